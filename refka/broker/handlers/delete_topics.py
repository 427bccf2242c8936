"""DeleteTopics (key 20), v1-v6.

Behavior:
- Marks each topic for deletion (/admin/delete_topics/<t>, as Kafka's
  ZooKeeper brokers do); the controller stops and deletes its replicas and
  removes its znodes. The answer waits, up to timeout_ms, until this broker's
  metadata no longer has the topic (else REQUEST_TIMED_OUT).
- Unknown topic: UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by ID, v6);
  delete.topic.enable=false: TOPIC_DELETION_DISABLED; an internal topic
  (__consumer_offsets) is refused with INVALID_TOPIC_EXCEPTION.

Version notes:
- v1 throttle. v4 flexible. v5 error_message. v6 topics by name or ID (KIP-516).
"""

from __future__ import annotations

import asyncio

from refka.protocol import ErrorCode
from refka.protocol.messages.delete_topics import DeleteTopics

from ..controller_side import AdminError
from ..metadata_cache import ZERO_UUID
from ..registry import handles

Resp = DeleteTopics.Response
RResult = Resp.DeletableTopicResult


@handles(DeleteTopics.key, 1, 6)
async def handle_delete_topics(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    cache = broker.metadata
    if v >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(n, ZERO_UUID) for n in req.topic_names]
    results = []
    deleting = []
    for name, tid in wanted:
        meta = cache.topic(name) if name is not None else cache.topic_by_id(tid)
        r = RResult(name=meta.name if meta else name, topic_id=meta.topic_id if meta else tid,
                    error_code=ErrorCode.NONE)
        results.append(r)
        if meta is None:
            r.error_code = ErrorCode.UNKNOWN_TOPIC_ID if name is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        if not broker.config["delete.topic.enable"]:
            r.error_code = ErrorCode.TOPIC_DELETION_DISABLED
            continue
        if meta.is_internal:
            r.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
            r.error_message = f"The internal topic {meta.name} cannot be deleted."
            continue
        try:
            await broker.controller_side.delete_topic(meta.name)
        except AdminError as e:
            r.error_code, r.error_message = e.error_code, str(e)
            continue
        deleting.append((r, meta))
    if deleting and req.timeout_ms > 0:
        try:
            await asyncio.wait_for(broker.wait_for_topics_gone([m for _r, m in deleting]), req.timeout_ms / 1000)
        except TimeoutError:
            for r, meta in deleting:
                if not broker.topic_gone(meta):
                    r.error_code = ErrorCode.REQUEST_TIMED_OUT
    return Resp(responses=results)
