"""DeleteTopics (key 20): delete topics by name, or from v6 by topic ID.

v1 adds throttle_time_ms; from v2 a throttled answer is sent before throttling
(KIP-219). v3 may answer TOPIC_DELETION_DISABLED. v4 is flexible (KIP-482).
v5 adds a per-topic error_message and may answer THROTTLING_QUOTA_EXCEEDED
(KIP-599). v6 names each topic by name or topic_id, and a result's name may be
null (KIP-516). Kafka 4.0 dropped v0 (KIP-896).
"""

from ..api import Api
from ..schema import INT16, INT32, STRING, UUID, api, array, field, struct

DeleteTopics = Api(
    api(
        20,
        "DeleteTopics",
        "1-6",
        flexible="4+",
        request=struct(
            "DeleteTopicsRequest",
            field(
                "topics",
                array(
                    struct(
                        "DeleteTopicState",
                        field("name", STRING, nullable="6+", default=None),
                        field("topic_id", UUID, about="Zero UUID when the topic is named."),
                    )
                ),
                "6+",
                about="Topics to delete, each by name or by topic ID.",
            ),
            field("topic_names", array(STRING), "0-5", about="Names of the topics to delete."),
            field("timeout_ms", INT32, about="How long to wait for the deletions to complete."),
        ),
        response=struct(
            "DeleteTopicsResponse",
            field(
                "throttle_time_ms",
                INT32,
                "1+",
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field(
                "responses",
                array(
                    struct(
                        "DeletableTopicResult",
                        field("name", STRING, nullable="6+"),
                        field(
                            "topic_id", UUID, "6+", about="The topic's ID (KIP-516); all zero when unknown."
                        ),
                        field("error_code", INT16),
                        field("error_message", STRING, "5+", nullable="5+", default=None),
                    )
                ),
            ),
        ),
    )
)
