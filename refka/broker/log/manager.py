"""All partition logs of a broker, over one or more log directories (or memory).

Directories are ``<log.dir>/<topic>-<partition>``; topic names may contain ``-``, so
the partition is what follows the last one. A new partition goes to the log dir
holding the fewest partitions, as in Kafka.

Descriptors: the logs' files are opened when used and closed least recently used
first past ``max_open_files`` (log.open.files.max), through one ``OpenFileCache``
(open_files.py) that every log of the manager shares.

Threading contract. The event loop owns the logs: it calls ``get_or_create``,
``get``, ``delete`` and the logs' own methods. Two passes may run in a worker
thread (``await asyncio.to_thread(manager.retention_pass, now_ms)``), concurrently
with the loop:

- ``retention_pass(now_ms, high_watermark)`` applies retention to every log (each
  log changes its own metadata under its lock, briefly), then unlinks the files of
  segments removed anywhere since the last pass (retention, DeleteRecords,
  truncation) once file.delete.delay.ms has passed, and removes the directories
  of deleted partitions. Unlinks and rmtree never hold a log's lock.
- ``flush_pass(now_ms)`` fsyncs logs due under flush.ms and segments rolled since
  the last pass; fsync never holds a log's lock.

- ``write_high_watermarks(hws)`` writes each log dir's replication-offset-checkpoint
  from a dict the loop built (serialised by a lock; the clean-shutdown write may
  overlap a periodic one).

At most one retention pass runs at a time (a second concurrent call returns at
once). ``high_watermark`` is read from the calling thread: give a function that
only reads (a dict lookup) so it is safe off the loop.
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import structlog

from refka.common import TopicPartition

from . import checkpoint
from .config import LogConfig
from .log import Clock, PartitionLog, wall_clock_ms
from .open_files import DEFAULT_MAX_OPEN_FILES, OpenFileCache
from .segment import LogSegment

_log = structlog.get_logger("refka.log")

DELETE_DIR_SUFFIX = "-delete"
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"  # Kafka's name, per log dir



class RetentionResult(NamedTuple):
    segments_removed: int  # by retention this pass
    files_deleted: int  # segment file sets unlinked this pass (from any cause)
    dirs_deleted: int  # partition directories removed


_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def _legal_topic(topic: str) -> bool:
    """Kafka's rule: 1-249 of [a-zA-Z0-9._-], and not "." or ".."."""
    return 0 < len(topic) <= 249 and topic not in (".", "..") and _TOPIC_CHARS.issuperset(topic)


