"""RecordBatch v2 (magic 2): the only on-wire and on-disk record format refka speaks.

Layout of one batch (Kafka's ``DefaultRecordBatch``), big-endian::

    offset  field                 type     notes
         0  baseOffset            int64    assigned by the leader
         8  batchLength           int32    bytes after this field
        12  partitionLeaderEpoch  int32    assigned by the leader, outside the CRC
        16  magic                 int8     2
        17  crc                   uint32   CRC32C of bytes [21, end)
        21  attributes            int16    bits 0-2 compression, 3 timestampType,
                                           4 transactional, 5 control
        23  lastOffsetDelta       int32
        27  baseTimestamp         int64
        35  maxTimestamp          int64
        43  producerId            int64
        51  producerEpoch         int16
        53  baseSequence          int32
        57  recordsCount          int32
        61  records               (compressed as a whole when compression != 0;
                                           the codecs are compression.py's)

Record (inside the records section)::

    length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
    keyLength varint, key, valueLength varint, value,
    headerCount varint, [keyLength varint, key utf-8, valueLength varint, value]

Varints are zigzag-encoded (protobuf ``sint``); length -1 means null.

The broker's produce path uses :func:`iter_batches` (one ``unpack_from`` and one
CRC32C call per batch), :func:`record_data` (the records section, decompressed once)
with record_walk.py's ``walk_records`` (the records checked without building them)
and :func:`assign_offsets` (two ``pack_into``, no CRC recompute: base offset and
partition leader epoch are outside the CRC). Records are decoded only by the
features that need them (:func:`iter_records`).

No I/O, no asyncio. The one clock read is :func:`build_batch`'s default timestamp,
for callers that did not give one (a producer stamps records with "now").
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from enum import IntEnum
from typing import Any, NamedTuple

from .compression import XERIAL_MAGIC, DecompressedTooLargeError, DecompressionError, compress, decompress

__all__ = [
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "NO_TIMESTAMP",
    "BatchHeader",
    "Compression",
    "CorruptRecordError",
    "InvalidRecordError",
    "NewRecord",
    "Record",
    "RecordError",
    "RecordsTooLargeError",
    "TimestampType",
    "UnsupportedCompressionTypeError",
    "assign_offsets",
    "build_batch",
    "decode_varint",
    "encode_varint",
    "iter_batches",
    "iter_records",
    "iter_valid_batches",
    "parse_batches",
    "read_header",
    "rebuild_batch",
    "record_data",
    "set_log_append_time",
    "valid_length",
]

MAGIC = 2
HEADER_SIZE = 61
# baseOffset + batchLength: the part of the header that batchLength does not count.
LOG_OVERHEAD = 12
NO_TIMESTAMP = -1

# Field positions inside a batch.
_PLE_OFFSET = 12
_MAGIC_OFFSET = 16
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
_MAX_TIMESTAMP_OFFSET = 35

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_unpack_header = _HEADER.unpack_from
_unpack_prefix = _PREFIX.unpack_from


def _crc32c_first_use(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C of ``data``: imports the crc32c package and puts its function in ``crc32c``'s place,
    so later checksums call it directly. Not imported with this module: the package reads its own
    distribution metadata when imported (importlib.metadata, ~40 ms of `refka serve`'s start-up,
    which answers its first requests before it sees a batch)."""
    global crc32c
    from crc32c import crc32c as implementation

    crc32c = implementation
    return implementation(data)


crc32c: Callable[[bytes | bytearray | memoryview], int] = _crc32c_first_use

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
_TRANSACTIONAL_MASK = 0x10
_CONTROL_MASK = 0x20


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


# -- errors ---------------------------------------------------------------------------


class RecordError(ValueError):
    """Records that break the format. ``error_code`` is the Kafka error to answer with."""

    error_code: int = -1  # UNKNOWN_SERVER_ERROR


