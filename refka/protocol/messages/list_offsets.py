"""ListOffsets (key 2): the offset of a partition at a timestamp, or at one end.

Versions 1+ (one offset per partition, KIP-79; Kafka 4.0 dropped v0, KIP-896).
v2 adds isolation_level (KIP-98) and throttle_time_ms. v3 same (KIP-219).
v4 adds current_leader_epoch to the request and leader_epoch to the response
(KIP-320). v5 same (may answer OFFSET_NOT_AVAILABLE). v6 is flexible. v7
accepts MAX_TIMESTAMP (KIP-734). v8 accepts EARLIEST_LOCAL_TIMESTAMP for
tiered storage (KIP-405). Kafka's v9 (latest tiered, KIP-1005) and v10
(timeout_ms, KIP-1075) are not declared.
"""

from ..api import Api
from ..schema import INT8, INT16, INT32, INT64, STRING, api, array, field, struct

# Special request timestamps.
LATEST_TIMESTAMP = -1  # the log end offset (high watermark / LSO for consumers)
EARLIEST_TIMESTAMP = -2  # the log start offset
MAX_TIMESTAMP = -3  # the offset of the record with the largest timestamp (v7+)
EARLIEST_LOCAL_TIMESTAMP = -4  # the first offset still on local disk (v8+)

# replica_id of a consumer, and of a debugging tool that may read past the high watermark.
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2

ListOffsets = Api(
    api(
        2,
        "ListOffsets",
        "1-8",
        flexible="6+",
        request=struct(
            "ListOffsetsRequest",
            field("replica_id", INT32, about="The broker id of the requester, or -1 for a consumer."),
            field("isolation_level", INT8, "2+", default=0, about="0 read_uncommitted, 1 read_committed."),
            field(
                "topics",
                array(
                    struct(
                        "ListOffsetsTopic",
                        field("name", STRING),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "ListOffsetsPartition",
                                    field("partition_index", INT32),
                                    field(
                                        "current_leader_epoch",
                                        INT32,
                                        "4+",
                                        default=-1,
                                        about="The leader epoch the sender knows, for "
                                        "fencing (KIP-320); -1 skips the check.",
                                    ),
                                    field(
                                        "timestamp",
                                        INT64,
                                        about="A timestamp in ms, or -1 latest, -2 earliest, -3 max, -4 earliest local.",
                                    ),
                                )
                            ),
                        ),
                    )
                ),
            ),
        ),
        response=struct(
            "ListOffsetsResponse",
            field(
                "throttle_time_ms",
                INT32,
                "2+",
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field(
                "topics",
                array(
                    struct(
                        "ListOffsetsTopicResponse",
                        field("name", STRING),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "ListOffsetsPartitionResponse",
                                    field("partition_index", INT32),
                                    field("error_code", INT16),
                                    field(
                                        "timestamp",
                                        INT64,
                                        default=-1,
                                        about="The record's timestamp; -1 for latest/earliest lookups.",
                                    ),
                                    field(
                                        "offset",
                                        INT64,
                                        default=-1,
                                        about="The offset found; -1 when no record qualifies.",
                                    ),
                                    field(
                                        "leader_epoch",
                                        INT32,
                                        "4+",
                                        default=-1,
                                        about="The leader epoch of the record at offset (KIP-320), or -1.",
                                    ),
                                )
                            ),
                        ),
                    )
                ),
            ),
        ),
    )
)
