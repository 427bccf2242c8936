"""FindCoordinator (key 10): which broker coordinates a consumer group or a
transactional id.

v1 adds key_type (0 group, 1 transaction; KIP-98), throttle_time_ms and
error_message. v2 is the same as v1; a throttled answer is sent before
throttling (KIP-219). v3 is flexible (KIP-482). v4 looks up several keys at
once: coordinator_keys in, one coordinator per key out (KIP-699).
"""

from ..api import Api
from ..schema import INT8, INT16, INT32, STRING, api, array, field, struct

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1

FindCoordinator = Api(
    api(
        10,
        "FindCoordinator",
        "0-4",
        flexible="3+",
        request=struct(
            "FindCoordinatorRequest",
            field("key", STRING, "0-3", about="The group id or transactional id."),
            field("key_type", INT8, "1+", default=KEY_TYPE_GROUP, about="0 group, 1 transaction."),
            field("coordinator_keys", array(STRING), "4+", about="The keys to look up (KIP-699)."),
        ),
        response=struct(
            "FindCoordinatorResponse",
            field(
                "throttle_time_ms",
                INT32,
                "1+",
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field("error_code", INT16, "0-3"),
            field("error_message", STRING, "1-3", nullable="1-3"),
            field("node_id", INT32, "0-3", about="The coordinator's broker id; -1 on error."),
            field("host", STRING, "0-3"),
            field("port", INT32, "0-3"),
            field(
                "coordinators",
                array(
                    struct(
                        "Coordinator",
                        field("key", STRING, about="The key asked for."),
                        field("node_id", INT32, about="The coordinator's broker id; -1 on error."),
                        field("host", STRING),
                        field("port", INT32),
                        field("error_code", INT16),
                        field("error_message", STRING, nullable="0+"),
                    )
                ),
                "4+",
                about="v4+: one answer per key asked for.",
            ),
        ),
    )
)