class CorruptRecordError(RecordError):
    """Bad CRC, a truncated batch, a length that does not fit (Kafka CORRUPT_MESSAGE)."""

    error_code = 2


class InvalidRecordError(RecordError):
    """A well-formed batch that Kafka's rules refuse: wrong magic, count mismatch
    (Kafka INVALID_RECORD)."""

    error_code = 87


class RecordsTooLargeError(RecordError):
    """Records that decompress to more bytes than the reader allows (Kafka
    MESSAGE_TOO_LARGE)."""

    error_code = 10


class UnsupportedCompressionTypeError(RecordError):
    """Compression bits name no codec (Kafka UNSUPPORTED_COMPRESSION_TYPE)."""

    error_code = 76


# -- batch headers --------------------------------------------------------------------


class BatchHeader(NamedTuple):
    """The 61-byte header of one batch, and where the batch starts in its buffer.

    ``length`` is the whole batch in bytes, including the 12-byte
    baseOffset/batchLength prefix (``batchLength + 12``).
    """

    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & _COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & _TIMESTAMP_TYPE_MASK
            else TimestampType.CREATE_TIME
        )

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_MASK)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def end(self) -> int:
        """Position just past this batch in its buffer."""
        return self.position + self.length


_new_header = tuple.__new__

Buffer = bytes | bytearray | memoryview


def _read_header(mv: Any, pos: int, end: int, validate_crc: bool, check_counts: bool) -> BatchHeader:
    remaining = end - pos
    if remaining < LOG_OVERHEAD:
        raise CorruptRecordError(f"truncated batch at position {pos}: {remaining} bytes left")
    base_offset, batch_length = _unpack_prefix(mv, pos)
    size = batch_length + LOG_OVERHEAD
    # A legacy (magic 0/1) message is usually shorter than a v2 header: look at its
    # magic before the v2 size check so it is INVALID_RECORD, as Kafka answers it.
    if _MAGIC_OFFSET < size <= remaining and mv[pos + _MAGIC_OFFSET] in (0, 1):
        raise InvalidRecordError(
            f"batch at position {pos} has magic {mv[pos + _MAGIC_OFFSET]}; only magic 2 is supported"
        )
    if size < HEADER_SIZE:
        raise CorruptRecordError(f"batch at position {pos} has length {size} < header size {HEADER_SIZE}")
    if size > remaining:
        raise CorruptRecordError(
            f"batch at position {pos} of {size} bytes extends past the buffer ({remaining} left)"
        )
    (
        _,
        _,
        ple,
        magic,
        crc,
        attributes,
        last_offset_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    ) = _unpack_header(mv, pos)
    if magic != MAGIC:
        raise InvalidRecordError(f"batch at position {pos} has magic {magic}; only magic 2 is supported")
    if attributes & _COMPRESSION_MASK > 4:
        raise UnsupportedCompressionTypeError(f"unknown compression type {attributes & _COMPRESSION_MASK}")
    if validate_crc and crc32c(mv[pos + _ATTRIBUTES_OFFSET : pos + size]) != crc:
        raise CorruptRecordError(f"batch at position {pos} (base offset {base_offset}) fails its CRC")
    if check_counts and (records_count <= 0 or last_offset_delta + 1 != records_count):
        raise InvalidRecordError(
            f"batch at position {pos} has {records_count} records but lastOffsetDelta {last_offset_delta}"
        )
    return _new_header(
        BatchHeader,
        (
            base_offset,
            size,
            ple,
            magic,
            crc,
            attributes,
            last_offset_delta,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            records_count,
            pos,
        ),
    )


