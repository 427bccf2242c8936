"""UpdateMetadata (key 6), v0-v8: the controller's view of the cluster for the metadata cache.

Behavior:
- Only from a broker (inter_broker.py: the inter-broker listener, or a
  connection that carried the registered controller's token, id and epoch):
  else CLUSTER_AUTHORIZATION_FAILED, and nothing changes.
- Only to this registration of the broker: a broker_epoch (v5+) older than
  its current one (the czxid of /brokers/ids/<id>, KIP-380) is
  STALE_BROKER_EPOCH for the whole request; -1 is not checked.
- Only from the controller: a controller_epoch older than the newest this
  broker obeyed, or than the store's, is STALE_CONTROLLER_EPOCH and changes
  nothing; one newer than the store's /controller_epoch is
  CLUSTER_AUTHORIZATION_FAILED (never adopted).
- live_brokers replaces the broker list. Each topic state replaces the
  partitions it names; a partition whose leader is -2 (Kafka's
  LeaderDuringDelete) is removed, and a topic left with none is gone; the
  group coordinator drops the committed offsets of such partitions.
- refka KIP-232/253 tagged fields: controller_metadata_epoch and
  max_partition_epoch (top level), topic_epoch and partition counts (topic),
  partition_epoch (partition) go to the cache and out in Metadata v9+; the
  partition znode's leaderEpochAfterCreation and leaderEpochBeforeDeletion
  (partition, v6+) go to the cache for PartitionLeaderEpochsForPartitions. A
  partition state replaces the partition's maps (absent tags: empty maps).
- Every update wakes admin requests waiting for metadata (CreateTopics ...).

Version notes:
- v1 endpoints. v2 rack. v3 listener names. v4 offline replicas. v5 topic
  states grouped, broker_epoch. v6 flexible (refka's controller_token). v7 topic
  IDs. v8 type (KRaft migration).
"""

from __future__ import annotations

from refka.protocol import ErrorCode
from refka.protocol.messages.update_metadata import UpdateMetadata

from ..metadata_cache import ZERO_UUID, BrokerMeta, PartitionMeta, TopicMeta
from ..registry import handles

Resp = UpdateMetadata.Response
LEADER_DURING_DELETE = -2
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def _topic_states(req, v):
    if v >= 5:
        for t in req.topic_states:
            yield t.topic_name, (t.topic_id if v >= 7 else ZERO_UUID), t.partition_states, t
    else:
        grouped: dict = {}
        for ps in req.ungrouped_partition_states:
            grouped.setdefault(ps.topic_name, []).append(ps)
        for name, parts in grouped.items():
            yield name, ZERO_UUID, parts, None


def _pairs(entries) -> tuple[tuple[int, int], ...]:
    """A KIP-253 map as the cache keeps it: (partition, leader epoch) pairs, ascending."""
    return tuple(sorted((e.partition, e.leader_epoch) for e in entries))


@handles(UpdateMetadata.key, 0, 8, inter_broker=True)
async def handle_update_metadata(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    fenced = await broker.inter_broker.admit_control_request(
        ctx, req.controller_id, req.controller_epoch, req.broker_epoch if v >= 5 else -1, req.controller_token)
    if fenced != ErrorCode.NONE:
        return Resp(error_code=fenced)
    cache = broker.metadata
    brokers = {}
    for b in req.live_brokers:
        if v >= 1:
            eps = {e.listener or "PLAINTEXT": (e.host, e.port) for e in b.endpoints}
        else:
            eps = {"PLAINTEXT": (b.v0_host, b.v0_port)}
        brokers[b.id] = BrokerMeta(node_id=b.id, endpoints=eps, rack=b.rack if v >= 2 else None)
    cache.set_brokers(brokers)
    cache.set_controller(req.controller_id, req.controller_epoch, req.controller_metadata_epoch)
    if req.max_partition_epoch >= 0:
        cache.max_partition_epoch = req.max_partition_epoch
    deleted: set[tuple[str, int]] = set()
    for name, topic_id, parts, tstate in _topic_states(req, v):
        old = cache.topic(name)
        if old is not None and topic_id != ZERO_UUID and old.topic_id != topic_id:
            cache.remove_topic(name)
            old = None
        t = TopicMeta(name=name, topic_id=topic_id if topic_id != ZERO_UUID or old is None else old.topic_id,
                      partitions=dict(old.partitions) if old is not None else {},
                      initial_partition_count=old.initial_partition_count if old else -1,
                      undeleted_partition_count=old.undeleted_partition_count if old else -1,
                      topic_epoch=old.topic_epoch if old else -1,
                      is_internal=name in INTERNAL_TOPICS)
        if tstate is not None:
            if tstate.partition_counts is not None:
                t.initial_partition_count = tstate.partition_counts.initial_partition_count
                t.undeleted_partition_count = tstate.partition_counts.undeleted_partition_count
                cache.set_undeleted_partition_count(name, t.topic_id, t.undeleted_partition_count)
            if tstate.topic_epoch >= 0:
                t.topic_epoch = tstate.topic_epoch
        for ps in parts:
            if ps.leader == LEADER_DURING_DELETE:
                t.partitions.pop(ps.partition_index, None)
                deleted.add((name, ps.partition_index))
                continue
            pm = t.partitions[ps.partition_index] = PartitionMeta(
                partition=ps.partition_index, leader=ps.leader, leader_epoch=ps.leader_epoch,
                replicas=list(ps.replicas), isr=list(ps.isr),
                offline_replicas=list(ps.offline_replicas) if v >= 4 else [],
                partition_epoch=ps.partition_epoch,
            )
            maps = ps.leader_epoch_maps  # None for nearly every partition, and before v6
            if maps is not None:
                pm.leader_epoch_after_creation = _pairs(maps.leader_epoch_after_creation)
                pm.leader_epoch_before_deletion = _pairs(maps.leader_epoch_before_deletion)
        if t.partitions:
            cache.put_topic(t)
        else:
            cache.remove_topic(name)
    if deleted:
        broker.groups.on_partitions_deleted(deleted)
    broker.notify_metadata_changed()
    return Resp(error_code=ErrorCode.NONE)
