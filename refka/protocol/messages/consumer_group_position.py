"""ConsumerGroupPosition (refka key 10254, KIP-253): members of a consumer group
tell each other, through the group coordinator, how far they have consumed.

Sent every heartbeat.interval.ms by a member (seed "Proposed Changes" 7)):
it reports its position of the partitions the coordinator asked it for
(position >= 0) and names the partitions whose group position it needs
(need_position = true), for instance the partition that blocks one it was
assigned after an expansion (step 4.4) or a partition marked for deletion
(step 5.2). The answer gives the group's latest known position of each
partition the member needs (-1: unknown), and sets need_position on the
partitions assigned to this member whose position some member needs, which
it reports next time.

v0 only, flexible (compact strings and arrays, tagged fields). Fields in the
seed's order and types (its protocol sections 3 and 4), error_code last as
the seed has it.
"""

from ..api import Api
from ..extensions import API_CONSUMER_GROUP_POSITION
from ..schema import BOOL, INT16, INT32, INT64, STRING, api, array, field, struct

ConsumerGroupPosition = Api(
    api(
        API_CONSUMER_GROUP_POSITION,
        "ConsumerGroupPosition",
        "0",
        flexible="0+",
        request=struct(
            "ConsumerGroupPositionRequest",
            field("group_id", STRING),
            field("generation_id", INT32, about="The group generation the member joined."),
            field("member_id", STRING),
            field(
                "topics",
                array(
                    struct(
                        "ConsumerGroupPositionRequestTopic",
                        field("topic", STRING),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "ConsumerGroupPositionRequestPartition",
                                    field("partition", INT32),
                                    field(
                                        "need_position",
                                        BOOL,
                                        about="True: the answer should carry the group's position "
                                        "of this partition.",
                                    ),
                                    field(
                                        "position",
                                        INT64,
                                        about="This member's position of this partition; -1: none "
                                        "reported.",
                                    ),
                                )
                            ),
                        ),
                    )
                ),
            ),
        ),
        response=struct(
            "ConsumerGroupPositionResponse",
            field(
                "throttle_time_ms",
                INT32,
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field(
                "topics",
                array(
                    struct(
                        "ConsumerGroupPositionResponseTopic",
                        field("topic", STRING),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "ConsumerGroupPositionResponsePartition",
                                    field("partition", INT32),
                                    field(
                                        "need_position",
                                        BOOL,
                                        about="True: the next request should carry this member's "
                                        "position of this partition.",
                                    ),
                                    field(
                                        "position",
                                        INT64,
                                        about="The group's latest known position of this partition; "
                                        "-1: unknown.",
                                    ),
                                )
                            ),
                        ),
                    )
                ),
            ),
            field("error_code", INT16),
        ),
    )
)