def read_header(buf: Buffer, position: int = 0, validate_crc: bool = False) -> BatchHeader:
    """The header of the batch at ``position`` (which must be whole in ``buf``)."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    return _read_header(mv, position, len(mv), validate_crc, False)


def iter_batches(
    buf: Buffer, validate_crc: bool = True, *, check_counts: bool = True, start: int = 0
) -> Generator[BatchHeader, None, None]:
    """Headers of the concatenated batches in ``buf``, raising on the first bad one.

    ``check_counts`` applies Kafka's produce-time rule recordsCount ==
    lastOffsetDelta + 1 > 0; turn it off for batches read back from a log (a
    compacted batch may hold fewer records than its offset range).
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(mv)
    pos = start
    while pos < end:
        header = _read_header(mv, pos, end, validate_crc, check_counts)
        yield header
        pos += header[1]


def parse_batches(buf: Buffer, validate_crc: bool = True, *, check_counts: bool = True) -> list[BatchHeader]:
    """All headers in ``buf`` (a Produce request's records), validated; raises RecordError."""
    return list(iter_batches(buf, validate_crc, check_counts=check_counts))


def iter_valid_batches(
    buf: Buffer, start: int = 0, validate_crc: bool = True
) -> Generator[BatchHeader, None, None]:
    """Like :func:`iter_batches`, but stops quietly at the first torn or invalid batch.

    For log recovery: the valid prefix ends at the last yielded header's ``end``.
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(mv)
    pos = start
    while pos < end:
        try:
            header = _read_header(mv, pos, end, validate_crc, False)
        except RecordError:
            return
        yield header
        pos += header[1]


def valid_length(buf: Buffer, start: int = 0, validate_crc: bool = True) -> int:
    """Bytes from ``start`` up to the end of the last whole, valid batch."""
    end = start
    for header in iter_valid_batches(buf, start, validate_crc):
        end = header.position + header.length
    return end


# -- in-place patches -----------------------------------------------------------------


def assign_offsets(
    buf: bytearray | memoryview, position: int, base_offset: int, partition_leader_epoch: int
) -> None:
    """Set the batch's base offset and partition leader epoch (both outside the CRC)."""
    _I64.pack_into(buf, position, base_offset)
    _I32.pack_into(buf, position + _PLE_OFFSET, partition_leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, position: int, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with ``timestamp_ms`` as its max timestamp; new CRC.

    As Kafka does, record timestamps are left alone: readers take the batch's max
    timestamp as every record's timestamp when the timestamp type is LogAppendTime.
    """
    (batch_length,) = _I32.unpack_from(buf, position + 8)
    (attributes,) = _I16.unpack_from(buf, position + _ATTRIBUTES_OFFSET)
    _I16.pack_into(buf, position + _ATTRIBUTES_OFFSET, attributes | _TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, position + _MAX_TIMESTAMP_OFFSET, timestamp_ms)
    end = position + batch_length + LOG_OVERHEAD
    crc = crc32c(memoryview(buf)[position + _ATTRIBUTES_OFFSET : end])
    _U32.pack_into(buf, position + _CRC_OFFSET, crc)


# -- varints --------------------------------------------------------------------------


def encode_varint(value: int) -> bytes:
    """Zigzag varint (Kafka's varint/varlong; same bytes for both)."""
    out = bytearray()
    _write_varint(out, value)
    return bytes(out)


def _write_varint(out: bytearray, value: int) -> None:
    v = (value << 1) ^ (value >> 63)
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def decode_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """(value, next position) of the zigzag varint at ``pos``."""
    b = buf[pos]
    pos += 1
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos
    result = b & 0x7F
    shift = 7
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


# -- records --------------------------------------------------------------------------


class Record(NamedTuple):
    """One decoded record. Absolute offset = base_offset + offset_delta; timestamp =
    base_timestamp + timestamp_delta (CreateTime) or the batch's max timestamp
    (LogAppendTime)."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class NewRecord(NamedTuple):
    """A record to encode with :func:`build_batch`; plain (key, value[, headers[,
    timestamp]]) tuples are accepted too."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int | None = None


def record_data(batch: Buffer, max_size: int | None = None) -> bytes | memoryview:
    """The records section of the one batch at ``batch[0:]``, to walk or decode: a view
    of the batch's own bytes when it is uncompressed (no copy), else its payload
    decompressed (the one pass). Raises CorruptRecordError when it does not
    decompress, RecordsTooLargeError when it decompresses to more than ``max_size``
    bytes (found out producing at most one byte more)."""
    mv = batch if isinstance(batch, memoryview) else memoryview(batch)
    return _record_data(mv, _read_header(mv, 0, len(mv), False, False), max_size)


def _record_data(mv: memoryview, header: BatchHeader, max_size: int | None = None) -> bytes | memoryview:
    codec = header.attributes & _COMPRESSION_MASK
    section = mv[HEADER_SIZE : header.length]
    if not codec:
        return section
    name = Compression(codec).name
    try:
        return decompress(codec, bytes(section), max_size)
    except DecompressedTooLargeError as exc:
        raise RecordsTooLargeError(f"records ({name}) decompress to more than {max_size} bytes") from exc
    except DecompressionError as exc:
        raise CorruptRecordError(f"cannot decompress records ({name}): {exc}") from exc


def iter_records(batch: Buffer) -> Iterator[Record]:
    """Decode (decompressing if needed) the records of the one batch at ``batch[0:]``."""
    mv = batch if isinstance(batch, memoryview) else memoryview(batch)
    header = _read_header(mv, 0, len(mv), False, False)
    data = _record_data(mv, header)
    # Keys and values are slices of ``data``: bytes, not views into the caller's buffer.
    yield from _decode_records(data if isinstance(data, bytes) else bytes(data), header.records_count)


def _decode_records(data: bytes, count: int) -> Iterator[Record]:
    pos, end = 0, len(data)
    rv = decode_varint
    try:
        for _ in range(count):
            length, pos = rv(data, pos)
            record_end = pos + length
            if length < 0 or record_end > end:
                raise CorruptRecordError("record extends past the end of its batch")
            pos += 1  # attributes, unused
            ts_delta, pos = rv(data, pos)
            offset_delta, pos = rv(data, pos)
            n, pos = rv(data, pos)
            if n < 0:
                key = None
            else:
                key = data[pos : pos + n]
                pos += n
            n, pos = rv(data, pos)
            if n < 0:
                value = None
            else:
                value = data[pos : pos + n]
                pos += n
            header_count, pos = rv(data, pos)
            headers: list[tuple[str, bytes | None]] = []
            for _ in range(header_count):
                n, pos = rv(data, pos)
                if n < 0:
                    raise CorruptRecordError("record header key is null")
                hkey = data[pos : pos + n].decode("utf-8")
                pos += n
                n, pos = rv(data, pos)
                if n < 0:
                    hvalue = None
                else:
                    hvalue = data[pos : pos + n]
                    pos += n
                headers.append((hkey, hvalue))
            if pos != record_end:
                raise CorruptRecordError(f"record length {length} does not match its fields")
            yield Record(offset_delta, ts_delta, key, value, headers)
    except IndexError as exc:
        raise CorruptRecordError("record data ends inside a record") from exc
    except UnicodeDecodeError as exc:
        raise CorruptRecordError("record header key is not UTF-8") from exc
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes after the last of {count} records")


def _encode_record(out: bytearray, offset_delta: int, ts_delta: int, record: NewRecord) -> None:
    body = bytearray(b"\x00")  # attributes
    wv = _write_varint
    wv(body, ts_delta)
    wv(body, offset_delta)
    key, value, headers = record.key, record.value, record.headers
    if key is None:
        wv(body, -1)
    else:
        wv(body, len(key))
        body += key
    if value is None:
        wv(body, -1)
    else:
        wv(body, len(value))
        body += value
    wv(body, len(headers))
    for hkey, hvalue in headers:
        raw = hkey.encode("utf-8")
        wv(body, len(raw))
        body += raw
        if hvalue is None:
            wv(body, -1)
        else:
            wv(body, len(hvalue))
            body += hvalue
    wv(out, len(body))
    out += body


def rebuild_batch(batch: Buffer, records: Sequence[Record]) -> bytearray:
    """The batch at ``batch[0:]`` holding only ``records`` (some of its own, in order,
    from :func:`iter_records`): what log compaction writes (Kafka's
    ``MemoryRecords.filterTo``). Kept as they were: base offset and last offset delta
    (so a producer's last sequence survives, as Kafka keeps the batch's last offset),
    partition leader epoch, producer id, epoch and base sequence, attributes and codec,
    base timestamp, each record's offset and timestamp deltas. The max timestamp
    becomes the largest kept (LogAppendTime batches keep theirs). No records: a
    header-only, uncompressed batch (Kafka's empty batch, kept for its offsets and
    producer state)."""
    mv = batch if isinstance(batch, memoryview) else memoryview(batch)
    h = _read_header(mv, 0, len(mv), False, False)
    attributes = h.attributes
    codec = attributes & _COMPRESSION_MASK
    payload: bytes | bytearray = b""
    max_ts = h.max_timestamp
    if records:
        body = bytearray()
        for r in records:
            _encode_record(body, r.offset_delta, r.timestamp_delta, NewRecord(r.key, r.value, r.headers))
        if codec:
            xerial = codec == Compression.SNAPPY and bytes(mv[HEADER_SIZE : HEADER_SIZE + 8]) == XERIAL_MAGIC
            payload = compress(codec, bytes(body), xerial)
        else:
            payload = body
        if not attributes & _TIMESTAMP_TYPE_MASK:
            max_ts = h.base_timestamp + max(r.timestamp_delta for r in records)
    else:
        attributes &= ~_COMPRESSION_MASK
    out = bytearray(HEADER_SIZE)
    out += payload
    _HEADER.pack_into(
        out,
        0,
        h.base_offset,
        len(out) - LOG_OVERHEAD,
        h.partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        h.last_offset_delta,
        h.base_timestamp,
        max_ts,
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        len(records),
    )
    _U32.pack_into(out, _CRC_OFFSET, crc32c(memoryview(out)[_ATTRIBUTES_OFFSET:]))
    return out


def build_batch(
    records: Iterable[NewRecord | tuple[Any, ...]],
    base_offset: int = 0,
    compression: Compression | int = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp: int | None = None,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    *,
    is_control: bool = False,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    snappy_xerial: bool = True,
) -> bytearray:
    """Encode one batch with a valid CRC.

    A record without its own timestamp gets ``timestamp`` (default: now, in ms).
    The batch's base timestamp is the first record's. Compression is applied as
    asked even when it does not pay (unlike most clients) so tests exercise it.
    ``snappy_xerial`` picks Java's framed snappy (True) or librdkafka's raw snappy.
    """
    items = [r if isinstance(r, NewRecord) else NewRecord(*r) for r in records]
    if not items:
        raise ValueError("a batch needs at least one record")
    default_ts = timestamp if timestamp is not None else time.time_ns() // 1_000_000
    stamps = [default_ts if r.timestamp is None else r.timestamp for r in items]
    base_ts = stamps[0]
    body = bytearray()
    for i, (rec, ts) in enumerate(zip(items, stamps, strict=True)):
        _encode_record(body, i, ts - base_ts, rec)
    codec = Compression(compression)
    payload: bytes | bytearray = compress(codec, bytes(body), snappy_xerial) if codec else body
    attributes = int(codec)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= _TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= _TRANSACTIONAL_MASK
    if is_control:
        attributes |= _CONTROL_MASK
    out = bytearray(HEADER_SIZE)
    out += payload
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        len(items) - 1,
        base_ts,
        max(stamps),
        producer_id,
        producer_epoch,
        base_sequence,
        len(items),
    )
    _U32.pack_into(out, _CRC_OFFSET, crc32c(memoryview(out)[_ATTRIBUTES_OFFSET:]))
    return out
