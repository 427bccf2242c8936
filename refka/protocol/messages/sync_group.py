"""SyncGroup (key 14): the leader hands in the group's assignment; every
member gets its own share back.

v1 adds throttle_time_ms; from v2 a throttled answer is sent before
throttling (KIP-219). v3 adds group_instance_id (KIP-345). v4 is flexible
(KIP-482). v5 adds protocol_type and protocol_name both ways (KIP-559).
"""

from ..api import Api
from ..schema import BYTES, INT16, INT32, STRING, api, array, field, struct

SyncGroup = Api(
    api(
        14,
        "SyncGroup",
        "0-5",
        flexible="4+",
        request=struct(
            "SyncGroupRequest",
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
            field(
                "protocol_type",
                STRING,
                "5+",
                nullable="5+",
                default=None,
                about="The group's protocol type; a mismatch is INCONSISTENT_GROUP_PROTOCOL (v5+).",
            ),
            field(
                "protocol_name",
                STRING,
                "5+",
                nullable="5+",
                default=None,
                about="The group's chosen assignor; a mismatch is INCONSISTENT_GROUP_PROTOCOL (v5+).",
            ),
            field(
                "assignments",
                array(
                    struct(
                        "SyncGroupRequestAssignment",
                        field("member_id", STRING),
                        field("assignment", BYTES, about="That member's assignment."),
                    )
                ),
                about="Each member's assignment; from the leader only.",
            ),
        ),
        response=struct(
            "SyncGroupResponse",
            field(
                "throttle_time_ms",
                INT32,
                "1+",
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field("error_code", INT16),
            field(
                "protocol_type",
                STRING,
                "5+",
                nullable="5+",
                default=None,
                about="The group's protocol type (v5+).",
            ),
            field(
                "protocol_name",
                STRING,
                "5+",
                nullable="5+",
                default=None,
                about="The group's chosen assignor (v5+).",
            ),
            field("assignment", BYTES, about="This member's assignment."),
        ),
    )
)
