"""The leader's ISR changes (Kafka's Partition.maybeExpandIsr / maybeShrinkIsr and,
before KIP-497, its ZooKeeper writes), on the rules of isr.py.

- Expansion: at a follower's fetch that reached the high watermark
  (``maybe_expand``, from the Fetch handler). Shrink: a task checks every
  replica.lag.time.max.ms / 2 the partitions this broker leads.
- The leader writes the ISR itself through an ``IsrWriter`` (the broker's
  controller side, controller_side.py): a conditional write of the partition
  state znode with the zk_version from LeaderAndIsr (or from our own previous
  write), then an ISR change notification; the controller broadcasts
  UpdateMetadata. A conflict means the controller changed the partition
  meanwhile: the leader keeps its ISR and waits for the controller's
  LeaderAndIsr. The local ISR changes only once the write succeeded. One write
  per partition at a time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from refka.common import TopicPartition

from ..config import BrokerConfig
from ..logging import get_logger
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


class IsrManager:
    def __init__(self, node_id: int, config: BrokerConfig,
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]],
                 partitions: Mapping[TopicPartition, Partition]) -> None:
        self.node_id = node_id
        self.spawn = spawn
        self.partitions = partitions  # the replica manager's: every partition hosted here
        self.writer: IsrWriter | None = None  # set once the broker has a controller side
        self.lag_time_max_ms: int = config["replica.lag.time.max.ms"]
        self._writes: set[TopicPartition] = set()
        self._shrink_task: asyncio.Task[None] | None = None
        self.shrinks = 0  # Kafka's IsrShrinksPerSec and IsrExpandsPerSec, as counts (broker_metrics.py)
        self.expands = 0

    def broker_epoch(self) -> int:
        return self.writer.broker_epoch if self.writer is not None else -1

    def leading(self, p: Partition) -> None:
        """``p`` is led here now: its followers are watched for lag."""
        if len(p.state.replicas) > 1 and (self._shrink_task is None or self._shrink_task.done()):
            self._shrink_task = self.spawn(self._shrink_loop())

    def maybe_expand(self, p: Partition) -> None:
        if (p.topic, p.index) in self._writes or not p.is_leader:
            return
        start = p.leader_epoch_start_offset
        joining = expansion_candidates(self.node_id, p.state.isr, p.state.replicas, p.followers,
                                       p.high_watermark, start)
        if joining:
            self._write_isr(p, [*p.state.isr, *joining], "expand")

    def maybe_shrink(self, p: Partition, now_ms: int) -> None:
        if (p.topic, p.index) in self._writes or not p.is_leader:
            return
        out = lagging_replicas(self.node_id, p.state.isr, p.followers, now_ms, self.lag_time_max_ms)
        if out:
            self._write_isr(p, [r for r in p.state.isr if r not in out], "shrink")

    def _write_isr(self, p: Partition, isr: list[int], why: str) -> None:
        if self.writer is None or p.state.zk_version < 0:
            return
        self._writes.add((p.topic, p.index))
        self.spawn(self._do_write_isr(self.writer, p, isr, why))

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
                if why == "shrink":
                    self.shrinks += 1
                else:
                    self.expands += 1
            log.info("isr_changed", broker=self.node_id, topic=p.topic, partition=p.index, change=why,
                     isr=isr, leader_epoch=state.leader_epoch, zk_version=version)
            await writer.notify_isr_change(p.topic, p.index)
        finally:
            self._writes.discard((p.topic, p.index))

    async def _shrink_loop(self) -> None:
        interval = max(self.lag_time_max_ms / 2000, 0.05)
        while True:
            await asyncio.sleep(interval)
            now_ms = int(time.time() * 1000)
            for p in list(self.partitions.values()):
                if p.is_leader and len(p.state.isr) > 1:
                    self.maybe_shrink(p, now_ms)
