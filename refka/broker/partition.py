"""One partition this broker hosts: its log, what the controller said of it, and,
as leader, its followers, high watermark and acks=all wait (Kafka's
``cluster/Partition.scala``).

- ``state`` is what the last LeaderAndIsr said (``PartitionState``); only the
  replica manager replaces it, and only the leader's own ISR writes change its
  ``isr`` (replication/isr_manager.py).
- Produce appends through ``append``; Fetch reads through ``read`` (below the
  high watermark, or to the log end for a follower's fetch).
- The high watermark follows the ISR rules of replication/isr.py; it moves on
  appends, follower fetches and ISR changes.
- The min-ISR check (``check_enough_replicas``) and the acks=all wait
  (``wait_for_high_watermark``) are the one place Produce and the group
  coordinator's own writes decide NOT_ENOUGH_REPLICAS[_AFTER_APPEND] and
  timeouts.
- Waiters (long-polling fetches, acks=all) are woken by appends,
  high-watermark moves, leadership changes and the partition leaving the
  broker, never by polling.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from refka.protocol import ErrorCode

from .log import PartitionLog
from .replication.isr import FollowerState
from .replication.isr import high_watermark as _isr_high_watermark
from .replication.isr import on_follower_fetch as _on_follower_fetch


@dataclass(slots=True)
class PartitionState:
    """What the controller said about a partition (from LeaderAndIsr)."""

    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    partition_epoch: int = -1
    controller_epoch: int = -1
    zk_version: int = -1  # of the state znode: the leader's ISR writes are conditional on it
    leader_recovery_state: int = 0


class Partition:
    __slots__ = (
        "topic",
        "index",
        "topic_id",
        "log",
        "state",
        "broker_id",
        "high_watermark",
        "_waiters",
        "followers",
        "leader_epoch_start_offset",
        "hosted",
    )

    def __init__(self, topic: str, index: int, topic_id: bytes, plog: PartitionLog,
                 state: PartitionState, broker_id: int, high_watermark: int | None = None) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = plog
        self.state = state
        self.broker_id = broker_id
        # Kafka's rule: the checkpointed high watermark, else the log start offset, within the log.
        hw = plog.log_start_offset if high_watermark is None else high_watermark
        self.high_watermark = min(max(hw, plog.log_start_offset), plog.log_end_offset)
        self._waiters: list[asyncio.Future[None]] = []
        self.followers: dict[int, FollowerState] = {}  # as leader: what each follower's fetches said
        self.leader_epoch_start_offset = -1
        self.hosted = True  # False once StopReplica (or a re-created topic) took it off this broker

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """KIP-320: a request's view of the leader epoch against ours (-1: no check)."""
        if current_leader_epoch < 0 or current_leader_epoch == self.state.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch < self.state.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    # -- produce

    def check_enough_replicas(self, min_insync_replicas: int) -> ErrorCode:
        """Before an acks=all append: NOT_ENOUGH_REPLICAS when the ISR is smaller than
        min.insync.replicas (Kafka's Partition.appendRecordsToLeader)."""
        if len(self.state.isr) < min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return ErrorCode.NONE

    async def wait_for_high_watermark(self, offset: int, deadline: float, min_insync_replicas: int = 0) -> ErrorCode:
        """acks=all: until the high watermark reaches ``offset`` (one past the records
        appended), by loop time ``deadline``. NOT_LEADER_OR_FOLLOWER when this broker stops
        leading the partition or stops hosting it, REQUEST_TIMED_OUT at the deadline, and
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when the records are committed by an ISR that
        shrank below ``min_insync_replicas`` (Kafka's DelayedProduce)."""
        loop = asyncio.get_running_loop()
        while True:
            if not self.hosted or not self.is_leader:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            if self.high_watermark >= offset:
                break
            remaining = deadline - loop.time()
            if remaining <= 0:
                return ErrorCode.REQUEST_TIMED_OUT
            try:
                async with asyncio.timeout(remaining):
                    await self.wait_for_data()
            except TimeoutError:
                pass
        if len(self.state.isr) < min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def append(self, records: Any, batches: Any, timestamp_type_log_append: bool) -> Any:
        now = int(time.time() * 1000) if timestamp_type_log_append else None
        info = self.log.append(records, self.state.leader_epoch, now, headers=batches)
        self.maybe_advance_high_watermark()
        self.wake()
        return info

    def read(self, offset: int, max_bytes: int, min_one_batch: bool, *, to_log_end: bool = False) -> Any:
        """Batches below the high watermark; a follower's fetch (``to_log_end``) reads to the log end."""
        limit = None if to_log_end else self.high_watermark
        return self.log.read(offset, max_bytes, max_offset=limit, min_one_batch=min_one_batch)

    # -- replication (rules in replication/isr.py)

    def become_leader(self, now_ms: int) -> None:
        """Kafka's Partition.makeLeader: followers unknown until they fetch; ISR members
        count as caught up now. The high watermark stays where it was (it may lag)."""
        self.leader_epoch_start_offset = self.log.log_end_offset
        self.followers = {
            r: FollowerState(last_caught_up_ms=now_ms if r in self.state.isr else 0, last_fetch_ms=now_ms)
            for r in self.state.replicas if r != self.broker_id
        }
        if self.high_watermark > self.log.log_end_offset:
            self.high_watermark = self.log.log_end_offset
        self.maybe_advance_high_watermark()

    def on_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """A follower fetched at ``fetch_offset`` (its log end offset). Returns whether the
        follower is outside the ISR and might join it."""
        f = self.followers.get(replica_id)
        if f is None:
            if replica_id not in self.state.replicas:
                return False
            f = self.followers[replica_id] = FollowerState()
        _on_follower_fetch(f, fetch_offset, self.log.log_end_offset, now_ms)
        if self.maybe_advance_high_watermark():
            self.wake()
        return replica_id not in self.state.isr

    def maybe_advance_high_watermark(self) -> bool:
        if not self.is_leader:
            return False
        hw = _isr_high_watermark(self.high_watermark, self.broker_id, self.log.log_end_offset,
                                 self.state.isr, self.followers)
        if hw != self.high_watermark:
            self.high_watermark = hw
            return True
        return False

    def on_isr_changed(self) -> None:
        self.maybe_advance_high_watermark()
        self.wake()  # acks=all waiters re-check the ISR size and the high watermark

    def follower_high_watermark(self, leader_high_watermark: int) -> None:
        """As follower: min(leader's high watermark, own log end offset)."""
        self.high_watermark = min(leader_high_watermark, self.log.log_end_offset)

    def wait_for_data(self) -> asyncio.Future[None]:
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        return fut

    def wake(self) -> None:
        """Wakes every waiter (fetch long-polls, acks=all) to look again."""
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for f in waiters:
                if not f.done():
                    f.set_result(None)
