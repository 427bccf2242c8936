"""StopReplica (key 5), v0-v4: the controller takes a partition away from this broker.

Behavior:
- Only from a broker (inter_broker.py: the inter-broker listener, or a
  connection that carried the registered controller's token, id and epoch):
  else CLUSTER_AUTHORIZATION_FAILED, top level and for every partition, as
  Kafka answers a client without ClusterAction.
- Only to this registration of the broker: a broker_epoch (v1+) older than its
  current one (the czxid of /brokers/ids/<id>, KIP-380) is STALE_BROKER_EPOCH
  for the whole request; -1 is not checked.
- Only from the controller: an epoch older than the newest obeyed, or than
  the store's, is STALE_CONTROLLER_EPOCH; one newer than the store's
  /controller_epoch is CLUSTER_AUTHORIZATION_FAILED (never adopted).
- Each partition stops being served here; with delete_partition its log
  directory is removed (topic deletion, reassignment away). A leader_epoch
  (v3+) older than the local one is FENCED_LEADER_EPOCH for that partition; -2
  (deletion) always applies.
- A __consumer_offsets partition that stops here has its groups dropped by
  the group coordinator.
- Other connections are let in every 16 partitions (a topic of thousands of
  partitions deleted at once held the event loop for seconds).

Version notes:
- v1 topics grouped, broker_epoch. v2 flexible (refka's controller_token). v3
  per-partition leader epoch and delete flag (KIP-570). v4 is_kraft_controller.
"""

from __future__ import annotations

import asyncio

from refka.protocol import ErrorCode
from refka.protocol.messages.stop_replica import StopReplica

from ..group import OFFSETS_TOPIC
from ..registry import handles
from .leader_and_isr import YIELD_EVERY

Resp = StopReplica.Response
RErr = Resp.StopReplicaPartitionError
EPOCH_DURING_DELETE = -2


def _partitions(req, v):
    if v >= 3:
        for t in req.topic_states:
            for ps in t.partition_states:
                yield t.topic_name, ps.partition_index, ps.leader_epoch, ps.delete_partition
    elif v >= 1:
        for t in req.topics:
            for p in t.partition_indexes:
                yield t.name, p, -1, req.delete_partitions
    else:
        for p in req.ungrouped_partitions:
            yield p.topic_name, p.partition_index, -1, req.delete_partitions


@handles(StopReplica.key, 0, 4, inter_broker=True)
async def handle_stop_replica(ctx, req):
    broker = ctx.broker
    fenced = await broker.inter_broker.admit_control_request(
        ctx, req.controller_id, req.controller_epoch, req.broker_epoch if ctx.api_version >= 1 else -1,
        req.controller_token)
    if fenced == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        return Resp(error_code=fenced, partition_errors=[
            RErr(topic_name=topic, partition_index=index, error_code=fenced)
            for topic, index, _epoch, _delete in _partitions(req, ctx.api_version)])
    if fenced != ErrorCode.NONE:
        return Resp(error_code=fenced)
    errors = []
    deleted_from: set[str] = set()
    for n, (topic, index, epoch, delete) in enumerate(_partitions(req, ctx.api_version), 1):
        if n % YIELD_EVERY == 0:
            await asyncio.sleep(0)  # thousands of partitions (a topic deleted): let the other connections in
        p = broker.replicas.get(topic, index)
        if p is not None and epoch not in (-1, EPOCH_DURING_DELETE) and epoch < p.leader_epoch:
            errors.append(RErr(topic_name=topic, partition_index=index, error_code=ErrorCode.FENCED_LEADER_EPOCH))
            continue
        broker.replicas.stop_replica(topic, index, delete)
        if topic == OFFSETS_TOPIC:
            broker.groups.on_resign(index)
        if delete:
            deleted_from.add(topic)
        errors.append(RErr(topic_name=topic, partition_index=index, error_code=ErrorCode.NONE))
    if deleted_from:
        # A topic whose last partition here went drops its overrides (a KIP-253 removal leaves
        # the others hosted, and they keep min.insync.replicas, retention ...). One pass over
        # the hosted partitions, not one per stopped partition (9,192 of them took seconds).
        hosted = {t for t, _i in broker.replicas.partitions}
        for topic in deleted_from - hosted:
            broker.replicas.topic_configs.pop(topic, None)
    return Resp(error_code=ErrorCode.NONE, partition_errors=errors)
