"""A partition's producer state: what the idempotent producer's checks need
(Kafka's ProducerStateManager, without transactions).

Per producer id the partition keeps the producer epoch and the metadata of
the last five batches that producer appended (first and last sequence, last
offset, offset delta, max timestamp), newest last.

Rules for a batch a client produces (the leader's ``PartitionLog.append``),
checked in this order; a batch with producer id -1 is not idempotent and skips
them all:

1. Duplicate. Same producer id and epoch, and the sequence range of one of the
   five batches kept: nothing is appended, the answer is that batch's offsets.
2. Fenced. An epoch below the producer's current one: INVALID_PRODUCER_EPOCH
   (47), which Produce answers in every version (KIP-588's PRODUCER_FENCED
   belongs to the transaction APIs).
3. New epoch. An epoch above the current one (the producer bumped it, KIP-360)
   must start at sequence 0: OUT_OF_ORDER_SEQUENCE_NUMBER (45) otherwise.
4. Same epoch. The first sequence must follow the last one: last + 1, or 0
   after Int32 max (sequences wrap). Otherwise:
   - the whole batch is older than the five batches kept (a late retry of a
     batch that was written): DUPLICATE_SEQUENCE_NUMBER (46). Clients complete
     such a batch as written, without an offset. This is Kafka 0.11's answer;
     Kafka 1.0+ answers 45 here, which makes librdkafka bump its epoch and send
     the batch again, that is, write it twice.
   - anything else: OUT_OF_ORDER_SEQUENCE_NUMBER (45).
5. Unknown producer: no state for this producer id (never seen here, expired,
   or lost with the records that carried it): any sequence is accepted and
   starts the producer's state. Kafka 2.5+ does this (KIP-360); before, it
   answered UNKNOWN_PRODUCER_ID (59), which refka never answers.

Several batches of one producer in one request are checked against the state
the earlier ones would leave. Appends that do not come from a client (a
follower's, the scan at open) update the state without checks.

State is not dropped when the log start offset moves (retention,
DeleteRecords): only after ``producer.id.expiration.ms`` (Kafka's default, one
day; not configurable yet) without a batch, measured as Kafka does from the
batch's max timestamp, at the retention pass.

Snapshots. ``<offset>.snapshot`` in the partition directory holds the state of
every producer for the offsets below ``offset``; one is written at each segment
roll (at the new segment's base offset) and at a clean close (at the log end
offset), in Kafka's format (version 1)::

    version int16 = 1, crc uint32 (CRC32C of everything after it),
    count int32, then per entry:
    producer_id int64, epoch int16, last_sequence int32, last_offset int64,
    offset_delta int32, timestamp int64, coordinator_epoch int32 (-1),
    current_txn_first_offset int64 (-1)

Kafka writes one entry per producer (its newest batch); refka writes one per
kept batch, oldest first, so a restart keeps all five for duplicate
detection. Kafka's loader keeps the last entry of a producer id, which is its
newest batch, so the files stay readable by Kafka's tools. At open the state
is the newest snapshot at or below the log end offset (a bad one is deleted
and the next older one tried), then the batch headers after it (records are
not decoded); with no snapshot, the headers of the whole log. Snapshots above
the log end offset are deleted at open and at truncation; snapshots below the
first segment go with the segments; a clean close keeps only the snapshots at
segment base offsets and its own (so restarts do not pile them up). Like checkpoints they are written to a
``.tmp`` file and renamed without fsync; the flush pass and close fsync them.

Not thread-safe: the log calls every method under its lock.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import structlog

from refka.protocol.records import BatchHeader

from .checkpoint import write_atomically
from .errors import LogError

_log = structlog.get_logger("refka.log")

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1
BATCHES_RETAINED = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # Kafka's producer.id.expiration.ms default

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_FROM = 6  # the CRC covers the bytes after version and crc


# -- errors ---------------------------------------------------------------------------


class ProducerStateError(LogError):
    """A client batch the producer state refuses; ``error_code`` is the answer."""


class OutOfOrderSequenceError(ProducerStateError):
    error_code = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceError(ProducerStateError):
    error_code = 46  # DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(ProducerStateError):
    error_code = 47  # INVALID_PRODUCER_EPOCH


# -- sequences ------------------------------------------------------------------------


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` wrapping past Int32 max to 0 (Kafka's DefaultRecordBatch)."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement`` wrapping below 0 to Int32 max."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def last_sequence(h: BatchHeader) -> int:
    return increment_sequence(h.base_sequence, h.last_offset_delta)


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


# -- state ----------------------------------------------------------------------------


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int  # the batch's max timestamp (the append time under LogAppendTime)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerStateEntry:
    __slots__ = ("producer_id", "epoch", "batches", "last_timestamp")

    def __init__(self, producer_id: int, epoch: int = NO_PRODUCER_EPOCH) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=BATCHES_RETAINED)
        self.last_timestamp = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def add_batch(self, epoch: int, meta: BatchMetadata) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()
        self.batches.append(meta)
        self.last_timestamp = meta.timestamp

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def is_older_than_kept(self, first_seq: int, last_seq: int) -> bool:
        """The range ends before the oldest batch kept, with no wrap-around in
        between (where "older" cannot be told from the numbers)."""
        if not self.batches:
            return False
        oldest = self.batches[0].first_seq
        return first_seq <= last_seq < oldest <= self.last_seq

    def __repr__(self) -> str:
        return f"ProducerStateEntry({self.producer_id}, epoch={self.epoch}, batches={list(self.batches)})"


class ProducerStateManager:
    """See the module docstring."""

    def __init__(self, directory: Path | None, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> None:
        self.directory = directory
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self._unsynced: list[Path] = []

    def __len__(self) -> int:
        return len(self.producers)

    def get(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def clear(self) -> None:
        self.producers.clear()

    # -- client appends -------------------------------------------------------------

    def check(self, headers: Sequence[BatchHeader]) -> BatchMetadata | None:
        """Rules 1-5 for a client's batches, before they are appended. Returns the
        kept batch a batch duplicates (then nothing of the request is appended),
        None if all may be appended; raises a ProducerStateError otherwise."""
        pending: dict[int, tuple[int, int]] | None = None  # producer id -> (epoch, last seq)
        for h in headers:
            pid = h.producer_id
            if pid < 0:
                continue
            epoch, first = h.producer_epoch, h.base_sequence
            last = last_sequence(h)
            entry = self.producers.get(pid)
            if entry is not None:
                dup = entry.find_duplicate(epoch, first, last)
                if dup is not None:
                    return dup
            if pending is not None and pid in pending:
                cur_epoch, cur_last = pending[pid]
                known = True
            elif entry is not None:
                cur_epoch, cur_last, known = entry.epoch, entry.last_seq, True
            else:
                cur_epoch, cur_last, known = NO_PRODUCER_EPOCH, NO_SEQUENCE, False
            if epoch < cur_epoch:
                raise InvalidProducerEpochError(
                    f"producer {pid} has epoch {cur_epoch}; a batch with epoch {epoch} is fenced"
                )
            if epoch != cur_epoch:
                if first != 0 and cur_epoch != NO_PRODUCER_EPOCH:
                    raise OutOfOrderSequenceError(
                        f"producer {pid}: the first batch of epoch {epoch} has sequence {first}, not 0 "
                        f"(current epoch {cur_epoch})"
                    )
            elif known and not _in_sequence(cur_last, first):
                first_of_request = pending is None or pid not in pending
                if first_of_request and entry is not None and entry.is_older_than_kept(first, last):
                    raise DuplicateSequenceError(
                        f"producer {pid} epoch {epoch}: sequences {first}-{last} were written before the "
                        f"{len(entry.batches)} batches kept (last sequence {cur_last})"
                    )
                raise OutOfOrderSequenceError(
                    f"producer {pid} epoch {epoch}: sequence {first} does not follow {cur_last}"
                )
            if pending is None:
                pending = {}
            pending[pid] = (epoch, last)
        return None

    # -- updates --------------------------------------------------------------------

    def update(self, h: BatchHeader, base_offset: int, timestamp: int) -> None:
        """Record an appended batch of producer ``h.producer_id`` (>= 0) whose offsets
        start at ``base_offset``. Control batches (transaction markers) are not
        tracked: refka serves no transactions."""
        if h.is_control:
            return
        pid = h.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerStateEntry(pid)
        delta = h.last_offset_delta
        entry.add_batch(
            h.producer_epoch,
            BatchMetadata(h.base_sequence, last_sequence(h), base_offset + delta, delta, timestamp),
        )

    def update_from_log(self, headers: Iterable[BatchHeader], from_offset: int) -> int:
        """Replay batches already in the log (offsets as stored) that end at or after
        ``from_offset``; returns how many batches of producers were replayed."""
        n = 0
        for h in headers:
            if h.producer_id >= 0 and h.base_offset + h.last_offset_delta >= from_offset:
                self.update(h, h.base_offset, h.max_timestamp)
                n += 1
        return n

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers with no batch for ``expiration_ms``; returns how many."""
        limit = now_ms - self.expiration_ms
        gone = [pid for pid, e in self.producers.items() if e.last_timestamp <= limit]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    # -- snapshots ------------------------------------------------------------------

    def snapshot_path(self, offset: int) -> Path:
        assert self.directory is not None
        return self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files in the directory, ascending."""
        if self.directory is None:
            return []
        out = []
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return []
        for e in entries:
            stem, _, suffix = e.name.partition(".")
            if "." + suffix == SNAPSHOT_SUFFIX and len(stem) == 20 and stem.isdigit():
                out.append(int(stem))
        out.sort()
        return out

    def take_snapshot(self, offset: int, *, fsync: bool = False) -> Path | None:
        """Write ``<offset>.snapshot`` (the state must cover exactly the offsets below
        ``offset``). No-op in memory."""
        if self.directory is None:
            return None
        entries = []
        for e in self.producers.values():
            for b in e.batches:
                entries.append(_SNAPSHOT_ENTRY.pack(
                    e.producer_id, e.epoch, b.last_seq, b.last_offset, b.offset_delta, b.timestamp, -1, -1
                ))
        body = struct.pack(">i", len(entries)) + b"".join(entries)
        from crc32c import crc32c  # not at start-up: records.py's crc32c says why

        data = struct.pack(">hI", SNAPSHOT_VERSION, crc32c(body)) + body
        path = self.snapshot_path(offset)
        write_atomically(path, data, fsync)
        if not fsync:
            self._unsynced.append(path)
        return path

    def take_unsynced(self) -> list[Path]:
        """Snapshots written since the last call without fsync (for the flush pass)."""
        paths, self._unsynced = self._unsynced, []
        return paths

    @staticmethod
    def sync(paths: Iterable[Path]) -> None:
        for p in paths:
            try:
                fd = os.open(p, os.O_RDONLY)
            except FileNotFoundError:
                continue  # deleted since
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def delete_snapshots(self, *, below: int | None = None, above: int | None = None) -> None:
        """Delete snapshot files with offsets < ``below`` or > ``above``. Small files:
        unlinked inline, unlike segments."""
        for off in self.snapshot_offsets():
            if (below is not None and off < below) or (above is not None and off > above):
                self.snapshot_path(off).unlink(missing_ok=True)

    def delete_snapshots_except(self, keep: Iterable[int]) -> None:
        """Delete every snapshot file whose offset is not in ``keep``."""
        kept = set(keep)
        for off in self.snapshot_offsets():
            if off not in kept:
                self.snapshot_path(off).unlink(missing_ok=True)

    def load_snapshot(self, log_end_offset: int, now_ms: int) -> int:
        """Replace the state with the newest readable snapshot at or below
        ``log_end_offset``; returns its offset (the caller replays the log from
        there), or -1 if there is none (replay everything). Snapshots above the log
        end offset and unreadable ones are deleted."""
        self.producers.clear()
        self.delete_snapshots(above=log_end_offset)
        for off in reversed(self.snapshot_offsets()):
            path = self.snapshot_path(off)
            try:
                entries = read_snapshot(path)
            except (OSError, SnapshotError) as exc:
                _log.warning("producer_snapshot_unreadable", path=str(path), error=str(exc))
                path.unlink(missing_ok=True)
                continue
            for pid, epoch, meta in entries:
                entry = self.producers.get(pid)
                if entry is None:
                    entry = self.producers[pid] = ProducerStateEntry(pid, epoch)
                entry.add_batch(epoch, meta)
            self.remove_expired(now_ms)
            return off
        return -1


class SnapshotError(ValueError):
    """A snapshot file that does not parse or fails its CRC."""


def read_snapshot(path: Path) -> list[tuple[int, int, BatchMetadata]]:
    """(producer id, epoch, batch) per entry of a snapshot file, in file order."""
    data = path.read_bytes()
    if len(data) < _SNAPSHOT_HEAD.size:
        raise SnapshotError(f"{len(data)} bytes")
    version, crc, count = _SNAPSHOT_HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise SnapshotError(f"version {version}")
    from crc32c import crc32c  # not at start-up: records.py's crc32c says why

    if crc32c(data[_CRC_FROM:]) != crc:
        raise SnapshotError("CRC mismatch")
    if count < 0 or len(data) != _SNAPSHOT_HEAD.size + count * _SNAPSHOT_ENTRY.size:
        raise SnapshotError(f"{count} entries do not fit {len(data)} bytes")
    out = []
    for i in range(count):
        pid, epoch, last_seq, last_offset, delta, ts, _coord, _txn = _SNAPSHOT_ENTRY.unpack_from(
            data, _SNAPSHOT_HEAD.size + i * _SNAPSHOT_ENTRY.size
        )
        first_seq = decrement_sequence(last_seq, delta)
        out.append((pid, epoch, BatchMetadata(first_seq, last_seq, last_offset, delta, ts)))
    return out
