"""DescribeConfigs (key 32): configuration of topics, brokers and broker
loggers, with where each value comes from.

v1 adds include_synonyms, each config's config_source and its synonyms
(KIP-226). v2 is the same as v1. v3 adds include_documentation, each config's
config_type and documentation (KIP-569). v4 is flexible (KIP-482). Kafka 4.0
dropped v0 and its is_default flag (KIP-896).

resource_type: 2 topic, 4 broker, 8 broker logger. config_source: 1 dynamic
topic, 2 dynamic broker, 3 dynamic default broker, 4 static broker, 5 default,
6 dynamic broker logger, 7 client metrics, 8 group.
"""

from ..api import Api
from ..schema import BOOL, INT8, INT16, INT32, STRING, api, array, field, struct

DescribeConfigs = Api(
    api(
        32,
        "DescribeConfigs",
        "1-4",
        flexible="4+",
        request=struct(
            "DescribeConfigsRequest",
            field(
                "resources",
                array(
                    struct(
                        "DescribeConfigsResource",
                        field("resource_type", INT8, about="2 topic, 4 broker, 8 broker logger."),
                        field(
                            "resource_name",
                            STRING,
                            about='The topic name, or the broker id ("" for the receiving broker).',
                        ),
                        field(
                            "configuration_keys",
                            array(STRING),
                            nullable="0+",
                            about="Config names to describe; null for all.",
                        ),
                    )
                ),
            ),
            field(
                "include_synonyms",
                BOOL,
                "1+",
                default=False,
                about="List each config's value in every source, by precedence.",
            ),
            field(
                "include_documentation",
                BOOL,
                "3+",
                default=False,
                about="Add each config's documentation (KIP-569).",
            ),
        ),
        response=struct(
            "DescribeConfigsResponse",
            field(
                "throttle_time_ms",
                INT32,
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field(
                "results",
                array(
                    struct(
                        "DescribeConfigsResult",
                        field("error_code", INT16),
                        field("error_message", STRING, nullable="0+"),
                        field("resource_type", INT8),
                        field("resource_name", STRING),
                        field(
                            "configs",
                            array(
                                struct(
                                    "DescribeConfigsResourceResult",
                                    field("name", STRING),
                                    field("value", STRING, nullable="0+"),
                                    field("read_only", BOOL, about="True if the config cannot be changed."),
                                    field(
                                        "config_source",
                                        INT8,
                                        "1+",
                                        default=-1,
                                        about="Where the value comes from: 1 topic override, "
                                        "2-3 dynamic broker, 4 static broker, 5 default.",
                                    ),
                                    field(
                                        "is_sensitive", BOOL, about="True for secrets: their value is null."
                                    ),
                                    field(
                                        "synonyms",
                                        array(
                                            struct(
                                                "DescribeConfigsSynonym",
                                                field("name", STRING),
                                                field("value", STRING, nullable="0+"),
                                                field(
                                                    "source",
                                                    INT8,
                                                    about="Where the value comes from: 1 topic override, "
                                                    "2-3 dynamic broker, 4 static broker, 5 default.",
                                                ),
                                            )
                                        ),
                                        "1+",
                                        about="Values this config takes from other sources, by precedence.",
                                    ),
                                    field(
                                        "config_type",
                                        INT8,
                                        "3+",
                                        default=0,
                                        about="0 unknown, 1 boolean, 2 string, 3 int, 4 short, 5 long, "
                                        "6 double, 7 list, 8 class, 9 password.",
                                    ),
                                    field(
                                        "documentation",
                                        STRING,
                                        "3+",
                                        nullable="0+",
                                        about="The config's documentation, or null.",
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
