"""Metadata (key 3): brokers, controller, topics, partitions, leaders.

v1 adds rack, controller_id, is_internal and a nullable topic list (null = all
topics). v2 cluster_id. v3 throttle_time_ms. v4 allow_auto_topic_creation. v5
offline_replicas. v7 leader_epoch (KIP-320). v8 authorized operations
(KIP-430). v9 flexible. v10 topic IDs (KIP-516). v11 drops the cluster
authorized operations (KIP-700). v12 nullable topic name in the request and
response (topic ID lookups).

refka extensions (tagged, see extensions.py): top level controller epochs
(KIP-232) and max_partition_epoch (KIP-253); per topic topic_epoch (KIP-232)
and partition counts (KIP-253); per partition partition_epoch (KIP-232).
"""

from ..api import Api
from ..extensions import TAG_EPOCHS, TAG_MAX_PARTITION_EPOCH, TAG_PARTITION_COUNTS
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
                        field("topic_id", UUID, "10+"),
                        field("name", STRING, nullable="10+"),
                    )
                ),
                nullable="1+",
                about="Topics to describe; null for all (v1+); v0 sends an empty list for all.",
            ),
            field("allow_auto_topic_creation", BOOL, "4+", default=True),
            field("include_cluster_authorized_operations", BOOL, "8-10"),
            field("include_topic_authorized_operations", BOOL, "8+"),
        ),
        response=struct(
            "MetadataResponse",
            field("throttle_time_ms", INT32, "3+"),
            field(
                "brokers",
                array(
                    struct(
                        "MetadataResponseBroker",
                        field("node_id", INT32),
                        field("host", STRING),
                        field("port", INT32),
                        field("rack", STRING, "1+", nullable="1+", default=None),
                    )
                ),
            ),
            field("cluster_id", STRING, "2+", nullable="2+", default=None),
            field("controller_id", INT32, "1+", default=-1),
            field(
                "topics",
                array(
                    struct(
                        "MetadataResponseTopic",
                        field("error_code", INT16),
                        field("name", STRING, nullable="12+"),
                        field("topic_id", UUID, "10+"),
                        field("is_internal", BOOL, "1+"),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "MetadataResponsePartition",
                                    field("error_code", INT16),
                                    field("partition_index", INT32),
                                    field("leader_id", INT32),
                                    field("leader_epoch", INT32, "7+", default=-1),
                                    field("replica_nodes", array(INT32)),
                                    field("isr_nodes", array(INT32)),
                                    field("offline_replicas", array(INT32), "5+"),
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
                                field("initial_partition_count", INT32),
                                field("undeleted_partition_count", INT32),
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
            ),
            field(
                "controller_epochs",
                struct(
                    "ControllerEpochs",
                    field("controller_epoch", INT32),
                    field("controller_metadata_epoch", INT32),
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
