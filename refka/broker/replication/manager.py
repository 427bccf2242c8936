"""Replication on one broker: its fetchers (as follower) and its ISR changes (as leader).

- ``become_follower`` / ``become_leader`` / ``stop`` are called by the replica
  manager when LeaderAndIsr or StopReplica changes a partition: a follower is
  (re)pointed at the fetcher of its leader broker (one task per leader broker,
  fetcher.py); a fetcher left with no partitions stops.
- ISR changes are written by the leader itself through the controller package,
  as Kafka did before KIP-497: ``admin.update_isr`` on the partition state znode
  with the zk_version from LeaderAndIsr (or from our own previous write), then
  ``admin.notify_isr_change``; the controller broadcasts UpdateMetadata. A
  BadVersionError means the controller changed the partition meanwhile: the
  leader keeps its ISR and waits for the controller's LeaderAndIsr. The local
  ISR changes only once the write succeeded. One write per partition at a time.
- Expansion: at a follower's fetch that reached the high watermark
  (``maybe_expand_isr``). Shrink: a task checks every
  replica.lag.time.max.ms / 2 the partitions this broker leads.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from refka.controller import admin, znodes
from refka.controller.store import BadVersionError, StoreError

from ..logging import get_logger
from .fetcher import ReplicaFetcher
from .isr import expansion_candidates, lagging_replicas

if TYPE_CHECKING:
    from ..broker import Broker
    from ..replica_manager import Partition, ReplicaManager

log = get_logger("refka.replication")


class ReplicationManager:
    def __init__(self, broker: Broker, replicas: ReplicaManager) -> None:
        self.broker = broker
        self.replicas = replicas
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.following: dict[tuple[str, int], int] = {}  # partition -> leader broker fetched from
        self.leader_endpoints: dict[int, tuple[str, int]] = {}  # from LeaderAndIsr live_leaders
        self.lag_time_max_ms: int = broker.config["replica.lag.time.max.ms"]
        self._isr_writes: set[tuple[str, int]] = set()
        self._shrink_task: asyncio.Task[None] | None = None

    # -- where leaders are

    def endpoint(self, broker_id: int) -> tuple[str, int] | None:
        ep = self.leader_endpoints.get(broker_id)
        if ep is not None:
            return ep
        meta = self.broker.metadata.brokers.get(broker_id)
        return meta.endpoint("PLAINTEXT") if meta is not None else None

    def broker_epoch(self) -> int:
        side = self.broker.controller_side
        return side.broker_epoch if side is not None else -1

    # -- roles

    def become_follower(self, p: Partition) -> None:
        key = (p.topic, p.index)
        leader = p.state.leader
        old = self.following.get(key)
        if old is not None and old != leader:
            self._remove_from(old, key)
        if leader < 0 or leader == self.broker.node_id:
            self.following.pop(key, None)
            return
        self.following[key] = leader
        f = self.fetchers.get(leader)
        if f is None or f.task.done():
            f = self.fetchers[leader] = ReplicaFetcher(self, leader)
        f.add(p)

    def become_leader(self, p: Partition) -> None:
        self.stop(p.topic, p.index)
        if len(p.state.replicas) > 1 and (self._shrink_task is None or self._shrink_task.done()):
            self._shrink_task = self.broker.spawn(self._shrink_loop())

    def stop(self, topic: str, index: int) -> None:
        key = (topic, index)
        leader = self.following.pop(key, None)
        if leader is not None:
            self._remove_from(leader, key)

    def _remove_from(self, leader: int, key: tuple[str, int]) -> None:
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
        joining = expansion_candidates(self.broker.node_id, p.state.isr, p.state.replicas, p.followers,
                                       p.high_watermark, start)
        if joining:
            self._write_isr(p, [*p.state.isr, *joining], "expand")

    def maybe_shrink_isr(self, p: Partition, now_ms: int) -> None:
        if (p.topic, p.index) in self._isr_writes or not p.is_leader:
            return
        out = lagging_replicas(self.broker.node_id, p.state.isr, p.followers, now_ms, self.lag_time_max_ms)
        if out:
            self._write_isr(p, [r for r in p.state.isr if r not in out], "shrink")

    def _write_isr(self, p: Partition, isr: list[int], why: str) -> None:
        side = self.broker.controller_side
        if side is None or p.state.zk_version < 0:
            return
        self._isr_writes.add((p.topic, p.index))
        self.broker.spawn(self._do_write_isr(p, isr, why))

    async def _do_write_isr(self, p: Partition, isr: list[int], why: str) -> None:
        key = (p.topic, p.index)
        state = p.state
        try:
            new = znodes.PartitionStateZnode(leader=state.leader, leader_epoch=state.leader_epoch, isr=tuple(isr),
                                             controller_epoch=state.controller_epoch,
                                             leader_recovery_state=state.leader_recovery_state)
            session = self.broker.controller_side.session
            try:
                version = await admin.update_isr(session, p.topic, p.index, new, state.zk_version)
            except BadVersionError:
                log.info("isr_update_conflict", topic=p.topic, partition=p.index, zk_version=state.zk_version)
                return
            except StoreError as e:
                log.warning("isr_update_failed", topic=p.topic, partition=p.index, error=repr(e))
                return
            if p.state is state and self.replicas.get(p.topic, p.index) is p:
                state.isr = list(isr)
                state.zk_version = version
                p.on_isr_changed()
            log.info("isr_changed", broker=self.broker.node_id, topic=p.topic, partition=p.index, change=why,
                     isr=isr, leader_epoch=state.leader_epoch, zk_version=version)
            try:
                await admin.notify_isr_change(session, [key])
            except StoreError as e:
                log.warning("isr_change_notify_failed", topic=p.topic, partition=p.index, error=repr(e))
        finally:
            self._isr_writes.discard(key)

    async def _shrink_loop(self) -> None:
        interval = max(self.lag_time_max_ms / 2000, 0.05)
        while True:
            await asyncio.sleep(interval)
            now_ms = int(time.time() * 1000)
            for p in list(self.replicas.partitions.values()):
                if p.is_leader and len(p.state.isr) > 1:
                    self.maybe_shrink_isr(p, now_ms)

