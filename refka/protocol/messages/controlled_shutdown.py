"""ControlledShutdown (key 7): a broker asks the controller to move leadership
away from it before it stops.

Inter-broker only (broker -> controller), declared after Kafka 3.x's last
ZooKeeper-era versions. v0 is sent with request header v0 (no client id).
v1 has the same body with the usual header. v2 adds broker_epoch (KIP-380).
v3 is flexible (KIP-482).

refka extension (tagged, v3, see extensions.py): the controller_token of the
controller asked, which proves the sender reads the metadata store, i.e. is a broker.
"""

from ..api import Api
from ..extensions import TAG_CONTROLLER_TOKEN
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
            field(
                "controller_token",
                INT64,
                "3+",
                tag=TAG_CONTROLLER_TOKEN,
                default=-1,
                about="refka: the token of the controller asked, read from /controller; "
                "proves the sender is a broker (broker/inter_broker.py). -1: not sent.",
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
