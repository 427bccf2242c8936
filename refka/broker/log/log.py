"""A running partition log: segments, log start/end offsets, leader-epoch cache, producer
state; appends, reads, truncation, retention, flush and close. Opening it from disk
(recovery, leftovers of an interrupted cleaner swap) is loader.py's.

Directory layout (Kafka's, plus two small refka files)::

    <log.dir>/<topic>-<partition>/
        00000000000000000000.log        raw v2 batches
        00000000000000000000.index      sparse offset index
        00000000000000000000.timeindex  sparse time index
        00000000000000000000.snapshot   producer state below that offset, Kafka's format
                                        (``producer_state.py``)
        leader-epoch-checkpoint         Kafka's format: 0, count, "epoch startOffset" lines
        log-start-offset                same format, one entry: the log start offset
                                        (Kafka keeps one broker-wide
                                        log-start-offset-checkpoint; refka keeps it per
                                        partition, written only when DeleteRecords or
                                        a full truncation moves it past the first
                                        segment's base offset)
        .clean_shutdown                 written by close(), removed by open()

Durability: appends go to the kernel (``os.pwrite``, unbuffered) before ``append``
returns, so they survive a crash of the process (kill -9). fsync happens only per Kafka's
``flush.messages`` (inline, on the append that reaches it) and ``flush.ms`` (from
the LogManager's flush pass, off the event loop), both off by default like Kafka,
and at ``close()``. A rolled segment is fsynced by the next flush pass. The files'
descriptors are the LogManager's ``OpenFileCache``'s (open_files.py): a quiet log
holds none, and a flush fsyncs an evicted file by opening it again.

Threads: every public method takes the log's lock, and holds it only for in-memory
work and cheap syscalls (write, rename, ftruncate, open). Unlinking files and fsync
run outside it. That lets the LogManager's retention and flush passes run in a
worker thread (``asyncio.to_thread``) next to appends and reads on the event loop.
"""

from __future__ import annotations

import bisect
import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import structlog

from refka.protocol.records import (
    BatchHeader,
    assign_offsets,
    parse_batches,
    set_log_append_time,
)

from . import checkpoint, loader
from .config import LogConfig
from .epoch_cache import UNDEFINED_EPOCH, LeaderEpochCache
from .errors import LogClosedError, OffsetOutOfRangeError, RecordTooLargeError, UnexpectedAppendOffsetError
from .loader import CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_FILE, LoadedLog
from .open_files import OpenFileCache
from .producer_state import BatchMetadata, ProducerStateManager, last_sequence
from .segment import BatchEntry, LogSegment, Reaper

_log = structlog.get_logger("refka.log")

Clock = Callable[[], int]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def delete_now(segment: LogSegment, delay_ms: int) -> None:
    segment.delete_files()


class AppendInfo(NamedTuple):
    base_offset: int  # -1 when nothing was appended
    last_offset: int
    log_append_time: int  # -1 unless message.timestamp.type=LogAppendTime
    max_timestamp: int
    offset_of_max_timestamp: int
    first_batch_timestamp: int
    records_count: int
    valid_bytes: int
    log_start_offset: int
    # A client's retry of a batch already in the log (idempotent producer): nothing
    # was appended; the offsets and timestamp are the original batch's.
    duplicate: bool = False


class ReadResult(NamedTuple):
    records: list[memoryview]  # zero-copy slices of segments, whole batches, in order
    size: int
    first_offset: int  # base offset of the first batch returned, -1 if none
    next_offset: int  # where a following read continues
    log_start_offset: int
    log_end_offset: int