def parse_partition_dir(name: str) -> TopicPartition | None:
    """``"my-topic-3"`` -> ("my-topic", 3); None for names that are not a partition."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit() or "." in partition:
        return None
    return topic, int(partition)


class LogManager:
    def __init__(
        self,
        log_dirs: Sequence[Path | str] | None,
        memory: bool = False,
        default_config: LogConfig | None = None,
        *,
        config_for: Callable[[str], LogConfig] | None = None,
        clock: Clock | None = None,
        max_open_files: int = DEFAULT_MAX_OPEN_FILES,
    ) -> None:
        """Open every partition found in ``log_dirs`` (with ``config_for(topic)``, or
        the default config), recovering them as needed; leftovers of deleted
        partitions are removed by the first retention pass. The logs keep at most
        ``max_open_files`` descriptors open between them (log.open.files.max)."""
        if not memory and not log_dirs:
            raise ValueError("LogManager needs log_dirs unless memory=True")
        self.memory = memory
        self.log_dirs = [] if memory else [Path(d) for d in log_dirs or ()]
        self.default_config = default_config or LogConfig()
        self._clock = clock or wall_clock_ms
        self.open_files = OpenFileCache(max_open_files)
        self._lock = threading.Lock()
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._partitions_in: Counter[Path] = Counter()  # per log dir, for placing new ones
        self._trash_lock = threading.Lock()
        self._trash: list[tuple[int, LogSegment | Path]] = []
        self._retention_running = threading.Lock()
        self._hw_lock = threading.Lock()
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            self._load_dir(log_dir, config_for)

    def _load_dir(self, log_dir: Path, config_for: Callable[[str], LogConfig] | None) -> None:
        for entry in sorted(os.scandir(log_dir), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            if entry.name.endswith(DELETE_DIR_SUFFIX):
                self._trash.append((0, Path(entry.path)))
                continue
            tp = parse_partition_dir(entry.name)
            if tp is None:
                continue
            config = config_for(tp[0]) if config_for else self.default_config
            self._logs[tp] = PartitionLog.open(
                Path(entry.path), config, clock=self._clock, reaper=self._reap, files=self.open_files
            )
            self._dir_of[tp] = log_dir
            self._partitions_in[log_dir] += 1
            _log.debug("log_loaded", topic=tp[0], partition=tp[1], dir=entry.path)

    # -- the loop's calls -------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        """The partition's log, created if missing; ``config`` (if given) replaces the
        config of an existing log."""
        tp = (topic, partition)
        log = self._logs.get(tp)
        if log is None and (partition < 0 or not _legal_topic(topic)):
            # Handlers validate names first; this guards the filesystem.
            raise ValueError(f"illegal topic partition {topic!r} {partition}")
        if log is not None:
            if config is not None and config != log.config:
                log.update_config(config)
            return log
        config = config or self.default_config
        with self._lock:
            if self.memory:
                log = PartitionLog.open(
                    None, config, memory=True, clock=self._clock, reaper=self._reap, files=self.open_files
                )
            else:
                log_dir = self._least_loaded_dir()
                log = PartitionLog.open(
                    log_dir / f"{topic}-{partition}",
                    config,
                    clock=self._clock,
                    reaper=self._reap,
                    files=self.open_files,
                )
                self._dir_of[tp] = log_dir
                self._partitions_in[log_dir] += 1
            self._logs[tp] = log
        return log

    def _least_loaded_dir(self) -> Path:
        return min(self.log_dirs, key=lambda d: self._partitions_in[d])

    def delete(self, topic: str, partition: int) -> bool:
        """Close the log and rename its directory to ``<name>.<uuid>-delete``; the next
        retention pass removes it. False if there was no such log."""
        tp = (topic, partition)
        with self._lock:
            log = self._logs.pop(tp, None)
            log_dir = self._dir_of.pop(tp, None)
            if log_dir is not None:
                self._partitions_in[log_dir] -= 1
        if log is None:
            return False
        log.close_without_flush()
        if log.directory is not None:
            doomed = log.directory.with_name(f"{log.directory.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
            os.rename(log.directory, doomed)
            with self._trash_lock:
                self._trash.append((0, doomed))
        return True

    def logs(self) -> dict[TopicPartition, PartitionLog]:
        """A snapshot of all logs."""
        with self._lock:
            return dict(self._logs)

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self.logs())

    def __len__(self) -> int:
        return len(self._logs)

    def __contains__(self, tp: object) -> bool:
        return tp in self._logs

    def close(self) -> None:
        """Close every log cleanly (fsync + clean-shutdown marker)."""
        for log in self.logs().values():
            log.close()

    # -- passes that may run in a worker thread ---------------------------------------

    def _reap(self, segment: LogSegment, delay_ms: int) -> None:
        if segment.store.path is None:
            segment.delete_files()  # memory: nothing to unlink
            return
        with self._trash_lock:
            self._trash.append((self._clock() + delay_ms, segment))

    def retention_pass(
        self,
        now_ms: int | None = None,
        high_watermark: Callable[[str, int], int | None] | None = None,
    ) -> RetentionResult:
        if not self._retention_running.acquire(blocking=False):
            return RetentionResult(0, 0, 0)
        try:
            now = self._clock() if now_ms is None else now_ms
            removed = 0
            for (topic, partition), log in self.logs().items():
                hw = high_watermark(topic, partition) if high_watermark else None
                try:
                    removed += log.enforce_retention(now, hw)
                except OSError as exc:
                    _log.error("log_retention_failed", topic=topic, partition=partition, error=str(exc))
            files, dirs = self._empty_trash(now)
            return RetentionResult(removed, files, dirs)
        finally:
            self._retention_running.release()

    def _empty_trash(self, now_ms: int) -> tuple[int, int]:
        with self._trash_lock:
            due = [item for due_ms, item in self._trash if due_ms <= now_ms]
            self._trash = [(d, item) for d, item in self._trash if d > now_ms]
        files = dirs = 0
        for item in due:
            if isinstance(item, Path):
                shutil.rmtree(item, ignore_errors=True)
                dirs += 1
            else:
                item.delete_files()
                files += 1
        return files, dirs

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        """The high watermarks checkpointed in every log dir, for the logs found there.
        A checkpoint that does not parse is logged and ignored: the high watermarks
        then start at each log's start offset and catch up (safe, only slower)."""
        out: dict[TopicPartition, int] = {}
        for log_dir in self.log_dirs:
            path = log_dir / HIGH_WATERMARK_FILE
            try:
                entries = checkpoint.read_partition_offsets(path) or {}
            except checkpoint.CheckpointError as exc:
                _log.warning("high_watermark_checkpoint_unreadable", path=str(path), error=str(exc))
                continue
            out.update((tp, hw) for tp, hw in entries.items() if self._dir_of.get(tp) == log_dir)
        return out

    def write_high_watermarks(self, hws: Mapping[TopicPartition, int], fsync: bool = False) -> None:
        """Writes each log dir's replication-offset-checkpoint: the entries of ``hws``
        whose log lives in that dir (a log dir without partitions gets an empty one)."""
        if self.memory:
            return
        by_dir: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs}
        for tp, hw in hws.items():
            d = self._dir_of.get(tp)
            if d is not None:
                by_dir[d][tp] = hw
        with self._hw_lock:
            for d, entries in by_dir.items():
                try:
                    checkpoint.write_partition_offsets(d / HIGH_WATERMARK_FILE, entries, fsync)
                except OSError as exc:
                    _log.error("high_watermark_checkpoint_failed", dir=str(d), error=str(exc))

    def flush_pass(self, now_ms: int | None = None) -> int:
        """fsync what flush.ms and rolled segments call for; returns logs flushed."""
        now = self._clock() if now_ms is None else now_ms
        flushed = 0
        for log in self.logs().values():
            try:
                flushed += log.maybe_flush(now)
            except OSError as exc:
                _log.error("log_flush_failed", dir=str(log.directory), error=str(exc))
        return flushed
