"""LeaderAndIsr (key 4), v0-v7: the controller tells a replica its role.

Behavior:
- Only from a broker (inter_broker.py: the inter-broker listener, or a
  connection that carried the registered controller's token, id and epoch):
  else CLUSTER_AUTHORIZATION_FAILED, top level and for every partition, as
  Kafka answers a client without ClusterAction.
- Only to this registration of the broker: a broker_epoch (v2+) older than
  its current one (the czxid of /brokers/ids/<id>, KIP-380) is
  STALE_BROKER_EPOCH for the whole request; -1 is not checked.
- Only from the controller: a controller_epoch older than the newest this
  broker obeyed, or than the store's, is STALE_CONTROLLER_EPOCH for the whole
  request; one newer than the store's /controller_epoch is
  CLUSTER_AUTHORIZATION_FAILED (never adopted).
- Per partition: a leader_epoch older than the one this broker has is
  STALE_CONTROLLER_EPOCH for that partition (the request is late); otherwise
  the partition is created if needed (its log opened with the topic's configs
  from /config/topics/<t>) and becomes leader or follower at that epoch. A
  topic ID different from the local one means the topic was re-created: the
  old log is deleted first.
- refka KIP-253 (seed step 4): the topic's undeleted_partition_count
  (tagged, v4+) is the one Produce and Fetch check from then on, set in the
  metadata cache before any partition changes, so a producer's count is
  compared with the one that came with the leader epoch (metadata_cache.py).
- A __consumer_offsets partition this broker now leads has its groups loaded
  by the group coordinator; one it no longer leads has them dropped.
- Replication (broker/replication/): a follower partition is handed to the
  fetcher of its leader broker (live_leaders give the leaders' endpoints); a
  leader partition stops fetching and tracks its followers. The zk_version is
  kept for the leader's conditional ISR writes.
- A full request (type 1, v5+, KIP-516: sent by a new controller or to a
  starting broker) names every partition this broker hosts: local partitions
  missing from it stop being served (logs kept on disk).

Version notes:
- v1 is_new. v2 topic states grouped by topic, broker_epoch. v3 adding/removing
  replicas (KIP-455). v4 flexible (refka's controller_token). v5 topic IDs and
  type (KIP-516). v6 leader_recovery_state (KIP-704). v7 is_kraft_controller
  (KIP-866, always false here).
"""

from __future__ import annotations

import asyncio

from refka.protocol import ErrorCode
from refka.protocol.messages.leader_and_isr import TYPE_FULL, LeaderAndIsr

from ..group import OFFSETS_TOPIC
from ..metadata_cache import ZERO_UUID
from ..partition import PartitionState
from ..registry import handles

# Partitions made leader or follower between two turns of the event loop: creating one
# costs ~1 ms (its log's directory and files), so a LeaderAndIsr of thousands would
# otherwise keep every other connection of the process waiting for seconds.
YIELD_EVERY = 16

Resp = LeaderAndIsr.Response
RPartErr = Resp.LeaderAndIsrPartitionError
RTopicErr = Resp.LeaderAndIsrTopicError


def _states(req, v):
    """(topic, topic_id, partition state) for both request layouts."""
    if v >= 2:
        for t in req.topic_states:
            for ps in t.partition_states:
                yield t.topic_name, t.topic_id if v >= 5 else ZERO_UUID, ps
    else:
        for ps in req.ungrouped_partition_states:
            yield ps.topic_name, ZERO_UUID, ps


def _response(v, error, errors):
    """The answer: ``error`` at the top, then (topic, topic ID, partition, error) per partition."""
    if v >= 5:
        by_topic: dict = {}
        for _topic, topic_id, index, err in errors:
            by_topic.setdefault(topic_id, []).append(RPartErr(partition_index=index, error_code=err))
        return Resp(error_code=error,
                    topics=[RTopicErr(topic_id=tid, partition_errors=pe) for tid, pe in by_topic.items()])
    return Resp(error_code=error,
                partition_errors=[RPartErr(topic_name=t, partition_index=i, error_code=e) for t, _tid, i, e in errors])


@handles(LeaderAndIsr.key, 0, 7, inter_broker=True)
async def handle_leader_and_isr(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    fenced = await broker.inter_broker.admit_control_request(
        ctx, req.controller_id, req.controller_epoch, req.broker_epoch if v >= 2 else -1, req.controller_token)
    if fenced == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        return _response(v, fenced, [(topic, topic_id, ps.partition_index, fenced)
                                     for topic, topic_id, ps in _states(req, v)])
    if fenced != ErrorCode.NONE:
        return Resp(error_code=fenced)
    errors = []
    side = broker.controller_side
    for ll in req.live_leaders:
        broker.replicas.fetchers.leader_endpoints[ll.broker_id] = (ll.host_name, ll.port)
    if v >= 5 and req.type == TYPE_FULL:
        named = {(topic, ps.partition_index) for topic, _tid, ps in _states(req, v)}
        for topic, index in broker.replicas.drop_partitions_not_in(named):
            if topic == OFFSETS_TOPIC:
                broker.groups.on_resign(index)
    if v >= 2:
        # Before any leader epoch moves: from the bumped epoch on, the old count is refused.
        for t in req.topic_states:
            if t.partition_counts is not None:
                broker.metadata.set_undeleted_partition_count(
                    t.topic_name, t.topic_id if v >= 5 else ZERO_UUID, t.partition_counts.undeleted_partition_count)
    for n, (topic, topic_id, ps) in enumerate(_states(req, v), 1):
        if n % YIELD_EVERY == 0:
            await asyncio.sleep(0)  # thousands of partitions: let the other connections in
        err = ErrorCode.NONE
        existing = broker.replicas.get(topic, ps.partition_index)
        if existing is not None and existing.topic_id == topic_id and ps.leader_epoch < existing.leader_epoch:
            err = ErrorCode.STALE_CONTROLLER_EPOCH
        else:
            if existing is None and side is not None and topic not in broker.replicas.topic_configs:
                broker.replicas.topic_configs[topic] = await side.topic_configs(topic)
            state = PartitionState(
                leader=ps.leader, leader_epoch=ps.leader_epoch, isr=list(ps.isr), replicas=list(ps.replicas),
                partition_epoch=ps.partition_epoch, controller_epoch=ps.controller_epoch,
                zk_version=ps.zk_version, leader_recovery_state=ps.leader_recovery_state if v >= 6 else 0,
            )
            try:
                p = broker.replicas.become_leader_or_follower(topic, ps.partition_index, topic_id, state)
                if topic == OFFSETS_TOPIC:
                    # The group coordinator loads (or drops) this partition's groups.
                    if p.is_leader:
                        broker.groups.on_become_leader(ps.partition_index, ps.leader_epoch)
                    else:
                        broker.groups.on_resign(ps.partition_index)
            except OSError:
                err = ErrorCode.KAFKA_STORAGE_ERROR
        errors.append((topic, topic_id, ps.partition_index, err))
    return _response(v, ErrorCode.NONE, errors)
