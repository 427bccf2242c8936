"""Fetch (key 1): read record batches from partition logs (consumers and followers).

v0-v3 answer legacy message sets (legacy_records.py), down-converted from the
log's RecordBatch v2: magic 0 for v0-v1, magic 1 (timestamps, KIP-32) for v2-v3.
v1 adds throttle_time_ms. v2 is v1 with message format v1. v3 adds the request's
max_bytes (KIP-74). v4 adds isolation_level, last_stable_offset and aborted_transactions (KIP-98).
v5 log_start_offset (KIP-107). v6 same. v7 incremental fetch sessions:
session_id, session_epoch, forgotten_topics_data and a top-level error_code
(KIP-227). v8 same. v9 current_leader_epoch, fencing with FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH (KIP-320). v10 same (zstd, KIP-110). v11 rack_id and
preferred_read_replica (KIP-392). v12 is flexible, adds last_fetched_epoch
and, as tagged fields, cluster_id and each partition's diverging_epoch,
current_leader and snapshot_id (KIP-595). v13 names topics by topic_id
instead of name (KIP-516). v14 same (KIP-405). v15 replaces replica_id with
the tagged replica_state (KIP-903). v16 adds the tagged node_endpoints so a
NOT_LEADER_OR_FOLLOWER answer tells the consumer where to go (KIP-951). v17
adds the tagged replica_directory_id that only KRaft voters send (KIP-853):
the same on the wire for clients, so declared. Kafka's v18 (tagged
high_watermark from followers, KIP-1166) is not declared.

refka extension (tagged, see extensions.py): each request topic may carry the
undeleted_partition_count the consumer knows (KIP-253); the broker answers
INVALID_PARTITION_METADATA when it is stale.
"""

from ..api import Api
from ..extensions import TAG_PARTITION_COUNTS
from ..schema import INT8, INT16, INT32, INT64, RECORDS, STRING, UUID, api, array, field, struct

ISOLATION_READ_UNCOMMITTED = 0
ISOLATION_READ_COMMITTED = 1
# replica_id of a consumer (Kafka's CONSUMER_REPLICA_ID).
CONSUMER_REPLICA_ID = -1
MAX_BYTES_UNLIMITED = 0x7FFFFFFF

