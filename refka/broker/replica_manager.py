"""The partitions this broker hosts (Kafka's ReplicaManager): which exist here,
their logs' configs, and the background work over all of them.

The controller's LeaderAndIsr is the only thing that makes a partition leader
or follower here (``become_leader_or_follower``); StopReplica removes it. One
partition's own rules (appends, reads, high watermark, acks=all) are in
partition.py; replication (fetchers, ISR writes) in replication/. Retention,
compaction and the high-watermark checkpoint run here, off the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

from refka.common import TopicPartition

from .config import BrokerConfig
from .log import LogConfig, LogManager
from .log.cleaner import MAP_ENTRY_BYTES, LogCleaner
from .logging import get_logger
from .metadata_cache import MetadataCache
from .partition import Partition, PartitionState
from .replication.fetcher_manager import ReplicaFetcherManager
from .replication.isr_manager import IsrManager

log = get_logger("refka.replica_manager")


class ReplicaManager:
    def __init__(self, node_id: int, config: BrokerConfig, logs: LogManager, metadata: MetadataCache,
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]) -> None:
        self.node_id = node_id
        self.config = config
        self.logs = logs
        self.partitions: dict[TopicPartition, Partition] = {}
        # Topic config overrides of the topics with a partition here (from the store), over
        # the broker's defaults: what each partition log's LogConfig is built from.
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.isr = IsrManager(node_id, config, spawn, self.partitions)
        self.fetchers = ReplicaFetcherManager(node_id, config, metadata, spawn, self.isr.broker_epoch)
        # replication-offset-checkpoint as found at start-up: a partition's high watermark
        # starts there (not at its log end: records a leader had not yet committed must not
        # become readable before the ISR has them).
        self._checkpointed_hw = logs.read_high_watermarks()

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def log_config(self, topic: str) -> LogConfig:
        props = dict(self.config.topic_defaults())
        props.update(self.topic_configs.get(topic, {}))
        return LogConfig.from_props(props)

    def become_leader_or_follower(self, topic: str, index: int, topic_id: bytes, state: PartitionState) -> Partition:
        key = (topic, index)
        p = self.partitions.get(key)
        if p is None or p.topic_id != topic_id:
            if p is not None:
                # The topic was deleted and re-created under the same name.
                self._unhost(p)
                self.logs.delete(topic, index)
            cfg = self.log_config(topic)
            plog = self.logs.get_or_create(topic, index, cfg)
            plog.update_config(cfg)  # a log loaded at start-up got the broker defaults
            p = Partition(topic, index, topic_id, plog, state, self.node_id,
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
            self.fetchers.stop_fetching(topic, index)
            self.isr.leading(p)
        else:
            p.followers = {}
            self.fetchers.become_follower(p)
        p.wake()
        return p

    def min_insync_replicas(self, topic: str) -> int:
        """The topic's min.insync.replicas (its override, else the broker's)."""
        raw = self.topic_configs.get(topic, {}).get("min.insync.replicas")
        if raw is None:
            return int(self.config["min.insync.replicas"])
        try:
            return int(raw)
        except ValueError:
            return 1

    def drop_partitions_not_in(self, keep: set[TopicPartition]) -> list[TopicPartition]:
        """A full LeaderAndIsr (type 1, KIP-516) names every partition this broker hosts:
        the others stop being served here (their logs stay on disk)."""
        gone = [key for key in self.partitions if key not in keep]
        for topic, index in gone:
            self.stop_replica(topic, index, False)
        return gone

    def stop_replica(self, topic: str, index: int, delete: bool) -> None:
        p = self.partitions.pop((topic, index), None)
        self.fetchers.stop_fetching(topic, index)
        if p is not None:
            self._unhost(p)
        if delete:
            self.logs.delete(topic, index)
        log.info("replica_stopped", topic=topic, partition=index, delete=delete)

    @staticmethod
    def _unhost(p: Partition) -> None:
        """``p`` is no longer served here: its waiters answer NOT_LEADER_OR_FOLLOWER."""
        p.hosted = False
        p.wake()

    def high_watermark_of(self, topic: str, partition: int) -> int | None:
        """For the retention thread: a dict read, nothing else."""
        p = self.partitions.get((topic, partition))
        return p.high_watermark if p is not None else None

    def high_watermarks(self) -> dict[TopicPartition, int]:
        """What replication-offset-checkpoint holds: every served partition's high
        watermark, and the start-up values of logs on disk not (yet) served here."""
        out = {key: hw for key, hw in self._checkpointed_hw.items() if key in self.logs}
        out.update((key, p.high_watermark) for key, p in self.partitions.items())
        return out

    async def checkpoint_loop(self, interval_ms: int) -> None:
        """replica.high.watermark.checkpoint.interval.ms: the high watermarks to disk, off the loop."""
        if self.logs.memory:
            return
        last: dict[TopicPartition, int] | None = None
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
                    p.wake()

    async def cleaner_loop(self, backoff_ms: int) -> None:
        """Log compaction (log/cleaner.py) every log.cleaner.backoff.ms, off the event
        loop like retention; stops a running pass when cancelled."""
        cleaner = LogCleaner(self.logs, max_map_keys=max(
            1, self.config["log.cleaner.dedupe.buffer.size"] // MAP_ENTRY_BYTES))
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
        self.fetchers.close()
        for p in self.partitions.values():
            p.wake()
        self.logs.write_high_watermarks(self.high_watermarks(), fsync=True)
        self.logs.close()
