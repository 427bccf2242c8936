"""OffsetCommit (key 8): a consumer group commits partition offsets.

v2 adds retention_time_ms. v3 adds throttle_time_ms; from v4 a throttled
answer is sent before throttling (KIP-219). v5 drops retention_time_ms
(KIP-211). v6 adds committed_leader_epoch (KIP-320). v7 adds
group_instance_id (KIP-345). v8 is flexible (KIP-482). v9 carries a member
epoch in generation_id_or_member_epoch for the new consumer protocol
(KIP-848). Kafka 4.0 dropped v0-v1 (KIP-896).

refka extension (tagged, see extensions.py): each partition carries the
topic_epoch the consumer read its offsets under (KIP-232), so a commit made
before the topic was deleted and re-created is refused with
INVALID_INTERNAL_METADATA.
"""

from ..api import Api
from ..extensions import TAG_OFFSET_TOPIC_EPOCH
from ..schema import INT16, INT32, INT64, STRING, api, array, field, struct

OffsetCommit = Api(
    api(
        8,
        "OffsetCommit",
        "2-9",
        flexible="8+",
        request=struct(
            "OffsetCommitRequest",
            field("group_id", STRING),
            field(
                "generation_id_or_member_epoch",
                INT32,
                "1+",
                default=-1,
                about="The classic group's generation, or the member epoch (KIP-848).",
            ),
            field(
                "member_id",
                STRING,
                "1+",
                about="The committing member; empty for a commit from outside the group.",
            ),
            field(
                "group_instance_id",
                STRING,
                "7+",
                nullable="7+",
                default=None,
                about="Static membership id (KIP-345), or null for a dynamic member.",
            ),
            field(
                "retention_time_ms",
                INT64,
                "2-4",
                default=-1,
                about="-1: the broker's offsets.retention.minutes.",
            ),
            field(
                "topics",
                array(
                    struct(
                        "OffsetCommitRequestTopic",
                        field("name", STRING),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "OffsetCommitRequestPartition",
                                    field("partition_index", INT32),
                                    field(
                                        "committed_offset",
                                        INT64,
                                        about="The next offset to consume (the last one processed + 1).",
                                    ),
                                    field(
                                        "committed_leader_epoch",
                                        INT32,
                                        "6+",
                                        default=-1,
                                        about="The leader epoch of the last "
                                        "consumed record (KIP-320), or -1.",
                                    ),
                                    field(
                                        "committed_metadata",
                                        STRING,
                                        nullable="0+",
                                        about="Free text kept with the offset, or null.",
                                    ),
                                    field(
                                        "topic_epoch",
                                        INT32,
                                        "8+",
                                        tag=TAG_OFFSET_TOPIC_EPOCH,
                                        default=-1,
                                        about="refka KIP-232: the topic epoch the offset belongs to.",
                                    ),
                                )
                            ),
                        ),
                    )
                ),
            ),
        ),
        response=struct(
            "OffsetCommitResponse",
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
                        "OffsetCommitResponseTopic",
                        field("name", STRING),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "OffsetCommitResponsePartition",
                                    field("partition_index", INT32),
                                    field("error_code", INT16),
                                )
                            ),
                        ),
                    )
                ),
            ),
        ),
    )
)
