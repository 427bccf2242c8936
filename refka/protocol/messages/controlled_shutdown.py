"""ControlledShutdown (key 7): a broker asks the controller to move leadership
away from it before it stops.

Inter-broker only (broker -> controller), declared after Kafka 3.x's last
ZooKeeper-era versions. v0 is sent with request header v0 (no client id).
v1 has the same body with the usual header. v2 adds broker_epoch (KIP-380).
v3 is flexible (KIP-482).
"""

from ..api import Api
from ..schema import INT16, INT32, INT64, STRING, api, array, field, struct

ControlledShutdown = Api(
    api(
        7,
        "ControlledShutdown",
        "0-3",
        flexible="3+",
        request_header_v0="0",
        request=struct(
            "ControlledShutdownRequest",
            field("broker_id", INT32, about="The broker that is shutting down."),
            field(
                "broker_epoch",
                INT64,
                "2+",
                default=-1,
                about="The broker's epoch (its registration, KIP-380); -1 if unknown.",
            ),
        ),
        response=struct(
            "ControlledShutdownResponse",
            field("error_code", INT16),
            field(
                "remaining_partitions",
                array(
                    struct(
                        "RemainingPartition",
                        field("topic_name", STRING),
                        field("partition_index", INT32),
                    )
                ),
                about="Partitions the broker still leads.",
            ),
        ),
    )
)
