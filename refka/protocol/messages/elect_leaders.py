"""ElectLeaders (key 43): ask the controller for preferred or unclean leader elections.

v0 elects preferred leaders only (KIP-183, which replaced the ZooKeeper
``/admin/preferred_replica_election`` znode). v1 adds election_type (0
preferred, 1 unclean) and a top-level error_code (KIP-460). v2 is flexible
(KIP-482). topic_partitions null means every partition of the cluster.
"""

from ..api import Api
from ..schema import INT8, INT16, INT32, STRING, api, array, field, struct

ELECTION_PREFERRED = 0
ELECTION_UNCLEAN = 1

ElectLeaders = Api(
    api(
        43,
        "ElectLeaders",
        "0-2",
        flexible="2+",
        request=struct(
            "ElectLeadersRequest",
            field(
                "election_type",
                INT8,
                "1+",
                default=ELECTION_PREFERRED,
                about="0 preferred, 1 unclean (KIP-460); v0 is always preferred.",
            ),
            field(
                "topic_partitions",
                array(
                    struct(
                        "TopicPartitions",
                        field("topic", STRING, about="The topic."),
                        field("partitions", array(INT32), about="The partitions of the topic to elect for."),
                    )
                ),
                nullable="0+",
                default=None,
                about="The partitions to elect for, or null for every partition.",
            ),
            field("timeout_ms", INT32, default=60000, about="How long to wait for the elections."),
        ),
        response=struct(
            "ElectLeadersResponse",
            field(
                "throttle_time_ms",
                INT32,
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field("error_code", INT16, "1+", about="A top-level error (v1+)."),
            field(
                "replica_election_results",
                array(
                    struct(
                        "ReplicaElectionResult",
                        field("topic", STRING),
                        field(
                            "partition_result",
                            array(
                                struct(
                                    "PartitionResult",
                                    field("partition_id", INT32),
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
