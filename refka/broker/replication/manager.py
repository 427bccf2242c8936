"""Replication on one broker: its fetchers (as follower) and its ISR changes (as leader).

- ``become_follower`` / ``become_leader`` / ``stop`` are called by the replica
  manager when LeaderAndIsr or StopReplica changes a partition: a follower is
  (re)pointed at the fetcher of its leader broker (one task per leader broker,
  fetcher.py); a fetcher left with no partitions stops.
- ISR changes are written by the leader itself, as Kafka did before KIP-497,
  through an ``IsrWriter`` (the broker's controller side, controller_side.py):
  a conditional write of the partition state znode with the zk_version from
  LeaderAndIsr (or from our own previous write), then an ISR change
  notification; the controller broadcasts UpdateMetadata. A conflict means the
  controller changed the partition meanwhile: the leader keeps its ISR and
  waits for the controller's LeaderAndIsr. The local ISR changes only once the
  write succeeded. One write per partition at a time.
- Expansion: at a follower's fetch that reached the high watermark
  (``maybe_expand_isr``). Shrink: a task checks every
  replica.lag.time.max.ms / 2 the partitions this broker leads.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from refka.common import TopicPartition

from ..config import BrokerConfig
from ..logging import get_logger
from ..metadata_cache import MetadataCache
from .fetcher import FetcherSettings, ReplicaFetcher
from .isr import expansion_candidates, lagging_replicas

if TYPE_CHECKING:
    from ..partition import Partition, PartitionState

log = get_logger("refka.replication")


class IsrWriter(Protocol):
    """Where the leader writes its ISR changes: the broker's controller side."""

    broker_epoch: int  # of this broker's registration; -1 before it registered

    async def write_isr(self, topic: str, partition: int, state: PartitionState, isr: list[int]) -> int | None:
        """The state znode with ``isr``, conditional on ``state.zk_version``: its new
        version, or None when nothing was written (the controller changed the partition
        meanwhile, or the store failed; logged)."""
        ...

    async def notify_isr_change(self, topic: str, partition: int) -> None:
        """Tells the controller the partition's ISR changed (failures are logged)."""
        ...


class ReplicationManager:
    def __init__(self, node_id: int, config: BrokerConfig, metadata: MetadataCache,
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]],
                 partitions: Mapping[TopicPartition, Partition]) -> None:
        self.node_id = node_id
        self.metadata = metadata
        self.spawn = spawn
        self.partitions = partitions  # the replica manager's: every partition hosted here
        self.isr_writer: IsrWriter | None = None  # set once the broker has a controller side
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.following: dict[TopicPartition, int] = {}  # partition -> leader broker fetched from
        self.leader_endpoints: dict[int, tuple[str, int]] = {}  # from LeaderAndIsr live_leaders
        self.lag_time_max_ms: int = config["replica.lag.time.max.ms"]
        self.fetcher_settings = FetcherSettings.from_config(config)
        self._isr_writes: set[TopicPartition] = set()
        self._shrink_task: asyncio.Task[None] | None = None

    # -- where leaders are

    def endpoint(self, broker_id: int) -> tuple[str, int] | None:
        ep = self.leader_endpoints.get(broker_id)
        if ep is not None:
            return ep
        meta = self.metadata.brokers.get(broker_id)
        return meta.endpoint("PLAINTEXT") if meta is not None else None

    def broker_epoch(self) -> int:
        return self.isr_writer.broker_epoch if self.isr_writer is not None else -1

    # -- roles

    def become_follower(self, p: Partition) -> None:
        key = (p.topic, p.index)
        leader = p.state.leader
        old = self.following.get(key)
        if old is not None and old != leader:
            self._remove_from(old, key)
        if leader < 0 or leader == self.node_id:
            self.following.pop(key, None)
            return
        self.following[key] = leader
        f = self.fetchers.get(leader)
        if f is None or f.task.done():
            f = self.fetchers[leader] = ReplicaFetcher(self.node_id, leader, self.fetcher_settings, self.spawn,
                                                       self.endpoint, self.broker_epoch)
        f.add(p)

    def become_leader(self, p: Partition) -> None:
        self.stop(p.topic, p.index)
        if len(p.state.replicas) > 1 and (self._shrink_task is None or self._shrink_task.done()):
            self._shrink_task = self.spawn(self._shrink_loop())

    def stop(self, topic: str, index: int) -> None:
        key = (topic, index)
        leader = self.following.pop(key, None)
        if leader is not None:
            self._remove_from(leader, key)

    def _remove_from(self, leader: int, key: TopicPartition) -> None:
        f = self.fetchers.get(leader)
        if f is None:
            return
        f.remove(key)
        if not f.partitions:
            f.stop()
            del self.fetchers[leader]

    def close(self) -> None:
        for f in self.fetchers.values():
            f.stop()
        self.fetchers.clear()
        self.following.clear()

    # -- ISR changes (leader)

    def maybe_expand_isr(self, p: Partition) -> None:
        if (p.topic, p.index) in self._isr_writes or not p.is_leader:
            return
        start = p.leader_epoch_start_offset
        joining = expansion_candidates(self.node_id, p.state.isr, p.state.replicas, p.followers,
                                       p.high_watermark, start)
        if joining:
            self._write_isr(p, [*p.state.isr, *joining], "expand")

    def maybe_shrink_isr(self, p: Partition, now_ms: int) -> None:
        if (p.topic, p.index) in self._isr_writes or not p.is_leader:
            return
        out = lagging_replicas(self.node_id, p.state.isr, p.followers, now_ms, self.lag_time_max_ms)
        if out:
            self._write_isr(p, [r for r in p.state.isr if r not in out], "shrink")

    def _write_isr(self, p: Partition, isr: list[int], why: str) -> None:
        if self.isr_writer is None or p.state.zk_version < 0:
            return
        self._isr_writes.add((p.topic, p.index))
        self.spawn(self._do_write_isr(self.isr_writer, p, isr, why))

    async def _do_write_isr(self, writer: IsrWriter, p: Partition, isr: list[int], why: str) -> None:
        state = p.state
        try:
            version = await writer.write_isr(p.topic, p.index, state, isr)
            if version is None:
                return
            if p.state is state and self.partitions.get((p.topic, p.index)) is p:
                state.isr = list(isr)
                state.zk_version = version
                p.on_isr_changed()
            log.info("isr_changed", broker=self.node_id, topic=p.topic, partition=p.index, change=why,
                     isr=isr, leader_epoch=state.leader_epoch, zk_version=version)
            await writer.notify_isr_change(p.topic, p.index)
        finally:
            self._isr_writes.discard((p.topic, p.index))

    async def _shrink_loop(self) -> None:
        interval = max(self.lag_time_max_ms / 2000, 0.05)
        while True:
            await asyncio.sleep(interval)
            now_ms = int(time.time() * 1000)
            for p in list(self.partitions.values()):
                if p.is_leader and len(p.state.isr) > 1:
                    self.maybe_shrink_isr(p, now_ms)

