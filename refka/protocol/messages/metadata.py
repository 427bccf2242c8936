"""Metadata (key 3): brokers, controller, topics, partitions, leaders.

v1 adds rack, controller_id, is_internal and a nullable topic list (null = all
topics). v2 cluster_id. v3 throttle_time_ms. v4 allow_auto_topic_creation. v5
offline_replicas. v7 leader_epoch (KIP-320). v8 authorized operations
(KIP-430). v9 flexible. v10 topic IDs (KIP-516). v11 drops the cluster
authorized operations (KIP-700). v12 nullable topic name in the request and
response (topic ID lookups).

refka extensions (tagged, see extensions.py): top level controller epochs
(KIP-232) and max_partition_epoch (KIP-253); per topic topic_epoch (KIP-232)
and partition counts (KIP-253); per partition partition_epoch (KIP-232). A
request carries refka_extensions to get them (extensions.py says why).
"""

from ..api import Api
from ..extensions import TAG_EPOCHS, TAG_EXTENSIONS_REQUESTED, TAG_MAX_PARTITION_EPOCH, TAG_PARTITION_COUNTS
from ..schema import BOOL, INT16, INT32, STRING, UUID, api, array, field, struct

AUTHORIZED_OPERATIONS_UNKNOWN = -(2**31)

Metadata = Api(
    api(
        3,
        "Metadata",
        "0-12",
        flexible="9+",
        request=struct(
            "MetadataRequest",
            field(
                "topics",
                array(
                    struct(
                        "MetadataRequestTopic",
                        field(
                            "topic_id", UUID, "10+", about="The topic's ID, or all zero when named (v10+)."
                        ),
                        field(
                            "name",
                            STRING,
                            nullable="10+",
                            about="The topic name; null when asked for by ID (v12+).",
                        ),
                    )
                ),
                nullable="1+",
                about="Topics to describe; null for all (v1+); v0 sends an empty list for all.",
            ),
            field(
                "allow_auto_topic_creation",
                BOOL,
                "4+",
                default=True,
                about="Create named topics that do not exist, if auto.create.topics.enable.",
            ),
            field(
                "include_cluster_authorized_operations",
                BOOL,
                "8-10",
                about="Ask for authorized operations (KIP-430); with no ACLs, every operation of the resource type.",
            ),
            field(
                "include_topic_authorized_operations",
                BOOL,
                "8+",
                about="Ask for authorized operations (KIP-430); with no ACLs, every operation of the resource type.",
            ),
            field(
                "refka_extensions",
                BOOL,
                "9+",
                tag=TAG_EXTENSIONS_REQUESTED,
                default=False,
                about="refka: the client reads refka's tagged fields; without it the answer has none.",
            ),
        ),
        response=struct(
            "MetadataResponse",
            field(
                "throttle_time_ms",
                INT32,
                "3+",
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field(
                "brokers",
                array(
                    struct(
                        "MetadataResponseBroker",
                        field("node_id", INT32),
                        field("host", STRING),
                        field("port", INT32),
                        field(
                            "rack",
                            STRING,
                            "1+",
                            nullable="1+",
                            default=None,
                            about="The broker's rack (broker.rack), or null.",
                        ),
                    )
                ),
            ),
            field(
                "cluster_id",
                STRING,
                "2+",
                nullable="2+",
                default=None,
                about="The cluster's id, or null if unknown.",
            ),
            field(
                "controller_id",
                INT32,
                "1+",
                default=-1,
                about="The controller's broker id, or -1 if unknown.",
            ),
            field(
                "topics",
                array(
                    struct(
                        "MetadataResponseTopic",
                        field("error_code", INT16),
                        field("name", STRING, nullable="12+"),
                        field(
                            "topic_id", UUID, "10+", about="The topic's ID (KIP-516); all zero when unknown."
                        ),
                        field(
                            "is_internal",
                            BOOL,
                            "1+",
                            about="True for Kafka's internal topics (__consumer_offsets).",
                        ),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "MetadataResponsePartition",
                                    field("error_code", INT16),
                                    field("partition_index", INT32),
                                    field(
                                        "leader_id",
                                        INT32,
                                        about="The leader's broker id, or -1 if no live leader.",
                                    ),
                                    field(
                                        "leader_epoch",
                                        INT32,
                                        "7+",
                                        default=-1,
                                        about="The partition's leader epoch (KIP-320); -1 if unknown.",
                                    ),
                                    field(
                                        "replica_nodes",
                                        array(INT32),
                                        about="Every assigned replica's broker id, preferred leader first.",
                                    ),
                                    field(
                                        "isr_nodes", array(INT32), about="The in-sync replicas' broker ids."
                                    ),
                                    field(
                                        "offline_replicas",
                                        array(INT32),
                                        "5+",
                                        about="Assigned replicas whose broker or log is offline.",
                                    ),
                                    field(
                                        "partition_epoch",
                                        INT32,
                                        "9+",
                                        tag=TAG_EPOCHS,
                                        default=-1,
                                        about="refka KIP-232: bumped when the partition is re-created.",
                                    ),
                                )
                            ),
                        ),
                        field(
                            "topic_authorized_operations",
                            INT32,
                            "8+",
                            default=AUTHORIZED_OPERATIONS_UNKNOWN,
                            about="Bit field of allowed operations (KIP-430); -2^31 when not asked for.",
                        ),
                        field(
                            "topic_epoch",
                            INT32,
                            "9+",
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
                            "9+",
                            tag=TAG_PARTITION_COUNTS,
                            default=None,
                            about="refka KIP-253: counts the producer hashes keys over.",
                        ),
                    )
                ),
            ),
            field(
                "cluster_authorized_operations",
                INT32,
                "8-10",
                default=AUTHORIZED_OPERATIONS_UNKNOWN,
                about="Bit field of allowed operations (KIP-430); -2^31 when not asked for.",
            ),
            field(
                "controller_epochs",
                struct(
                    "ControllerEpochs",
                    field(
                        "controller_epoch",
                        INT32,
                        about="refka KIP-232: the epoch of the controller whose metadata this is.",
                    ),
                    field(
                        "controller_metadata_epoch",
                        INT32,
                        about="refka KIP-232: 0 after an election, +1 per "
                        "broadcast: orders one controller's metadata.",
                    ),
                ),
                "9+",
                tag=TAG_EPOCHS,
                default=None,
                about="refka KIP-232: lets a client reject metadata older than its cache.",
            ),
            field(
                "max_partition_epoch",
                INT32,
                "9+",
                tag=TAG_MAX_PARTITION_EPOCH,
                default=-1,
                about="refka KIP-253: the highest partition_epoch in the cluster.",
            ),
        ),
    )
)
