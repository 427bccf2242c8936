"""Heartbeat (key 12): a member of a classic group is alive; the answer says
whether the group is rebalancing.

v1 adds throttle_time_ms; from v2 a throttled answer is sent before
throttling (KIP-219). v3 adds group_instance_id (KIP-345). v4 is flexible
(KIP-482).
"""

from ..api import Api
from ..schema import INT16, INT32, STRING, api, field, struct

Heartbeat = Api(
    api(
        12,
        "Heartbeat",
        "0-4",
        flexible="4+",
        request=struct(
            "HeartbeatRequest",
            field("group_id", STRING),
            field("generation_id", INT32, about="The group generation the member joined."),
            field("member_id", STRING),
            field(
                "group_instance_id",
                STRING,
                "3+",
                nullable="3+",
                default=None,
                about="Static membership id (KIP-345), or null for a dynamic member.",
            ),
        ),
        response=struct(
            "HeartbeatResponse",
            field(
                "throttle_time_ms",
                INT32,
                "1+",
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field("error_code", INT16),
        ),
    )
)
