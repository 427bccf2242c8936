"""DeleteRecords (key 21): move partitions' log start offsets forward (KIP-107).

v1 is the same as v0; a throttled answer is sent before throttling (KIP-219).
v2 is flexible (KIP-482). An offset of -1 means the high watermark.
"""

from ..api import Api
from ..schema import INT16, INT32, INT64, STRING, api, array, field, struct

DeleteRecords = Api(
    api(
        21,
        "DeleteRecords",
        "0-2",
        flexible="2+",
        request=struct(
            "DeleteRecordsRequest",
            field(
                "topics",
                array(
                    struct(
                        "DeleteRecordsTopic",
                        field("name", STRING),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "DeleteRecordsPartition",
                                    field("partition_index", INT32),
                                    field(
                                        "offset",
                                        INT64,
                                        about="Delete records before this offset; -1 for the high watermark.",
                                    ),
                                )
                            ),
                        ),
                    )
                ),
            ),
            field("timeout_ms", INT32, about="How long to wait for the deletion to complete."),
        ),
        response=struct(
            "DeleteRecordsResponse",
            field(
                "throttle_time_ms",
                INT32,
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field(
                "topics",
                array(
                    struct(
                        "DeleteRecordsTopicResult",
                        field("name", STRING),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "DeleteRecordsPartitionResult",
                                    field("partition_index", INT32),
                                    field("low_watermark", INT64, about="The new log start offset."),
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
