"""The descriptors of a broker's log files: opened when a file is used, closed least
recently used first once more than ``log.open.files.max`` are open.

Kafka keeps every segment's files open while the broker runs and asks for a
descriptor limit of 100,000 or more; it has no setting that bounds them (its
LazyIndex only defers mapping an index until first use). refka kept four
descriptors per partition (the active segment's file and its mapping, both
indexes once appended to, the leader-epoch checkpoint), so a broker's partitions
were bounded by ``ulimit -n``. Here a partition at rest holds none, and a
mapping never holds one (store.py).

Rules:

- A ``CachedFile`` (a segment's ``FileStore``, an index file, the leader-epoch
  checkpoint) opens its one descriptor when an operation needs it and tells the
  cache (``opened``).
- Past ``max_open`` descriptors the least recently used files are released:
  a segment's file is trimmed to its data, its mapping let go (unmapped at
  once, or when the last view handed out is released, store.py) and its
  descriptor closed; an index file or a checkpoint closes its descriptor. Its
  next use opens (and maps) it again.
- A hit makes no syscall: ``touch`` moves the file to the end of an
  OrderedDict, O(1).
- Threads. Every operation of a file holds the file's own lock. Eviction holds
  the cache's lock and only *tries* a victim's lock: a file in use, by another
  thread or further up the evicting thread's own stack, is passed over and
  counts as recently used. No thread waits on another to evict, and no
  descriptor is closed (its number reused) under an operation using it.
  ``touch`` takes no lock: each of its OrderedDict operations is one C call,
  atomic under the GIL, and a file an evictor holds at that moment is simply
  not found (the evictor puts it back at the end).
- Durability. Eviction never fsyncs: it runs inline in whatever opened a file,
  the event loop included, where an fsync would stall every client. What a
  flush owes is still done, because fsync works on the file, not on the
  descriptor that wrote: the flush paths fsync what ``sync_fd`` gives them (a
  dup of the open descriptor, or the file opened again by its current name
  when it was evicted), and that flushes pages written through a descriptor
  since closed. A writeback error raised while no descriptor was open is
  reported to the next fsync through one opened later (Linux >= 4.16 reports
  an error nobody has seen to a later opener).
- The bound is on the descriptors the logs keep. Transient ones (a checkpoint
  or snapshot written through a temporary file, a flush's descriptor, the
  files of operations running while the bound is reached) come on top and go
  away by themselves.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

import structlog

_log = structlog.get_logger("refka.log")

# log.open.files.max's default: see config.py.
DEFAULT_MAX_OPEN_FILES = 4096


class OpenFileCache:
    """The LRU of the open log files of one LogManager (see the module docstring)."""

    def __init__(self, max_open: int = DEFAULT_MAX_OPEN_FILES) -> None:
        if max_open < 1:
            raise ValueError(f"log.open.files.max must be at least 1, not {max_open}")
        self.max_open = max_open
        self._lock = threading.Lock()
        # the open files (one descriptor each), least recently used first
        self._lru: OrderedDict[CachedFile, None] = OrderedDict()

    @property
    def open_descriptors(self) -> int:
        """Descriptors the files in the cache hold (transient ones not counted)."""
        return len(self._lru)

    def __contains__(self, f: object) -> bool:
        return f in self._lru

    def touch(self, f: CachedFile) -> None:
        """``f`` was used (a hit: no lock, no syscall)."""
        try:
            self._lru.move_to_end(f)
        except KeyError:
            pass  # an evictor is looking at it and puts it back

    def opened(self, f: CachedFile) -> None:
        """``f`` (its lock held by the caller) opened its descriptor; files used less
        recently are released while more than ``max_open`` are open."""
        with self._lock:
            self._lru[f] = None
            over = len(self._lru) > self.max_open
        if over:
            self._evict()

    def forget(self, f: CachedFile) -> None:
        """``f`` (its lock held by the caller) closed its descriptor itself."""
        with self._lock:
            self._lru.pop(f, None)

    def _evict(self) -> None:
        victims: list[CachedFile] = []
        with self._lock:
            for _ in range(len(self._lru)):
                if len(self._lru) <= self.max_open:
                    break
                f, _ = self._lru.popitem(last=False)
                if f._lock.acquire(blocking=False):
                    victims.append(f)
                else:
                    self._lru[f] = None  # in use right now: it stays, as recently used
        for f in victims:
            try:
                f._release()
            except OSError as exc:
                # Its descriptor is closed all the same (_release's contract); what
                # failed was the trim, which recovery redoes after a crash.
                _log.warning("log_file_release_failed", path=str(f.path), error=str(exc))
            finally:
                f._lock.release()


class CachedFile:
    """One log file whose descriptor lives in an ``OpenFileCache``.

    Subclasses do their work under ``self._lock``, get the descriptor from
    ``_use()`` (opened again if it was evicted) and release what they hold in
    ``_release()``."""

    __slots__ = ("path", "_files", "_flags", "_lock", "_fd")

    def __init__(self, path: Path, files: OpenFileCache, flags: int) -> None:
        self.path = path
        self._files = files
        self._flags = flags  # for os.open when (re)opened
        self._lock = threading.Lock()
        self._fd = -1

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    def _use(self) -> int:
        """The descriptor, opened if it is not (the caller holds the lock)."""
        fd = self._fd
        if fd >= 0:
            self._files.touch(self)
            return fd
        fd = self._fd = os.open(self.path, self._flags, 0o644)
        self._files.opened(self)
        return fd

    def _release(self) -> None:
        """Close the descriptor (the caller holds the lock; the cache's count is the
        caller's business). Subclasses release what depends on it first, and close
        the descriptor even when that fails."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def sync_fd(self) -> int:
        """A descriptor to fsync the file with, outside any lock (the caller closes
        it): a dup of the open one, or the file opened again if it was evicted
        (not cached: the flush is done with it at once); -1 if the file is gone."""
        with self._lock:
            if self._fd >= 0:
                return os.dup(self._fd)
            try:
                return os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return -1

    def close(self) -> None:
        with self._lock:
            try:
                self._release()
            finally:
                self._files.forget(self)
