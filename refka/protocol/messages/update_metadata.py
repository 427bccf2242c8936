"""UpdateMetadata (key 6): the controller's view of brokers and partitions,
sent to every live broker, which answers Metadata requests from it.

Inter-broker only, declared after Kafka 3.x's last ZooKeeper-era versions. v1
lists several endpoints per broker (v0 had one host and port). v2 adds rack.
v3 adds the listener name. v4 adds offline_replicas. v5 adds broker_epoch and
groups partitions by topic. v6 is flexible (KIP-482). v7 adds topic IDs
(KIP-516). v8 adds is_kraft_controller and the tagged request type (KIP-866).

refka extensions (tagged, flexible versions, see extensions.py): top level the
controller_metadata_epoch (KIP-232; the controller_epoch is already there) and
max_partition_epoch (KIP-253); per topic topic_epoch (KIP-232) and the KIP-253
partition counts; per partition partition_epoch (KIP-232) and the partition
znode's leaderEpochAfterCreation and leaderEpochBeforeDeletion maps (KIP-253,
one tagged struct, absent when both are empty). Together they are what a broker needs to
answer MetadataResponse's refka fields and PartitionLeaderEpochsForPartitions.
Top level also the controller_token that identifies the controller (only
brokers may send this API).
"""

from ..api import Api
from ..extensions import (
    TAG_CONTROLLER_TOKEN,
    TAG_EPOCHS,
    TAG_LEADER_EPOCH_MAPS,
    TAG_MAX_PARTITION_EPOCH,
    TAG_PARTITION_COUNTS,
)
from ..schema import BOOL, INT8, INT16, INT32, INT64, STRING, UUID, api, array, field, struct

# Kafka's SecurityProtocol ids, as sent in endpoints.
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def _partition_state():  # type: ignore[no-untyped-def]
    # Kafka's common struct; declared per use so each parent class nests its own.
    # One entry of a KIP-253 map (the znode's JSON object partition -> leader epoch).
    leader_epoch = struct(
        "PartitionLeaderEpoch",
        field("partition", INT32, about="A partition of the same topic (the map's key)."),
        field("leader_epoch", INT32, about="That partition's leader epoch (the map's value)."),
    )
    return struct(
        "UpdateMetadataPartitionState",
        field("topic_name", STRING, "0-4", about="The topic name; only in v0-4."),
        field("partition_index", INT32),
        field(
            "controller_epoch",
            INT32,
            about="The epoch of the controller that last chose this partition's leader or ISR.",
        ),
        field("leader", INT32, about="The leader's broker ID; -1 none, -2 being deleted."),
        field(
            "leader_epoch",
            INT32,
            about="The partition's leader epoch: bumped by every leader change, fences stale leaders.",
        ),
        field("isr", array(INT32), about="The in-sync replicas' broker ids."),
        field("zk_version", INT32, about="Version of the partition state znode."),
        field("replicas", array(INT32), about="Every assigned replica's broker id, preferred leader first."),
        field(
            "offline_replicas", array(INT32), "4+", about="Assigned replicas whose broker or log is offline."
        ),
        field(
            "partition_epoch",
            INT32,
            "6+",
            tag=TAG_EPOCHS,
            default=-1,
            about="refka KIP-232: bumped when the partition is re-created.",
        ),
        field(
            "leader_epoch_maps",
            struct(
                "LeaderEpochMaps",
                field(
                    "leader_epoch_after_creation",
                    array(leader_epoch),
                    about="refka KIP-253: the partition znode's leaderEpochAfterCreation, by "
                    "partition: each older partition's leader epoch before the expansion that "
                    "created this one.",
                ),
                field(
                    "leader_epoch_before_deletion",
                    array(leader_epoch),
                    about="refka KIP-253: the partition znode's leaderEpochBeforeDeletion, by "
                    "partition: each undeleted partition's leader epoch when this one was marked "
                    "for deletion (not empty: marked).",
                ),
            ),
            "6+",
            tag=TAG_LEADER_EPOCH_MAPS,
            default=None,
            about="refka KIP-253: the partition znode's two maps; null when both are empty.",
        ),
    )


