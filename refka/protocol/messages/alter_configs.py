"""AlterConfigs (key 33): replace the whole dynamic configuration of topics,
brokers or broker loggers (KIP-133; IncrementalAlterConfigs is the
non-destructive form).

v1 is the same as v0; a throttled answer is sent before throttling
(KIP-219). v2 is flexible (KIP-482).
"""

from ..api import Api
from ..schema import BOOL, INT8, INT16, INT32, STRING, api, array, field, struct

AlterConfigs = Api(
    api(
        33,
        "AlterConfigs",
        "0-2",
        flexible="2+",
        request=struct(
            "AlterConfigsRequest",
            field(
                "resources",
                array(
                    struct(
                        "AlterConfigsResource",
                        field("resource_type", INT8, about="2 topic, 4 broker, 8 broker logger."),
                        field("resource_name", STRING),
                        field(
                            "configs",
                            array(
                                struct(
                                    "AlterableConfig",
                                    field("name", STRING),
                                    field("value", STRING, nullable="0+"),
                                )
                            ),
                        ),
                    )
                ),
            ),
            field("validate_only", BOOL, about="Check the new configs, change nothing."),
        ),
        response=struct(
            "AlterConfigsResponse",
            field(
                "throttle_time_ms",
                INT32,
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field(
                "responses",
                array(
                    struct(
                        "AlterConfigsResourceResponse",
                        field("error_code", INT16),
                        field("error_message", STRING, nullable="0+"),
                        field("resource_type", INT8),
                        field("resource_name", STRING),
                    )
                ),
            ),
        ),
    )
)
