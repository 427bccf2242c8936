"""Sparse segment indexes in Kafka's file formats.

- ``.index``: entries (relative offset int32, position int32), big-endian. An entry
  (o, p) says the batch starting at byte p ends at offset base + o (Kafka writes the
  batch's last offset). Lookup of offset t: the last entry with offset <= t gives a
  position at or before the batch holding t.
- ``.timeindex``: entries (timestamp int64, relative offset int32). An entry (T, o) is
  the largest timestamp seen so far in the segment and the batch offset holding it,
  written at the same points as ``.index`` entries when T grew. Every record at or
  before o has a timestamp <= T.

Entries live in ``array`` objects (bisect on them) and are appended to the file with
``os.write``; the files hold exactly the entries (Kafka preallocates and trims; we
never need to). A file is read only when its segment is opened; its descriptor
(O_APPEND, for the appends) is the OpenFileCache's (open_files.py).
"""

from __future__ import annotations

import bisect
import operator
import os
import struct
from array import array
from itertools import islice
from pathlib import Path

from .open_files import CachedFile, OpenFileCache

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


def _increasing(a: array) -> bool:  # type: ignore[type-arg]
    return all(map(operator.lt, a, islice(a, 1, None)))


def _non_decreasing(a: array) -> bool:  # type: ignore[type-arg]
    return all(map(operator.le, a, islice(a, 1, None)))


