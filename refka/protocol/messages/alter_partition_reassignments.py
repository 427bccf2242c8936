"""AlterPartitionReassignments (key 45): start or cancel partition reassignments.

v0 is flexible from the start (KIP-455, which moved reassignment from the
``/admin/reassign_partitions`` znode to this API). A partition's replicas
null cancels its ongoing reassignment. v1 adds allow_replication_factor_change
to request and response (KIP-860): false refuses a target whose replica
count differs from the current one.
"""

from ..api import Api
from ..schema import BOOL, INT16, INT32, STRING, api, array, field, struct

AlterPartitionReassignments = Api(
    api(
        45,
        "AlterPartitionReassignments",
        "0-1",
        flexible="0+",
        request=struct(
            "AlterPartitionReassignmentsRequest",
            field("timeout_ms", INT32, default=60000, about="How long to wait for the request."),
            field(
                "allow_replication_factor_change",
                BOOL,
                "1+",
                default=True,
                about="False refuses a change of the replica count (KIP-860).",
            ),
            field(
                "topics",
                array(
                    struct(
                        "ReassignableTopic",
                        field("name", STRING),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "ReassignablePartition",
                                    field("partition_index", INT32),
                                    field(
                                        "replicas",
                                        array(INT32),
                                        nullable="0+",
                                        default=None,
                                        about="The target replicas, or null to cancel.",
                                    ),
                                )
                            ),
                        ),
                    )
                ),
            ),
        ),
        response=struct(
            "AlterPartitionReassignmentsResponse",
            field(
                "throttle_time_ms",
                INT32,
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field(
                "allow_replication_factor_change",
                BOOL,
                "1+",
                default=True,
                about="The request's flag, echoed (v1+).",
            ),
            field("error_code", INT16, about="A top-level error."),
            field("error_message", STRING, nullable="0+", default=None),
            field(
                "responses",
                array(
                    struct(
                        "ReassignableTopicResponse",
                        field("name", STRING),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "ReassignablePartitionResponse",
                                    field("partition_index", INT32),
                                    field("error_code", INT16),
                                    field("error_message", STRING, nullable="0+", default=None),
                                )
                            ),
                        ),
                    )
                ),
            ),
        ),
    )
)
