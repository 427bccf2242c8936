"""IncrementalAlterConfigs (key 44): set, delete, append to or subtract from
single config entries of topics, brokers or broker loggers (KIP-339).

v1 is flexible (KIP-482).
"""

from ..api import Api
from ..schema import BOOL, INT8, INT16, INT32, STRING, api, array, field, struct

OP_SET = 0
OP_DELETE = 1
OP_APPEND = 2
OP_SUBTRACT = 3

IncrementalAlterConfigs = Api(
    api(
        44,
        "IncrementalAlterConfigs",
        "0-1",
        flexible="1+",
        request=struct(
            "IncrementalAlterConfigsRequest",
            field(
                "resources",
                array(
                    struct(
                        "AlterConfigsResource",
                        field("resource_type", INT8, about="2 topic, 4 broker, 8 broker logger."),
                        field("resource_name", STRING),
                        field(
                            "configs",
                            array(
                                struct(
                                    "AlterableConfig",
                                    field("name", STRING),
                                    field(
                                        "config_operation",
                                        INT8,
                                        about="0 set, 1 delete, 2 append, 3 subtract.",
                                    ),
                                    field("value", STRING, nullable="0+"),
                                )
                            ),
                        ),
                    )
                ),
            ),
            field("validate_only", BOOL, about="Check the changes, make none."),
        ),
        response=struct(
            "IncrementalAlterConfigsResponse",
            field(
                "throttle_time_ms",
                INT32,
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field(
                "responses",
                array(
                    struct(
                        "AlterConfigsResourceResponse",
                        field("error_code", INT16),
                        field("error_message", STRING, nullable="0+"),
                        field("resource_type", INT8),
                        field("resource_name", STRING),
                    )
                ),
            ),
        ),
    )
)
