"""Log compaction: Kafka's log cleaner, for cleanup.policy=compact (and compact,delete).

One pass over a log (``LogCleaner.clean_pass`` -> ``_clean_log``), in a worker thread:

1. Snapshot, under the log's lock: its segments, a zero-copy view of each one's
   bytes (views stay valid and unchanged whatever the log does next, see
   store.py), the log start and end offsets. Everything after reads the views
   without the lock.
2. Cleanable range: the whole segments below the first uncleanable offset, the
   smallest of the active segment's base offset, the high watermark, and the
   base of the first segment holding a record newer than min.compaction.lag.ms.
   The dirty part starts at the first dirty offset (the cleaner checkpoint,
   Kafka's ``cleaner-offset-checkpoint`` in each log dir). The log is cleaned
   when dirty bytes / cleanable bytes > min.cleanable.dirty.ratio, when its
   oldest dirty segment is older than max.compaction.lag.ms, or when a tombstone
   an earlier pass kept has become older than delete.retention.ms (so a quiet
   log still loses its tombstones, as Kafka 3.x's delete horizon, KIP-534, does).
3. Offset map: key -> offset of its latest record, over the dirty segments (up
   to ``max_map_keys`` keys, stopping at a segment boundary; the rest waits for
   the next pass).
4. Rewrite: the segments from the log's first up to the end of the mapped range,
   in groups that fit one segment (segment.bytes, the offset index, 2^31
   offsets), each group into one new segment at the group's base offset. A
   record stays unless a later record of its key is in the map, it has no key
   (Kafka drops those), or it is a tombstone (null value) whose timestamp is
   more than delete.retention.ms old. Offsets never change: compaction leaves
   gaps, as in Kafka. A batch whose records all stay is copied byte for byte;
   one that loses some is rebuilt (``records.rebuild_batch``: same base and last
   offset, producer id/epoch/sequence, leader epoch, codec); one that loses all
   is dropped, except the last batch of each producer id in the log (kept empty,
   Kafka's RETAIN_EMPTY, so the producer state rebuilt from the log at start-up
   still knows the producer's last sequence) and the last batch of each group
   (kept empty, so a new segment ends exactly where its group did). Control
   batches stay as they are.
5. Swap, per group, atomically. The new segment is written as
   ``<base>.log.cleaned`` (with ``.index.cleaned``, ``.timeindex.cleaned``),
   fsynced, renamed to ``.swap`` (indexes first; renaming the ``.log`` is the
   commit point). Then, under the log's lock and only if the group's segments
   are still in the log unchanged, the old segments are renamed ``*.deleted``
   (the log's reaper unlinks them after file.delete.delay.ms) and the ``.swap``
   files take the final names. If the log changed meanwhile (retention,
   truncation, DeleteRecords, deletion, shutdown), the new files are removed
   and the pass stops for this log. At open, loader.py deletes ``.cleaned``
   files and finishes any ``.swap`` (the old segments within its offsets go, it
   takes the final name), as Kafka's LogLoader does.
   Groups swap in log order and a pass stops at the first that cannot, so a
   tombstone never goes before the older records of its key.

Threads: the contract of the LogManager's retention pass (manager.py).
``clean_pass`` runs in a worker thread (``asyncio.to_thread``), one at a time;
the event loop keeps appending and reading. ``high_watermark`` is called from
the thread: give a dict lookup. ``shutdown()`` stops a running pass early.

The checkpoint (Kafka's ``cleaner-offset-checkpoint``, one per log dir) is read
and written through checkpoint.py; one that does not parse is ignored (the next
pass cleans more, nothing else). That a compacted topic refuses records without
a key on produce is validator.py's.

Not done, where Kafka does more: transaction markers and aborted transactions
are kept as they are (refka serves no transactions); a tombstone's age is its
own timestamp (Kafka 3.x stamps a delete horizon into the batch, KIP-534);
max.compaction.lag.ms makes the cleaner run but does not roll the active
segment; the map holds whole keys in a dict (Kafka: 16-byte hashes in a fixed
buffer) and is bounded to log.cleaner.dedupe.buffer.size / 24 keys, as many as
Kafka's map holds.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from refka.common import TopicPartition
from refka.protocol.records import (
    BatchHeader,
    Record,
    RecordError,
    TimestampType,
    iter_batches,
    iter_records,
    read_header,
    rebuild_batch,
)

from . import checkpoint
from .config import LogConfig
from .errors import LogClosedError, LogError
from .index import OffsetIndex, TimeIndex
from .log import Clock, PartitionLog, wall_clock_ms
from .manager import LogManager
from .open_files import OpenFileCache
from .segment import CLEANED_SUFFIX, SEGMENT_SUFFIXES, SWAP_SUFFIX, LogSegment, file_name
from .store import FileStore

_log = structlog.get_logger("refka.log.cleaner")

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
# Kafka's SkimpyOffsetMap entry: a 16-byte MD5 of the key and an 8-byte offset.
MAP_ENTRY_BYTES = 24
DEFAULT_MAX_MAP_KEYS = 128 * 1024 * 1024 // MAP_ENTRY_BYTES

_INT32_MAX = 2**31 - 1
_OFFSET_ENTRY_SIZE = 8  # segment.py's index entry sizes
_TIME_ENTRY_SIZE = 12
_WRITE_CHUNK = 1024 * 1024


# -- the checkpoint -----------------------------------------------------------------


def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """The first dirty offsets in ``path``; none if the file is missing or does not parse."""
    try:
        return checkpoint.read_partition_offsets(path) or {}
    except checkpoint.CheckpointError as exc:
        _log.warning("cleaner_checkpoint_unreadable", path=str(path), error=str(exc))
        return {}


# -- the cleaner --------------------------------------------------------------------


@dataclass
class CleanResult:
    logs_cleaned: int = 0
    segments_cleaned: int = 0  # old segments rewritten
    records_removed: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    logs_aborted: int = 0  # the log changed under the pass (retried next pass)


class _Snapshot:
    __slots__ = ("segments", "views", "log_start_offset", "log_end_offset")

    def __init__(self, log: PartitionLog) -> None:
        self.segments, self.views, self.log_start_offset, self.log_end_offset = log.snapshot_for_cleaning()

    def end_of(self, i: int) -> int:
        """Where segment ``i``'s offsets end: the next segment's base (compaction gaps
        included), or the log end offset."""
        segs = self.segments
        return segs[i + 1].base_offset if i + 1 < len(segs) else self.log_end_offset

    def release(self) -> None:
        for v in self.views:
            v.release()


class _Abort(Exception):
    """The log changed under the pass, or the cleaner is shutting down."""


class LogCleaner:
    """Compacts the logs of a LogManager whose config compacts. See the module docstring."""

    def __init__(
        self,
        logs: LogManager,
        *,
        max_map_keys: int = DEFAULT_MAX_MAP_KEYS,
        clock: Clock | None = None,
    ) -> None:
        self.logs = logs
        self.max_map_keys = max(1, max_map_keys)
        self._clock = clock or wall_clock_ms
        self._running = threading.Lock()
        self._stop = threading.Event()
        # First dirty offset per partition, and the log it belongs to (a log deleted
        # and created again under the same name starts over). None: read from a file.
        self._first_dirty: dict[TopicPartition, tuple[int, PartitionLog | None]] = {}
        # Timestamp of the oldest tombstone an earlier pass kept, per partition: the log
        # is due again once it is older than delete.retention.ms (read at that time).
        self._oldest_tombstone: dict[TopicPartition, tuple[int, PartitionLog]] = {}
        self._written: dict[Path, dict[TopicPartition, int]] = {}
        for log_dir in logs.log_dirs:
            entries = _read_checkpoint(Path(log_dir) / CHECKPOINT_FILE)
            self._written[Path(log_dir)] = entries
            for tp, offset in entries.items():
                self._first_dirty[tp] = (offset, None)

    def shutdown(self) -> None:
        """Make a running pass stop at its next batch (and every later pass at once)."""
        self._stop.set()

    def first_dirty_offset(self, topic: str, partition: int) -> int | None:
        entry = self._first_dirty.get((topic, partition))
        return entry[0] if entry is not None else None

    def clean_pass(
        self,
        now_ms: int | None = None,
        high_watermark: Callable[[str, int], int | None] | None = None,
    ) -> CleanResult:
        """Clean every log that compacts and is dirty enough; at most one pass at a
        time (a concurrent call returns an empty result at once)."""
        result = CleanResult()
        if not self._running.acquire(blocking=False):
            return result
        try:
            now = self._clock() if now_ms is None else now_ms
            logs = self.logs.logs()
            for tp, log in logs.items():
                if self._stop.is_set():
                    break
                if not log.config.compacts:
                    continue
                hw = high_watermark(*tp) if high_watermark is not None else None
                try:
                    self._clean_log(tp, log, now, hw, result)
                except _Abort:
                    result.logs_aborted += 1
                except LogClosedError:
                    continue  # deleted or shut down since the snapshot of the logs
                except (OSError, RecordError, LogError) as exc:
                    _log.error("log_cleaning_failed", topic=tp[0], partition=tp[1], error=str(exc))
            for tp in [tp for tp in self._first_dirty if tp not in logs]:
                del self._first_dirty[tp]
            for tp in [tp for tp in self._oldest_tombstone if tp not in logs]:
                del self._oldest_tombstone[tp]
            self._write_checkpoints(logs)
            return result
        finally:
            self._running.release()

    def _write_checkpoints(self, logs: dict[TopicPartition, PartitionLog]) -> None:
        by_dir: dict[Path, dict[TopicPartition, int]] = {Path(d): {} for d in self.logs.log_dirs}
        for tp, (offset, _log_obj) in self._first_dirty.items():
            log = logs.get(tp)
            if log is not None and log.directory is not None:
                by_dir.setdefault(log.directory.parent, {})[tp] = offset
        for log_dir, entries in by_dir.items():
            if self._written.get(log_dir) == entries:
                continue
            try:
                checkpoint.write_partition_offsets(log_dir / CHECKPOINT_FILE, entries)
                self._written[log_dir] = entries
            except OSError as exc:
                _log.error("cleaner_checkpoint_write_failed", dir=str(log_dir), error=str(exc))

    # -- one log ----------------------------------------------------------------------

    def _clean_log(
        self, tp: TopicPartition, log: PartitionLog, now: int, hw: int | None, result: CleanResult
    ) -> None:
        cfg = log.config
        snap = _Snapshot(log)
        try:
            self._clean_snapshot(tp, log, cfg, snap, now, hw, result)
        finally:
            snap.release()

    def _clean_snapshot(
        self,
        tp: TopicPartition,
        log: PartitionLog,
        cfg: LogConfig,
        snap: _Snapshot,
        now: int,
        hw: int | None,
        result: CleanResult,
    ) -> None:
        segs = snap.segments
        lso = snap.log_start_offset
        # The first uncleanable offset.
        limit = segs[-1].base_offset
        if hw is not None:
            limit = min(limit, hw)
        if cfg.min_compaction_lag_ms > 0:
            for seg in segs[:-1]:
                if seg.largest_timestamp > now - cfg.min_compaction_lag_ms:
                    limit = min(limit, seg.base_offset)
                    break
        cleanable = [i for i in range(len(segs) - 1) if snap.end_of(i) <= limit]
        if not cleanable:
            return
        entry = self._first_dirty.get(tp)
        first_dirty = lso
        if entry is not None and (entry[1] is None or entry[1] is log):
            first_dirty = max(entry[0], lso)
        if first_dirty > snap.log_end_offset:
            first_dirty = lso  # the log was truncated below the checkpoint
        dirty = [i for i in cleanable if snap.end_of(i) > first_dirty]
        kept = self._oldest_tombstone.get(tp)
        tombstones_due = kept is not None and kept[1] is log and now - kept[0] > cfg.delete_retention_ms
        if not dirty and not tombstones_due:
            return
        dirty_bytes = sum(segs[i].size for i in dirty)
        total = sum(segs[i].size for i in cleanable)
        ratio = dirty_bytes / total if total else 0.0
        forced = tombstones_due
        if dirty and cfg.max_compaction_lag_ms < 2**63 - 1:
            first_dirty_seg = segs[dirty[0]]
            oldest = first_dirty_seg.first_batch_timestamp
            if oldest is None or oldest < 0:
                oldest = first_dirty_seg.created_ms
            forced = forced or now - oldest > cfg.max_compaction_lag_ms
        if ratio <= cfg.min_cleanable_dirty_ratio and not forced:
            return

        offset_map: dict[bytes, int] = {}
        mapped_end = first_dirty
        if dirty:
            offset_map, mapped = self._build_offset_map(snap, dirty, lso)
            mapped_end = snap.end_of(mapped[-1])
        to_clean = [i for i in cleanable if snap.end_of(i) <= mapped_end]
        if not to_clean:
            return
        last_of_producer = self._last_batch_of_producers(snap)
        before = sum(segs[i].size for i in to_clean)
        after = removed = 0
        oldest_tombstone: int | None = None
        for group in self._groups(snap, to_clean, cfg):
            new, kept_bytes, dropped, tombstone_ts = self._clean_group(
                log, cfg, snap, group, offset_map, last_of_producer, now
            )
            if tombstone_ts is not None and (oldest_tombstone is None or tombstone_ts < oldest_tombstone):
                oldest_tombstone = tombstone_ts
            if new is None:
                after += sum(segs[i].size for i in group)
                continue
            old = [segs[i] for i in group]
            sizes = [snap.views[i].nbytes for i in group]
            if not log.replace_segments(old, sizes, new, self._installer(new)):
                _discard(new)
                _log.info("log_cleaning_aborted", topic=tp[0], partition=tp[1], reason="the log changed")
                raise _Abort
            after += kept_bytes
            removed += dropped
            result.segments_cleaned += len(group)
        self._first_dirty[tp] = (mapped_end, log)
        if oldest_tombstone is not None:
            self._oldest_tombstone[tp] = (oldest_tombstone, log)
        else:
            self._oldest_tombstone.pop(tp, None)
        result.logs_cleaned += 1
        result.records_removed += removed
        result.bytes_before += before
        result.bytes_after += after
        _log.info(
            "log_cleaned",
            topic=tp[0],
            partition=tp[1],
            segments=len(to_clean),
            keys=len(offset_map),
            records_removed=removed,
            bytes_before=before,
            bytes_after=after,
            dirty_ratio=round(ratio, 3),
            first_dirty_offset=mapped_end,
        )

    def _check_stop(self) -> None:
        if self._stop.is_set():
            raise _Abort

    def _build_offset_map(
        self, snap: _Snapshot, dirty: list[int], lso: int
    ) -> tuple[dict[bytes, int], list[int]]:
        """key -> offset of its latest record in the dirty segments, and the segments
        mapped (all of ``dirty``, or the first ones while the map had room)."""
        offset_map: dict[bytes, int] = {}
        mapped: list[int] = []
        for i in dirty:
            if mapped and len(offset_map) >= self.max_map_keys:
                break
            view = snap.views[i]
            for h in iter_batches(view, False, check_counts=False):
                self._check_stop()
                if h.is_control:
                    continue
                base = h.base_offset
                for r in iter_records(view[h.position : h.position + h.length]):
                    if r.key is not None and base + r.offset_delta >= lso:
                        offset_map[r.key] = base + r.offset_delta
            mapped.append(i)
        return offset_map, mapped

    @staticmethod
    def _last_batch_of_producers(snap: _Snapshot) -> dict[int, int]:
        """producer id -> last offset of its last batch anywhere in the log."""
        out: dict[int, int] = {}
        for view in snap.views:
            for h in iter_batches(view, False, check_counts=False):
                if h.producer_id >= 0:
                    out[h.producer_id] = h.base_offset + h.last_offset_delta
        return out

    @staticmethod
    def _groups(snap: _Snapshot, indexes: list[int], cfg: LogConfig) -> list[list[int]]:
        """Consecutive segments whose data, index entries and offsets fit one segment."""
        segs = snap.segments
        max_entries = cfg.segment_index_bytes // _OFFSET_ENTRY_SIZE
        groups: list[list[int]] = []
        for i in indexes:
            seg = segs[i]
            if groups:
                g = groups[-1]
                size = sum(segs[j].size for j in g) + seg.size
                entries = sum(len(segs[j].offset_index) for j in g) + len(seg.offset_index)
                span = snap.end_of(i) - 1 - segs[g[0]].base_offset
                if size <= cfg.segment_bytes and entries < max_entries and span <= _INT32_MAX:
                    g.append(i)
                    continue
            groups.append([i])
        return groups

    def _clean_group(
        self,
        log: PartitionLog,
        cfg: LogConfig,
        snap: _Snapshot,
        group: list[int],
        offset_map: dict[bytes, int],
        last_of_producer: dict[int, int],
        now: int,
    ) -> tuple[LogSegment | None, int, int, int | None]:
        """The group's cleaned segment (None if the group holds no batch), its size,
        the records removed and the timestamp of the oldest tombstone kept."""
        segs = snap.segments
        new = _new_segment(log.directory, segs[group[0]].base_offset, cfg, now, log.files)
        buf = bytearray()
        entries: list[tuple[int, int, int, int]] = []
        removed = 0
        last_dropped: memoryview | None = None
        oldest_tombstone: int | None = None

        def emit(data: bytes | bytearray | memoryview, h: BatchHeader) -> None:
            max_ts = h.max_timestamp
            if not isinstance(data, memoryview):
                max_ts = read_header(data).max_timestamp
            entries.append((len(buf), len(data), h.base_offset + h.last_offset_delta, max_ts))
            buf.extend(data)
            if len(buf) >= _WRITE_CHUNK:
                flush()

        def flush() -> None:
            if entries:
                new.append(buf, entries, now)
                buf.clear()
                entries.clear()

        try:
            for i in group:
                view = snap.views[i]
                for h in iter_batches(view, False, check_counts=False):
                    self._check_stop()
                    batch = view[h.position : h.position + h.length]
                    if h.is_control:
                        emit(batch, h)
                        last_dropped = None
                        continue
                    records = list(iter_records(batch))
                    kept = [r for r in records if _retain(r, h, offset_map, now, cfg)]
                    removed += len(records) - len(kept)
                    for r in kept:
                        if r.value is None:
                            ts = _timestamp(r, h)
                            if oldest_tombstone is None or ts < oldest_tombstone:
                                oldest_tombstone = ts
                    if len(kept) == len(records):
                        emit(batch, h)
                    elif kept or (h.producer_id >= 0 and last_of_producer.get(h.producer_id) == h.last_offset):
                        emit(rebuild_batch(batch, kept), h)
                    else:
                        last_dropped = batch
                        continue
                    last_dropped = None
            if last_dropped is not None:
                # The group keeps its last batch (empty), so the segment ends where it did.
                emit(rebuild_batch(last_dropped, []), read_header(last_dropped))
            flush()
            if new.size == 0:
                _discard(new)
                return None, 0, 0, None
            new.on_become_inactive()
            new.created_ms = segs[group[0]].created_ms
            new.last_modified_ms = segs[group[-1]].last_modified_ms
            _commit(new)
            return new, new.size, removed, oldest_tombstone
        except BaseException:
            _discard(new)
            raise

    @staticmethod
    def _installer(new: LogSegment) -> Callable[[], None]:
        def install() -> None:
            # Under the log's lock, after the old segments were renamed *.deleted.
            for part in (new.offset_index, new.time_index, new.store):
                path = part.path
                if path is not None and path.name.endswith(SWAP_SUFFIX):
                    part.rename(path.with_name(path.name[: -len(SWAP_SUFFIX)]))

        return install


def _retain(r: Record, h: BatchHeader, offset_map: dict[bytes, int], now: int, cfg: LogConfig) -> bool:
    key = r.key
    if key is None:
        return False  # Kafka's cleaner drops records without a key
    offset = h.base_offset + r.offset_delta
    latest = offset_map.get(key)
    if latest is not None and offset < latest:
        return False
    if r.value is None and now - _timestamp(r, h) > cfg.delete_retention_ms:
        return False
    return True


def _timestamp(r: Record, h: BatchHeader) -> int:
    if h.timestamp_type == TimestampType.LOG_APPEND_TIME:
        return h.max_timestamp
    return h.base_timestamp + r.timestamp_delta


def _new_segment(directory: Path | None, base: int, cfg: LogConfig, now: int, files: OpenFileCache) -> LogSegment:
    """An empty segment at ``base``; on disk its files are named ``*.cleaned``."""
    if directory is None:
        return LogSegment.create(None, base, cfg, now, files)
    paths = [directory / (file_name(base, s) + CLEANED_SUFFIX) for s in SEGMENT_SUFFIXES]
    for p in paths:
        p.unlink(missing_ok=True)
    seg = LogSegment(
        base,
        FileStore(paths[0], files),
        OffsetIndex(paths[1], base, cfg.segment_index_bytes // _OFFSET_ENTRY_SIZE, files),
        TimeIndex(paths[2], base, cfg.segment_index_bytes // _TIME_ENTRY_SIZE, files),
        cfg,
        now,
    )
    seg.offset_index.reset()
    seg.time_index.reset()
    return seg


def _commit(new: LogSegment) -> None:
    """fsync the cleaned files, then rename them ``.swap``: the ``.log`` last, the
    commit point (see loader.py)."""
    path = new.store.path
    if path is None:
        return
    for fd in new.sync_fds():
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    ns = new.last_modified_ms * 1_000_000
    os.utime(path, ns=(ns, ns))  # retention by time of a segment without timestamps
    for part in (new.offset_index, new.time_index, new.store):
        p = part.path
        if p is not None:
            part.rename(p.with_name(p.name[: -len(CLEANED_SUFFIX)] + SWAP_SUFFIX))
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _discard(new: LogSegment) -> None:
    try:
        new.delete_files()
    except OSError as exc:  # the directory may be gone (partition deleted)
        _log.debug("cleaned_segment_discard_failed", error=str(exc))
