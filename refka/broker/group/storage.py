"""Kafka's ``__consumer_offsets`` record formats, and reading/writing them.

Every record's key and value start with an int16 version; the key version says
what the record is (Kafka's GroupMetadataManager and the coordinator-key JSON
schemas ``OffsetCommitKey`` / ``GroupMetadataKey``)::

    key v0/v1  offset commit    group string, topic string, partition int32
    key v2     group metadata   group string

    offset commit value
      v0  offset int64, metadata string, commit_timestamp int64
      v1  v0 + expire_timestamp int64      (OffsetCommit v2-v4 retention_time_ms)
      v2  as v0
      v3  offset, leader_epoch int32 (KIP-320), metadata, commit_timestamp
      v4  v3, flexible (compact string, tagged fields)

    group metadata value
      v0  protocol_type string, generation int32, protocol string?, leader string?,
          members [member_id, client_id, client_host, session_timeout int32,
                   subscription bytes, assignment bytes]
      v1  member + rebalance_timeout int32 (before session_timeout)
      v2  + current_state_timestamp int64 (before members)
      v3  member + group_instance_id string? (after member_id)
      v4  v3, flexible

A null value is a tombstone: the offset or the group is gone (compaction, when
it comes, keeps only the newest record per key).

Keys and the values refka writes are non-flexible: a string there has an
int16 length, so at most ``MAX_STRING_BYTES`` bytes of UTF-8. Requests carry
longer ones (flexible versions have varint lengths), so the handlers refuse
what ``fits`` says cannot be stored before a group or an offset exists
(Kafka's own serializer throws at that point); writing one anyway is our bug,
a ``ValueError`` that says so.

refka writes offset values v3, v1 when the commit carried a retention time (as
Kafka does), and v4 with a tagged ``topic_epoch`` (tag 10233, KIP-232, see
``protocol/extensions.py``) when the commit carried one, so Kafka's own tools
still read the log. Group metadata values are written as v3.

``LogStore`` appends through ``Partition.append`` (one batch per call: a
commit of many partitions is atomic) and reads a partition back from its log
start offset for loading. No asyncio here except ``LogStore``'s waits.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from refka.protocol import ErrorCode
from refka.protocol.extensions import TAG_OFFSET_TOPIC_EPOCH
from refka.protocol.records import RecordError, build_batch, iter_batches, iter_records, parse_batches

from ..log import LogError, RecordTooLargeError
from ..logging import get_logger
from .offsets import CommittedOffset

if TYPE_CHECKING:
    from ..partition import Partition

log = get_logger("refka.group")

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
GROUP_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

MAX_STRING_BYTES = 0x7FFF  # a non-flexible string's int16 length


def fits(s: str) -> bool:
    """Whether ``s`` can be a string of a key or a non-flexible value."""
    return len(s.encode()) <= MAX_STRING_BYTES


class StorageFormatError(ValueError):
    """A record in __consumer_offsets that does not parse (a corrupt or foreign log)."""


# -- the decoded forms


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(slots=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class StoredGroup:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[StoredMember] = field(default_factory=list)


# -- writing


class _Writer:
    __slots__ = ("out", "flexible")

    def __init__(self, version: int, flexible: bool = False) -> None:
        self.out = bytearray(_I16.pack(version))
        self.flexible = flexible

    def int16(self, v: int) -> None:
        self.out += _I16.pack(v)

    def int32(self, v: int) -> None:
        self.out += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.out += _I64.pack(v)

    def uvarint(self, v: int) -> None:
        while v >= 0x80:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)

    def string(self, s: str | None) -> None:
        if s is None:
            if self.flexible:
                self.uvarint(0)
            else:
                self.int16(-1)
            return
        b = s.encode()
        if self.flexible:
            self.uvarint(len(b) + 1)
        elif len(b) > MAX_STRING_BYTES:
            raise ValueError(f"a string of {len(b)} bytes does not fit a non-flexible record")
        else:
            self.int16(len(b))
        self.out += b

    def bytes_(self, b: bytes) -> None:
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            self.int32(len(b))
        self.out += b

    def array_len(self, n: int) -> None:
        if self.flexible:
            self.uvarint(n + 1)
        else:
            self.int32(n)

    def tags(self, tagged: dict[int, bytes] | None = None) -> None:
        if not self.flexible:
            return
        tagged = tagged or {}
        self.uvarint(len(tagged))
        for tag in sorted(tagged):
            self.uvarint(tag)
            self.uvarint(len(tagged[tag]))
            self.out += tagged[tag]


def offset_key(group: str, topic: str, partition: int) -> bytes:
    w = _Writer(OFFSET_KEY_VERSION)
    w.string(group)
    w.string(topic)
    w.int32(partition)
    return bytes(w.out)


def group_key(group: str) -> bytes:
    w = _Writer(GROUP_KEY_VERSION)
    w.string(group)
    return bytes(w.out)


def offset_value(o: CommittedOffset) -> bytes:
    if o.expire_timestamp >= 0:
        w = _Writer(1)
        w.int64(o.offset)
        w.string(o.metadata)
        w.int64(o.commit_timestamp)
        w.int64(o.expire_timestamp)
        return bytes(w.out)
    flexible = o.topic_epoch >= 0
    w = _Writer(4 if flexible else 3, flexible)
    w.int64(o.offset)
    w.int32(o.leader_epoch)
    w.string(o.metadata)
    w.int64(o.commit_timestamp)
    w.tags({TAG_OFFSET_TOPIC_EPOCH: _I32.pack(o.topic_epoch)} if flexible else None)
    return bytes(w.out)


def group_value(g: StoredGroup) -> bytes:
    w = _Writer(GROUP_VALUE_VERSION)
    w.string(g.protocol_type)
    w.int32(g.generation)
    w.string(g.protocol)
    w.string(g.leader)
    w.int64(g.current_state_timestamp)
    w.array_len(len(g.members))
    for m in g.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.int32(m.rebalance_timeout_ms)
        w.int32(m.session_timeout_ms)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return bytes(w.out)


# -- reading


class _Reader:
    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes, pos: int = 0, flexible: bool = False) -> None:
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def _take(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.buf):
            raise StorageFormatError("record ends early")
        (v,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return int(v)

    def int16(self) -> int:
        return self._take(_I16)

    def int32(self) -> int:
        return self._take(_I32)

    def int64(self) -> int:
        return self._take(_I64)

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            if self.pos >= len(self.buf):
                raise StorageFormatError("varint ends early")
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7
            if shift > 35:
                raise StorageFormatError("varint too long")

    def _raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise StorageFormatError("field ends past the record")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return bytes(b)

    def string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.int16()
        if n < 0:
            return None
        try:
            return self._raw(n).decode()
        except UnicodeDecodeError as e:
            raise StorageFormatError(str(e)) from None

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        return b"" if n < 0 else self._raw(n)

    def array_len(self) -> int:
        return self.uvarint() - 1 if self.flexible else self.int32()

    def tags(self) -> dict[int, bytes]:
        if not self.flexible:
            return {}
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self._raw(self.uvarint())
        return out


def decode_key(key: bytes) -> OffsetKey | GroupKey:
    r = _Reader(key)
    version = r.int16()
    if version in (0, 1):
        group, topic = r.string(), r.string()
        partition = r.int32()
        if group is None or topic is None:
            raise StorageFormatError("null group or topic in an offset commit key")
        return OffsetKey(group, topic, partition)
    if version == 2:
        group = r.string()
        if group is None:
            raise StorageFormatError("null group in a group metadata key")
        return GroupKey(group)
    raise StorageFormatError(f"unknown key version {version}")


def decode_offset_value(value: bytes) -> CommittedOffset:
    r = _Reader(value)
    version = r.int16()
    if not 0 <= version <= 4:
        raise StorageFormatError(f"unknown offset commit value version {version}")
    r.flexible = version >= 4
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_ts = r.int64()
    expire_ts = r.int64() if version == 1 else -1
    topic_epoch = -1
    raw = r.tags().get(TAG_OFFSET_TOPIC_EPOCH)
    if raw is not None and len(raw) == 4:
        topic_epoch = _I32.unpack(raw)[0]
    return CommittedOffset(offset, leader_epoch, metadata, commit_ts, expire_ts, topic_epoch)


def decode_group_value(value: bytes) -> StoredGroup:
    r = _Reader(value)
    version = r.int16()
    if not 0 <= version <= 4:
        raise StorageFormatError(f"unknown group metadata value version {version}")
    r.flexible = version >= 4
    protocol_type = r.string() or ""
    generation = r.int32()
    protocol = r.string()
    leader = r.string()
    state_ts = r.int64() if version >= 2 else -1
    members = []
    for _ in range(max(r.array_len(), 0)):
        member_id = r.string() or ""
        instance_id = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.tags()
        members.append(StoredMember(member_id, instance_id, client_id, client_host,
                                    rebalance_timeout if rebalance_timeout >= 0 else session_timeout,
                                    session_timeout, subscription, assignment))
    r.tags()
    return StoredGroup(protocol_type, generation, protocol, leader, state_ts, members)


def decode_record(key: bytes | None, value: bytes | None) -> tuple[OffsetKey | GroupKey, Any]:
    """(key, value) of one record; the value is None for a tombstone."""
    if key is None:
        raise StorageFormatError("record without a key")
    k = decode_key(key)
    if value is None:
        return k, None
    if isinstance(k, OffsetKey):
        return k, decode_offset_value(value)
    return k, decode_group_value(value)


# -- the offsets partitions, through the broker's replica manager


@dataclass(frozen=True, slots=True)
class AppendResult:
    error: ErrorCode
    last_offset: int = -1


class LogStore:
    """The __consumer_offsets partitions this broker leads, as the coordinator sees them,
    found through ``partition(topic, index)`` (the replica manager's lookup)."""

    def __init__(self, partition: Callable[[str, int], Partition | None],
                 load_buffer_bytes: int = 5 * 1024 * 1024) -> None:
        self._lookup = partition
        self.load_buffer_bytes = load_buffer_bytes

    def _partition(self, index: int) -> Partition | None:
        return self._lookup(OFFSETS_TOPIC, index)

    def append(self, index: int, records: list[tuple[bytes, bytes | None]]) -> AppendResult:
        """One batch with these records, appended as leader. Errors as the coordinator
        answers them (Kafka's appendGroupMetadataErrorToResponseError), except
        MESSAGE_TOO_LARGE, which the caller maps (a commit says INVALID_COMMIT_OFFSET_SIZE)."""
        part = self._partition(index)
        if part is None or not part.is_leader:
            return AppendResult(ErrorCode.NOT_COORDINATOR)
        buf = build_batch(records)
        try:
            info = part.append(buf, parse_batches(buf), False)
        except RecordTooLargeError:
            return AppendResult(ErrorCode.MESSAGE_TOO_LARGE)
        except (OSError, LogError):
            return AppendResult(ErrorCode.NOT_COORDINATOR)
        return AppendResult(ErrorCode.NONE, info.last_offset)

    def replicated(self, index: int, last_offset: int) -> bool:
        part = self._partition(index)
        return part is not None and part.high_watermark > last_offset

    async def wait_replicated(self, index: int, last_offset: int, timeout_ms: int) -> ErrorCode:
        """acks=-1 for the coordinator's own writes: until the high watermark passes them
        (the partition's acks=all wait). Not replicated in time is COORDINATOR_NOT_AVAILABLE
        (as Kafka maps REQUEST_TIMED_OUT); a partition no longer led here NOT_COORDINATOR."""
        part = self._partition(index)
        if part is None:
            return ErrorCode.NOT_COORDINATOR
        deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
        error = await part.wait_for_high_watermark(last_offset + 1, deadline)
        if error == ErrorCode.REQUEST_TIMED_OUT:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE if error == ErrorCode.NONE else ErrorCode.NOT_COORDINATOR

    async def read(self, index: int) -> AsyncIterator[tuple[bytes | None, bytes | None]]:
        """Every record of the partition from its log start offset to its log end offset
        (as Kafka loads: up to the log end, not the high watermark), yielding the loop
        between chunks of offsets.load.buffer.size bytes. A batch whose records do not
        decode is skipped with a warning (Kafka stops loading the partition there)."""
        part = self._partition(index)
        if part is None:
            return
        plog = part.log
        offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            res = plog.read(offset, self.load_buffer_bytes, max_offset=None, min_one_batch=True)
            if not res.size:
                break
            for view in res.records:
                for header in iter_batches(view, validate_crc=False, check_counts=False):
                    if header.is_control:
                        continue
                    batch = view[header.position : header.position + header.length]
                    try:
                        records = list(iter_records(batch))
                    except RecordError as e:
                        # Stored before leaders walked every batch's records (an older
                        # refka): skipped whole, and the records after it still load.
                        log.warning("group_batch_unreadable", partition=index, offset=header.base_offset,
                                    reason=str(e))
                        continue
                    for rec in records:
                        yield rec.key, rec.value
            offset = res.next_offset
            await asyncio.sleep(0)
