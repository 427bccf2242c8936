"""Legacy message sets (magic 0 and 1): what Produce v0-v2 carry and Fetch v0-v3 answer.

Kafka before 0.11 had no record batches. A *message set* is messages one after
another, each with its own log overhead and CRC (Kafka's ``LegacyRecord`` and
``AbstractLegacyRecordBatch``; magic 0 is Kafka 0.8-0.9's format, magic 1 0.10's,
KIP-31/32). One message, big-endian::

    offset  field        type     notes
         0  offset       int64    see "Offsets" below
         8  messageSize  int32    bytes after this field
        12  crc          uint32   CRC-32 (zlib's, not CRC-32C) of bytes [16, end)
        16  magic        int8     0 or 1
        17  attributes   int8     bits 0-2 compression; bit 3 timestampType (magic 1:
                                  0 CreateTime, 1 LogAppendTime)
        18  timestamp    int64    magic 1 only
     18/26  key          bytes    int32 length, then the bytes; -1 is null
            value        bytes    int32 length, then the bytes; -1 is null

The magic byte sits where a RecordBatch v2 has its own (position 16), so the first
message tells which format a Produce carries (:func:`is_message_set`).

Compression: a compressed message, the *wrapper*, has a null key and as value a whole
message set of *inner* messages compressed with the codec its attributes name (gzip 1,
snappy 2, lz4 3; compression.py's ``compress_legacy`` frames them as Kafka does for
magic 0 and 1). Inner messages have the wrapper's magic and are never compressed
themselves. zstd came with magic 2: a zstd wrapper is refused.

Offsets: an uncompressed message's offset is its own. A magic-0 wrapper's inner
messages carry absolute offsets (the wrapper, the last one's). A magic-1 wrapper
carries its last inner message's absolute offset and the inner messages relative
offsets 0, 1, 2, ...: inner ``i`` is at ``wrapper - last_inner + relative_i``
(a wrapper offset of 0, as some librdkafka versions sent, means base 0).

Timestamps (magic 1): a CreateTime message has its own; the inner messages of a
LogAppendTime wrapper all have the wrapper's. Magic 0 has none (-1).

What the broker does with them (Kafka 3.x with its default message format, v2):

- Produce v0-v2: :func:`decode_message_set` checks a message set as Kafka's Log and
  LogValidator do (raising records.py's ``RecordError`` kinds, each with the Kafka
  error to answer) and gives its messages; :func:`to_record_batch` makes them one
  RecordBatch v2 (Kafka's ``convertAndAssignOffsetsNonCompressed`` and
  ``buildRecordsAndAssignOffsets``): keys, values and timestamps kept, no headers,
  offsets assigned later by the log, the wrapper's codec kept.
- Fetch v0-v3: :func:`down_convert` turns the log's RecordBatch v2 bytes into
  messages of magic 0 (Fetch v0-v1) or 1 (v2-v3), as Kafka's
  ``RecordsUtil.downConvert`` does: offsets kept, headers dropped, control batches
  skipped, an uncompressed batch one message per record (those before the fetch
  offset dropped), a compressed batch one wrapper of all its records in its codec;
  zstd batches are not converted (UNSUPPORTED_COMPRESSION_TYPE). Whole messages
  within the fetch's limit; for Fetch v0-v2 (before KIP-74) a first message
  beyond it is answered with :func:`overflow_filler`, as Kafka answers it.

:func:`build_message_set` writes message sets as an old producer does, for tests
and tools.

Cost: plain Python, each message built or read as an object (about 7 us a record
down-converted, 11 us up-converted, uncompressed 100-byte values; a codec adds its
compression). Only Produce v0-v2 and Fetch v0-v3 pay it: the handlers' paths for
v3+ and v4+ meet this module in one version comparison.

No I/O, no asyncio.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from typing import Any, NamedTuple

from .compression import DecompressedTooLargeError, DecompressionError, compress_legacy, decompress_legacy
from .records import (
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    Compression,
    CorruptRecordError,
    InvalidRecordError,
    NewRecord,
    RecordsTooLargeError,
    TimestampType,
    UnsupportedCompressionTypeError,
    build_batch,
    iter_batches,
    iter_records,
)

__all__ = [
    "LegacyMessage",
    "MessageSet",
    "build_message_set",
    "decode_message_set",
    "down_convert",
    "encode_message",
    "is_message_set",
    "message_entry",
    "overflow_filler",
    "to_record_batch",
]

# Kafka's LegacyRecord: the smallest message of each magic (crc, magic, attributes,
# [timestamp,] key length, value length).
RECORD_OVERHEAD = (14, 22)
_MAGIC_POSITION = 16  # offset + messageSize + crc: where magic 0/1 and v2 both keep it
_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08

_ENTRY = struct.Struct(">qi")  # offset, messageSize: the log overhead
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")

Buffer = bytes | bytearray | memoryview


class LegacyMessage(NamedTuple):
    """One message of a message set: uncompressed, or an inner message of a wrapper.

    ``offset`` is absolute (a magic-1 inner message's resolved from its wrapper's);
    ``timestamp`` is -1 for magic 0, the wrapper's for the inner messages of a
    LogAppendTime wrapper. ``log_append_time``: its batch (the wrapper, or itself) says
    LogAppendTime, which a producer may not (Kafka's validateTimestamp)."""

    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    log_append_time: bool = False


class MessageSet(NamedTuple):
    """A Produce's message set, decoded: its magic, its codec (the wrapper's; NONE when
    uncompressed) and its messages (the inner ones of a wrapper)."""

    magic: int
    compression: Compression
    messages: list[LegacyMessage]


def is_message_set(records: Buffer | None) -> bool:
    """True when ``records`` start with a magic 0 or 1 message (not a RecordBatch v2)."""
    return records is not None and len(records) > _MAGIC_POSITION and records[_MAGIC_POSITION] < 2


# -- decoding ---------------------------------------------------------------------------


def decode_message_set(
    buf: Buffer, *, max_message_size: int | None = None, max_decompressed: int | None = None
) -> MessageSet:
    """The messages of a Produce v0-v2 message set, checked as Kafka's Log
    (analyzeAndValidateRecords) and LogValidator check them, in their order. Raises:

    - CorruptRecordError (CORRUPT_MESSAGE): a message shorter than the smallest one,
      one extending past the buffer, a magic byte other than 0-2, a CRC that does
      not match (the message's, then each inner message's), lengths that do not fill
      the message exactly, a wrapper value that does not decompress or an inner
      message set that ends inside a message;
    - RecordsTooLargeError (MESSAGE_TOO_LARGE): a message (with its 12-byte log
      overhead) above ``max_message_size``, or a wrapper decompressing to more than
      ``max_decompressed`` bytes;
    - UnsupportedCompressionTypeError: compression bits 5-7;
    - InvalidRecordError (INVALID_RECORD): no message; a compressed message with
      others beside it; messages of different magics (a RecordBatch v2 among them
      too); a zstd wrapper, one with a null value or no inner message, a magic-1
      wrapper whose offset is below its last inner message's relative offset (and
      not 0); an inner message compressed, or of another magic than its wrapper.
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(mv)
    pos = 0
    entries: list[tuple[int, int, int]] = []  # position, size with log overhead, magic
    while pos < end:
        size, magic = _entry_size(mv, pos, end, "message")
        if max_message_size is not None and size > max_message_size:
            raise RecordsTooLargeError(
                f"message at position {pos} is {size} bytes, above max.message.bytes {max_message_size}"
            )
        if magic < 2:
            _check_crc(mv, pos, size, "message")
            if mv[pos + 17] & _COMPRESSION_MASK > Compression.ZSTD:
                raise UnsupportedCompressionTypeError(
                    f"message at position {pos} has unknown compression type {mv[pos + 17] & _COMPRESSION_MASK}"
                )
        entries.append((pos, size, magic))
        pos += size
    if not entries:
        raise InvalidRecordError("the message set has no message")
    first_magic = entries[0][2]
    codecs = [mv[p + 17] & _COMPRESSION_MASK if m < 2 else 0 for p, _s, m in entries]
    if any(codecs) and len(entries) > 1:
        raise InvalidRecordError("Compressed outer record has more than one batch")
    for p, _s, m in entries:
        if m != first_magic:
            raise InvalidRecordError(
                f"message at position {p} has magic {m}, not the first message's magic {first_magic}"
            )
    if first_magic == 2:
        raise InvalidRecordError("a RecordBatch v2 is not a message set")
    if codecs[0]:
        position, size, _m = entries[0]
        messages = _inner_messages(mv[position : position + size], codecs[0], max_decompressed)
        return MessageSet(first_magic, Compression(codecs[0]), messages)
    out = []
    for position, size, _m in entries:
        message = _decode_message(mv, position + LOG_OVERHEAD, position + size)
        out.append(message._replace(offset=_ENTRY.unpack_from(mv, position)[0]))
    return MessageSet(first_magic, Compression.NONE, out)


def _entry_size(mv: memoryview, pos: int, end: int, what: str) -> tuple[int, int]:
    """(size with log overhead, magic) of the message at ``pos``; CorruptRecordError when
    it does not fit (Kafka's ByteBufferLogInputStream checks)."""
    if end - pos < LOG_OVERHEAD:
        raise CorruptRecordError(f"{what} at position {pos} is truncated: {end - pos} bytes left")
    (message_size,) = _I32.unpack_from(mv, pos + 8)
    if message_size < RECORD_OVERHEAD[0]:
        raise CorruptRecordError(
            f"{what} at position {pos} has size {message_size}, below the minimum record overhead "
            f"{RECORD_OVERHEAD[0]}"
        )
    size = message_size + LOG_OVERHEAD
    if size > end - pos:
        raise CorruptRecordError(f"{what} at position {pos} of {size} bytes extends past the data ({end - pos} left)")
    magic = mv[pos + _MAGIC_POSITION]
    if magic > 2:
        raise CorruptRecordError(f"{what} at position {pos} has an invalid magic {magic}")
    return size, magic


def _check_crc(mv: memoryview, pos: int, size: int, what: str) -> None:
    (crc,) = _U32.unpack_from(mv, pos + LOG_OVERHEAD)
    computed = zlib.crc32(mv[pos + _MAGIC_POSITION : pos + size])
    if crc != computed:
        raise CorruptRecordError(
            f"{what} at position {pos} is corrupt (stored crc = {crc}, computed crc = {computed})"
        )


def _decode_message(mv: memoryview, start: int, end: int) -> LegacyMessage:
    """The message in ``mv[start:end]`` (after its log overhead). Its offset is left 0."""
    magic = mv[start + 4]
    if end - start < RECORD_OVERHEAD[magic]:
        raise CorruptRecordError(f"a magic {magic} message of {end - start} bytes is shorter than its header")
    attributes = mv[start + 5]
    if magic == 0:
        timestamp, pos = NO_TIMESTAMP, start + 6
    else:
        (timestamp,) = _I64.unpack_from(mv, start + 6)
        pos = start + 14
    key, pos = _bytes_field(mv, pos, end)
    value, pos = _bytes_field(mv, pos, end)
    if pos != end:
        raise CorruptRecordError(f"a message's key and value end {end - pos} bytes before the message")
    lat = magic == 1 and bool(attributes & _TIMESTAMP_TYPE_MASK)
    return LegacyMessage(0, magic, attributes, timestamp, key, value, lat)


def _bytes_field(mv: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise CorruptRecordError("a message ends inside a length")
    (n,) = _I32.unpack_from(mv, pos)
    pos += 4
    if n < 0:
        return None, pos
    if n > end - pos:
        raise CorruptRecordError(f"a key or value of {n} bytes extends past its message")
    return bytes(mv[pos : pos + n]), pos + n


def _inner_messages(wrapper: memoryview, codec: int, max_decompressed: int | None) -> list[LegacyMessage]:
    """The inner messages of the wrapper ``wrapper`` (with its log overhead), checked
    as Kafka's DeepRecordsIterator and LogValidator check them."""
    outer = _decode_message(wrapper, LOG_OVERHEAD, len(wrapper))
    magic = outer.magic
    (wrapper_offset,) = _I64.unpack_from(wrapper, 0)
    if codec == Compression.ZSTD:
        raise InvalidRecordError(f"a magic {magic} wrapper cannot be zstd-compressed (zstd needs magic 2)")
    if outer.value is None:
        raise InvalidRecordError(f"Found invalid compressed record set with null value (magic = {magic})")
    name = Compression(codec).name
    try:
        data = memoryview(decompress_legacy(codec, outer.value, magic, max_decompressed))
    except DecompressedTooLargeError as e:
        raise RecordsTooLargeError(f"the wrapper ({name}) decompresses to more than {max_decompressed} bytes") from e
    except DecompressionError as e:
        raise CorruptRecordError(f"cannot decompress the wrapper ({name}): {e}") from e
    inner: list[LegacyMessage] = []
    pos, end = 0, len(data)
    while pos < end:
        size, inner_magic = _entry_size(data, pos, end, "inner message")
        (offset,) = _I64.unpack_from(data, pos)
        if data[pos + 17] & _COMPRESSION_MASK:
            raise InvalidRecordError("Inner messages must not be compressed")
        if inner_magic != magic:
            raise InvalidRecordError(f"an inner message has magic {inner_magic}, its wrapper {magic}")
        _check_crc(data, pos, size, "inner message")
        message = _decode_message(data, pos + LOG_OVERHEAD, pos + size)
        if outer.log_append_time:
            message = message._replace(timestamp=outer.timestamp)
        inner.append(message._replace(offset=offset, log_append_time=outer.log_append_time))
        pos += size
    if not inner:
        raise InvalidRecordError("Found invalid compressed record set with no inner records")
    if magic == 1:
        last = inner[-1].offset
        if wrapper_offset == 0:  # some librdkafka versions' produce data
            base = 0
        elif wrapper_offset < last:
            raise InvalidRecordError(
                f"Found invalid wrapper offset in compressed v1 message set, wrapper offset '{wrapper_offset}' "
                f"is less than the last inner message offset '{last}' and it is not zero."
            )
        else:
            base = wrapper_offset - last
        inner = [m._replace(offset=base + m.offset) for m in inner]
    return inner


def to_record_batch(message_set: MessageSet) -> bytearray:
    """One RecordBatch v2 of ``message_set``'s messages, as Kafka's LogValidator converts
    them: base offset 0 (the log assigns it), no producer id, CreateTime (the log marks
    a LogAppendTime topic's batches), each message's key, value and timestamp (-1 for
    magic 0), no headers, the wrapper's codec (snappy in xerial's framing, as Kafka's
    SnappyOutputStream writes it)."""
    records = [NewRecord(m.key, m.value, (), m.timestamp) for m in message_set.messages]
    return build_batch(records, compression=message_set.compression, snappy_xerial=True)


# -- encoding ---------------------------------------------------------------------------


def encode_message(
    magic: int,
    key: bytes | None,
    value: bytes | None,
    timestamp: int = NO_TIMESTAMP,
    attributes: int = 0,
) -> bytes:
    """One message without its log overhead (crc, magic, attributes, [timestamp,] key,
    value), its CRC computed. ``timestamp`` is not written for magic 0."""
    if magic not in (0, 1):
        raise ValueError(f"a legacy message has magic 0 or 1, not {magic}")
    body = bytearray()
    if magic == 1:
        body += _I64.pack(timestamp)
    for field in (key, value):
        if field is None:
            body += _I32.pack(-1)
        else:
            body += _I32.pack(len(field))
            body += field
    head = bytes((magic, attributes))
    crc = zlib.crc32(body, zlib.crc32(head))
    return _U32.pack(crc) + head + bytes(body)


def message_entry(offset: int, message: bytes) -> bytes:
    """``message`` (from :func:`encode_message`) with its log overhead: offset and size."""
    return _ENTRY.pack(offset, len(message)) + message


def build_message_set(
    records: Iterable[tuple[Any, ...]],
    magic: int,
    compression: Compression | int = Compression.NONE,
    *,
    base_offset: int = 0,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    wrapper_offset: int | None = None,
) -> bytes:
    """A message set as an old producer writes it, of ``(key, value[, timestamp])``
    records (timestamp -1 unless given; ignored for magic 0). Uncompressed: one message
    per record at offsets ``base_offset``, +1, ... Compressed: one wrapper whose inner
    messages carry absolute offsets from ``base_offset`` (magic 0) or relative offsets
    0, 1, ... (magic 1); the wrapper's offset is the last inner message's absolute
    offset unless ``wrapper_offset`` says otherwise, its timestamp the largest."""
    items = [(r[0], r[1], r[2] if len(r) > 2 else NO_TIMESTAMP) for r in records]
    if not items:
        raise ValueError("a message set needs at least one record")
    ts_bit = _TIMESTAMP_TYPE_MASK if magic == 1 and timestamp_type == TimestampType.LOG_APPEND_TIME else 0
    codec = int(compression)
    if not codec:
        return b"".join(
            message_entry(base_offset + i, encode_message(magic, k, v, ts, ts_bit)) for i, (k, v, ts) in enumerate(items)
        )
    inner = b"".join(
        message_entry(i if magic == 1 else base_offset + i, encode_message(magic, k, v, ts, ts_bit))
        for i, (k, v, ts) in enumerate(items)
    )
    last = base_offset + len(items) - 1
    wrapper_ts = max(ts for _k, _v, ts in items)
    wrapper = encode_message(magic, None, compress_legacy(codec, inner, magic), wrapper_ts, codec | ts_bit)
    return message_entry(last if wrapper_offset is None else wrapper_offset, wrapper)


# -- down-conversion (Fetch v0-v3) ------------------------------------------------------


def down_convert(
    buffers: Iterable[Buffer] | Buffer,
    magic: int,
    fetch_offset: int,
    max_bytes: int,
    min_one: bool = True,
    *,
    hard_limit: bool = False,
) -> bytes:
    """The RecordBatch v2 batches in ``buffers`` (whole batches, as a log read gives
    them) as messages of ``magic`` (0 or 1), as Kafka's ``RecordsUtil.downConvert``:

    - offsets kept; headers dropped; control batches skipped;
    - an uncompressed batch: one message per record, those below ``fetch_offset``
      dropped (a consumer reading from the middle of a batch);
    - a compressed batch: one wrapper of all its records, in the batch's codec (magic
      0/1 framing), at the last record's offset, its inner offsets absolute (magic 0)
      or relative to the first record (magic 1);
    - magic 1 timestamps: the records' own (CreateTime), or for a LogAppendTime batch
      its max timestamp on every message, with the LogAppendTime attribute bit; the
      wrapper's is the largest of its records' (or the append time);
    - whole messages only, as long as they fit in ``max_bytes`` together, the first
      message or wrapper always when ``min_one`` (Fetch v3+, KIP-74: so a consumer
      progresses);
    - ``hard_limit`` (Fetch v0-v2, before KIP-74): not even the first beyond
      ``max_bytes``; when it does not fit, the answer is :func:`overflow_filler`, which
      those clients read as a message too large for their fetch size, as from Kafka.

    A zstd batch cannot be converted (Kafka refuses zstd below magic 2): the messages
    before it are returned; UnsupportedCompressionTypeError when it comes first.
    """
    if isinstance(buffers, (bytes, bytearray, memoryview)):
        buffers = [buffers]
    min_one = min_one and not hard_limit
    out = bytearray()
    ts_mask = _TIMESTAMP_TYPE_MASK if magic == 1 else 0
    for buf in buffers:
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        for h in iter_batches(mv, False, check_counts=False):
            if h.is_control:
                continue
            codec = h.compression
            if codec == Compression.ZSTD:
                if out:
                    return bytes(out)
                raise UnsupportedCompressionTypeError("Down-conversion of zstandard-compressed batches is not supported")
            batch = mv[h.position : h.end]
            lat = h.timestamp_type == TimestampType.LOG_APPEND_TIME
            attrs = ts_mask if lat else 0
            records = [
                (
                    h.base_offset + r.offset_delta,
                    h.max_timestamp if lat else h.base_timestamp + r.timestamp_delta,
                    r.key,
                    r.value,
                )
                for r in iter_records(batch)
            ]
            if codec == Compression.NONE:
                entries = [
                    message_entry(offset, encode_message(magic, key, value, ts, attrs))
                    for offset, ts, key, value in records
                    if offset >= fetch_offset
                ]
            elif records:
                first = records[0][0]
                inner = b"".join(
                    message_entry(o - first if magic == 1 else o, encode_message(magic, k, v, ts, attrs))
                    for o, ts, k, v in records
                )
                wrapper_ts = h.max_timestamp if lat else max(NO_TIMESTAMP, *(ts for _o, ts, _k, _v in records))
                value = compress_legacy(codec, inner, magic)
                entries = [message_entry(records[-1][0], encode_message(magic, None, value, wrapper_ts, codec | attrs))]
            else:
                continue
            for entry in entries:
                if len(out) + len(entry) > max_bytes and not (min_one and not out):
                    return bytes(out) if out or not hard_limit else overflow_filler(max_bytes)
                out += entry
    return bytes(out)


def overflow_filler(size: int) -> bytes:
    """``size`` bytes that begin a message longer than themselves (offset -1): Kafka's
    overflow batch (LazyDownConversionRecordsSend), what a Fetch v0-v2 gets when its
    first message is larger than its partition_max_bytes. Those clients take such a
    partial message as one too large for their fetch size (kafka-python's
    RecordTooLargeError, librdkafka's MSG_SIZE_TOO_LARGE)."""
    if size <= 0:
        return b""
    head = _ENTRY.pack(-1, max(size + 1, 61))  # 61: a RecordBatch header, the smallest Kafka writes
    return (head + bytes(max(size - len(head), 0)))[:size]

