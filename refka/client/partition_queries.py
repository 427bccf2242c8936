"""The questions KIP-253's client half asks brokers about partitions, shared by
the consumer's ordered-delivery gate (``ordered_delivery.py``) and the
producer's compacted-topic tombstones (``tombstones.py``): a partition's
leader-epoch maps (PartitionLeaderEpochsForPartitions, refka's 10253), the end
offset of a leader epoch (OffsetForLeaderEpoch), the earliest or latest offset
(ListOffsets), and topic configs (DescribeConfigs).

The contract of every function here:

- ListOffsets and OffsetForLeaderEpoch go to each partition's leader in the
  metadata cache, one request per leader; a partition whose leader is unknown,
  or whose answer is a leader error (NOT_LEADER_OR_FOLLOWER and the like), has
  its topic added to ``stale``, which the caller refreshes before asking again.
- What is not answered (a lost connection, any other error, OffsetForLeaderEpoch's
  UNDEFINED end offset) is left out of the result: the caller asks again later.
  Nothing here raises for a broker's trouble; a lost connection is logged.
- 10253 and DescribeConfigs are built and read here and sent by the caller (the
  gate to its group coordinator, the producer to any broker: both are answered
  from a broker's metadata cache).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

import structlog

from refka.protocol import Api, ErrorCode
from refka.protocol.messages.describe_configs import DescribeConfigs
from refka.protocol.messages.list_offsets import CONSUMER_REPLICA_ID, ListOffsets
from refka.protocol.messages.offsets_for_leader_epoch import OffsetForLeaderEpoch
from refka.protocol.messages.partition_leader_epochs_for_partitions import PartitionLeaderEpochsForPartitions

from .cluster import ClusterClient
from .connection import BrokerConnectionError
from .structs import TopicPartition

_log = structlog.get_logger("refka.client")

E = ErrorCode
LEADER_ERRORS = frozenset({E.NOT_LEADER_OR_FOLLOWER, E.LEADER_NOT_AVAILABLE, E.UNKNOWN_TOPIC_OR_PARTITION,
                           E.FENCED_LEADER_EPOCH, E.UNKNOWN_LEADER_EPOCH})
_RESOURCE_TOPIC = 2

LeaderEpochMap = dict[int, int]  # partition -> leader epoch


async def send(cluster: ClusterClient, node_id: int, api: Api, body: Any, version: int | None = None) -> Any:
    """The answer, or None when the broker could not be reached or answered nonsense."""
    try:
        conn = await cluster.connection(node_id)
        return await conn.request(api, body, version)
    except (BrokerConnectionError, ValueError) as e:
        _log.warning("client_request_failed", api=api.name, node=node_id, error=str(e))
        return None


def by_leader(cluster: ClusterClient, tps: Iterable[TopicPartition], stale: set[str]) -> dict[int, list[TopicPartition]]:
    out: dict[int, list[TopicPartition]] = {}
    for tp in tps:
        leader = cluster.metadata.leader_for(tp.topic, tp.partition)
        if leader < 0:
            stale.add(tp.topic)
        else:
            out.setdefault(leader, []).append(tp)
    return out


async def list_offsets(cluster: ClusterClient, tps: Iterable[TopicPartition], timestamp: int,
                       stale: set[str]) -> dict[TopicPartition, int]:
    """ListOffsets (read_uncommitted) at ``timestamp`` (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP)."""
    R = ListOffsets.Request
    RT = R.ListOffsetsTopic
    out: dict[TopicPartition, int] = {}
    for leader, group in by_leader(cluster, tps, stale).items():
        topics: dict[str, list[int]] = {}
        for tp in group:
            topics.setdefault(tp.topic, []).append(tp.partition)
        req = R(replica_id=CONSUMER_REPLICA_ID, isolation_level=0, topics=[
            RT(name=t, partitions=[RT.ListOffsetsPartition(partition_index=p, timestamp=timestamp)
                                   for p in sorted(ps)]) for t, ps in sorted(topics.items())])
        resp = await send(cluster, leader, ListOffsets, req)
        if resp is None:
            continue
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code == E.NONE and p.offset >= 0:
                    out[TopicPartition(t.name, p.partition_index)] = p.offset
                elif p.error_code in LEADER_ERRORS:
                    stale.add(t.name)
    return out


async def epoch_end_offsets(cluster: ClusterClient, asks: Iterable[tuple[TopicPartition, int]],
                            stale: set[str]) -> dict[tuple[TopicPartition, int], int]:
    """OffsetForLeaderEpoch: the end offset of each (partition, leader epoch); UNDEFINED left out."""
    R = OffsetForLeaderEpoch.Request
    RT = R.OffsetForLeaderTopic
    epochs: dict[TopicPartition, set[int]] = {}
    for tp, epoch in asks:
        epochs.setdefault(tp, set()).add(epoch)
    out: dict[tuple[TopicPartition, int], int] = {}
    for leader, group in by_leader(cluster, epochs, stale).items():
        # One epoch per partition and request: an answer names its partition, not the epoch asked.
        for round_ in range(max(len(epochs[tp]) for tp in group)):
            asked = {tp: sorted(epochs[tp])[round_] for tp in group if round_ < len(epochs[tp])}
            topics: dict[str, list[int]] = {}
            for tp in asked:
                topics.setdefault(tp.topic, []).append(tp.partition)
            req = R(replica_id=CONSUMER_REPLICA_ID, topics=[
                RT(topic=t, partitions=[RT.OffsetForLeaderPartition(
                    partition=p, current_leader_epoch=-1, leader_epoch=asked[TopicPartition(t, p)])
                    for p in sorted(ps)]) for t, ps in sorted(topics.items())])
            resp = await send(cluster, leader, OffsetForLeaderEpoch, req)
            if resp is None:
                break
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.topic, p.partition)
                    if tp not in asked:
                        continue
                    if p.error_code == E.NONE and p.end_offset >= 0:
                        out[(tp, asked[tp])] = p.end_offset
                    elif p.error_code in LEADER_ERRORS:
                        stale.add(t.topic)
    return out


def leader_epochs_request(wanted: Mapping[str, Collection[int]]) -> Any:
    """PartitionLeaderEpochsForPartitions for ``wanted`` (topic -> partitions)."""
    R = PartitionLeaderEpochsForPartitions.Request
    return R(topics=[R.PartitionLeaderEpochsForPartitionsRequestTopic(topic=t, partitions=sorted(ps))
                     for t, ps in sorted(wanted.items())])


def leader_epoch_maps(resp: Any) -> tuple[dict[TopicPartition, LeaderEpochMap], dict[TopicPartition, LeaderEpochMap]]:
    """Each answered partition's leaderEpochAfterCreation and leaderEpochBeforeDeletion maps
    (a partition answered with an error, which the broker's cache does not have yet, is left out)."""
    after: dict[TopicPartition, LeaderEpochMap] = {}
    before: dict[TopicPartition, LeaderEpochMap] = {}
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code != E.NONE:
                continue
            tp = TopicPartition(t.topic, p.partition)
            after[tp] = {e.partition: e.leader_epoch_after_creation
                         for e in p.leader_epochs if e.leader_epoch_after_creation >= 0}
            before[tp] = {e.partition: e.leader_epoch_before_deletion
                          for e in p.leader_epochs if e.leader_epoch_before_deletion >= 0}
    return after, before


def topic_configs_request(topics: Iterable[str], keys: Iterable[str]) -> Any:
    """DescribeConfigs of ``keys`` for each of ``topics``."""
    R = DescribeConfigs.Request
    keys = list(keys)
    return R(resources=[R.DescribeConfigsResource(resource_type=_RESOURCE_TOPIC, resource_name=t,
                                                  configuration_keys=keys) for t in topics])


def topic_configs(resp: Any) -> dict[str, dict[str, str]]:
    """Each topic answered without error: its configs that have a value."""
    return {r.resource_name: {c.name: c.value for c in r.configs if c.value is not None}
            for r in resp.results if r.error_code == E.NONE}
