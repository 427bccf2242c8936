"""Produce (key 0): append record batches to partition logs.

v0-v2 carry legacy message sets (magic 0 and 1, legacy_records.py), which the
broker converts to RecordBatch v2 as Kafka 3.x does (Kafka 4.0 dropped v0-v2,
KIP-896). v1 adds throttle_time_ms to the response; v2 log_append_time_ms (and
magic-1 messages, with timestamps, KIP-32). v3 adds transactional_id and
requires RecordBatch v2 (magic 2). v4 may answer
KAFKA_STORAGE_ERROR. v5 adds log_start_offset to the response. v6-v7 are the
same on the wire (v7: zstd batches, KIP-110). v8 adds record_errors and
error_message (KIP-467). v9 is flexible. v10 adds, as tagged fields, each
partition's current_leader and the top-level node_endpoints, so a
NOT_LEADER_OR_FOLLOWER answer tells the producer where to go (KIP-951). v11
is the same on the wire (the client may skip the Metadata round trip after
such an answer, KIP-951). Kafka's v12 (KIP-890 transactions) and v13 (topic
ids, KIP-516) are not declared.

refka extension (tagged, see extensions.py): each request topic may carry the
undeleted_partition_count the producer hashed its keys over (KIP-253); the
broker answers INVALID_PARTITION_METADATA when it is stale.
"""

from ..api import Api
from ..extensions import TAG_PARTITION_COUNTS
from ..schema import INT16, INT32, INT64, RECORDS, STRING, api, array, field, struct

ACKS_NONE = 0
ACKS_LEADER = 1
ACKS_ALL = -1

Produce = Api(
    api(
        0,
        "Produce",
        "0-11",
        flexible="9+",
        request=struct(
            "ProduceRequest",
            field(
                "transactional_id",
                STRING,
                "3+",
                nullable="3+",
                default=None,
                about="The transactional id, or null if the producer is not transactional.",
            ),
            field("acks", INT16, about="0 none, 1 the leader, -1 the full ISR."),
            field("timeout_ms", INT32, about="How long to wait for the acks."),
            field(
                "topic_data",
                array(
                    struct(
                        "TopicProduceData",
                        field("name", STRING),
                        field(
                            "partition_data",
                            array(
                                struct(
                                    "PartitionProduceData",
                                    field("index", INT32, about="The partition index."),
                                    field(
                                        "records",
                                        RECORDS,
                                        about="RecordBatch v2 bytes (v3+); v0-v2 a legacy message set, or v2 batches.",
                                    ),
                                )
                            ),
                        ),
                        field(
                            "undeleted_partition_count",
                            INT32,
                            "9+",
                            tag=TAG_PARTITION_COUNTS,
                            default=-1,
                            about="refka KIP-253: the partition count the producer hashed over; -1 unknown.",
                        ),
                    )
                ),
            ),
        ),
        response=struct(
            "ProduceResponse",
            field(
                "responses",
                array(
                    struct(
                        "TopicProduceResponse",
                        field("name", STRING),
                        field(
                            "partition_responses",
                            array(
                                struct(
                                    "PartitionProduceResponse",
                                    field("index", INT32, about="The partition index."),
                                    field("error_code", INT16),
                                    field(
                                        "base_offset",
                                        INT64,
                                        about="The offset given to the batch's first record; -1 on error.",
                                    ),
                                    field(
                                        "log_append_time_ms",
                                        INT64,
                                        "2+",
                                        default=-1,
                                        about="Broker time of the append under LogAppendTime, else -1.",
                                    ),
                                    field(
                                        "log_start_offset",
                                        INT64,
                                        "5+",
                                        default=-1,
                                        about="The log start offset after the append; -1 on error.",
                                    ),
                                    field(
                                        "record_errors",
                                        array(
                                            struct(
                                                "BatchIndexAndErrorMessage",
                                                field(
                                                    "batch_index",
                                                    INT32,
                                                    about="Index in the batch of a record that failed.",
                                                ),
                                                field(
                                                    "batch_index_error_message",
                                                    STRING,
                                                    nullable="8+",
                                                    default=None,
                                                    about="Why that record failed, or null.",
                                                ),
                                            )
                                        ),
                                        "8+",
                                        about="Records that made the whole batch fail (KIP-467).",
                                    ),
                                    field("error_message", STRING, "8+", nullable="8+", default=None),
                                    field(
                                        "current_leader",
                                        struct(
                                            "LeaderIdAndEpoch",
                                            field(
                                                "leader_id",
                                                INT32,
                                                default=-1,
                                                about="The leader's broker id, or -1 if unknown.",
                                            ),
                                            field(
                                                "leader_epoch",
                                                INT32,
                                                default=-1,
                                                about="The leader's epoch, or -1 if unknown.",
                                            ),
                                        ),
                                        "10+",
                                        tag=0,
                                        default=None,
                                        about="KIP-951: the partition's leader, on NOT_LEADER_OR_FOLLOWER.",
                                    ),
                                )
                            ),
                        ),
                    )
                ),
            ),
            field(
                "throttle_time_ms",
                INT32,
                "1+",
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field(
                "node_endpoints",
                array(
                    struct(
                        "NodeEndpoint",
                        field("node_id", INT32),
                        field("host", STRING),
                        field("port", INT32),
                        field(
                            "rack",
                            STRING,
                            nullable="10+",
                            default=None,
                            about="The broker's rack (broker.rack), or null.",
                        ),
                    )
                ),
                "10+",
                tag=0,
                about="KIP-951: endpoints of every current_leader named above.",
            ),
        ),
    )
)