UpdateMetadata = Api(
    api(
        6,
        "UpdateMetadata",
        "0-8",
        flexible="6+",
        request=struct(
            "UpdateMetadataRequest",
            field("controller_id", INT32, about="The sending controller's broker id."),
            field("is_kraft_controller", BOOL, "8+", default=False, about="KIP-866 migration; always false."),
            field("type", INT8, "8+", tag=0, default=0, about="0 unknown, 1 incremental, 2 full (KIP-866)."),
            field(
                "controller_epoch",
                INT32,
                about="The sending controller's epoch; a broker "
                "refuses an older one (STALE_CONTROLLER_EPOCH).",
            ),
            field("broker_epoch", INT64, "5+", default=-1, about="The receiving broker's epoch."),
            field(
                "ungrouped_partition_states",
                array(_partition_state()),
                "0-4",
                about="v0-4: the partition states, each naming its topic.",
            ),
            field(
                "topic_states",
                array(
                    struct(
                        "UpdateMetadataTopicState",
                        field("topic_name", STRING),
                        field(
                            "topic_id", UUID, "7+", about="The topic's ID (KIP-516); all zero when unknown."
                        ),
                        field("partition_states", array(_partition_state())),
                        field(
                            "topic_epoch",
                            INT32,
                            "6+",
                            tag=TAG_EPOCHS,
                            default=-1,
                            about="refka KIP-232: bumped when the topic is re-created.",
                        ),
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
                            "6+",
                            tag=TAG_PARTITION_COUNTS,
                            default=None,
                            about="refka KIP-253: the counts producers hash keys over.",
                        ),
                    )
                ),
                "5+",
                about="v5+: the partition states, by topic.",
            ),
            field(
                "live_brokers",
                array(
                    struct(
                        "UpdateMetadataBroker",
                        field("id", INT32, about="The broker's id."),
                        field("v0_host", STRING, "0", about="v0's single endpoint."),
                        field("v0_port", INT32, "0", about="The port of v0's single endpoint."),
                        field(
                            "endpoints",
                            array(
                                struct(
                                    "UpdateMetadataEndpoint",
                                    field("port", INT32),
                                    field("host", STRING),
                                    field(
                                        "listener",
                                        STRING,
                                        "3+",
                                        about="The listener name (v3+; before, "
                                        "the security protocol's name).",
                                    ),
                                    field(
                                        "security_protocol",
                                        INT16,
                                        about="0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL.",
                                    ),
                                )
                            ),
                            "1+",
                            about="The broker's listeners (v1+).",
                        ),
                        field(
                            "rack",
                            STRING,
                            "2+",
                            nullable="0+",
                            default=None,
                            about="The broker's rack (broker.rack), or null.",
                        ),
                    )
                ),
                about="Every live broker and its endpoints.",
            ),
            field(
                "controller_metadata_epoch",
                INT32,
                "6+",
                tag=TAG_EPOCHS,
                default=-1,
                about="refka KIP-232: 0 after an election, +1 per broadcast.",
            ),
            field(
                "max_partition_epoch",
                INT32,
                "6+",
                tag=TAG_MAX_PARTITION_EPOCH,
                default=-1,
                about="refka KIP-253: the highest partition_epoch in the cluster.",
            ),
            field(
                "controller_token",
                INT64,
                "6+",
                tag=TAG_CONTROLLER_TOKEN,
                default=-1,
                about="refka: the token the controller wrote into /controller with its election; "
                "proves the sender is a broker (broker/inter_broker.py). -1: not sent.",
            ),
        ),
        response=struct(
            "UpdateMetadataResponse",
            field("error_code", INT16),
        ),
    )
)
