"""OffsetForLeaderEpoch (key 23), v0-v4.

Behavior:
- For each partition and leader epoch: the largest epoch <= the requested one
  in the leader-epoch cache and the offset where it ended (the log end offset
  for the current epoch); UNDEFINED (-1, -1) when the log has no such epoch.
  Consumers use it to detect log truncation after a leader change (KIP-320),
  followers to find where to truncate their divergent tail.
- Not the leader: NOT_LEADER_OR_FOLLOWER; unknown: UNKNOWN_TOPIC_OR_PARTITION;
  current_leader_epoch checked (v2+): FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH.

Version notes:
- v1 leader_epoch in the answer. v2 current_leader_epoch (KIP-320). v3
  replica_id (consumers send -1). v4 flexible.
"""

from __future__ import annotations

from typing import Any

from refka.protocol import ErrorCode
from refka.protocol.messages.offsets_for_leader_epoch import OffsetForLeaderEpoch

from ..leader_hints import local_leader
from ..registry import handles

Resp = OffsetForLeaderEpoch.Response
RTopic = Resp.OffsetForLeaderTopicResult
RPart = RTopic.EpochEndOffset


def _answer(broker, topic: str, p) -> Any:
    out = RPart(error_code=ErrorCode.NONE, partition=p.partition, leader_epoch=-1, end_offset=-1)
    part, err = local_leader(broker.replicas, broker.metadata, topic, p.partition, p.current_leader_epoch)
    if part is None:
        out.error_code = err
        return out
    out.leader_epoch, out.end_offset = part.log.end_offset_for_epoch(p.leader_epoch)
    return out


@handles(OffsetForLeaderEpoch.key, 0, 4)
def handle_offsets_for_leader_epoch(ctx, req):
    broker = ctx.broker
    return Resp(topics=[RTopic(topic=t.topic, partitions=[_answer(broker, t.topic, p) for p in t.partitions])
                        for t in req.topics])
