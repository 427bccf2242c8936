"""DeleteGroups (key 42): delete empty consumer groups and their offsets
(KIP-229).

v1 is the same as v0; a throttled answer is sent before throttling
(KIP-219). v2 is flexible (KIP-482).
"""

from ..api import Api
from ..schema import INT16, INT32, STRING, api, array, field, struct

DeleteGroups = Api(
    api(
        42,
        "DeleteGroups",
        "0-2",
        flexible="2+",
        request=struct(
            "DeleteGroupsRequest",
            field("groups_names", array(STRING), about="The group ids to delete."),
        ),
        response=struct(
            "DeleteGroupsResponse",
            field(
                "throttle_time_ms",
                INT32,
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field(
                "results",
                array(
                    struct(
                        "DeletableGroupResult",
                        field("group_id", STRING),
                        field("error_code", INT16),
                    )
                ),
            ),
        ),
    )
)
