"""ApiVersions (key 18): which APIs and versions the broker serves.

v1 adds throttle_time_ms. v3 is flexible and adds the client's software name
and version (KIP-511) and, as tagged fields, the feature flags (KIP-584).
The response header is always v0, so a client that sent an unknown version can
read the UNSUPPORTED_VERSION answer (encoded as v0).
"""

from ..api import Api
from ..schema import BOOL, INT16, INT32, INT64, STRING, api, array, field, struct

ApiVersions = Api(
    api(
        18,
        "ApiVersions",
        "0-4",
        flexible="3+",
        request=struct(
            "ApiVersionsRequest",
            field("client_software_name", STRING, "3+", about="The name of the client."),
            field("client_software_version", STRING, "3+", about="The version of the client."),
        ),
        response=struct(
            "ApiVersionsResponse",
            field("error_code", INT16),
            field(
                "api_keys",
                array(
                    struct(
                        "ApiVersion",
                        field("api_key", INT16),
                        field("min_version", INT16),
                        field("max_version", INT16),
                    )
                ),
                about="Every API the broker serves, with its version range.",
            ),
            field(
                "throttle_time_ms",
                INT32,
                "1+",
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field(
                "supported_features",
                array(
                    struct(
                        "SupportedFeatureKey",
                        field("name", STRING),
                        field("min_version", INT16),
                        field("max_version", INT16),
                    )
                ),
                "3+",
                tag=0,
                about="Features supported by the broker (KIP-584).",
            ),
            field(
                "finalized_features_epoch",
                INT64,
                "3+",
                tag=1,
                default=-1,
                about="The epoch of finalized_features (KIP-584); -1 if none.",
            ),
            field(
                "finalized_features",
                array(
                    struct(
                        "FinalizedFeatureKey",
                        field("name", STRING),
                        field("max_version_level", INT16),
                        field("min_version_level", INT16),
                    )
                ),
                "3+",
                tag=2,
                about="Feature levels the whole cluster has agreed on (KIP-584).",
            ),
            field(
                "zk_migration_ready",
                BOOL,
                "3+",
                tag=3,
                default=False,
                about="KIP-866: a KRaft controller ready to migrate from ZooKeeper; always false.",
            ),
        ),
    )
)