class PartitionLog:
    """Use :meth:`open`. See the module docstring for layout, durability, threads."""

    def __init__(
        self,
        directory: Path | None,
        config: LogConfig,
        clock: Clock,
        reaper: Reaper,
        files: OpenFileCache,
        loaded: LoadedLog,
    ) -> None:
        self.directory = directory
        self.config = config
        # Where the descriptors of the log's files live (open_files.py).
        self.files = files
        self._clock = clock
        self._reaper = reaper
        self._lock = threading.RLock()
        self._segments: list[LogSegment] = loaded.segments
        self._bases: list[int] = [s.base_offset for s in loaded.segments]
        self._epochs = loaded.epochs
        self._producers = loaded.producers
        self._log_start_offset = loaded.log_start_offset
        self._log_end_offset = loaded.log_end_offset
        self._closed = False
        self._unflushed_messages = 0
        self._last_flush_ms = clock()
        self._needs_sync: list[LogSegment] = []

    @property
    def memory(self) -> bool:
        return self.directory is None

    # -- opening ----------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        dir: Path | str | None,
        config: LogConfig,
        memory: bool = False,
        *,
        clock: Clock | None = None,
        reaper: Reaper | None = None,
        files: OpenFileCache | None = None,
    ) -> PartitionLog:
        """Open (or create) the log in ``dir``, recovered as loader.py says;
        ``memory=True`` keeps everything in memory (``dir`` is then ignored).
        ``files``: the cache of open files the log's descriptors live in (the
        LogManager's, shared by its logs); without it the log gets one of its own."""
        clock = clock or wall_clock_ms
        reaper = reaper or delete_now
        files = files if files is not None else OpenFileCache()
        directory = None if memory or dir is None else Path(dir)
        if directory is None and not memory:
            raise ValueError("a log needs a directory unless memory=True")
        if directory is None:
            segment = LogSegment.create(None, 0, config, clock(), files)
            loaded = LoadedLog([segment], 0, 0, LeaderEpochCache(None), ProducerStateManager(None))
        else:
            loaded = loader.load(directory, config, clock(), reaper, files)
        return cls(directory, config, clock, reaper, files, loaded)

    def _persist_log_start_offset(self) -> None:
        if self.directory is not None:
            checkpoint.write(self.directory / LOG_START_OFFSET_FILE, [(self._log_start_offset,)])

    def _add_segment(self, seg: LogSegment) -> None:
        self._segments.append(seg)
        self._bases.append(seg.base_offset)

    # -- state ------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self._segments)

    def segment_base_offsets(self) -> list[int]:
        with self._lock:
            return list(self._bases)

    @property
    def producers(self) -> ProducerStateManager:
        """The producer state (idempotent producer). Read it on the thread that appends."""
        return self._producers

    # -- for the log cleaner (cleaner.py), from its worker thread --------------------

    def snapshot_for_cleaning(self) -> tuple[list[LogSegment], list[memoryview], int, int]:
        """Every segment (the active one last), a view of each one's bytes, the log
        start and end offsets. The views stay valid and unchanged whatever the log
        does next (store.py); the caller releases them."""
        with self._lock:
            self._check_open()
            segments = list(self._segments)
            views = [s.view(0, s.size) if s.size else memoryview(b"") for s in segments]
            return segments, views, self._log_start_offset, self._log_end_offset

    def replace_segments(
        self, old: Sequence[LogSegment], sizes: Sequence[int], new: LogSegment, install: Callable[[], None]
    ) -> bool:
        """Swap ``new`` in for ``old`` (consecutive, not the active segment, still of
        these ``sizes``); False, changing nothing, if the log moved on. ``install``
        gives ``new``'s files their final names, after ``old``'s were renamed
        ``*.deleted``; if it fails the old segments stay in memory (their open files
        still serve) and the next open completes the swap."""
        with self._lock:
            if self._closed or not old:
                return False
            try:
                i = next(k for k, s in enumerate(self._segments) if s is old[0])
            except StopIteration:
                return False
            j = i + len(old)
            current = self._segments[i:j]
            if j >= len(self._segments) or any(
                a is not b or a.size != n for a, b, n in zip(current, old, sizes, strict=True)
            ):
                return False
            for seg in old:
                seg.rename_for_deletion()
            install()
            self._segments[i:j] = [new]
            self._bases[i:j] = [new.base_offset]
            for seg in old:
                if seg in self._needs_sync:
                    self._needs_sync.remove(seg)
                self._reaper(seg, self.config.file_delete_delay_ms)
            return True

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            for seg in self._segments:
                seg.configure(config)

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.directory or '(memory)'} is closed")

    # -- appends ----------------------------------------------------------------------

    def _duplicate_info(self, producer_id: int, dup: BatchMetadata) -> AppendInfo:
        _log.info("duplicate_batch_acknowledged", dir=str(self.directory or "(memory)"),
                  producer_id=producer_id, base_sequence=dup.first_seq, base_offset=dup.first_offset)
        ts = dup.timestamp
        return AppendInfo(dup.first_offset, dup.last_offset, ts if self.config.log_append_time else -1,
                          ts, dup.last_offset, ts, 0, 0, self._log_start_offset, True)

    def duplicate_of(self, headers: Sequence[BatchHeader]) -> AppendInfo | None:
        """The append of the idempotent producer's batch ``headers[0]`` if the log has it
        already (a retry), as ``append`` would answer it; None otherwise. Nothing is
        checked or appended: Produce asks this where it refuses the batch anyway (KIP-253),
        so a retry of a batch that is in the log is answered with its offset."""
        if not headers or headers[0].producer_id < 0:
            return None
        h = headers[0]
        with self._lock:
            entry = self._producers.get(h.producer_id)
            dup = entry.find_duplicate(h.producer_epoch, h.base_sequence, last_sequence(h)) if entry else None
            return self._duplicate_info(h.producer_id, dup) if dup is not None else None

    def append(
        self,
        batches: bytes | bytearray | memoryview,
        leader_epoch: int,
        log_append_time_ms: int | None = None,
        *,
        headers: Sequence[BatchHeader] | None = None,
    ) -> AppendInfo:
        """Append a producer's batches as leader: assign offsets from the log end
        offset and ``leader_epoch`` as partition leader epoch.

        ``headers``: the result of ``records.parse_batches(batches)`` if the caller
        already validated them (then they are not parsed again); otherwise they are
        parsed and validated here (RecordError). A writable memoryview is patched in
        place; other buffers are copied once into a bytearray and patched there. With message.timestamp.type=LogAppendTime
        each batch gets ``log_append_time_ms`` (default: now).
        """
        if headers is None:
            headers = parse_batches(batches)
        if not headers:
            return AppendInfo(-1, -1, -1, -1, -1, -1, 0, 0, self._log_start_offset)
        _check_layout(batches, headers)
        max_bytes = self.config.max_message_bytes
        for h in headers:
            if h.length > max_bytes:
                raise RecordTooLargeError(f"batch of {h.length} bytes exceeds max.message.bytes={max_bytes}")
        with self._lock:
            self._check_open()
            # The idempotent producer's checks (ProducerStateError) and duplicates.
            dup = self._producers.check(headers)
            if dup is not None:
                return self._duplicate_info(headers[0].producer_id, dup)
            now = self._clock()
            # A writable view (the connection's receive buffer) is patched in place:
            # those bytes belong to this request alone. Anything else is copied once.
            buf = batches if isinstance(batches, memoryview) and not batches.readonly else bytearray(batches)
            append_time = -1
            if self.config.log_append_time:
                append_time = now if log_append_time_ms is None else log_append_time_ms
            first_offset = next_offset = self._log_end_offset
            entries: list[BatchEntry] = []
            max_ts = offset_of_max = -1
            records = 0
            for h in headers:
                pos = h.position
                assign_offsets(buf, pos, next_offset, leader_epoch)
                ts = h.max_timestamp
                if append_time >= 0:
                    set_log_append_time(buf, pos, append_time)
                    ts = append_time
                last = next_offset + h.last_offset_delta
                if ts > max_ts:
                    max_ts, offset_of_max = ts, last
                entries.append((pos, h.length, last, ts))
                records += h.records_count
                next_offset = last + 1
            self._write(buf, entries, first_offset, next_offset - 1, max_ts, now, records)
            self._update_producers(headers, first_offset, append_time)
            if leader_epoch >= 0:
                self._epochs.assign(leader_epoch, first_offset)
            first_ts = append_time if append_time >= 0 else headers[0].base_timestamp
            return AppendInfo(
                first_offset,
                next_offset - 1,
                append_time,
                max_ts,
                offset_of_max,
                first_ts,
                records,
                len(buf),
                self._log_start_offset,
            )

    def append_as_follower(
        self,
        batches: bytes | bytearray | memoryview,
        *,
        headers: Sequence[BatchHeader] | None = None,
    ) -> AppendInfo:
        """Append batches fetched from the leader, offsets and epochs as they are.

        Offsets must increase and start at or after the log end offset (a gap is
        allowed, as after compaction on the leader); otherwise
        UnexpectedAppendOffsetError: the follower should have truncated first. Each
        batch's partition leader epoch goes into the epoch cache.
        """
        if headers is None:
            headers = parse_batches(batches, check_counts=False)
        if not headers:
            return AppendInfo(-1, -1, -1, -1, -1, -1, 0, 0, self._log_start_offset)
        _check_layout(batches, headers)
        with self._lock:
            self._check_open()
            now = self._clock()
            prev_last = self._log_end_offset - 1
            entries: list[BatchEntry] = []
            max_ts = offset_of_max = -1
            records = 0
            for h in headers:
                if h.base_offset <= prev_last or h.last_offset_delta < 0:
                    raise UnexpectedAppendOffsetError(
                        f"batch at offset {h.base_offset} does not follow offset {prev_last} "
                        f"(log end offset {self._log_end_offset})"
                    )
                last = h.base_offset + h.last_offset_delta
                if h.max_timestamp > max_ts:
                    max_ts, offset_of_max = h.max_timestamp, last
                entries.append((h.position, h.length, last, h.max_timestamp))
                records += h.records_count
                prev_last = last
            first_offset = headers[0].base_offset
            self._write(batches, entries, first_offset, prev_last, max_ts, now, records)
            self._update_producers(headers, -1, -1)
            for h in headers:
                if h.partition_leader_epoch >= 0:
                    self._epochs.assign(h.partition_leader_epoch, h.base_offset)
            return AppendInfo(
                first_offset,
                prev_last,
                -1,
                max_ts,
                offset_of_max,
                headers[0].base_timestamp,
                records,
                len(batches),
                self._log_start_offset,
            )

    def _write(
        self,
        data: bytes | bytearray | memoryview,
        entries: list[BatchEntry],
        first_offset: int,
        last_offset: int,
        max_ts: int,
        now: int,
        records: int,
    ) -> None:
        seg = self._segments[-1]
        if seg.should_roll(len(data), last_offset, max_ts, now, self.config):
            seg = self._roll_locked(first_offset, now)
        seg.append(data, entries, now)
        self._log_end_offset = last_offset + 1
        self._unflushed_messages += records
        if self._unflushed_messages >= self.config.flush_messages:
            self._fsync(self._collect_fds_locked())

    def _update_producers(self, headers: Sequence[BatchHeader], first_offset: int, append_time: int) -> None:
        """After a write: batches of idempotent producers into the producer state.
        ``first_offset`` -1: the batches carry their offsets (a follower's append)."""
        producers = self._producers
        offset = first_offset
        for h in headers:
            base = h.base_offset if first_offset < 0 else offset
            if h.producer_id >= 0:
                producers.update(h, base, append_time if append_time >= 0 else h.max_timestamp)
            offset = base + h.last_offset_delta + 1

    def roll(self) -> None:
        """Start a new active segment at the log end offset (no-op if the active
        segment is empty)."""
        with self._lock:
            self._check_open()
            if self._segments[-1].size:
                self._roll_locked(self._log_end_offset, self._clock())

    def _roll_locked(self, base_offset: int, now: int) -> LogSegment:
        old = self._segments[-1]
        if old.size == 0:
            # Only when relative offsets would overflow an empty segment.
            self._remove_segments([self._pop_last_segment()])
        else:
            old.on_become_inactive()
            if self.directory is not None:
                self._needs_sync.append(old)
        seg = LogSegment.create(self.directory, base_offset, self.config, now, self.files)
        self._add_segment(seg)
        # Called before the producer state takes in the append that rolled: it covers
        # exactly the offsets below base_offset.
        self._producers.take_snapshot(base_offset)
        return seg

    def _pop_last_segment(self) -> LogSegment:
        self._bases.pop()
        return self._segments.pop()

    def maybe_assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """On becoming leader: record that ``epoch`` starts at ``start_offset`` (the log
        end offset), as Kafka's Partition.makeLeader does before any append."""
        with self._lock:
            self._epochs.assign(epoch, start_offset)

    # -- reads ------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> ReadResult:
        """Whole batches from the one holding ``fetch_offset``, as zero-copy views.

        Stops before any batch that ends at or after ``max_offset`` (the high
        watermark), and at ``max_bytes``, except that with ``min_one_batch`` the first
        batch is returned even if larger (KIP-74). One view per segment touched.
        OffsetOutOfRangeError if ``fetch_offset`` is below the log start offset or above
        the log end offset.
        """
        with self._lock:
            self._check_open()
            lso, leo = self._log_start_offset, self._log_end_offset
            if fetch_offset < lso or fetch_offset > leo:
                raise OffsetOutOfRangeError(fetch_offset, lso, leo)
            limit = leo if max_offset is None or max_offset > leo else max_offset
            if fetch_offset >= limit:
                return ReadResult([], 0, -1, fetch_offset, lso, leo)
            segments = self._segments
            i = bisect.bisect_right(self._bases, fetch_offset) - 1
            if i < 0:
                i = 0
            views: list[memoryview] = []
            total = 0
            first_offset = -1
            next_offset = offset = fetch_offset
            budget = max_bytes
            while i < len(segments):
                seg = segments[i]
                if seg.base_offset >= limit:
                    break
                size = seg.size
                start = seg.find_position(offset)
                if start >= size:
                    i += 1
                    continue
                stop = size if limit >= seg.next_offset else seg.find_position(limit)
                if start >= stop:
                    break
                end = seg.batch_boundary(start, min(stop, start + budget)) if budget > 0 else start
                if end == start:
                    if views or not min_one_batch:
                        break
                    end = start + seg.batch_length_at(start)
                if first_offset < 0:
                    first_offset = seg.base_offset_at(start)
                views.append(seg.view(start, end))
                total += end - start
                budget -= end - start
                if end < size:
                    next_offset = seg.base_offset_at(end)
                    seg.remember_position(next_offset, end)  # where this reader goes next
                    break
                next_offset = offset = seg.next_offset
                if budget <= 0:
                    break
                i += 1
            return ReadResult(views, total, first_offset, next_offset, lso, leo)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """ListOffsets by time: (offset, timestamp, leader epoch) of the first record at
        or after the log start offset with a timestamp >= ``timestamp``; None if none."""
        with self._lock:
            self._check_open()
            lso = self._log_start_offset
            for seg in self._segments:
                if seg.max_timestamp >= timestamp and seg.next_offset > lso:
                    found = seg.find_by_timestamp(timestamp, lso)
                    if found is not None:
                        return found
            return None

    def max_timestamp_offset(self) -> tuple[int, int, int] | None:
        """ListOffsets MAX_TIMESTAMP (-3, KIP-734): (offset, timestamp, leader epoch) of
        the first record with the largest timestamp; None for an empty log."""
        with self._lock:
            self._check_open()
            best: LogSegment | None = None
            for seg in self._segments:
                if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                    best = seg
            return best.max_timestamp_record() if best is not None else None

    # -- leader epochs ----------------------------------------------------------------

    def latest_epoch(self) -> int:
        """The latest leader epoch in the log, -1 if none."""
        with self._lock:
            return self._epochs.latest_epoch()

    def epoch_for_offset(self, offset: int) -> int:
        with self._lock:
            return self._epochs.epoch_for_offset(offset)

    def epoch_entries(self) -> list[tuple[int, int]]:
        """(epoch, start offset) pairs of the leader-epoch cache."""
        with self._lock:
            return self._epochs.entries()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (epoch, end offset), (-1, -1) when undefined."""
        with self._lock:
            return self._epochs.end_offset_for(epoch, self._log_end_offset)

    # -- truncation, deletion, retention ----------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Follower truncation: remove offsets >= ``offset``. A batch that straddles
        ``offset`` goes whole (the new end is its base offset); epochs that start at
        or after the new end leave the epoch cache, also when no record goes. Returns
        the log end offset."""
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        with self._lock:
            self._check_open()
            if offset >= self._log_end_offset:
                # Nothing to cut, but the epoch cache may end with an epoch this broker
                # started as leader and wrote nothing in before it lost leadership: that
                # entry goes, or every fetch would name it as the last fetched epoch and be
                # answered with the same diverging epoch again (Kafka's UnifiedLog.truncateTo).
                self._epochs.truncate_from_end(self._log_end_offset)
                return self._log_end_offset
            if self._segments[0].base_offset > offset:
                self._truncate_fully_locked(offset)
                return offset
            dropped = []
            while self._segments[-1].base_offset > offset:
                dropped.append(self._pop_last_segment())
            self._remove_segments(dropped)
            active = self._segments[-1]
            active.truncate_to(offset)
            self._needs_sync = [s for s in self._needs_sync if s is not active]
            self._log_end_offset = active.next_offset
            if self._log_start_offset > self._log_end_offset:
                self._log_start_offset = self._log_end_offset
                self._persist_log_start_offset()
            self._epochs.truncate_from_end(self._log_end_offset)
            loader.rebuild_producer_state(
                self._producers, self._segments, self._log_end_offset, self._clock(), self.directory
            )
            return self._log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop everything; the log restarts empty at ``offset`` (a follower far behind
        a leader whose log start offset moved past it)."""
        with self._lock:
            self._check_open()
            self._truncate_fully_locked(offset)

    def _truncate_fully_locked(self, offset: int) -> None:
        dropped = list(reversed(self._segments))
        self._segments, self._bases = [], []
        self._remove_segments(dropped)
        self._add_segment(LogSegment.create(self.directory, offset, self.config, self._clock(), self.files))
        self._log_start_offset = self._log_end_offset = offset
        self._persist_log_start_offset()
        self._epochs.clear()
        self._producers.clear()
        self._producers.delete_snapshots(above=-1)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: the log start offset moves up to ``offset`` and segments wholly
        below it are removed. The caller checks ``offset`` against the high watermark;
        above the log end offset is OffsetOutOfRangeError. Returns the log start offset."""
        with self._lock:
            self._check_open()
            if offset > self._log_end_offset or offset < 0:
                raise OffsetOutOfRangeError(offset, self._log_start_offset, self._log_end_offset)
            if offset <= self._log_start_offset:
                return self._log_start_offset
            self._log_start_offset = offset
            self._persist_log_start_offset()
            self._epochs.truncate_from_start(offset)
            dropped = []
            while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
                self._bases.pop(0)
                dropped.append(self._segments.pop(0))
            self._remove_segments(dropped)
            if dropped:
                self._producers.delete_snapshots(below=self._segments[0].base_offset)
            return offset

    def enforce_retention(self, now_ms: int, high_watermark: int | None = None) -> int:
        """Delete the oldest segments past retention.ms (by their largest timestamp) or
        beyond retention.bytes; only segments that end at or below ``high_watermark``
        (default: the log end offset). If every segment goes, a new empty active
        segment is rolled first: the active segment itself is never deleted. No-op
        under cleanup.policy=compact alone (the cleaner compacts, cleaner.py). Returns
        the number of segments removed."""
        with self._lock:
            if self._closed:
                return 0
            self._producers.remove_expired(now_ms)
            if not self.config.deletes:
                return 0
            cfg = self.config
            leo = self._log_end_offset
            hw = leo if high_watermark is None else min(high_watermark, leo)
            segments = self._segments
            over = sum(s.size for s in segments) - cfg.retention_bytes if cfg.retention_bytes >= 0 else -1
            count = 0
            for i, seg in enumerate(segments):
                end = segments[i + 1].base_offset if i + 1 < len(segments) else leo
                if end > hw or seg.size == 0:
                    break
                by_time = cfg.retention_ms >= 0 and now_ms - seg.largest_timestamp > cfg.retention_ms
                by_size = over >= 0 and over - seg.size >= 0
                by_start = i + 1 < len(segments) and end <= self._log_start_offset
                if not (by_time or by_size or by_start):
                    break
                over -= seg.size
                count += 1
            if not count:
                return 0
            if count == len(segments):
                self._roll_locked(leo, self._clock())
            dropped = segments[:count]
            del self._segments[:count]
            del self._bases[:count]
            self._remove_segments(dropped)
            self._producers.delete_snapshots(below=self._segments[0].base_offset)
            new_start = self._segments[0].base_offset
            if new_start > self._log_start_offset:
                self._log_start_offset = new_start
                self._epochs.truncate_from_start(new_start)
            _log.info(
                "log_segments_deleted_by_retention",
                dir=str(self.directory or "(memory)"),
                segments=count,
                log_start_offset=self._log_start_offset,
            )
            return count

    def _remove_segments(self, segments: list[LogSegment]) -> None:
        for seg in segments:
            seg.rename_for_deletion()
            if seg in self._needs_sync:
                self._needs_sync.remove(seg)
            self._reaper(seg, self.config.file_delete_delay_ms)

    # -- flush, close, delete ---------------------------------------------------------

    def _collect_fds_locked(self) -> list[int]:
        fds: list[int] = []
        for seg in self._needs_sync:
            fds.extend(seg.sync_fds())
        if self._segments:
            fds.extend(self._segments[-1].sync_fds())
        self._needs_sync = []
        self._unflushed_messages = 0
        self._last_flush_ms = self._clock()
        return fds

    @staticmethod
    def _fsync(fds: list[int]) -> None:
        for fd in fds:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def flush(self) -> None:
        """fsync rolled-but-unsynced segments, the active segment, their indexes and the
        checkpoints. The fsyncs run outside the lock."""
        with self._lock:
            if self._closed or self.directory is None:
                return
            fds = self._collect_fds_locked()
            snapshots = self._producers.take_unsynced()
        self._fsync(fds)
        self._producers.sync(snapshots)
        self._epochs.sync()
        checkpoint.sync(self.directory / LOG_START_OFFSET_FILE)

    def maybe_flush(self, now_ms: int) -> bool:
        """Flush if flush.ms has passed since the last one, or a rolled segment waits."""
        with self._lock:
            due = bool(self._needs_sync) or (
                self._unflushed_messages > 0 and now_ms - self._last_flush_ms >= self.config.flush_ms
            )
        if due:
            self.flush()
        return due

    def close(self) -> None:
        """fsync, close files and leave the clean-shutdown marker."""
        with self._lock:
            if self._closed:
                return
            if self.directory is not None:
                self._segments[-1].on_become_inactive()
                self._fsync(self._collect_fds_locked())
                self._epochs.sync()
                self._producers.sync(self._producers.take_unsynced())
                self._producers.take_snapshot(self._log_end_offset, fsync=True)
                self._producers.delete_snapshots_except([*self._bases, self._log_end_offset])
            for seg in self._segments:
                seg.close()
            self._epochs.close()
            self._closed = True
            if self.directory is not None:
                (self.directory / CLEAN_SHUTDOWN_FILE).touch()

    def close_without_flush(self) -> None:
        """Close file descriptors only (the log is about to be deleted)."""
        with self._lock:
            if self._closed:
                return
            for seg in self._segments:
                seg.close()
            self._epochs.close()
            self._closed = True

    def delete(self) -> None:
        """Close and remove the partition directory."""
        self.close_without_flush()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.directory or '(memory)'}, log_start_offset={self._log_start_offset}, "
            f"log_end_offset={self._log_end_offset}, segments={len(self._segments)})"
        )


def _check_layout(batches: bytes | bytearray | memoryview, headers: Sequence[BatchHeader]) -> None:
    # Cheap guard against headers parsed from a different buffer.
    last = headers[-1]
    if headers[0].position != 0 or last.position + last.length != len(batches):
        raise ValueError("headers do not describe this buffer of batches")


__all__ = [
    "AppendInfo",
    "PartitionLog",
    "ReadResult",
    "UNDEFINED_EPOCH",
    "wall_clock_ms",
]