Fetch = Api(
    api(
        1,
        "Fetch",
        "0-17",
        flexible="12+",
        request=struct(
            "FetchRequest",
            field(
                "cluster_id",
                STRING,
                "12+",
                nullable="12+",
                tag=0,
                default=None,
                about="The cluster id the sender believes in (KIP-595); null when unknown.",
            ),
            field(
                "replica_id",
                INT32,
                "0-14",
                default=CONSUMER_REPLICA_ID,
                about="The follower's broker id, or -1 for a consumer.",
            ),
            field(
                "replica_state",
                struct(
                    "ReplicaState",
                    field("replica_id", INT32, default=-1, about="The follower's broker id."),
                    field(
                        "replica_epoch",
                        INT64,
                        default=-1,
                        about="The follower's broker epoch (its registration); -1 if unknown.",
                    ),
                ),
                "15+",
                tag=1,
                default=None,
                about="The follower's id and broker epoch (KIP-903); absent for a consumer.",
            ),
            field("max_wait_ms", INT32, about="How long to wait for min_bytes."),
            field(
                "min_bytes",
                INT32,
                about="Answer once this many bytes are ready, or when max_wait_ms has passed.",
            ),
            field(
                "max_bytes",
                INT32,
                "3+",
                default=MAX_BYTES_UNLIMITED,
                about="Cap on all records in the answer; a larger first batch still goes (KIP-74).",
            ),
            field(
                "isolation_level",
                INT8,
                "4+",
                default=ISOLATION_READ_UNCOMMITTED,
                about="0 read_uncommitted; 1 read_committed: only below the last stable offset.",
            ),
            field(
                "session_id",
                INT32,
                "7+",
                default=0,
                about="The fetch session (KIP-227); 0 with epoch 0 asks for a new one.",
            ),
            field(
                "session_epoch",
                INT32,
                "7+",
                default=-1,
                about="0 opens a session, -1 closes it or fetches without one, else the next in sequence.",
            ),
            field(
                "topics",
                array(
                    struct(
                        "FetchTopic",
                        field("topic", STRING, "0-12"),
                        field("topic_id", UUID, "13+", about="The topic's ID: v13+ name topics by ID only."),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "FetchPartition",
                                    field("partition", INT32),
                                    field(
                                        "current_leader_epoch",
                                        INT32,
                                        "9+",
                                        default=-1,
                                        about="The leader epoch the sender knows, for "
                                        "fencing (KIP-320); -1 skips the check.",
                                    ),
                                    field("fetch_offset", INT64, about="The offset to read from."),
                                    field(
                                        "last_fetched_epoch",
                                        INT32,
                                        "12+",
                                        default=-1,
                                        about="The epoch of the fetcher's last record "
                                        "(KIP-595), to find divergence; -1 none.",
                                    ),
                                    field(
                                        "log_start_offset",
                                        INT64,
                                        "5+",
                                        default=-1,
                                        about="A follower's own log start offset; -1 from a consumer.",
                                    ),
                                    field(
                                        "partition_max_bytes",
                                        INT32,
                                        about="Cap on this partition's records; "
                                        "a larger first batch still goes.",
                                    ),
                                    field(
                                        "replica_directory_id",
                                        UUID,
                                        "17+",
                                        tag=0,
                                        about="The follower's log directory (KIP-853).",
                                    ),
                                )
                            ),
                        ),
                        field(
                            "undeleted_partition_count",
                            INT32,
                            "12+",
                            tag=TAG_PARTITION_COUNTS,
                            default=-1,
                            about="refka KIP-253: the partition count the consumer knows; -1 unknown.",
                        ),
                    )
                ),
            ),
            field(
                "forgotten_topics_data",
                array(
                    struct(
                        "ForgottenTopic",
                        field("topic", STRING, "7-12"),
                        field("topic_id", UUID, "13+", about="The topic's ID: v13+ name topics by ID only."),
                        field("partitions", array(INT32), about="The partitions to drop."),
                    )
                ),
                "7+",
                about="Partitions to drop from the fetch session.",
            ),
            field("rack_id", STRING, "11+", default="", about="The consumer's rack (KIP-392)."),
        ),
        response=struct(
            "FetchResponse",
            field(
                "throttle_time_ms",
                INT32,
                "1+",
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field("error_code", INT16, "7+", about="The fetch session's error."),
            field(
                "session_id",
                INT32,
                "7+",
                default=0,
                about="The fetch session these answers belong to; 0 for none.",
            ),
            field(
                "responses",
                array(
                    struct(
                        "FetchableTopicResponse",
                        field("topic", STRING, "0-12"),
                        field("topic_id", UUID, "13+", about="The topic's ID: v13+ name topics by ID only."),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "PartitionData",
                                    field("partition_index", INT32),
                                    field("error_code", INT16),
                                    field(
                                        "high_watermark",
                                        INT64,
                                        about="Offset past the last record the full "
                                        "ISR has; consumers read below it.",
                                    ),
                                    field(
                                        "last_stable_offset",
                                        INT64,
                                        "4+",
                                        default=-1,
                                        about="Transactions below it are decided; "
                                        "refka has none: the high watermark.",
                                    ),
                                    field(
                                        "log_start_offset",
                                        INT64,
                                        "5+",
                                        default=-1,
                                        about="The leader's log start offset: its first readable offset.",
                                    ),
                                    field(
                                        "diverging_epoch",
                                        struct(
                                            "EpochEndOffset",
                                            field(
                                                "epoch",
                                                INT32,
                                                default=-1,
                                                about="The largest epoch both logs agree on.",
                                            ),
                                            field(
                                                "end_offset",
                                                INT64,
                                                default=-1,
                                                about="That epoch's end in the leader's log: truncate there.",
                                            ),
                                        ),
                                        "12+",
                                        tag=0,
                                        default=None,
                                        about="Where a follower's log diverges from the leader's.",
                                    ),
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
                                        "12+",
                                        tag=1,
                                        default=None,
                                        about="KIP-951: the partition's leader, on NOT_LEADER_OR_FOLLOWER.",
                                    ),
                                    field(
                                        "snapshot_id",
                                        struct(
                                            "SnapshotId",
                                            field(
                                                "end_offset",
                                                INT64,
                                                default=-1,
                                                about="The snapshot's end offset.",
                                            ),
                                            field("epoch", INT32, default=-1, about="The snapshot's epoch."),
                                        ),
                                        "12+",
                                        tag=2,
                                        default=None,
                                        about="The snapshot to fetch instead (KRaft).",
                                    ),
                                    field(
                                        "aborted_transactions",
                                        array(
                                            struct(
                                                "AbortedTransaction",
                                                field(
                                                    "producer_id",
                                                    INT64,
                                                    about="The producer whose transaction was aborted.",
                                                ),
                                                field(
                                                    "first_offset",
                                                    INT64,
                                                    about="The first offset of the aborted transaction.",
                                                ),
                                            )
                                        ),
                                        "4+",
                                        nullable="4+",
                                        default=None,
                                        about="Aborted transactions in the returned range (read_committed).",
                                    ),
                                    field(
                                        "preferred_read_replica",
                                        INT32,
                                        "11+",
                                        default=-1,
                                        about="The replica to fetch from instead (KIP-392).",
                                    ),
                                    field(
                                        "records",
                                        RECORDS,
                                        about="RecordBatch v2 bytes, or segment slices; v0-v3 a legacy message set.",
                                    ),
                                )
                            ),
                        ),
                    )
                ),
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
                            nullable="16+",
                            default=None,
                            about="The broker's rack (broker.rack), or null.",
                        ),
                    )
                ),
                "16+",
                tag=0,
                about="KIP-951: endpoints of every current_leader named above.",
            ),
        ),
    )
)
