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
- A group id longer than a __consumer_offsets key can hold (32767 bytes of
  UTF-8; flexible versions can carry more) is INVALID_GROUP_ID for every
  partition, before the group exists. (Kafka's serializer throws there, and
  its answer is UNKNOWN_SERVER_ERROR.)
- Stored with each offset: committed_leader_epoch (v6+, KIP-320), metadata,
  the commit time, and refka's KIP-232 topic_epoch (tagged, v8+), which
  OffsetFetch returns.
- KIP-232 (seed 002): a partition whose commit carries both epochs (neither
  -1) gets INVALID_INTERNAL_METADATA, and nothing of it is written, when its
  topic_epoch is smaller than the topic's in this broker's metadata (a commit
  made for a topic since deleted and re-created under the same name), or
  smaller than the one last committed for the partition, or equal to it with
  a smaller leader_epoch (group/offsets.py ``older_epochs``). The other
  partitions of the request are committed. A stock client sends -1 and is
  never refused.
- retention_time_ms (v2-v4): -1 follows offsets.retention.minutes (see
  group/offsets.py); any other value makes the offset expire at commit time
  plus that, as Kafka's GroupCoordinatorAdapter computes it. Kafka adds the
  two as Longs: past 2^63-1 the sum wraps to a negative expire timestamp, so
  the offset goes at the next expiry check. refka saturates instead: a sum
  past 2^63-1 is stored as 2^63-1 (the offset never expires by its own
  timestamp, what the client asked for), and a sum below 0 (a negative
  retention other than -1) as 0 (expired at the next check, as in Kafka).
  The value written to __consumer_offsets (v1) always fits and loads back.

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

from ..group import storage
from ..group.offsets import CommittedOffset
from ..registry import handles

# OffsetCommitRequest.DEFAULT_RETENTION_TIME: the broker's offsets.retention.minutes.
DEFAULT_RETENTION_TIME = -1
INT64_MAX = (1 << 63) - 1

Resp = OffsetCommit.Response
RTopic = Resp.OffsetCommitResponseTopic
RPart = RTopic.OffsetCommitResponsePartition


def expire_timestamp(commit_timestamp: int, retention_time_ms: int) -> int:
    """When an offset committed with ``retention_time_ms`` expires: -1 (none of its own)
    for DEFAULT_RETENTION_TIME, else the sum held within 0..2^63-1 (see the header)."""
    if retention_time_ms == DEFAULT_RETENTION_TIME:
        return -1
    return min(max(commit_timestamp + retention_time_ms, 0), INT64_MAX)


@handles(OffsetCommit.key, 2, 9)
async def handle_offset_commit(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    cache = broker.metadata
    now = time.time_ns() // 1_000_000
    if not storage.fits(req.group_id):
        return _answer(req, {}, ErrorCode.INVALID_GROUP_ID)
    retention = req.retention_time_ms if v <= 4 else DEFAULT_RETENTION_TIME
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], CommittedOffset] = {}
    for t in req.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if cache.partition(t.name, p.partition_index) is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if p.committed_metadata is not None and not storage.fits(p.committed_metadata):
                # Even with offset.metadata.max.bytes set above what the record can hold.
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            topic_epoch = p.topic_epoch if v >= 8 else -1
            leader_epoch = p.committed_leader_epoch if v >= 6 else -1
            if 0 <= topic_epoch < cache.topic(t.name).topic_epoch and leader_epoch >= 0:
                errors[tp] = ErrorCode.INVALID_INTERNAL_METADATA
                continue
            offsets[tp] = CommittedOffset(
                offset=p.committed_offset,
                leader_epoch=leader_epoch,
                metadata=p.committed_metadata or "",
                commit_timestamp=now,
                expire_timestamp=expire_timestamp(now, retention),
                topic_epoch=topic_epoch,
            )
    if offsets:
        errors.update(await broker.groups.commit_offsets(
            req.group_id, req.member_id, req.group_instance_id if v >= 7 else None,
            req.generation_id_or_member_epoch, offsets,
        ))
    return _answer(req, errors, ErrorCode.NONE)


def _answer(req, errors: dict[tuple[str, int], ErrorCode], otherwise: ErrorCode):
    return Resp(topics=[
        RTopic(name=t.name, partitions=[
            RPart(partition_index=p.partition_index, error_code=errors.get((t.name, p.partition_index), otherwise))
            for p in t.partitions
        ])
        for t in req.topics
    ])
