"""FindCoordinator (key 10), v0-v4.

Behavior:
- A group's coordinator is the leader of its __consumer_offsets partition,
  abs(java hashCode(group id)) % the topic's partition count (Kafka's
  partitionFor), answered with that broker's endpoint on the listener the
  request came in on.
- The first lookup creates __consumer_offsets (offsets.topic.num.partitions
  partitions, offsets.topic.replication.factor capped to the live brokers,
  cleanup.policy=compact) through the controller, as Kafka does; until the
  topic has a live leader for the partition the answer is
  COORDINATOR_NOT_AVAILABLE (retriable: clients ask again).
- key_type 1 (transactional id): transactions are not served, so
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED (not retriable, as Produce answers a
  transactional_id). Another key_type is INVALID_REQUEST.

Version notes:
- v1 key_type (KIP-98), throttle_time_ms, error_message. v2 as v1 (KIP-219).
- v3 flexible. v4 several keys at once, one coordinator each (KIP-699).
"""

from __future__ import annotations

from refka.protocol import ErrorCode
from refka.protocol.messages.find_coordinator import KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION, FindCoordinator

from ..controller_side import TopicExistsError
from ..group import OFFSETS_TOPIC
from ..logging import get_logger
from ..registry import handles

log = get_logger("refka.group")

Resp = FindCoordinator.Response
RCoordinator = Resp.Coordinator


def _lookup(broker, key: str, key_type: int, listener: str) -> tuple[ErrorCode, str | None, int, str, int]:
    """(error, message, node id, host, port) for one key."""
    if key_type == KEY_TYPE_TRANSACTION:
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactions are not served", -1, "", -1
    if key_type != KEY_TYPE_GROUP:
        return ErrorCode.INVALID_REQUEST, f"unknown key type {key_type}", -1, "", -1
    topic = broker.metadata.topic(OFFSETS_TOPIC)
    if topic is None or not topic.partitions:
        _ensure_offsets_topic(broker)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
    p = topic.partitions.get(broker.groups.partition_for(key))
    leader = broker.metadata.brokers.get(p.leader) if p is not None else None
    endpoint = leader.endpoint(listener) if leader is not None else None
    if leader is None or endpoint is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
    return ErrorCode.NONE, None, leader.node_id, endpoint[0], endpoint[1]


def _ensure_offsets_topic(broker) -> None:
    groups = broker.groups
    if broker.controller_side is None:
        return
    if groups.offsets_topic_creation is not None and not groups.offsets_topic_creation.done():
        return
    groups.offsets_topic_creation = broker.spawn(_create_offsets_topic(broker))


async def _create_offsets_topic(broker) -> None:
    cfg = broker.config
    live = max(len(broker.metadata.brokers), 1)
    rf = max(min(cfg["offsets.topic.replication.factor"], live), 1)
    configs = {"cleanup.policy": "compact", "segment.bytes": str(cfg["offsets.topic.segment.bytes"])}
    try:
        await broker.controller_side.create_topic(OFFSETS_TOPIC, cfg["offsets.topic.num.partitions"], rf, None,
                                                  configs)
        log.info("offsets_topic_created", partitions=cfg["offsets.topic.num.partitions"], replication_factor=rf)
    except TopicExistsError:
        pass  # created by another broker, or by our earlier lookup: its metadata is on its way
    except Exception as e:  # refused: the next lookup asks again
        log.warning("offsets_topic_not_created", reason=str(e))


@handles(FindCoordinator.key, 0, 4)
def handle_find_coordinator(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    key_type = req.key_type if v >= 1 else KEY_TYPE_GROUP
    listener = ctx.conn.listener
    if key_type == KEY_TYPE_TRANSACTION:
        ctx.not_served("transactions: FindCoordinator for a transactional id",
                       ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if v >= 4:
        out = []
        for key in req.coordinator_keys:
            err, msg, node, host, port = _lookup(broker, key, key_type, listener)
            out.append(RCoordinator(key=key, node_id=node, host=host, port=port, error_code=err, error_message=msg))
        return Resp(coordinators=out)
    err, msg, node, host, port = _lookup(broker, req.key, key_type, listener)
    return Resp(error_code=err, error_message=msg, node_id=node, host=host, port=port)
