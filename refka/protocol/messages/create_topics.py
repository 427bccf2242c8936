"""CreateTopics (key 19): create topics with a partition count and replication
factor, or an explicit replica assignment, and per-topic configs.

v1 adds validate_only (KIP-108) and a per-topic error_message. v2 adds
throttle_time_ms; from v3 a throttled answer is sent before throttling
(KIP-219). v4 lets num_partitions / replication_factor be -1 for the broker
defaults even without an assignment (KIP-464). v5 is flexible (KIP-482) and
the response returns the created topic's configs, partition count and
replication factor, with topic_config_error_code tagged (KIP-525). v6 may
answer THROTTLING_QUOTA_EXCEEDED (KIP-599). v7 returns the topic_id (KIP-516).
Kafka 4.0 dropped v0-v1 (KIP-896); v2 is the baseline here too.
"""

from ..api import Api
from ..schema import BOOL, INT8, INT16, INT32, STRING, UUID, api, array, field, struct

CreateTopics = Api(
    api(
        19,
        "CreateTopics",
        "2-7",
        flexible="5+",
        request=struct(
            "CreateTopicsRequest",
            field(
                "topics",
                array(
                    struct(
                        "CreatableTopic",
                        field("name", STRING),
                        field("num_partitions", INT32, about="-1: broker default or explicit assignments."),
                        field(
                            "replication_factor", INT16, about="-1: broker default or explicit assignments."
                        ),
                        field(
                            "assignments",
                            array(
                                struct(
                                    "CreatableReplicaAssignment",
                                    field("partition_index", INT32),
                                    field(
                                        "broker_ids",
                                        array(INT32),
                                        about="The partition's replicas, preferred leader first.",
                                    ),
                                )
                            ),
                            about="Manual replica assignment; empty for automatic assignment.",
                        ),
                        field(
                            "configs",
                            array(
                                struct(
                                    "CreatableTopicConfig",
                                    field("name", STRING),
                                    field("value", STRING, nullable="0+"),
                                )
                            ),
                            about="Topic config overrides.",
                        ),
                    )
                ),
            ),
            field(
                "timeout_ms",
                INT32,
                default=60000,
                about="How long to wait for leaders on every new partition; 0 answers at once.",
            ),
            field(
                "validate_only",
                BOOL,
                "1+",
                default=False,
                about="Check that the topics could be created, create nothing.",
            ),
        ),
        response=struct(
            "CreateTopicsResponse",
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
                        "CreatableTopicResult",
                        field("name", STRING),
                        field(
                            "topic_id", UUID, "7+", about="The topic's ID (KIP-516); all zero when unknown."
                        ),
                        field("error_code", INT16),
                        field("error_message", STRING, "1+", nullable="0+"),
                        field(
                            "topic_config_error_code",
                            INT16,
                            "5+",
                            tag=0,
                            about="Why configs are missing from this result, if they are.",
                        ),
                        field(
                            "num_partitions",
                            INT32,
                            "5+",
                            default=-1,
                            about="The topic's partition count (v5+); -1 on error.",
                        ),
                        field(
                            "replication_factor",
                            INT16,
                            "5+",
                            default=-1,
                            about="The topic's replica count (v5+); -1 on error.",
                        ),
                        field(
                            "configs",
                            array(
                                struct(
                                    "CreatableTopicConfigs",
                                    field("name", STRING),
                                    field("value", STRING, nullable="0+"),
                                    field("read_only", BOOL, about="True if the config cannot be changed."),
                                    field(
                                        "config_source",
                                        INT8,
                                        default=-1,
                                        about="Where the value comes from: 1 topic override, "
                                        "2-3 dynamic broker, 4 static broker, 5 default.",
                                    ),
                                    field(
                                        "is_sensitive", BOOL, about="True for secrets: their value is null."
                                    ),
                                )
                            ),
                            "5+",
                            nullable="5+",
                            about="The topic's configuration as created (KIP-525).",
                        ),
                    )
                ),
            ),
        ),
    )
)
