"""LeaveGroup (key 13): members leave a classic group.

v1 adds throttle_time_ms; from v2 a throttled answer is sent before
throttling (KIP-219). v3 removes several members at once, by member id or
group_instance_id, with a result per member (KIP-345). v4 is flexible
(KIP-482). v5 adds each member's leave reason (KIP-800).
"""

from ..api import Api
from ..schema import INT16, INT32, STRING, api, array, field, struct

LeaveGroup = Api(
    api(
        13,
        "LeaveGroup",
        "0-5",
        flexible="4+",
        request=struct(
            "LeaveGroupRequest",
            field("group_id", STRING),
            field("member_id", STRING, "0-2", about="v0-2: the member leaving."),
            field(
                "members",
                array(
                    struct(
                        "MemberIdentity",
                        field("member_id", STRING),
                        field(
                            "group_instance_id",
                            STRING,
                            nullable="0+",
                            default=None,
                            about="Static membership id (KIP-345), or null for a dynamic member.",
                        ),
                        field(
                            "reason",
                            STRING,
                            "5+",
                            nullable="5+",
                            default=None,
                            about="Why the member leaves, for the broker's log (KIP-800).",
                        ),
                    )
                ),
                "3+",
                about="v3+: the members leaving (KIP-345).",
            ),
        ),
        response=struct(
            "LeaveGroupResponse",
            field(
                "throttle_time_ms",
                INT32,
                "1+",
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field("error_code", INT16),
            field(
                "members",
                array(
                    struct(
                        "MemberResponse",
                        field("member_id", STRING),
                        field(
                            "group_instance_id",
                            STRING,
                            nullable="0+",
                            about="Static membership id (KIP-345), or null for a dynamic member.",
                        ),
                        field("error_code", INT16),
                    )
                ),
                "3+",
                about="v3+: one answer per member named.",
            ),
        ),
    )
)
