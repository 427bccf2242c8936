"""Leader-epoch cache: which leader epoch wrote from which offset (KIP-101/279/320).

Entries are (epoch, start_offset), both strictly increasing. Persisted to
``leader-epoch-checkpoint`` in Kafka's format (``0``, count, ``epoch startOffset``
lines) on every change, rewritten in place (one pwrite, then a truncation when it
shrank), not by a temporary file renamed over it as Kafka does: a create and a
rename cost ~1 ms each here, for every partition of every LeaderAndIsr, on the
event loop. Its descriptor is the broker's OpenFileCache's (open_files.py): kept
while the partition is busy, closed when evicted, opened again by the next
write; ``sync`` (flush and close) fsyncs it through the open descriptor or the
file opened again, which flushes what was written before an eviction too. A process killed between the write and
the truncation leaves a file whose count line does not match its lines: ``load``
refuses it and the log rebuilds the cache from its batch headers (an epoch that
wrote no batch is all that can be lost, and it holds no records). Semantics follow Kafka's ``LeaderEpochFileCache``:

- ``assign(epoch, start)``: no-op if ``epoch`` is the latest and ``start`` is not
  smaller; otherwise entries with epoch >= ``epoch`` or start >= ``start`` are
  dropped first (they were written by a leader the log has since diverged from).
- ``end_offset_for(epoch, leo)``: OffsetsForLeaderEpoch. The latest epoch ends at
  the log end offset; an older epoch ends where the next higher epoch starts;
  an epoch between two known ones answers the lower known epoch and the start of
  the higher one; an epoch above every known one, or UNDEFINED_EPOCH, answers
  (-1, -1).
- ``truncate_from_end(offset)`` after a log truncation, ``truncate_from_start``
  when the log start offset moves (the first kept entry is moved to start there).
"""

from __future__ import annotations

import bisect
import os
from pathlib import Path

from . import checkpoint
from .open_files import CachedFile, OpenFileCache

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

FILE_NAME = "leader-epoch-checkpoint"


class _CheckpointFile(CachedFile):
    """The checkpoint, rewritten in place through a descriptor of the OpenFileCache."""

    __slots__ = ()

    def __init__(self, path: Path, files: OpenFileCache) -> None:
        super().__init__(path, files, os.O_RDWR | os.O_CREAT)

    def write(self, data: bytes, truncate: bool) -> None:
        with self._lock:
            fd = self._use()
            os.pwrite(fd, data, 0)
            if truncate:
                os.ftruncate(fd, len(data))


class LeaderEpochCache:
    def __init__(
        self,
        path: Path | None,
        entries: list[tuple[int, int]] | None = None,
        *,
        files: OpenFileCache | None = None,
    ) -> None:
        """``files``: the cache the checkpoint's descriptor lives in (a log's files
        share one); without it the file gets a cache of its own."""
        self.path = path
        self._epochs: list[int] = [e for e, _ in entries or ()]
        self._starts: list[int] = [s for _, s in entries or ()]
        self._file = None if path is None else _CheckpointFile(
            path, files if files is not None else OpenFileCache()
        )
        self._written = -1  # bytes in the file after our last write (-1: not written by us)

    @classmethod
    def load(cls, path: Path | None, files: OpenFileCache | None = None) -> tuple[LeaderEpochCache, bool]:
        """The cache from ``path``, and whether the file was there and sane (if not,
        the caller rebuilds it from the log's batch headers)."""
        if path is None:
            return cls(None), True
        try:
            raw = checkpoint.read(path, 2)
        except checkpoint.CheckpointError:
            return cls(path, files=files), False
        if raw is None:
            return cls(path, files=files), False
        entries = [(int(e), int(s)) for e, s in raw]
        for (e1, s1), (e2, s2) in zip(entries, entries[1:], strict=False):
            if e2 <= e1 or s2 < s1:
                return cls(path, files=files), False
        if any(e < 0 or s < 0 for e, s in entries):
            return cls(path, files=files), False
        return cls(path, entries, files=files), True

    # -- queries ----------------------------------------------------------------------

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch of the leader that wrote ``offset`` (-1 if unknown)."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def start_offset_of(self, epoch: int) -> int | None:
        i = bisect.bisect_left(self._epochs, epoch)
        if i < len(self._epochs) and self._epochs[i] == epoch:
            return self._starts[i]
        return None

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._epochs[-1]:
            return epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    # -- changes ----------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed."""
        if epoch < 0 or start_offset < 0:
            return False
        if self._epochs and self._epochs[-1] == epoch and start_offset >= self._starts[-1]:
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        self._persist()
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after ``end_offset`` (log truncated there)."""
        changed = False
        while self._starts and self._starts[-1] >= end_offset:
            self._epochs.pop()
            self._starts.pop()
            changed = True
        if changed:
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop entries wholly before it and
        move the entry covering it to start there."""
        i = bisect.bisect_right(self._starts, start_offset) - 1
        if i < 0 or (i == 0 and self._starts[0] == start_offset):
            return
        del self._epochs[:i]
        del self._starts[:i]
        self._starts[0] = start_offset
        self._persist()

    def clear(self) -> None:
        if self._epochs:
            self._epochs.clear()
            self._starts.clear()
            self._persist()

    def replace(self, entries: list[tuple[int, int]]) -> None:
        self._epochs = [e for e, _ in entries]
        self._starts = [s for _, s in entries]
        self._persist()

    def sync(self) -> None:
        """fsync the checkpoint (from the flush pass or close, outside the log's lock)."""
        fd = self._file.sync_fd() if self._file is not None else -1
        if fd >= 0:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def _persist(self) -> None:
        if self._file is None:
            return
        data = checkpoint.encode(self.entries())
        self._file.write(data, truncate=len(data) < self._written or self._written < 0)
        self._written = len(data)
