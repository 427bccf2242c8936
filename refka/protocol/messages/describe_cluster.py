"""DescribeCluster (key 60): cluster id, controller and brokers, for admin
clients (KIP-700: the part of Metadata that is not about topics).

Flexible from v0. v1 adds endpoint_type, so an admin client that bootstraps
from controllers can ask for their endpoints (KIP-919). v2 adds
include_fenced_brokers and each broker's is_fenced (KIP-1073).
"""

from ..api import Api
from ..schema import BOOL, INT8, INT16, INT32, STRING, api, array, field, struct

AUTHORIZED_OPERATIONS_UNKNOWN = -(2**31)
ENDPOINT_TYPE_BROKERS = 1
ENDPOINT_TYPE_CONTROLLERS = 2

DescribeCluster = Api(
    api(
        60,
        "DescribeCluster",
        "0-2",
        flexible="0+",
        request=struct(
            "DescribeClusterRequest",
            field(
                "include_cluster_authorized_operations",
                BOOL,
                about="Ask for authorized operations (KIP-430); with no ACLs, every operation of the resource type.",
            ),
            field(
                "endpoint_type",
                INT8,
                "1+",
                default=ENDPOINT_TYPE_BROKERS,
                about="1 brokers, 2 controllers.",
            ),
            field(
                "include_fenced_brokers",
                BOOL,
                "2+",
                default=False,
                about="Also list fenced brokers (KIP-1073).",
            ),
        ),
        response=struct(
            "DescribeClusterResponse",
            field(
                "throttle_time_ms",
                INT32,
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field("error_code", INT16),
            field("error_message", STRING, nullable="0+", default=None),
            field(
                "endpoint_type",
                INT8,
                "1+",
                default=ENDPOINT_TYPE_BROKERS,
                about="What brokers lists: 1 brokers, 2 controllers.",
            ),
            field("cluster_id", STRING),
            field("controller_id", INT32, default=-1, about="The controller's broker id, or -1 if unknown."),
            field(
                "brokers",
                array(
                    struct(
                        "DescribeClusterBroker",
                        field("broker_id", INT32),
                        field("host", STRING),
                        field("port", INT32),
                        field(
                            "rack",
                            STRING,
                            nullable="0+",
                            default=None,
                            about="The broker's rack (broker.rack), or null.",
                        ),
                        field(
                            "is_fenced",
                            BOOL,
                            "2+",
                            default=False,
                            about="True for a fenced broker (KRaft); never in ZooKeeper mode.",
                        ),
                    )
                ),
            ),
            field(
                "cluster_authorized_operations",
                INT32,
                default=AUTHORIZED_OPERATIONS_UNKNOWN,
                about="Bit field of allowed operations (KIP-430); -2^31 when not asked for.",
            ),
        ),
    )
)
