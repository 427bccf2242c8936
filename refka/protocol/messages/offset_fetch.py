"""OffsetFetch (key 9): a consumer group's committed offsets.

v1 reads offsets stored in Kafka (v0 read ZooKeeper; Kafka 4.0 dropped it,
KIP-896). v2 allows null topics for all of them and adds a top-level
error_code. v3 adds throttle_time_ms; from v4 a throttled answer is sent
before throttling (KIP-219). v5 adds committed_leader_epoch (KIP-320). v6 is
flexible (KIP-482). v7 adds require_stable, to wait for pending transactional
commits (KIP-447). v8 asks for several groups at once: the request and
response are reorganised per group (KIP-709). v9 adds member_id and
member_epoch for the new consumer protocol (KIP-848).

refka extension (tagged, see extensions.py): each response partition carries
the topic_epoch its offset was committed under (KIP-232), in the per-topic
form (v6-v7) and the per-group form (v8+), when the request carries
refka_extensions (extensions.py says why).
"""

from ..api import Api
from ..extensions import TAG_EXTENSIONS_REQUESTED, TAG_OFFSET_TOPIC_EPOCH
from ..schema import BOOL, INT16, INT32, INT64, STRING, Field, api, array, field, struct


def _topic_epoch() -> Field:
    return field(
        "topic_epoch",
        INT32,
        "6+",
        tag=TAG_OFFSET_TOPIC_EPOCH,
        default=-1,
        about="refka KIP-232: the topic epoch the offset was committed under.",
    )


OffsetFetch = Api(
    api(
        9,
        "OffsetFetch",
        "1-9",
        flexible="6+",
        request=struct(
            "OffsetFetchRequest",
            field("group_id", STRING, "0-7"),
            field(
                "topics",
                array(
                    struct(
                        "OffsetFetchRequestTopic",
                        field("name", STRING),
                        field("partition_indexes", array(INT32)),
                    )
                ),
                "0-7",
                nullable="2-7",
                # Kafka's default is an empty list: a v8+ request, which has no
                # top-level topics, must not read as "all topics".
                default=[],
                about="Topics to fetch offsets for; null for all (v2+).",
            ),
            field(
                "groups",
                array(
                    struct(
                        "OffsetFetchRequestGroup",
                        field("group_id", STRING),
                        field(
                            "member_id",
                            STRING,
                            "9+",
                            nullable="9+",
                            default=None,
                            about="KIP-848: the asking member; null from a classic consumer.",
                        ),
                        field(
                            "member_epoch",
                            INT32,
                            "9+",
                            default=-1,
                            about="KIP-848: the asking member's epoch; -1 from a classic consumer.",
                        ),
                        field(
                            "topics",
                            array(
                                struct(
                                    "OffsetFetchRequestTopics",
                                    field("name", STRING),
                                    field("partition_indexes", array(INT32)),
                                )
                            ),
                            nullable="8+",
                            about="Topics to fetch offsets for; null for all.",
                        ),
                    )
                ),
                "8+",
                about="v8+: the groups to fetch offsets for (KIP-709).",
            ),
            field(
                "require_stable",
                BOOL,
                "7+",
                default=False,
                about="Answer UNSTABLE_OFFSET_COMMIT while a transactional commit is pending.",
            ),
            field(
                "refka_extensions",
                BOOL,
                "6+",
                tag=TAG_EXTENSIONS_REQUESTED,
                default=False,
                about="refka: the client reads refka's tagged fields; without it the answer has none.",
            ),
        ),
        response=struct(
            "OffsetFetchResponse",
            field(
                "throttle_time_ms",
                INT32,
                "3+",
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field(
                "topics",
                array(
                    struct(
                        "OffsetFetchResponseTopic",
                        field("name", STRING),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "OffsetFetchResponsePartition",
                                    field("partition_index", INT32),
                                    field(
                                        "committed_offset",
                                        INT64,
                                        about="The committed offset, or -1 if none.",
                                    ),
                                    field(
                                        "committed_leader_epoch",
                                        INT32,
                                        "5+",
                                        default=-1,
                                        about="The leader epoch committed with it (KIP-320), or -1.",
                                    ),
                                    field(
                                        "metadata",
                                        STRING,
                                        nullable="0+",
                                        about="The metadata committed with the offset.",
                                    ),
                                    field("error_code", INT16),
                                    _topic_epoch(),
                                )
                            ),
                        ),
                    )
                ),
                "0-7",
            ),
            field("error_code", INT16, "2-7", default=0, about="v2-7: an error for the whole group."),
            field(
                "groups",
                array(
                    struct(
                        "OffsetFetchResponseGroup",
                        field("group_id", STRING),
                        field(
                            "topics",
                            array(
                                struct(
                                    "OffsetFetchResponseTopics",
                                    field("name", STRING),
                                    field(
                                        "partitions",
                                        array(
                                            struct(
                                                "OffsetFetchResponsePartitions",
                                                field("partition_index", INT32),
                                                field(
                                                    "committed_offset",
                                                    INT64,
                                                    about="The committed offset, or -1 if none.",
                                                ),
                                                field(
                                                    "committed_leader_epoch",
                                                    INT32,
                                                    default=-1,
                                                    about="The leader epoch committed "
                                                    "with it (KIP-320), or -1.",
                                                ),
                                                field(
                                                    "metadata",
                                                    STRING,
                                                    nullable="0+",
                                                    about="The metadata committed with the offset.",
                                                ),
                                                field("error_code", INT16),
                                                _topic_epoch(),
                                            )
                                        ),
                                    ),
                                )
                            ),
                        ),
                        field("error_code", INT16, default=0, about="An error for the whole group."),
                    )
                ),
                "8+",
            ),
        ),
    )
)
