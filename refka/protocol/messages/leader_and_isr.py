"""LeaderAndIsr (key 4): the controller tells a broker which replicas it hosts,
who leads each partition, at which leader epoch, and with which ISR.

Inter-broker only (controller -> broker), declared after Kafka 3.x's last
ZooKeeper-era versions. v1 adds is_new. v2 adds broker_epoch and groups
partitions by topic (v0-1 name the topic in every partition state). v3 adds
adding_replicas and removing_replicas (KIP-455). v4 is flexible (KIP-482). v5
adds topic IDs and the request type, 0 incremental or 1 full (KIP-516); its
response groups errors by topic ID. v6 adds leader_recovery_state (KIP-704). v7
adds is_kraft_controller, the ZooKeeper-migration flag (KIP-866).

Kafka 3.x calls the partition's zk_version "PartitionEpoch"; refka keeps the
seeds' name ``zk_version`` because ``partition_epoch`` is KIP-232's epoch here.

refka extensions (tagged, flexible versions, see extensions.py): per topic the
KIP-253 partition counts, so a leader learns undeleted_partition_count in the
same request as the leader epoch it goes with; per partition the KIP-232
partition_epoch; top level the controller_token that identifies the controller
(only brokers may send this API).
"""

from ..api import Api
from ..extensions import TAG_CONTROLLER_TOKEN, TAG_EPOCHS, TAG_PARTITION_COUNTS
from ..schema import BOOL, INT8, INT16, INT32, INT64, STRING, UUID, api, array, field, struct

TYPE_INCREMENTAL = 0
TYPE_FULL = 1  # every partition the broker should host: others are strays (KIP-516)


def _partition_state():  # type: ignore[no-untyped-def]
    # Kafka's common struct; declared per use so each parent class nests its own.
    return struct(
        "LeaderAndIsrPartitionState",
        field("topic_name", STRING, "0-1", about="The topic name; only in v0-1."),
        field("partition_index", INT32),
        field(
            "controller_epoch",
            INT32,
            about="The epoch of the controller that last chose this partition's leader or ISR.",
        ),
        field("leader", INT32, about="The broker ID of the leader."),
        field(
            "leader_epoch",
            INT32,
            about="The partition's leader epoch: bumped by every leader change, fences stale leaders.",
        ),
        field("isr", array(INT32), about="The in-sync replica IDs."),
        field("zk_version", INT32, about="Version of the partition state znode (Kafka 3.x: PartitionEpoch)."),
        field("replicas", array(INT32), about="Every assigned replica's broker id, preferred leader first."),
        field("adding_replicas", array(INT32), "3+", about="Replicas being added by a reassignment."),
        field("removing_replicas", array(INT32), "3+", about="Replicas being removed by a reassignment."),
        field("is_new", BOOL, "1+", default=False, about="Whether the replica should not exist yet."),
        field(
            "leader_recovery_state",
            INT8,
            "6+",
            default=0,
            about="1 while recovering from an unclean election, else 0 (KIP-704).",
        ),
        field(
            "partition_epoch",
            INT32,
            "4+",
            tag=TAG_EPOCHS,
            default=-1,
            about="refka KIP-232: bumped when the partition is re-created.",
        ),
    )


def _partition_error():  # type: ignore[no-untyped-def]
    return struct(
        "LeaderAndIsrPartitionError",
        field("topic_name", STRING, "0-4"),
        field("partition_index", INT32),
        field("error_code", INT16),
    )


LeaderAndIsr = Api(
    api(
        4,
        "LeaderAndIsr",
        "0-7",
        flexible="4+",
        request=struct(
            "LeaderAndIsrRequest",
            field("controller_id", INT32, about="The sending controller's broker id."),
            field("is_kraft_controller", BOOL, "7+", default=False, about="KIP-866 migration; always false."),
            field(
                "controller_epoch",
                INT32,
                about="The sending controller's epoch; a broker "
                "refuses an older one (STALE_CONTROLLER_EPOCH).",
            ),
            field("broker_epoch", INT64, "2+", default=-1, about="The receiving broker's epoch."),
            field("type", INT8, "5+", default=TYPE_INCREMENTAL, about="0 incremental, 1 full (KIP-516)."),
            field(
                "ungrouped_partition_states",
                array(_partition_state()),
                "0-1",
                about="v0-1: the partition states, each naming its topic.",
            ),
            field(
                "topic_states",
                array(
                    struct(
                        "LeaderAndIsrTopicState",
                        field("topic_name", STRING),
                        field(
                            "topic_id", UUID, "5+", about="The topic's ID (KIP-516); all zero when unknown."
                        ),
                        field("partition_states", array(_partition_state())),
                        field(
                            "partition_counts",
                            struct(
                                "PartitionCounts",
                                field(
                                    "initial_partition_count",
                                    INT32,
                                    about="refka KIP-253: the partition count at the "
                                    "topic's creation (linear hashing's base).",
                                ),
                                field(
                                    "undeleted_partition_count",
                                    INT32,
                                    about="refka KIP-253: partitions not marked for "
                                    "deletion, which producers hash keys over.",
                                ),
                            ),
                            "4+",
                            tag=TAG_PARTITION_COUNTS,
                            default=None,
                            about="refka KIP-253: the counts producers must hash keys over.",
                        ),
                    )
                ),
                "2+",
                about="v2+: the partition states, by topic.",
            ),
            field(
                "live_leaders",
                array(
                    struct(
                        "LeaderAndIsrLiveLeader",
                        field("broker_id", INT32),
                        field("host_name", STRING),
                        field("port", INT32),
                    )
                ),
                about="The endpoints of the leaders named in the partition states.",
            ),
            field(
                "controller_token",
                INT64,
                "4+",
                tag=TAG_CONTROLLER_TOKEN,
                default=-1,
                about="refka: the token the controller wrote into /controller with its election; "
                "proves the sender is a broker (broker/inter_broker.py). -1: not sent.",
            ),
        ),
        response=struct(
            "LeaderAndIsrResponse",
            field("error_code", INT16),
            field("partition_errors", array(_partition_error()), "0-4"),
            field(
                "topics",
                array(
                    struct(
                        "LeaderAndIsrTopicError",
                        field("topic_id", UUID, about="The topic's ID (KIP-516); all zero when unknown."),
                        field("partition_errors", array(_partition_error())),
                    )
                ),
                "5+",
            ),
        ),
    )
)