class _IndexFile(CachedFile):
    """Append-only file of fixed-size entries; its descriptor lives in the broker's
    OpenFileCache (open_files.py) and is opened again when evicted."""

    __slots__ = ()

    def __init__(self, path: Path, files: OpenFileCache) -> None:
        super().__init__(path, files, os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def read(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None

    def append(self, data: bytes) -> None:
        with self._lock:
            os.write(self._use(), data)

    def rewrite(self, data: bytes) -> None:
        with self._lock:
            fd = self._use()
            os.ftruncate(fd, 0)
            if data:
                os.write(fd, data)

    def truncate(self, size: int) -> None:
        with self._lock:
            os.ftruncate(self._use(), size)

    def rename(self, path: Path) -> None:
        with self._lock:
            try:
                os.rename(self.path, path)
            except FileNotFoundError:
                pass
            self.path = path

    def delete(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class _SparseIndex:
    """What the offset and time indexes share: their file (none in memory mode), size
    and entry count."""

    def __init__(self, path: Path | None, base_offset: int, max_entries: int, files: OpenFileCache) -> None:
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._file = _IndexFile(path, files) if path is not None else None
        self._offsets = array("i")

    @property
    def path(self) -> Path | None:
        return self._file.path if self._file is not None else None

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    def _read(self) -> bytes | None:
        return self._file.read() if self._file is not None else None

    def _append(self, data: bytes) -> None:
        if self._file is not None:
            self._file.append(data)

    def _rewrite(self, data: bytes) -> None:
        if self._file is not None:
            self._file.rewrite(data)

    def _truncate(self, size: int) -> None:
        if self._file is not None:
            self._file.truncate(size)

    def sync_fd(self) -> int:
        return self._file.sync_fd() if self._file is not None else -1

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def rename(self, path: Path) -> None:
        if self._file is not None:
            self._file.rename(path)

    def delete(self) -> None:
        if self._file is not None:
            self._file.delete()


class OffsetIndex(_SparseIndex):
    """Relative offset -> position, sparse (one entry per index.interval.bytes)."""

    def __init__(self, path: Path | None, base_offset: int, max_entries: int, files: OpenFileCache) -> None:
        super().__init__(path, base_offset, max_entries, files)
        self._positions = array("i")

    def load(self, segment_size: int) -> bool:
        """Read the file; False (and empty) if missing or not sane for this segment."""
        raw = self._read()
        self._offsets = array("i")
        self._positions = array("i")
        if raw is None:
            return self._file is None
        if len(raw) % _OFFSET_ENTRY.size:
            return False
        values = struct.unpack(f">{len(raw) // 4}i", raw)  # one C call, no Python loop
        offsets, positions = array("i", values[0::2]), array("i", values[1::2])
        if offsets and (
            offsets[0] < 0
            or positions[0] < 0
            or positions[-1] >= segment_size
            or not _increasing(offsets)
            or not _increasing(positions)
        ):
            return False
        self._offsets, self._positions = offsets, positions
        return True

    def append(self, offset: int, position: int, write: bool = True) -> None:
        rel = offset - self.base_offset
        self._offsets.append(rel)
        self._positions.append(position)
        if write:
            self._append(_OFFSET_ENTRY.pack(rel, position))

    def persist(self) -> None:
        """Write all entries (after appends with ``write=False``, as recovery does)."""
        self._rewrite(
            b"".join(_OFFSET_ENTRY.pack(o, p) for o, p in zip(self._offsets, self._positions, strict=True))
        )

    def lookup(self, offset: int) -> int:
        """Position to start scanning for ``offset`` (0 when no entry is at or below it)."""
        i = bisect.bisect_right(self._offsets, offset - self.base_offset) - 1
        return self._positions[i] if i >= 0 else 0

    def floor_position(self, position: int) -> int:
        """The largest indexed batch position <= ``position`` (0 if none)."""
        i = bisect.bisect_right(self._positions, position) - 1
        return self._positions[i] if i >= 0 else 0

    def last_entry(self) -> tuple[int, int] | None:
        """(absolute offset, position) of the last entry."""
        if not self._offsets:
            return None
        return self.base_offset + self._offsets[-1], self._positions[-1]

    def truncate_to(self, offset: int) -> None:
        """Remove entries for batches ending at or after ``offset``."""
        i = bisect.bisect_left(self._offsets, offset - self.base_offset)
        if i < len(self._offsets):
            del self._offsets[i:]
            del self._positions[i:]
            self._truncate(i * _OFFSET_ENTRY.size)

    def reset(self) -> None:
        self._offsets = array("i")
        self._positions = array("i")
        self._rewrite(b"")



class TimeIndex(_SparseIndex):
    """Max timestamp so far -> relative offset holding it."""

    def __init__(self, path: Path | None, base_offset: int, max_entries: int, files: OpenFileCache) -> None:
        super().__init__(path, base_offset, max_entries, files)
        self._timestamps = array("q")

    def load(self) -> bool:
        raw = self._read()
        self._timestamps = array("q")
        self._offsets = array("i")
        if raw is None:
            return self._file is None
        if len(raw) % _TIME_ENTRY.size:
            return False
        values = struct.unpack(">" + "qi" * (len(raw) // _TIME_ENTRY.size), raw)
        timestamps, offsets = array("q", values[0::2]), array("i", values[1::2])
        if offsets and (offsets[0] < 0 or not _increasing(timestamps) or not _non_decreasing(offsets)):
            return False
        self._timestamps, self._offsets = timestamps, offsets
        return True

    def maybe_append(self, timestamp: int, offset: int, write: bool = True) -> None:
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        rel = offset - self.base_offset
        self._timestamps.append(timestamp)
        self._offsets.append(rel)
        if write:
            self._append(_TIME_ENTRY.pack(timestamp, rel))

    def persist(self) -> None:
        self._rewrite(
            b"".join(_TIME_ENTRY.pack(t, o) for t, o in zip(self._timestamps, self._offsets, strict=True))
        )

    def lookup_before(self, timestamp: int) -> int | None:
        """Absolute offset o of the last entry whose timestamp < ``timestamp``: every
        record at or before o is older than ``timestamp``. None if there is none."""
        i = bisect.bisect_left(self._timestamps, timestamp) - 1
        return self.base_offset + self._offsets[i] if i >= 0 else None

    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the last entry."""
        if not self._offsets:
            return None
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def truncate_to(self, offset: int) -> None:
        """Remove entries pointing at ``offset`` or later."""
        rel = offset - self.base_offset
        n = len(self._offsets)
        i = n
        while i > 0 and self._offsets[i - 1] >= rel:
            i -= 1
        if i < n:
            del self._timestamps[i:]
            del self._offsets[i:]
            self._truncate(i * _TIME_ENTRY.size)

    def reset(self) -> None:
        self._timestamps = array("q")
        self._offsets = array("i")
        self._rewrite(b"")

