"""DescribeGroups (key 15): state, protocol and members of classic groups.

v1 adds throttle_time_ms; from v2 a throttled answer is sent before
throttling (KIP-219). v3 adds include_authorized_operations and each group's
authorized_operations (KIP-430). v4 adds each member's group_instance_id
(KIP-345). v5 is flexible (KIP-482).
"""

from ..api import Api
from ..schema import BOOL, BYTES, INT16, INT32, STRING, api, array, field, struct

AUTHORIZED_OPERATIONS_UNKNOWN = -(2**31)

DescribeGroups = Api(
    api(
        15,
        "DescribeGroups",
        "0-5",
        flexible="5+",
        request=struct(
            "DescribeGroupsRequest",
            field("groups", array(STRING), about="The group ids to describe."),
            field(
                "include_authorized_operations",
                BOOL,
                "3+",
                about="Ask for authorized operations (KIP-430); with no ACLs, every operation of the resource type.",
            ),
        ),
        response=struct(
            "DescribeGroupsResponse",
            field(
                "throttle_time_ms",
                INT32,
                "1+",
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field(
                "groups",
                array(
                    struct(
                        "DescribedGroup",
                        field("error_code", INT16),
                        field("group_id", STRING),
                        field(
                            "group_state",
                            STRING,
                            about="Empty, PreparingRebalance, CompletingRebalance, Stable or Dead.",
                        ),
                        field(
                            "protocol_type",
                            STRING,
                            about='"consumer" for consumer groups, empty for a group without members.',
                        ),
                        field(
                            "protocol_data", STRING, about="The chosen assignor, when the group is stable."
                        ),
                        field(
                            "members",
                            array(
                                struct(
                                    "DescribedGroupMember",
                                    field("member_id", STRING),
                                    field(
                                        "group_instance_id",
                                        STRING,
                                        "4+",
                                        nullable="4+",
                                        default=None,
                                        about="Static membership id (KIP-345), or null for a dynamic member.",
                                    ),
                                    field("client_id", STRING),
                                    field(
                                        "client_host",
                                        STRING,
                                        about="The member's address as the coordinator saw it.",
                                    ),
                                    field(
                                        "member_metadata",
                                        BYTES,
                                        about="The member's subscription, as sent in JoinGroup.",
                                    ),
                                    field(
                                        "member_assignment",
                                        BYTES,
                                        about="The member's assignment, as the leader sent it in SyncGroup.",
                                    ),
                                )
                            ),
                        ),
                        field(
                            "authorized_operations",
                            INT32,
                            "3+",
                            default=AUTHORIZED_OPERATIONS_UNKNOWN,
                            about="Bit field of allowed operations (KIP-430); -2^31 when not asked for.",
                        ),
                    )
                ),
            ),
        ),
    )
)
