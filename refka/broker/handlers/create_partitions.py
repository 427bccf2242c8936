"""CreatePartitions (key 37), v0-v3.

Behavior:
- Raises a topic's partition count: the new partitions' assignments are
  written to the topic znode and the controller runs KIP-253's expansion
  steps (leaderEpochAfterCreation in the new partition znodes, the old
  partitions' leader epochs bumped, undeleted_partition_count raised).
- A count equal to the current one, or smaller, is INVALID_PARTITIONS
  (partition deletion, KIP-253, is a later capability); unknown topic
  UNKNOWN_TOPIC_OR_PARTITION; a manual assignment that does not fit
  INVALID_REPLICA_ASSIGNMENT. The answer waits, up to timeout_ms, for the new
  partitions to show up in this broker's metadata.
- validate_only checks and changes nothing.

Version notes:
- v1 same as v0. v2 flexible. v3 may answer THROTTLING_QUOTA_EXCEEDED (never here).
"""

from __future__ import annotations

import asyncio
from collections import Counter

from refka.protocol import ErrorCode
from refka.protocol.messages.create_partitions import CreatePartitions

from ..controller_side import AdminError
from ..registry import handles

Resp = CreatePartitions.Response
RResult = Resp.CreatePartitionsTopicResult


@handles(CreatePartitions.key, 0, 3)
async def handle_create_partitions(ctx, req):
    broker = ctx.broker
    results = []
    grown = []
    named = Counter(t.name for t in req.topics)
    for t in req.topics:
        r = RResult(name=t.name, error_code=ErrorCode.NONE, error_message=None)
        results.append(r)
        if named[t.name] > 1:
            r.error_code, r.error_message = ErrorCode.INVALID_REQUEST, "Topic named more than once."
            continue
        meta = broker.metadata.topic(t.name)
        if meta is None:
            r.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        current = len(meta.partitions)
        if t.count <= current:
            r.error_code = ErrorCode.INVALID_PARTITIONS
            r.error_message = (f"Topic currently has {current} partitions, {t.count} would not be an increase."
                               if t.count == current else
                               f"Topic currently has {current} partitions; decreasing is not supported.")
            continue
        assignment = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
        try:
            await broker.controller_side.create_partitions(t.name, t.count, assignment,
                                                           validate_only=req.validate_only)
        except AdminError as e:
            r.error_code, r.error_message = e.error_code, str(e)
            continue
        if not req.validate_only:
            grown.append((r, t.name, t.count))
    if grown and req.timeout_ms > 0:
        async def wait() -> None:
            while not all(broker.topic_ready(n, count) for _r, n, count in grown):
                await broker.metadata_changed()

        try:
            await asyncio.wait_for(wait(), req.timeout_ms / 1000)
        except TimeoutError:
            for r, n, count in grown:
                if not broker.topic_ready(n, count):
                    r.error_code = ErrorCode.REQUEST_TIMED_OUT
    return Resp(results=results)
