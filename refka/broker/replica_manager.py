"""Partitions this broker hosts: their logs, leadership, epochs and high watermark.

The controller's LeaderAndIsr is the only thing that makes a partition leader
or follower here (``apply_leader_and_isr``); StopReplica removes it. Produce
appends through ``Partition.append``; Fetch reads through ``Partition.read``.
Long-polling fetches wait on ``Partition.wait_for_data``, woken by appends and
high-watermark moves, never by polling.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from refka.protocol import ErrorCode

from .log import LogConfig, LogManager, PartitionLog
from .log.cleaner import MAP_ENTRY_BYTES, LogCleaner
from .logging import get_logger
from .replication import FollowerState, ReplicationManager
from .replication.isr import high_watermark as _isr_high_watermark
from .replication.isr import on_follower_fetch as _on_follower_fetch

if TYPE_CHECKING:
    from .broker import Broker

log = get_logger("refka.replica_manager")


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
        "undeleted_partition_count",
        "followers",
        "leader_epoch_start_offset",
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
        self.undeleted_partition_count = -1
        self.followers: dict[int, FollowerState] = {}  # as leader: what each follower's fetches said
        self.leader_epoch_start_offset = -1

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

    def append(self, records: Any, batches: Any, timestamp_type_log_append: bool) -> Any:
        now = int(time.time() * 1000) if timestamp_type_log_append else None
        info = self.log.append(records, self.state.leader_epoch, now, headers=batches)
        self.maybe_advance_high_watermark()
        self._wake()
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
            self._wake()
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
        self._wake()  # acks=all waiters re-check the ISR size and the high watermark

    def follower_high_watermark(self, leader_high_watermark: int) -> None:
        """As follower: min(leader's high watermark, own log end offset)."""
        self.high_watermark = min(leader_high_watermark, self.log.log_end_offset)

    def wait_for_data(self) -> asyncio.Future[None]:
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        return fut

    def _wake(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for f in waiters:
                if not f.done():
                    f.set_result(None)


class ReplicaManager:
    def __init__(self, broker: Broker, logs: LogManager) -> None:
        self.broker = broker
        self.logs = logs
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.replication = ReplicationManager(broker, self)
        # replication-offset-checkpoint as found at start-up: a partition's high watermark
        # starts there (not at its log end: records a leader had not yet committed must not
        # become readable before the ISR has them).
        self._checkpointed_hw = logs.read_high_watermarks()

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def log_config(self, topic: str) -> LogConfig:
        props = dict(self.broker.config.topic_defaults())
        props.update(self.broker.topic_configs.get(topic, {}))
        return LogConfig.from_props(props)

    def become_leader_or_follower(self, topic: str, index: int, topic_id: bytes, state: PartitionState) -> Partition:
        key = (topic, index)
        p = self.partitions.get(key)
        if p is None or p.topic_id != topic_id:
            if p is not None:
                # The topic was deleted and re-created under the same name.
                self.logs.delete(topic, index)
            cfg = self.log_config(topic)
            plog = self.logs.get_or_create(topic, index, cfg)
            plog.update_config(cfg)  # a log loaded at start-up got the broker defaults
            p = Partition(topic, index, topic_id, plog, state, self.broker.node_id,
                          self._checkpointed_hw.get(key))
            self.partitions[key] = p
            log.info("partition_created", topic=topic, partition=index, leader=state.leader,
                     leader_epoch=state.leader_epoch, log_end_offset=plog.log_end_offset)
        else:
            p.state = state
            log.info("partition_state_changed", topic=topic, partition=index, leader=state.leader,
                     leader_epoch=state.leader_epoch, isr=state.isr)
        if p.is_leader:
            # Records from now on belong to this epoch (the leader-epoch cache, KIP-101).
            p.log.maybe_assign_epoch_start_offset(state.leader_epoch, p.log.log_end_offset)
            p.become_leader(int(time.time() * 1000))
            self.replication.become_leader(p)
        else:
            p.followers = {}
            self.replication.become_follower(p)
        p._wake()
        return p

    def min_insync_replicas(self, topic: str) -> int:
        """The topic's min.insync.replicas (its override, else the broker's)."""
        raw = self.broker.topic_configs.get(topic, {}).get("min.insync.replicas")
        if raw is None:
            return int(self.broker.config["min.insync.replicas"])
        try:
            return int(raw)
        except ValueError:
            return 1

    def drop_partitions_not_in(self, keep: set[tuple[str, int]]) -> list[tuple[str, int]]:
        """A full LeaderAndIsr (type 1, KIP-516) names every partition this broker hosts:
        the others stop being served here (their logs stay on disk)."""
        gone = [key for key in self.partitions if key not in keep]
        for topic, index in gone:
            self.stop_replica(topic, index, False)
        return gone

    def stop_replica(self, topic: str, index: int, delete: bool) -> None:
        p = self.partitions.pop((topic, index), None)
        self.replication.stop(topic, index)
        if p is not None:
            p._wake()
        if delete:
            self.logs.delete(topic, index)
        log.info("replica_stopped", topic=topic, partition=index, delete=delete)

    def high_watermark_of(self, topic: str, partition: int) -> int | None:
        """For the retention thread: a dict read, nothing else."""
        p = self.partitions.get((topic, partition))
        return p.high_watermark if p is not None else None

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        """What replication-offset-checkpoint holds: every served partition's high
        watermark, and the start-up values of logs on disk not (yet) served here."""
        out = {key: hw for key, hw in self._checkpointed_hw.items() if key in self.logs}
        out.update((key, p.high_watermark) for key, p in self.partitions.items())
        return out

    async def checkpoint_loop(self, interval_ms: int) -> None:
        """replica.high.watermark.checkpoint.interval.ms: the high watermarks to disk, off the loop."""
        if self.logs.memory:
            return
        last: dict[tuple[str, int], int] | None = None
        while True:
            await asyncio.sleep(interval_ms / 1000)
            hws = self.high_watermarks()
            if hws != last:
                await asyncio.to_thread(self.logs.write_high_watermarks, hws)
                last = hws

    async def retention_loop(self, interval_ms: int) -> None:
        """Retention by time and size, off the event loop (file deletion can be slow)."""
        while True:
            await asyncio.sleep(interval_ms / 1000)
            result = await asyncio.to_thread(self.logs.retention_pass, None, self.high_watermark_of)
            if result.segments_removed:
                log.info("retention_deleted_segments", segments=result.segments_removed)
                for p in self.partitions.values():
                    p._wake()

    async def cleaner_loop(self, backoff_ms: int) -> None:
        """Log compaction (log/cleaner.py) every log.cleaner.backoff.ms, off the event
        loop like retention; stops a running pass when cancelled."""
        cleaner = LogCleaner(self.logs, max_map_keys=max(
            1, self.broker.config["log.cleaner.dedupe.buffer.size"] // MAP_ENTRY_BYTES))
        try:
            while True:
                await asyncio.sleep(backoff_ms / 1000)
                result = await asyncio.to_thread(cleaner.clean_pass, None, self.high_watermark_of)
                if result.logs_cleaned:
                    log.info("logs_compacted", logs=result.logs_cleaned, segments=result.segments_cleaned,
                             records_removed=result.records_removed, bytes_before=result.bytes_before,
                             bytes_after=result.bytes_after)
        finally:
            cleaner.shutdown()

    def close(self) -> None:
        self.replication.close()
        for p in self.partitions.values():
            p._wake()
        self.logs.write_high_watermarks(self.high_watermarks(), fsync=True)
        self.logs.close()
