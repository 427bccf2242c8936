"""StopReplica (key 5): the controller tells a broker to stop hosting (and
possibly delete) replicas: topic deletion, reassignment, controlled shutdown.

Inter-broker only, declared after Kafka 3.x's last ZooKeeper-era versions. v1
adds broker_epoch and groups partitions by topic. v2 is flexible (KIP-482). v3
moves delete_partitions into each partition and adds its leader_epoch, so a
stale request can be fenced (KIP-570). v4 adds is_kraft_controller (KIP-866).

refka extension (tagged, flexible versions, see extensions.py): top level the
controller_token that identifies the controller (only brokers may send this API).
"""

from ..api import Api
from ..extensions import TAG_CONTROLLER_TOKEN
from ..schema import BOOL, INT16, INT32, INT64, STRING, api, array, field, struct

StopReplica = Api(
    api(
        5,
        "StopReplica",
        "0-4",
        flexible="2+",
        request=struct(
            "StopReplicaRequest",
            field("controller_id", INT32, about="The sending controller's broker id."),
            field("is_kraft_controller", BOOL, "4+", default=False, about="KIP-866 migration; always false."),
            field(
                "controller_epoch",
                INT32,
                about="The sending controller's epoch; a broker "
                "refuses an older one (STALE_CONTROLLER_EPOCH).",
            ),
            field("broker_epoch", INT64, "1+", default=-1, about="The receiving broker's epoch."),
            field("delete_partitions", BOOL, "0-2", about="Whether to delete the partitions (v0-2)."),
            field(
                "ungrouped_partitions",
                array(
                    struct(
                        "StopReplicaPartitionV0",
                        field("topic_name", STRING),
                        field("partition_index", INT32),
                    )
                ),
                "0",
                about="v0: the partitions to stop, each naming its topic.",
            ),
            field(
                "topics",
                array(
                    struct(
                        "StopReplicaTopicV1",
                        field("name", STRING),
                        field("partition_indexes", array(INT32)),
                    )
                ),
                "1-2",
                about="v1-2: the partitions to stop, by topic.",
            ),
            field(
                "topic_states",
                array(
                    struct(
                        "StopReplicaTopicState",
                        field("topic_name", STRING),
                        field(
                            "partition_states",
                            array(
                                struct(
                                    "StopReplicaPartitionState",
                                    field("partition_index", INT32),
                                    field(
                                        "leader_epoch",
                                        INT32,
                                        default=-1,
                                        about="-2 when the topic is deleted.",
                                    ),
                                    field(
                                        "delete_partition",
                                        BOOL,
                                        about="Also delete the log; false only stops replicating.",
                                    ),
                                )
                            ),
                        ),
                    )
                ),
                "3+",
                about="v3+: per partition, its leader epoch and whether to delete it.",
            ),
            field(
                "controller_token",
                INT64,
                "2+",
                tag=TAG_CONTROLLER_TOKEN,
                default=-1,
                about="refka: the token the controller wrote into /controller with its election; "
                "proves the sender is a broker (broker/inter_broker.py). -1: not sent.",
            ),
        ),
        response=struct(
            "StopReplicaResponse",
            field("error_code", INT16),
            field(
                "partition_errors",
                array(
                    struct(
                        "StopReplicaPartitionError",
                        field("topic_name", STRING),
                        field("partition_index", INT32),
                        field("error_code", INT16),
                    )
                ),
            ),
        ),
    )
)
