"""JoinGroup (key 11): a member joins a classic consumer group; the leader
gets every member's subscription metadata to compute the assignment.

v1 adds rebalance_timeout_ms (KIP-62). v2 adds throttle_time_ms; from v3 a
throttled answer is sent before throttling (KIP-219). v4 answers a first join
with MEMBER_ID_REQUIRED and the member id to rejoin with (KIP-394). v5 adds
group_instance_id for static membership (KIP-345). v6 is flexible (KIP-482).
v7 returns protocol_type, and protocol_name may be null (KIP-559). v8 adds the
join reason (KIP-800). v9 adds skip_assignment for a leader whose assignment
the broker computed (KIP-814).
"""

from ..api import Api
from ..schema import BOOL, BYTES, INT16, INT32, STRING, api, array, field, struct

JoinGroup = Api(
    api(
        11,
        "JoinGroup",
        "0-9",
        flexible="6+",
        request=struct(
            "JoinGroupRequest",
            field("group_id", STRING),
            field(
                "session_timeout_ms",
                INT32,
                about="The member is removed if no heartbeat arrives within this.",
            ),
            field(
                "rebalance_timeout_ms",
                INT32,
                "1+",
                default=-1,
                about="How long the coordinator waits for members to rejoin (KIP-62).",
            ),
            field("member_id", STRING, about="Empty on a member's first join."),
            field(
                "group_instance_id",
                STRING,
                "5+",
                nullable="5+",
                default=None,
                about="Static membership id (KIP-345), or null for a dynamic member.",
            ),
            field("protocol_type", STRING, about='"consumer" for consumer groups.'),
            field(
                "protocols",
                array(
                    struct(
                        "JoinGroupRequestProtocol",
                        field("name", STRING, about="The assignor name."),
                        field("metadata", BYTES, about="The member's subscription."),
                    )
                ),
            ),
            field(
                "reason",
                STRING,
                "8+",
                nullable="8+",
                default=None,
                about="Why the member (re)joins, for the broker's log (KIP-800).",
            ),
        ),
        response=struct(
            "JoinGroupResponse",
            field(
                "throttle_time_ms",
                INT32,
                "2+",
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field("error_code", INT16),
            field(
                "generation_id",
                INT32,
                default=-1,
                about="The generation this rebalance produced; -1 on error.",
            ),
            field(
                "protocol_type",
                STRING,
                "7+",
                nullable="7+",
                default=None,
                about="The group's protocol type (v7+).",
            ),
            field("protocol_name", STRING, nullable="7+", about="The chosen assignor."),
            field("leader", STRING, about="The leader's member id."),
            field(
                "skip_assignment",
                BOOL,
                "9+",
                default=False,
                about="True when the leader must not assign again: a static leader rejoined (KIP-814).",
            ),
            field("member_id", STRING, about="This member's id, as assigned by the coordinator."),
            field(
                "members",
                array(
                    struct(
                        "JoinGroupResponseMember",
                        field("member_id", STRING),
                        field(
                            "group_instance_id",
                            STRING,
                            "5+",
                            nullable="5+",
                            default=None,
                            about="Static membership id (KIP-345), or null for a dynamic member.",
                        ),
                        field("metadata", BYTES, about="That member's subscription."),
                    )
                ),
                about="Every member and its subscription; for the leader only.",
            ),
        ),
    )
)
