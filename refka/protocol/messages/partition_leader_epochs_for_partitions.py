"""PartitionLeaderEpochsForPartitions (refka key 10253, KIP-253): the
leaderEpochAfterCreation and leaderEpochBeforeDeletion maps of partitions.

A consumer about to read a partition P1 created by an expansion needs P1's
leaderEpochAfterCreation (each older partition's leader epoch before the
expansion; seed "Proposed Changes" 8) steps 4.1-4.3); one whose partition
may be blocked by a partition P3 marked for deletion needs P3's
leaderEpochBeforeDeletion (each undeleted partition's leader epoch when P3
was marked; step 5.2). Both are maps from partition to leader epoch, kept in
the partition znode, which the controller ships to brokers in UpdateMetadata.

v0 only, flexible (compact strings and arrays, tagged fields). Fields in the
seed's order and types (its protocol section 5), with one level the seed
does not have. The seed's response partition is (partition,
leader_epoch_after_creation, leader_epoch_before_deletion), -1 where "the
given partition" is not in the map, listed per topic: a flat list that can
carry the maps of one requested partition but cannot say whose maps an entry
is when several partitions are asked for. refka answers per requested
partition P1 (``partitions``, in the request's order) with P1's error code
and the seed's entries (``leader_epochs``): one per partition P that is a key
of either of P1's maps, ascending, each with P1's leaderEpochAfterCreation[P]
and leaderEpochBeforeDeletion[P], -1 where that map has no P. So P1's
leaderEpochAfterCreation is the entries whose leader_epoch_after_creation is
not -1 (its keys are the partitions before the expansion, step 4.2) and
likewise for leaderEpochBeforeDeletion (leader epochs are never negative).
A partition with both maps empty has no entries. The per-partition
error_code is refka's too (the seed's layout has none):
UNKNOWN_TOPIC_OR_PARTITION for a topic or partition the broker does not know.
"""

from ..api import Api
from ..extensions import API_PARTITION_LEADER_EPOCHS_FOR_PARTITIONS
from ..schema import INT16, INT32, STRING, api, array, field, struct

PartitionLeaderEpochsForPartitions = Api(
    api(
        API_PARTITION_LEADER_EPOCHS_FOR_PARTITIONS,
        "PartitionLeaderEpochsForPartitions",
        "0",
        flexible="0+",
        request=struct(
            "PartitionLeaderEpochsForPartitionsRequest",
            field(
                "topics",
                array(
                    struct(
                        "PartitionLeaderEpochsForPartitionsRequestTopic",
                        field("topic", STRING),
                        field("partitions", array(INT32), about="The partitions whose maps are wanted."),
                    )
                ),
            ),
        ),
        response=struct(
            "PartitionLeaderEpochsForPartitionsResponse",
            field(
                "throttle_time_ms",
                INT32,
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field(
                "topics",
                array(
                    struct(
                        "PartitionLeaderEpochsForPartitionsResponseTopic",
                        field("topic", STRING),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "PartitionLeaderEpochsForPartitionsResponseRequestedPartition",
                                    field("partition", INT32, about="A requested partition (P1)."),
                                    field(
                                        "error_code",
                                        INT16,
                                        about="refka: UNKNOWN_TOPIC_OR_PARTITION, or NONE.",
                                    ),
                                    field(
                                        "leader_epochs",
                                        array(
                                            struct(
                                                "PartitionLeaderEpochsForPartitionsResponsePartition",
                                                field(
                                                    "partition",
                                                    INT32,
                                                    about="A key of either of P1's maps.",
                                                ),
                                                field(
                                                    "leader_epoch_after_creation",
                                                    INT32,
                                                    about="P1's leaderEpochAfterCreation of this "
                                                    "partition; -1 if it has none.",
                                                ),
                                                field(
                                                    "leader_epoch_before_deletion",
                                                    INT32,
                                                    about="P1's leaderEpochBeforeDeletion of this "
                                                    "partition; -1 if it has none.",
                                                ),
                                            )
                                        ),
                                        about="The entries of P1's two maps, by partition, ascending.",
                                    ),
                                )
                            ),
                            about="One per requested partition, in the request's order.",
                        ),
                    )
                ),
            ),
        ),
    )
)
