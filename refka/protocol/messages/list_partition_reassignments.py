"""ListPartitionReassignments (key 46): the ongoing partition reassignments.

v0 is flexible (KIP-455). topics null lists every ongoing reassignment.
"""

from ..api import Api
from ..schema import INT16, INT32, STRING, api, array, field, struct

ListPartitionReassignments = Api(
    api(
        46,
        "ListPartitionReassignments",
        "0",
        flexible="0+",
        request=struct(
            "ListPartitionReassignmentsRequest",
            field("timeout_ms", INT32, default=60000, about="How long to wait for the request."),
            field(
                "topics",
                array(
                    struct(
                        "ListPartitionReassignmentsTopics",
                        field("name", STRING),
                        field("partition_indexes", array(INT32)),
                    )
                ),
                nullable="0+",
                default=None,
                about="The partitions to list, or null for every ongoing reassignment.",
            ),
        ),
        response=struct(
            "ListPartitionReassignmentsResponse",
            field(
                "throttle_time_ms",
                INT32,
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field("error_code", INT16),
            field("error_message", STRING, nullable="0+", default=None),
            field(
                "topics",
                array(
                    struct(
                        "OngoingTopicReassignment",
                        field("name", STRING),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "OngoingPartitionReassignment",
                                    field("partition_index", INT32),
                                    field(
                                        "replicas", array(INT32), about="Current replicas (target + origin)."
                                    ),
                                    field(
                                        "adding_replicas",
                                        array(INT32),
                                        about="Replicas the reassignment adds.",
                                    ),
                                    field(
                                        "removing_replicas",
                                        array(INT32),
                                        about="Replicas removed once the added ones have caught up.",
                                    ),
                                )
                            ),
                        ),
                    )
                ),
            ),
        ),
    )
)
