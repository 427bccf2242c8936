"""OffsetDelete (key 47): delete a group's committed offsets for some
partitions, e.g. of topics it no longer subscribes to (KIP-496). v0 only,
not flexible.
"""

from ..api import Api
from ..schema import INT16, INT32, STRING, api, array, field, struct

OffsetDelete = Api(
    api(
        47,
        "OffsetDelete",
        "0",
        request=struct(
            "OffsetDeleteRequest",
            field("group_id", STRING),
            field(
                "topics",
                array(
                    struct(
                        "OffsetDeleteRequestTopic",
                        field("name", STRING),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "OffsetDeleteRequestPartition",
                                    field("partition_index", INT32),
                                )
                            ),
                        ),
                    )
                ),
            ),
        ),
        response=struct(
            "OffsetDeleteResponse",
            field("error_code", INT16),
            field(
                "throttle_time_ms",
                INT32,
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field(
                "topics",
                array(
                    struct(
                        "OffsetDeleteResponseTopic",
                        field("name", STRING),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "OffsetDeleteResponsePartition",
                                    field("partition_index", INT32),
                                    field("error_code", INT16),
                                )
                            ),
                        ),
                    )
                ),
            ),
        ),
    )
)
