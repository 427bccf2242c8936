"""ListGroups (key 16): the groups a broker coordinates.

v1 adds throttle_time_ms; from v2 a throttled answer is sent before
throttling (KIP-219). v3 is flexible (KIP-482). v4 filters by state and
returns each group's state (KIP-518). v5 filters by type and returns each
group's type (KIP-848).
"""

from ..api import Api
from ..schema import INT16, INT32, STRING, api, array, field, struct

ListGroups = Api(
    api(
        16,
        "ListGroups",
        "0-5",
        flexible="3+",
        request=struct(
            "ListGroupsRequest",
            field("states_filter", array(STRING), "4+", about="Only groups in these states; empty for all."),
            field("types_filter", array(STRING), "5+", about="Only groups of these types; empty for all."),
        ),
        response=struct(
            "ListGroupsResponse",
            field(
                "throttle_time_ms",
                INT32,
                "1+",
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field("error_code", INT16),
            field(
                "groups",
                array(
                    struct(
                        "ListedGroup",
                        field("group_id", STRING),
                        field("protocol_type", STRING),
                        field("group_state", STRING, "4+", about="The group's state (v4+)."),
                        field("group_type", STRING, "5+", about='"classic" or "consumer" (KIP-848, v5+).'),
                    )
                ),
            ),
        ),
    )
)
