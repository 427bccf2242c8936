"""OffsetCommit (key 8), v2-v9.

Behavior:
- Commits go to the group's __consumer_offsets partition as one batch (all
  partitions of a request or none) and are answered once the high watermark
  passes them (within offsets.commit.timeout.ms, else COORDINATOR_NOT_AVAILABLE).
- Accepted from a member of the group's current generation (not while the
  group waits for its assignment: REBALANCE_IN_PROGRESS), and with
  generation -1 and no member id while the group is Empty (simple consumers,
  admin tools; that creates the group). Otherwise UNKNOWN_MEMBER_ID,
  ILLEGAL_GENERATION, FENCED_INSTANCE_ID. NOT_COORDINATOR and
  COORDINATOR_LOAD_IN_PROGRESS when the group is not (yet) served here.
- Per partition: UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata does
  not have; OFFSET_METADATA_TOO_LARGE above offset.metadata.max.bytes.
- Stored with each offset: committed_leader_epoch (v6+, KIP-320), metadata,
  the commit time, and refka's KIP-232 topic_epoch (tagged, v8+), which
  OffsetFetch returns. (Refusing a stale topic epoch with
  INVALID_INTERNAL_METADATA is not done yet.)
- An offset commit with retention_time_ms (v2-v4) expires at commit time plus
  that; others follow offsets.retention.minutes (see group/offsets.py).

Version notes:
- v2 retention_time_ms. v3 throttle_time_ms. v4 as v3 (KIP-219).
- v5 no retention_time_ms (KIP-211). v6 committed_leader_epoch (KIP-320).
- v7 group_instance_id (KIP-345). v8 flexible; refka topic_epoch tag (KIP-232).
- v9 generation_id_or_member_epoch, the classic group's generation here (KIP-848).
"""

from __future__ import annotations

import time

from refka.protocol import ErrorCode
from refka.protocol.messages.offset_commit import OffsetCommit

from ..group.offsets import CommittedOffset
from ..registry import handles

Resp = OffsetCommit.Response
RTopic = Resp.OffsetCommitResponseTopic
RPart = RTopic.OffsetCommitResponsePartition


@handles(OffsetCommit.key, 2, 9)
async def handle_offset_commit(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    cache = broker.metadata
    now = time.time_ns() // 1_000_000
    retention = req.retention_time_ms if v <= 4 else -1
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], CommittedOffset] = {}
    for t in req.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if cache.partition(t.name, p.partition_index) is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[tp] = CommittedOffset(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if v >= 6 else -1,
                metadata=p.committed_metadata or "",
                commit_timestamp=now,
                expire_timestamp=now + retention if retention >= 0 else -1,
                topic_epoch=p.topic_epoch if v >= 8 else -1,
            )
    if offsets:
        errors.update(await broker.groups.commit_offsets(
            req.group_id, req.member_id, req.group_instance_id if v >= 7 else None,
            req.generation_id_or_member_epoch, offsets,
        ))
    return Resp(topics=[
        RTopic(name=t.name, partitions=[
            RPart(partition_index=p.partition_index, error_code=errors.get((t.name, p.partition_index), ErrorCode.NONE))
            for p in t.partitions
        ])
        for t in req.topics
    ])
