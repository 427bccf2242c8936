"""Opening a partition log from its directory at start-up (Kafka's LogLoader).

``load`` turns what ``<log.dir>/<topic>-<partition>/`` holds into a ``LoadedLog``
(segments, log start and end offsets, leader-epoch cache, producer state), from
which ``PartitionLog.open`` builds the running log (log.py). In order:

1. Leftovers of work cut short. A log cleaner's swap (cleaner.py writes
   ``<base>.log.cleaned`` and friends, fsyncs them and commits by renaming them
   ``.swap``, the ``.log`` last): ``.cleaned`` files go; each ``<base>.log.swap``
   is finished (the segments whose base offset lies within its offsets go, the
   ``.swap`` files take their final names); an index ``.swap`` whose ``.log``
   never got there goes. Then the files of an unfinished deletion
   (``.deleted``), truncation (``.truncating``) or checkpoint write (``.tmp``).
2. Segments, in base-offset order. Without a clean-shutdown marker the last
   segment is re-read with CRC checks and cut at the first torn or invalid
   batch; every other segment has its indexes checked and the batches after
   its last index entry parsed to the end of the file, and is recovered the
   same way if that fails (segments after one that lost bytes are dropped: a
   log has no holes). A missing or bad index is rebuilt. The active segment's
   file is grown ahead of its data (see ``store.py``); the zeros past the data
   after a crash are cut like any torn tail.
3. The log start offset: its checkpoint, at least the first segment's base. A
   checkpoint above the data (the data was lost, the checkpoint not): the log
   restarts empty there.
4. The leader-epoch cache: its checkpoint, plus the epoch changes the recovery
   saw; rebuilt from the batch headers when the checkpoint does not parse.
5. The producer state at the log end offset (``rebuild_producer_state``, which
   a truncation calls again).
6. The clean-shutdown marker goes: a crash from now on is an unclean one.

Threads: called by ``PartitionLog.open`` before anyone else sees the log.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import structlog

from refka.protocol.records import iter_valid_batches

from . import checkpoint
from .config import LogConfig
from .epoch_cache import FILE_NAME as EPOCH_FILE_NAME
from .epoch_cache import LeaderEpochCache
from .open_files import OpenFileCache
from .producer_state import ProducerStateManager
from .segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    Reaper,
    file_name,
    parse_file_name,
)

# Written by PartitionLog.close(), removed here.
CLEAN_SHUTDOWN_FILE = ".clean_shutdown"
# Written by the log when DeleteRecords or a full truncation moves its start (log.py).
LOG_START_OFFSET_FILE = "log-start-offset"

_log = structlog.get_logger("refka.log")


class LoadedLog(NamedTuple):
    segments: list[LogSegment]  # at least one; the last is the active segment
    log_start_offset: int
    log_end_offset: int
    epochs: LeaderEpochCache
    producers: ProducerStateManager


def load(directory: Path, config: LogConfig, now_ms: int, reaper: Reaper, files: OpenFileCache) -> LoadedLog:
    """The log in ``directory`` (created if missing), recovered as the module
    docstring says, its files' descriptors in ``files``. ``reaper`` takes the
    segments a restart below the log start offset removes."""
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / CLEAN_SHUTDOWN_FILE
    clean = marker.exists()
    _complete_interrupted_swaps(directory)
    segments, transitions = _load_segments(directory, config, now_ms, clean, files)

    start = read_log_start_offset(directory)
    if not segments:
        segments.append(LogSegment.create(directory, start, config, now_ms, files))
    log_end_offset = segments[-1].next_offset
    log_start_offset = max(start, segments[0].base_offset)

    epochs, ok = LeaderEpochCache.load(directory / EPOCH_FILE_NAME, files)
    if not ok and log_end_offset > segments[0].base_offset:
        epochs.replace(_epochs_from_batches(segments))
    else:
        for epoch, offset in transitions:
            epochs.assign(epoch, offset)
    producers = ProducerStateManager(directory)

    if log_end_offset < log_start_offset:
        # The log start offset checkpoint outlived the data: restart empty there.
        for seg in reversed(segments):
            seg.rename_for_deletion()
            reaper(seg, config.file_delete_delay_ms)
        segments = [LogSegment.create(directory, log_start_offset, config, now_ms, files)]
        log_end_offset = log_start_offset
        epochs.clear()
        producers.delete_snapshots(above=-1)
    epochs.truncate_from_end(log_end_offset)
    epochs.truncate_from_start(log_start_offset)
    rebuild_producer_state(producers, segments, log_end_offset, now_ms, directory)
    marker.unlink(missing_ok=True)
    return LoadedLog(segments, log_start_offset, log_end_offset, epochs, producers)


def _load_segments(
    directory: Path, config: LogConfig, now_ms: int, clean: bool, files: OpenFileCache
) -> tuple[list[LogSegment], list[tuple[int, int]]]:
    """The segments found (steps 1, end, and 2), and the (epoch, start offset)
    changes seen in the segments recovered."""
    bases: list[int] = []
    for entry in os.scandir(directory):
        name = entry.name
        if name.endswith((DELETED_SUFFIX, ".truncating", ".tmp")):
            os.unlink(entry.path)
            continue
        base = parse_file_name(name)
        if base is not None:
            bases.append(base)
    bases.sort()

    segments: list[LogSegment] = []
    transitions: list[tuple[int, int]] = []
    for i, base in enumerate(bases):
        is_last = i == len(bases) - 1
        seg, seen, cut = LogSegment.open(directory, base, config, now_ms, not clean and is_last, files)
        segments.append(seg)
        if seen is not None:
            transitions.extend(seen)
            _log.info("segment_recovered", dir=str(directory), base_offset=base, truncated_bytes=cut)
        if cut and not is_last:
            for later in bases[i + 1 :]:
                for suffix in SEGMENT_SUFFIXES:
                    (directory / file_name(later, suffix)).unlink(missing_ok=True)
            _log.warning("log_segments_dropped_after_torn_segment", dir=str(directory), dropped=bases[i + 1 :])
            break
    return segments, transitions


def read_log_start_offset(directory: Path) -> int:
    """The checkpointed log start offset; 0 when there is none or it does not parse."""
    try:
        entries = checkpoint.read(directory / LOG_START_OFFSET_FILE, 1)
    except checkpoint.CheckpointError:
        _log.warning("log_start_offset_checkpoint_unreadable", dir=str(directory))
        return 0
    return entries[0][0] if entries else 0


def _epochs_from_batches(segments: Sequence[LogSegment]) -> list[tuple[int, int]]:
    cache = LeaderEpochCache(None)
    for seg in segments:
        for h in seg.iter_headers():
            if h.partition_leader_epoch >= 0:
                cache.assign(h.partition_leader_epoch, h.base_offset)
    return cache.entries()


def rebuild_producer_state(
    producers: ProducerStateManager,
    segments: Sequence[LogSegment],
    log_end_offset: int,
    now_ms: int,
    directory: Path | None,
) -> None:
    """The producer state at ``log_end_offset``: the newest snapshot at or below it,
    then the batch headers after the snapshot (no record decoding)."""
    start = producers.load_snapshot(log_end_offset, now_ms)
    start = max(start, segments[0].base_offset)
    replayed = 0
    for seg in segments:
        if seg.next_offset <= start or seg.size == 0:
            continue
        pos = seg.find_position(start) if seg.base_offset < start else 0
        replayed += producers.update_from_log(seg.iter_headers(pos), start)
    if replayed or len(producers):
        _log.info("producer_state_loaded", dir=str(directory), producers=len(producers),
                  from_offset=start, batches_replayed=replayed)


# -- a log cleaner's swap cut short (step 1) ---------------------------------------------


def _base_of(name: str, suffix: str) -> int | None:
    stem = name[: -len(suffix)] if name.endswith(suffix) else ""
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def _complete_interrupted_swaps(directory: Path) -> None:
    """Removes the ``.cleaned`` files of a cleaning that did not commit and finishes
    the swaps that did (``<base>.log.swap``: the segments whose base offset is within
    its offsets go, the ``.swap`` files take their final names; missing indexes are
    rebuilt when the segments load)."""
    names = os.listdir(directory)
    for name in names:
        if name.endswith(CLEANED_SUFFIX):
            os.unlink(directory / name)
    swaps = sorted(n for n in names if n.endswith(LOG_SUFFIX + SWAP_SUFFIX))
    for swap in swaps:
        base = _base_of(swap[: -len(SWAP_SUFFIX)], LOG_SUFFIX)
        if base is None:
            continue
        next_offset = _next_offset_of(directory / swap, base)
        for name in os.listdir(directory):
            for suffix in SEGMENT_SUFFIXES:
                b = _base_of(name, suffix)
                if b is not None and base <= b < max(next_offset, base + 1):
                    os.unlink(directory / name)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX):
            src = directory / (file_name(base, suffix) + SWAP_SUFFIX)
            if src.exists():
                os.replace(src, directory / file_name(base, suffix))
        _log.info("cleaner_swap_completed", dir=str(directory), base_offset=base, next_offset=next_offset)
    for name in os.listdir(directory):
        if name.endswith(SWAP_SUFFIX):  # index swaps of a segment whose .log never got there
            os.unlink(directory / name)


def _next_offset_of(path: Path, base: int) -> int:
    next_offset = base
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return base
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            mv = memoryview(mm)
            try:
                for h in iter_valid_batches(mv):
                    next_offset = h.base_offset + h.last_offset_delta + 1
            finally:
                mv.release()
    return next_offset
