"""CreatePartitions (key 37), v0-v3.

Behavior:
- Raises a topic's partition count: the new partitions' assignments are
  written to the topic znode and the controller runs KIP-253's expansion
  steps (leaderEpochAfterCreation in the new partition znodes, the old
  partitions' leader epochs bumped, undeleted_partition_count raised).
- Lowers it (KIP-253 partition deletion) to a count no smaller than the
  topic's initial_partition_count: undeleted_partition_count is written and the
  controller marks the partitions from the new count up for deletion (they
  stay readable; the controller removes each once it is empty).
- INVALID_PARTITIONS, with a message that says why (controller/admin.py): the
  same count ("Topic already has N partitions.", as Kafka), a count below
  initial_partition_count, growing while partitions are marked for deletion,
  a change while the controller is still applying the previous one, and with
  enable.ordered.delivery=false any decrease (Kafka's rules). Unknown topic
  UNKNOWN_TOPIC_OR_PARTITION; a manual assignment that does not fit (or any
  with a decrease) INVALID_REPLICA_ASSIGNMENT. The answer waits, up to
  timeout_ms, for this broker's metadata to show the new count with a leader
  for every partition.
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
    changed = []
    named = Counter(t.name for t in req.topics)
    for t in req.topics:
        r = RResult(name=t.name, error_code=ErrorCode.NONE, error_message=None)
        results.append(r)
        if named[t.name] > 1:
            r.error_code, r.error_message = ErrorCode.INVALID_REQUEST, "Topic named more than once."
            continue
        if broker.metadata.topic(t.name) is None:
            r.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        assignment = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
        try:
            await broker.controller_side.create_partitions(t.name, t.count, assignment,
                                                           validate_only=req.validate_only)
        except AdminError as e:
            r.error_code, r.error_message = e.error_code, str(e)
            continue
        if not req.validate_only:
            changed.append((r, t.name, t.count))
    if changed and req.timeout_ms > 0:
        async def wait() -> None:
            while not all(_applied(broker, n, count) for _r, n, count in changed):
                await broker.metadata_changed()

        try:
            await asyncio.wait_for(wait(), req.timeout_ms / 1000)
        except TimeoutError:
            for r, n, count in changed:
                if not _applied(broker, n, count):
                    r.error_code = ErrorCode.REQUEST_TIMED_OUT
    return Resp(results=results)


def _applied(broker, name: str, count: int) -> bool:
    """This broker's metadata shows the topic with ``count`` partitions (its
    undeleted_partition_count when the controller sent one) and a leader for each."""
    t = broker.metadata.topic(name)
    if t is None or not broker.topic_ready(name):
        return False
    if t.undeleted_partition_count >= 0:
        return t.undeleted_partition_count == count
    return len(t.partitions) >= count
