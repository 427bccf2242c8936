"""OffsetForLeaderEpoch (key 23): the end offset of a leader epoch.

A follower (after a leader change) or a consumer (after a leader change or an
unclean election, KIP-320) asks where an epoch it has seen ends on the
leader, and truncates its log, or detects truncation, from there (KIP-101).

v1 adds leader_epoch to the response (KIP-279). v2 adds current_leader_epoch
for fencing and throttle_time_ms (KIP-320). v3 adds replica_id so consumers
(-1) and followers can be told apart (KIP-392). v4 is flexible.
"""

from ..api import Api
from ..schema import INT16, INT32, INT64, STRING, api, array, field, struct

CONSUMER_REPLICA_ID = -1
# The replica_id of a v0-v2 request, which cannot say who sent it.
DEBUGGING_REPLICA_ID = -2

OffsetForLeaderEpoch = Api(
    api(
        23,
        "OffsetForLeaderEpoch",
        "0-4",
        flexible="4+",
        request=struct(
            "OffsetForLeaderEpochRequest",
            field(
                "replica_id",
                INT32,
                "3+",
                default=DEBUGGING_REPLICA_ID,
                about="The follower's broker id, or -1 for a consumer.",
            ),
            field(
                "topics",
                array(
                    struct(
                        "OffsetForLeaderTopic",
                        field("topic", STRING),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "OffsetForLeaderPartition",
                                    field("partition", INT32),
                                    field(
                                        "current_leader_epoch",
                                        INT32,
                                        "2+",
                                        default=-1,
                                        about="The epoch the requester believes current, for fencing; -1 none.",
                                    ),
                                    field("leader_epoch", INT32, about="The epoch to look up."),
                                )
                            ),
                        ),
                    )
                ),
            ),
        ),
        response=struct(
            "OffsetForLeaderEpochResponse",
            field(
                "throttle_time_ms",
                INT32,
                "2+",
                about="How long a quota held this answer back; refka has no quotas: always 0.",
            ),
            field(
                "topics",
                array(
                    struct(
                        "OffsetForLeaderTopicResult",
                        field("topic", STRING),
                        field(
                            "partitions",
                            array(
                                struct(
                                    "EpochEndOffset",
                                    field("error_code", INT16),
                                    field("partition", INT32),
                                    field(
                                        "leader_epoch",
                                        INT32,
                                        "1+",
                                        default=-1,
                                        about="The largest epoch not above the one asked for.",
                                    ),
                                    field(
                                        "end_offset",
                                        INT64,
                                        default=-1,
                                        about="The epoch's end: the next epoch's start, or "
                                        "the log end for the current one; -1 unknown.",
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
