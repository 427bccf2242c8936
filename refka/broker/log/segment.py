"""One log segment: the batches from ``base_offset`` on, with its two sparse indexes.

Files (Kafka's names, base offset in 20 digits): ``<base>.log`` (raw v2 batches),
``<base>.index``, ``<base>.timeindex``. Positions are byte offsets in ``.log``.
A segment on its way out carries a suffix after those (Kafka's LogFileUtils):
``.deleted`` (removed from its log, unlinked later by the log's reaper),
``.cleaned`` and ``.swap`` (a log cleaner's replacement, before and after its
commit point, cleaner.py; loader.py finishes or discards them at open).

Lookups use the offset index to land at or before the wanted batch, then a short
scan of batch headers (at most index.interval.bytes worth of batches, plus one).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from refka.protocol.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    iter_batches,
    iter_records,
    iter_valid_batches,
)

from .config import LogConfig
from .index import OffsetIndex, TimeIndex
from .open_files import OpenFileCache
from .store import FileStore, MemoryStore

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
# The files of one segment.
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)

_INT32_MAX = 2**31 - 1
_OFFSET_ENTRY_SIZE = 8
_TIME_ENTRY_SIZE = 12
_LOG_APPEND_TIME = 0x08

# base offset, batch length, partition leader epoch, magic, crc, attributes, lastOffsetDelta
_SCAN = struct.Struct(">qiibIhi")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MAX_TS_AT = 35

# (position in the appended buffer, batch length, last offset, max timestamp)
BatchEntry = tuple[int, int, int, int]
# (leader epoch, start offset) changes seen while recovering
EpochTransitions = list[tuple[int, int]]
# What a log calls with a segment it removed and renamed to *.deleted, and the delay
# (file.delete.delay.ms) after which the files may be unlinked (manager.py queues them).
Reaper = Callable[["LogSegment", int], None]


def file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def parse_file_name(name: str) -> int | None:
    """Base offset of a ``.log`` file name, else None."""
    stem, dot, suffix = name.partition(".")
    if dot and "." + suffix == LOG_SUFFIX and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


class LogSegment:
    def __init__(
        self,
        base_offset: int,
        store: FileStore | MemoryStore,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        config: LogConfig,
        now_ms: int,
    ) -> None:
        self.base_offset = base_offset
        self.store = store
        self.offset_index = offset_index
        self.time_index = time_index
        self.index_interval_bytes = config.index_interval_bytes
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        # Kafka rolls on segment.ms measured from the first batch's timestamp.
        self.first_batch_timestamp: int | None = None
        self.created_ms = now_ms
        self.last_modified_ms = now_ms
        self._bytes_since_index = 0
        # offset -> position answers of find_position (the high watermark, the next
        # fetch offset of a reader that keeps up). Appends never change them.
        self._position_cache: dict[int, int] = {}

    # -- construction -----------------------------------------------------------------

    @classmethod
    def _build(
        cls, directory: Path | None, base_offset: int, config: LogConfig, now_ms: int, files: OpenFileCache
    ) -> LogSegment:
        if directory is None:
            store: FileStore | MemoryStore = MemoryStore(config.segment_bytes + config.max_message_bytes)
            index_path = time_path = None
        else:
            store = FileStore(directory / file_name(base_offset, LOG_SUFFIX), files)
            index_path = directory / file_name(base_offset, INDEX_SUFFIX)
            time_path = directory / file_name(base_offset, TIME_INDEX_SUFFIX)
        return cls(
            base_offset,
            store,
            OffsetIndex(index_path, base_offset, config.segment_index_bytes // _OFFSET_ENTRY_SIZE, files),
            TimeIndex(time_path, base_offset, config.segment_index_bytes // _TIME_ENTRY_SIZE, files),
            config,
            now_ms,
        )

    @classmethod
    def create(
        cls, directory: Path | None, base_offset: int, config: LogConfig, now_ms: int, files: OpenFileCache
    ) -> LogSegment:
        """A new, empty segment (empty files in file mode, their descriptors in ``files``)."""
        if directory is not None:
            path = directory / file_name(base_offset, LOG_SUFFIX)
            if path.exists() and path.stat().st_size:
                raise FileExistsError(f"segment {path} already exists")
        seg = cls._build(directory, base_offset, config, now_ms, files)
        seg.offset_index.reset()
        seg.time_index.reset()
        return seg

    @classmethod
    def open(
        cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int, recover: bool, files: OpenFileCache
    ) -> tuple[LogSegment, EpochTransitions | None, int]:
        """An existing segment, and what loading it found: the epoch changes seen if it
        was recovered (a full CRC scan), and how many torn bytes were cut off."""
        seg = cls._build(directory, base_offset, config, now_ms, files)
        if isinstance(seg.store, FileStore):
            seg.last_modified_ms = int(os.stat(seg.store.path).st_mtime * 1000)
        transitions, truncated = seg.load(recover)
        seg.store.release_mappings()
        return seg, transitions, truncated

    def load(self, recover: bool) -> tuple[EpochTransitions | None, int]:
        if not recover:
            if self.offset_index.load(self.size) and self.time_index.load() and self._scan_tail():
                self._load_first_batch_timestamp()
                return None, 0
        return self.recover()

    def recover(self) -> tuple[EpochTransitions, int]:
        """Rebuild indexes and state from a CRC-checked scan; cut the file at the first
        torn or invalid batch. Returns (epoch transitions, bytes cut)."""
        self.offset_index.reset()
        self.time_index.reset()
        self._reset_stats()
        size = self.size
        valid_end = 0
        prev_last = self.base_offset - 1
        transitions: EpochTransitions = []
        last_epoch = -1
        batches = iter_valid_batches(self._data())
        try:
            for h in batches:
                if h.base_offset <= prev_last or h.last_offset_delta < 0:
                    break
                self._index_batch(
                    h.position, h.length, h.base_offset + h.last_offset_delta, h.max_timestamp, False
                )
                epoch = h.partition_leader_epoch
                if epoch >= 0 and epoch != last_epoch:
                    transitions.append((epoch, h.base_offset))
                    last_epoch = epoch
                if self.first_batch_timestamp is None:
                    self.first_batch_timestamp = h.max_timestamp
                prev_last = h.base_offset + h.last_offset_delta
                valid_end = h.position + h.length
        finally:
            batches.close()
        self.offset_index.persist()
        self.time_index.persist()
        if valid_end < size:
            self.store.truncate(valid_end)
        self.next_offset = prev_last + 1
        return transitions, size - valid_end

    def _reset_stats(self) -> None:
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = None
        self._bytes_since_index = 0
        self._position_cache.clear()

    def _scan_tail(self) -> bool:
        """Set next offset and max timestamp from the indexes plus a header scan from the
        last offset-index entry to the end. False if that tail does not parse or does
        not agree with the indexes (the caller then recovers the segment)."""
        size = self.size
        buf = self.store.buffer()
        last = self.offset_index.last_entry()
        pos = last[1] if last is not None else 0
        max_ts, max_offset = -1, -1
        time_last = self.time_index.last_entry()
        if time_last is not None:
            max_ts, max_offset = time_last
        prev_last = self.base_offset - 1
        first = True
        while pos < size:
            if size - pos < HEADER_SIZE:
                return False
            base, blen, _, magic, _, _, lod = _SCAN.unpack_from(buf, pos)
            total = blen + LOG_OVERHEAD
            if magic != MAGIC or total < HEADER_SIZE or pos + total > size or lod < 0 or base <= prev_last:
                return False
            if first and last is not None and base + lod != last[0]:
                return False
            first = False
            (ts,) = _I64.unpack_from(buf, pos + _MAX_TS_AT)
            if ts > max_ts:
                max_ts, max_offset = ts, base + lod
            prev_last = base + lod
            pos += total
        if size and prev_last < self.base_offset:
            return False
        next_offset = prev_last + 1
        if time_last is not None and time_last[1] >= next_offset:
            return False
        self.next_offset = next_offset
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, max_offset
        self._bytes_since_index = size - (last[1] if last is not None else 0)
        self._position_cache.clear()
        return True

    def _load_first_batch_timestamp(self) -> None:
        if self.size >= HEADER_SIZE:
            (self.first_batch_timestamp,) = _I64.unpack_from(self.store.buffer(), _MAX_TS_AT)
        else:
            self.first_batch_timestamp = None

    def configure(self, config: LogConfig) -> None:
        self.index_interval_bytes = config.index_interval_bytes
        self.offset_index.max_entries = config.segment_index_bytes // _OFFSET_ENTRY_SIZE
        self.time_index.max_entries = config.segment_index_bytes // _TIME_ENTRY_SIZE

    # -- appends ----------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self.store.size

    @property
    def largest_timestamp(self) -> int:
        """What retention.ms compares against: the max record timestamp, or the last
        modification time for a segment without timestamps."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms

    def should_roll(
        self, append_size: int, last_offset: int, append_max_timestamp: int, now_ms: int, config: LogConfig
    ) -> bool:
        if self.size == 0:
            return last_offset - self.base_offset > _INT32_MAX
        if self.size + append_size > config.segment_bytes:
            return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        if last_offset - self.base_offset > _INT32_MAX:
            return True
        first_ts = self.first_batch_timestamp
        if first_ts is not None and first_ts >= 0:
            waited = append_max_timestamp - first_ts
        else:
            waited = now_ms - self.created_ms
        return waited > config.segment_ms

    def append(
        self, data: bytes | bytearray | memoryview, entries: Sequence[BatchEntry], now_ms: int
    ) -> None:
        """Write ``data`` (whole batches with final offsets) and index its batches."""
        start = self.size
        self.store.write(data)
        for position, length, last_offset, max_ts in entries:
            self._index_batch(start + position, length, last_offset, max_ts, True)
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = entries[0][3]
        self.next_offset = entries[-1][2] + 1
        self.last_modified_ms = now_ms

    def _index_batch(self, position: int, length: int, last_offset: int, max_ts: int, write: bool) -> None:
        # Kafka's LogSegment.append: update max-so-far first, then index this batch if
        # more than index.interval.bytes were written since the last entry.
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = last_offset
        if self._bytes_since_index > self.index_interval_bytes:
            self.offset_index.append(last_offset, position, write)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, write)
            self._bytes_since_index = 0
        self._bytes_since_index += length

    def on_become_inactive(self) -> None:
        """Rolled or closing: the time index's last entry carries the segment's max
        timestamp, so it can be read back at open (Kafka does the same), and the file
        is trimmed to its data."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.store.trim()

    # -- lookups ----------------------------------------------------------------------

    def find_position(self, offset: int) -> int:
        """Position of the first batch whose last offset is >= ``offset``; ``size`` if
        every batch ends before it."""
        cached = self._position_cache.get(offset)
        if cached is not None:
            return cached
        size = self.size
        pos = self.offset_index.lookup(offset)
        if pos >= size:
            return size
        buf = self.store.buffer()
        scan = _SCAN.unpack_from
        while pos < size:
            base, blen, _, _, _, _, lod = scan(buf, pos)
            if base + lod >= offset:
                self.remember_position(offset, pos)
                return pos
            pos += blen + LOG_OVERHEAD
        return size

    def remember_position(self, offset: int, position: int) -> None:
        """Cache that the batch at ``position`` is the first ending at or after ``offset``."""
        cache = self._position_cache
        if len(cache) >= 64:
            cache.clear()
        cache[offset] = position

    def batch_boundary(self, start: int, limit: int) -> int:
        """The last batch boundary <= ``limit``, at or after ``start`` (a boundary)."""
        pos = self.offset_index.floor_position(limit)
        if pos < start:
            pos = start
        buf = self.store.buffer()
        unpack = _I32.unpack_from
        while limit - pos >= HEADER_SIZE:
            nxt = pos + unpack(buf, pos + 8)[0] + LOG_OVERHEAD
            if nxt > limit:
                break
            pos = nxt
        return pos

    def batch_length_at(self, position: int) -> int:
        return _I32.unpack_from(self.store.buffer(), position + 8)[0] + LOG_OVERHEAD

    def base_offset_at(self, position: int) -> int:
        return _I64.unpack_from(self.store.buffer(), position)[0]

    def view(self, start: int, end: int) -> memoryview:
        return self.store.view(start, end)

    def iter_headers(self, start: int = 0) -> Iterator[BatchHeader]:
        """Headers from ``start`` on, without CRC checks (data already validated)."""
        return iter_batches(self._data(), False, check_counts=False, start=start)

    def _data(self) -> memoryview:
        """The segment's bytes (its store's buffer may extend past them)."""
        return memoryview(self.store.buffer())[: self.size]

    def find_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record at or after
        ``start_offset`` whose timestamp is >= ``timestamp``."""
        before = self.time_index.lookup_before(timestamp)
        from_offset = max(start_offset, self.base_offset if before is None else before + 1)
        pos = self.find_position(from_offset)
        for h in self.iter_headers(pos):
            if h.max_timestamp < timestamp or h.base_offset + h.last_offset_delta < from_offset:
                continue
            found = self._first_record(h, from_offset, lambda ts: ts >= timestamp)
            if found is not None:
                return found
        return None

    def max_timestamp_record(self) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record with the segment's max
        timestamp (ListOffsets MAX_TIMESTAMP)."""
        if self.max_timestamp < 0:
            return None
        pos = self.find_position(self.offset_of_max_timestamp)
        if pos >= self.size:
            return None
        h = next(self.iter_headers(pos))
        target = self.max_timestamp
        found = self._first_record(h, h.base_offset, lambda ts: ts == target)
        if found is None:
            return self.offset_of_max_timestamp, target, h.partition_leader_epoch
        return found

    def _first_record(
        self, h: BatchHeader, from_offset: int, match: Callable[[int], bool]
    ) -> tuple[int, int, int] | None:
        log_append = h.attributes & _LOG_APPEND_TIME
        for r in iter_records(self.store.view(h.position, h.position + h.length)):
            offset = h.base_offset + r.offset_delta
            if offset < from_offset:
                continue
            ts = h.max_timestamp if log_append else h.base_timestamp + r.timestamp_delta
            if match(ts):
                return offset, ts, h.partition_leader_epoch
        return None

    # -- truncation and files ---------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Cut the batch holding ``offset`` and everything after it."""
        pos = self.find_position(offset)
        if pos >= self.size:
            return
        cut_base = self.base_offset_at(pos)
        self.store.truncate(pos)
        self.offset_index.truncate_to(cut_base)
        self.time_index.truncate_to(cut_base)
        self._reset_stats()
        if not self._scan_tail():  # indexes we just cut are consistent; be safe anyway
            self.recover()
        self._load_first_batch_timestamp()

    def sync_fds(self) -> list[int]:
        """Descriptors to fsync the segment's files with, outside the log's lock (the
        caller closes them); evicted files are opened again for it."""
        return [
            fd
            for fd in (self.store.sync_fd(), self.offset_index.sync_fd(), self.time_index.sync_fd())
            if fd >= 0
        ]

    def close(self) -> None:
        self.store.close()
        self.offset_index.close()
        self.time_index.close()

    def rename_for_deletion(self) -> None:
        """Rename the files to ``*.deleted`` (Kafka's async delete), so a new segment
        with the same base offset can be created before they are unlinked."""
        for part in (self.store, self.offset_index, self.time_index):
            path = part.path
            if path is not None:
                try:
                    part.rename(path.with_name(path.name + DELETED_SUFFIX))
                except FileNotFoundError:
                    pass

    def delete_files(self) -> None:
        self.store.delete()
        self.offset_index.delete()
        self.time_index.delete()

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, next_offset={self.next_offset})"
