"""PartitionLeaderEpochsForPartitions (refka key 10253), v0: the KIP-253 maps of partitions.

Behavior:
- Answered from the metadata cache (the partition znodes' maps as the
  controller's UpdateMetadata carried them), so every broker answers, not
  only the group coordinator the seed sends it to.
- Per requested partition P1, in the request's order: one entry per
  partition that is a key of either of P1's maps (leaderEpochAfterCreation,
  leaderEpochBeforeDeletion), ascending, with both values, -1 where a map
  has no such key (the layout is explained in the message declaration).
- A topic or partition the cache does not have: UNKNOWN_TOPIC_OR_PARTITION
  for that partition, without entries.
- The maps reach a broker with the UpdateMetadata after the LeaderAndIsr that
  marks partitions for deletion: a partition already refusing records may
  still answer an empty leaderEpochBeforeDeletion for that moment.

Version notes:
- v0 (refka, KIP-253) is flexible.
"""

from __future__ import annotations

from refka.protocol import ErrorCode
from refka.protocol.messages.partition_leader_epochs_for_partitions import PartitionLeaderEpochsForPartitions

from ..registry import handles

Resp = PartitionLeaderEpochsForPartitions.Response
RTopic = Resp.PartitionLeaderEpochsForPartitionsResponseTopic
RRequested = RTopic.PartitionLeaderEpochsForPartitionsResponseRequestedPartition
REntry = RRequested.PartitionLeaderEpochsForPartitionsResponsePartition


def _entries(after: tuple[tuple[int, int], ...], before: tuple[tuple[int, int], ...]) -> list:
    if not after and not before:
        return []
    a, b = dict(after), dict(before)
    return [REntry(partition=p, leader_epoch_after_creation=a.get(p, -1), leader_epoch_before_deletion=b.get(p, -1))
            for p in sorted(a.keys() | b.keys())]


@handles(PartitionLeaderEpochsForPartitions.key, 0, 0)
def handle_partition_leader_epochs_for_partitions(ctx, req):
    cache = ctx.broker.metadata
    out = []
    for t in req.topics:
        tmeta = cache.topic(t.topic)
        parts = []
        for index in t.partitions:
            pmeta = tmeta.partitions.get(index) if tmeta is not None else None
            if pmeta is None:
                parts.append(RRequested(partition=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            parts.append(RRequested(partition=index, error_code=ErrorCode.NONE, leader_epochs=_entries(
                pmeta.leader_epoch_after_creation, pmeta.leader_epoch_before_deletion)))
        out.append(RTopic(topic=t.topic, partitions=parts))
    return Resp(throttle_time_ms=0, topics=out)
