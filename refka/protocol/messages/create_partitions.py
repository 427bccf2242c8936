"""CreatePartitions (key 37): change a topic's partition count (KIP-195).

v1 is the same as v0; a throttled answer is sent before throttling (KIP-219).
v2 is flexible (KIP-482). v3 may answer THROTTLING_QUOTA_EXCEEDED (KIP-599).

In refka a count below the current one (but not below the topic's initial
partition count) marks partitions for deletion, as KIP-253 describes; the wire
format is Kafka's.
"""

from ..api import Api
from ..schema import BOOL, INT16, INT32, STRING, api, array, field, struct

CreatePartitions = Api(
    api(
        37,
        "CreatePartitions",
        "0-3",
        flexible="2+",
        request=struct(
            "CreatePartitionsRequest",
            field(
                "topics",
                array(
                    struct(
                        "CreatePartitionsTopic",
                        field("name", STRING),
                        field("count", INT32, about="The new partition count."),
                        field(
                            "assignments",
                            array(
                                struct(
                                    "CreatePartitionsAssignment",
                                    field(
                                        "broker_ids",
                                        array(INT32),
                                        about="One new partition's replicas, preferred leader first.",
                                    ),
                                )
                            ),
                            nullable="0+",
                            about="Replicas of each new partition; null for automatic assignment.",
                        ),
                    )
                ),
            ),
            field(
                "timeout_ms",
                INT32,
                about="How long to wait for leaders on the new partitions; 0 answers at once.",
            ),
            field("validate_only", BOOL, about="Check the request, change nothing."),
        ),
        response=struct(
            "CreatePartitionsResponse",
            field(
                "throttle_time_ms",
                INT32,
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field(
                "results",
                array(
                    struct(
                        "CreatePartitionsTopicResult",
                        field("name", STRING),
                        field("error_code", INT16),
                        field("error_message", STRING, nullable="0+", default=None),
                    )
                ),
            ),
        ),
    )
)
