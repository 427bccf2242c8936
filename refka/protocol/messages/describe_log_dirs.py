"""DescribeLogDirs (key 35): a broker's log directories and the size and lag
of each partition replica in them (KIP-113).

v1 is the same as v0; a throttled answer is sent before throttling
(KIP-219). v2 is flexible (KIP-482). v3 adds a top-level error_code
(KIP-784). v4 adds each directory's total_bytes and usable_bytes (KIP-827).
Kafka 4.0 dropped v0 (KIP-896); refka still serves it: it is v1's format.
"""

from ..api import Api
from ..schema import BOOL, INT16, INT32, INT64, STRING, api, array, field, struct

DescribeLogDirs = Api(
    api(
        35,
        "DescribeLogDirs",
        "0-4",
        flexible="2+",
        request=struct(
            "DescribeLogDirsRequest",
            field(
                "topics",
                array(
                    struct(
                        "DescribableLogDirTopic",
                        field("topic", STRING),
                        field("partitions", array(INT32)),
                    )
                ),
                nullable="0+",
                about="Partitions to describe; null for all.",
            ),
        ),
        response=struct(
            "DescribeLogDirsResponse",
            field(
                "throttle_time_ms",
                INT32,
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field("error_code", INT16, "3+"),
            field(
                "results",
                array(
                    struct(
                        "DescribeLogDirsResult",
                        field("error_code", INT16),
                        field("log_dir", STRING, about="Absolute path of the log directory."),
                        field(
                            "topics",
                            array(
                                struct(
                                    "DescribeLogDirsTopic",
                                    field("name", STRING),
                                    field(
                                        "partitions",
                                        array(
                                            struct(
                                                "DescribeLogDirsPartition",
                                                field("partition_index", INT32),
                                                field("partition_size", INT64, about="Bytes on disk."),
                                                field(
                                                    "offset_lag",
                                                    INT64,
                                                    about="Log end offset minus the high watermark, "
                                                    "or of the current replica for a future one.",
                                                ),
                                                field(
                                                    "is_future_key",
                                                    BOOL,
                                                    about="True for a future replica being moved here.",
                                                ),
                                            )
                                        ),
                                    ),
                                )
                            ),
                        ),
                        field(
                            "total_bytes",
                            INT64,
                            "4+",
                            default=-1,
                            about="The size of the directory's volume in bytes (KIP-827); -1 if unknown.",
                        ),
                        field(
                            "usable_bytes",
                            INT64,
                            "4+",
                            default=-1,
                            about="Free bytes on that volume (KIP-827); -1 if unknown.",
                        ),
                    )
                ),
            ),
        ),
    )
)
