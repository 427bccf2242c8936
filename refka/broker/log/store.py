"""Where a segment's bytes live: a mapped file, or anonymous memory in memory mode.

Both hand out zero-copy ``memoryview`` slices that stay valid and unchanged for as
long as the caller holds them, whatever the log does next:

- Appends never move or change bytes already handed out (``os.pwrite`` past the
  data in the file; the memory store writes past its used size and, when it must
  grow, moves to a new mapping, leaving the old one to existing views).
- The file grows ahead of its data in steps of a few MiB (``ftruncate``: a sparse
  hole, no disk blocks) and is mapped read-only to that length, so a reader
  following the active segment's tail causes one new mapping per step, not one
  per append. The file is trimmed to its data when the segment is rolled, closed
  or evicted; after a crash the zeros past the data are a torn tail that recovery
  cuts, like any other. No view ever reaches past the data, so trimming is safe
  under live views.
- When a read needs bytes past the mapped length, the file is mapped again. A
  mapping that still has views cannot be closed: it is let go and unmapped by
  CPython when the last view is released.
- A mapping holds no descriptor. ``mmap.mmap(fd, ...)`` dup()s the descriptor it
  maps and keeps it for the mapping's life, so every mapping let go under live
  views (a Fetch answer in flight holds one per partition) held a descriptor of
  its own: a Fetch over a thousand partitions whose files were evicted meanwhile
  held a thousand. ``_map_file`` maps the file over an anonymous ``mmap`` object
  instead (see there): the same object, the same rules, no descriptor.
- Truncation is the dangerous case: ``ftruncate`` under a live mapping turns reads
  of the cut pages into SIGBUS. So ``truncate`` first closes every mapping of the
  file; if one is still exported, the kept prefix is copied to a new file that is
  renamed over the old one (old views keep the old inode). Memory mode always
  truncates into a fresh mapping.
- Deletion renames/unlinks; mapped views of an unlinked file remain readable.
- The descriptor is the broker's ``OpenFileCache``'s (open_files.py): evicted, the
  file is trimmed, its mapping let go and its descriptor closed; the next write,
  read or view opens and maps it again.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import sys
import weakref
from pathlib import Path
from typing import Any

from .open_files import CachedFile, OpenFileCache

# How far the file is grown ahead of its data.
GROWTH_STEP = 4 * 1024 * 1024


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_MAP_FIXED = 0x10  # Linux's (and the BSDs'); Python's mmap module does not name it before 3.13
# Mappings whose MAP_FIXED call failed: that may have unmapped their range already,
# and a munmap there could hit whatever another thread has mapped since. Never closed.
_abandoned: list[mmap.mmap] = []


def _map_file(fd: int, length: int) -> mmap.mmap:
    """The first ``length`` (> 0) bytes of the file, mapped read-only and shared, in an
    ``mmap`` object that holds no descriptor.

    Python 3.13 says so itself (``trackfd=False``). Before it: an anonymous mapping
    (no descriptor to dup) whose pages mmap(2) then replaces, at the same address,
    with the file's. It is used read-only only (views through ``toreadonly()``);
    closing it, or its last view going, unmaps it as any mapping."""
    if sys.version_info >= (3, 13):
        return mmap.mmap(fd, length, access=mmap.ACCESS_READ, trackfd=False)  # type: ignore[call-arg,unused-ignore]
    mm = mmap.mmap(-1, length, flags=mmap.MAP_PRIVATE)
    first = ctypes.c_char.from_buffer(mm)
    addr = ctypes.addressof(first)
    del first  # the export ends: the mapping can be closed again
    if _libc.mmap(addr, length, mmap.PROT_READ, mmap.MAP_SHARED | _MAP_FIXED, fd, 0) != addr:
        err = ctypes.get_errno()
        _abandoned.append(mm)
        raise OSError(err, f"mmap: {os.strerror(err)}")
    return mm


class FileStore(CachedFile):
    """A segment's bytes in its file; its descriptor lives in the broker's
    ``OpenFileCache`` (open_files.py) and comes back when used."""

    __slots__ = ("size", "_capacity", "_mm", "_view", "_mm_size", "_retired")

    def __init__(self, path: Path, files: OpenFileCache) -> None:
        # Opened again read-write, never created: a file gone from under the log is
        # an error, not an empty segment.
        super().__init__(path, files, os.O_RDWR)
        self._mm: mmap.mmap | None = None
        self._view: memoryview | None = None  # read-only, over all of _mm
        self._mm_size = 0
        # Earlier mappings that still had views when we moved on.
        self._retired: weakref.WeakSet[mmap.mmap] = weakref.WeakSet()
        with self._lock:
            fd = self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            # Until a load or recovery says otherwise, the whole file is data.
            self.size = self._capacity = os.fstat(fd).st_size
            files.opened(self)

    def write(self, data: Any) -> None:
        """Write ``data`` after the current data; in the kernel when this returns."""
        mv = memoryview(data)
        n = len(mv)
        try:
            with self._lock:
                fd = self._use()
                end = self.size + n
                if end > self._capacity:
                    os.ftruncate(fd, end + GROWTH_STEP)
                    self._capacity = end + GROWTH_STEP
                done = 0
                while done < n:
                    done += os.pwrite(fd, mv[done:], self.size + done)
                # A failed write leaves bytes past the data: never read, cut by recovery.
                self.size = end
        finally:
            mv.release()

    def trim(self) -> None:
        """Give back the space grown ahead of the data (segment rolled or closed)."""
        with self._lock:
            self._trim()

    def _trim(self) -> None:
        # An evicted file was trimmed then: capacity == size, nothing to reopen for.
        if self._capacity > self.size:
            os.ftruncate(self._use(), self.size)
            self._capacity = self.size
            self._mm_size = min(self._mm_size, self.size)

    def buffer(self) -> Any:
        """Bytes [0, size) for ``struct.unpack_from`` and slicing: a view, so that an
        eviction while the caller reads lets the mapping go instead of closing it."""
        with self._lock:
            size = self.size
            if self._mm_size < size:
                self._remap()
            elif self._view is None:
                return b""
            else:
                self._files.touch(self)
            return self._view[:size]  # type: ignore[index]

    def view(self, start: int, end: int) -> memoryview:
        with self._lock:
            if self._mm_size < end:
                self._remap()
            else:
                self._files.touch(self)
            return self._view[start:end]  # type: ignore[index]

    def _remap(self) -> None:
        mm = _map_file(self._use(), self._capacity)
        self._let_go()
        self._mm, self._view = mm, memoryview(mm).toreadonly()
        self._mm_size = self._capacity

    def _let_go(self) -> None:
        """Close the current mapping, or keep it among the retired if views of it live."""
        mm, view = self._mm, self._view
        self._mm = self._view = None
        self._mm_size = 0
        if view is not None:
            view.release()  # ours: the slices handed out keep the mapping alive
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                self._retired.add(mm)

    def release_mappings(self) -> bool:
        """Close every mapping; False if some are still exported (views alive)."""
        with self._lock:
            return self._unmap()

    def _unmap(self) -> bool:
        self._let_go()
        if self._retired:  # listing an empty WeakSet costs a few µs, for every store at start-up
            for mm in list(self._retired):
                try:
                    mm.close()
                    self._retired.discard(mm)
                except BufferError:
                    pass
        return not self._retired

    def truncate(self, size: int) -> None:
        with self._lock:
            if size >= self.size:
                return
            if self._unmap():
                os.ftruncate(self._use(), size)
            else:
                self._copy_prefix(size)
            self.size = self._capacity = size

    def _copy_prefix(self, size: int) -> None:
        src = self._use()
        tmp = self.path.with_name(self.path.name + ".truncating")
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _copy_range(src, out, size)
        finally:
            os.close(out)
        os.replace(tmp, self.path)
        self._fd = os.open(self.path, os.O_RDWR)
        os.close(src)
        self._retired = weakref.WeakSet()  # they map the old inode: harmless now

    def _release(self) -> None:
        """Evicted or closed: trimmed, mapping let go, descriptor closed."""
        try:
            if self._fd >= 0:
                self._trim()
        finally:
            self._unmap()
            super()._release()

    def rename(self, path: Path) -> None:
        with self._lock:
            os.rename(self.path, path)
            self.path = path

    def delete(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def _copy_range(src: int, dst: int, size: int) -> None:
    copied = 0
    try:
        while copied < size:
            n = os.copy_file_range(src, dst, size - copied, copied, copied)
            if n == 0:
                break
            copied += n
    except OSError:
        pass  # not supported here (filesystem, kernel): copy by hand below
    while copied < size:
        chunk = os.pread(src, min(size - copied, 1 << 20), copied)
        if not chunk:
            raise OSError(f"short read copying a segment prefix at {copied}/{size}")
        copied += os.pwrite(dst, chunk, copied)


class MemoryStore:
    """A segment's bytes in anonymous memory.

    The whole segment's capacity (segment.bytes plus one batch) is reserved up
    front as an anonymous mapping with MAP_NORESERVE: pages are only allocated
    when written, and the data never moves as the segment grows (a growing
    bytearray re-allocated and copied the segment at every doubling, which
    dominated memory-mode produce). Past the capacity (an oversize batch) it
    falls back to a copy into a larger mapping.

    Pages are allocated ahead of the writes, POPULATE_AHEAD bytes at a time, with
    one madvise(MADV_POPULATE_WRITE) (Linux 5.14+): left to the writes, every
    fresh 4 KiB page costs a page fault, and memory mode produced at 0.42-0.66x
    disk mode's rate, where a file write(2) fills the page cache in the kernel
    without them (a 16 KiB-write loop into a mapping: 1.2 GB/s with the faults,
    2.6 GB/s populated 1 MiB ahead, 1.6-2.3 GB/s into a file, one run each on
    this machine, a Firecracker VM where a fault is dear). Transparent huge
    pages (MADV_HUGEPAGE) were slower still here (0.19 GB/s: each 2 MiB page
    zeroed, and compaction). Where the kernel does not know the advice, the
    writes fault as before. In `python -m lab.bench --targets
    refka-disk,refka-memory --repeat 1` memory mode produced 1 KiB records at
    0.22x disk mode's rate before, 0.95x and 0.79x after (two runs, the machine
    shared: load 3).
    """

    __slots__ = ("size", "_buf", "_populated")

    path = None

    def __init__(self, capacity: int = 1 << 20) -> None:
        self.size = 0
        self._buf = _anonymous(max(capacity, 4096))
        self._populated = 0  # bytes from the start whose pages are allocated (page-aligned)

    def write(self, data: Any) -> None:
        n = len(data)
        need = self.size + n
        if need > len(self._buf):
            grown = _anonymous(max(need, 2 * len(self._buf)))
            grown[: self.size] = self._buf[: self.size]
            self._buf = grown
            self._populated = self.size - self.size % mmap.PAGESIZE  # the copy allocated those
        if need > self._populated:
            self._populated = _populate(self._buf, self._populated, need)
        # Same-length slice assignment: allowed while views of the mapping exist.
        self._buf[self.size : need] = data
        self.size = need

    def buffer(self) -> Any:
        return self._buf

    def view(self, start: int, end: int) -> memoryview:
        return memoryview(self._buf)[start:end]

    def release_mappings(self) -> bool:
        return True

    def trim(self) -> None:
        pass

    def truncate(self, size: int) -> None:
        if size >= self.size:
            return
        # A fresh mapping: views handed out earlier keep the old bytes.
        fresh = _anonymous(len(self._buf))
        fresh[:size] = self._buf[:size]
        self._buf = fresh
        self.size = size
        self._populated = size - size % mmap.PAGESIZE

    def sync_fd(self) -> int:
        return -1

    def close(self) -> None:
        pass

    def rename(self, path: Path) -> None:
        pass

    def delete(self) -> None:
        self._buf = _anonymous(4096)
        self.size = 0
        self._populated = 0


POPULATE_AHEAD = 1 << 20
_MADV_POPULATE_WRITE = 23  # Linux 5.14's; Python's mmap module names it from 3.13 on
_populate_works = sys.platform == "linux"


def _populate(buf: mmap.mmap, start: int, need: int) -> int:
    """Allocates ``buf``'s pages from ``start`` (page-aligned) to past ``need``: at least
    POPULATE_AHEAD bytes, at most the mapping. The new populated end; ``need`` rounded up
    to a page where the kernel refuses the advice (the writes then fault the pages in)."""
    global _populate_works
    end = min(len(buf), max(need, start + POPULATE_AHEAD))
    end += -end % mmap.PAGESIZE
    if _populate_works:
        try:
            buf.madvise(_MADV_POPULATE_WRITE, start, min(end, len(buf)) - start)
        except OSError as e:
            if e.errno in (errno.EINVAL, errno.ENOSYS):  # an older kernel: not again
                _populate_works = False
            return need + -need % mmap.PAGESIZE
    return end


def _anonymous(size: int) -> mmap.mmap:
    flags = mmap.MAP_PRIVATE | getattr(mmap, "MAP_ANONYMOUS", 0x20) | getattr(mmap, "MAP_NORESERVE", 0)
    return mmap.mmap(-1, size, flags=flags)


Store = FileStore | MemoryStore
