"""Validation of a client's records before a leader appends them (Kafka's LogValidator).

``validate_records`` takes one partition's records from a Produce request and
returns their batch headers, from which the log appends without parsing again;
or it refuses them with a ``RecordValidationError`` carrying the Kafka error the
partition is answered with. Nothing refused reaches the log. The rules, in the
order they are checked:

- No batch at all: INVALID_RECORD.
- A batch that breaks RecordBatch v2 (records.py reads each header and checks
  its CRC): a bad CRC or a truncated batch is CORRUPT_MESSAGE; magic < 2 (v3+
  requires v2) or recordsCount != lastOffsetDelta + 1 INVALID_RECORD;
  compression bits naming no codec (5-7) UNSUPPORTED_COMPRESSION_TYPE.
- A batch above the topic's max.message.bytes: MESSAGE_TOO_LARGE.
- A compressed batch whose records decompress to more than
  ``DECOMPRESSED_SIZE_FACTOR`` (64) times max.message.bytes: MESSAGE_TOO_LARGE,
  found out producing at most one byte more. refka's bound, not Kafka's: Kafka
  streams the records it checks, refka holds them whole, and without a bound a
  3 KB zstd batch (100 MB of zeros) would make the leader allocate what it
  says. A Java producer splits a batch answered MESSAGE_TOO_LARGE and sends
  the halves.
- Records a batch's CRC covers but that do not read back (Kafka's
  validateMessagesAndAssignOffsets walking each record): every batch's records
  section is decompressed once and walked by record_walk.py's ``walk_records``
  (each record's length and varints consistent and inside the batch,
  recordsCount records and no byte more, offset deltas 0, 1, 2, ..., header
  keys neither null nor other than UTF-8): CORRUPT_MESSAGE, and the message says
  which record. Control batches are walked too.
- On a compacted topic (cleanup.policy has compact), a record without a key:
  INVALID_RECORD, each such record named in ``record_errors`` (its index within
  its batch, KIP-467), as Kafka 2.4+ answers (older Kafka said CORRUPT_MESSAGE).
  The keys come from the same walk. Control batches' records are not counted.

Kafka 3.9 answers the walk's refusals otherwise, and refka does not follow it
there: records that do not parse raise InvalidRecordException (INVALID_RECORD)
and a payload that does not decompress a KafkaException that nothing maps, so
the client reads UNKNOWN_SERVER_ERROR, a server fault, for its own bytes (as
sarama and librdkafka users have reported). refka answers both with the error
Kafka's protocol describes for a message "otherwise corrupt", CORRUPT_MESSAGE,
as it answered undecodable records on compacted topics before. Kafka does not
check offset deltas (it rewrites a compressed batch whose deltas are off, and
stores an uncompressed one as sent) nor header keys' UTF-8; refka writes
batches as they came and its own readers (the cleaner, ListOffsets, group
loading) decode header keys, so it refuses both.

Cost, on the Produce hot path (``python -m lab.bench.validate`` per codec, value
size and layout): one header read and one CRC32C call per batch and a size
comparison, as before; then the walk, compiled (record_walk.py's COMPILED):
~15 ns a record, so a 1 MB batch of 100-byte values costs ~0.16 ms where its
CRC alone costs ~0.05 ms, and of 1 KiB values ~0.09 against ~0.06 ms (in
Python, where no C compiler was at hand: ~0.1 µs a record when a batch's
records are laid out alike, ~1.5-2 µs when not); and a compressed batch's
decompression (~0.3-1 ms a MB for snappy, lz4 and zstd, ~1.5-3 ms for gzip).
No object is built per record.

Produce v0-v2 may carry a legacy message set (magic 0 or 1) instead:
``validate_message_set`` checks it as Kafka's Log and LogValidator do
(protocol/legacy_records.py ``decode_message_set``: sizes against
max.message.bytes, CRCs, magics, the wrapper and its inner messages) and
converts it to one RecordBatch v2 (keys, values and timestamps kept, no
headers, the wrapper's codec kept), as Kafka 3.x with message format v2 does;
the log then appends that batch. On top of the rules above: a compacted
topic's message without a key is INVALID_RECORD; a magic-1 message (or
wrapper) marked LogAppendTime by its producer is INVALID_TIMESTAMP unless the
topic takes CreateTime and it has a timestamp, as Kafka's validateTimestamp
answers, and so is a timestamp below -1 (Kafka's MemoryRecordsBuilder throws
an IllegalArgumentException there, which reaches the client as
UNKNOWN_SERVER_ERROR); the converted batch above max.message.bytes is
MESSAGE_TOO_LARGE (Kafka checks the converted size too). Kafka 3.9 reads a
message set's trailing partial message (and an inner message set's) as its
end and drops it; refka answers CORRUPT_MESSAGE, as for a RecordBatch v2
that does not read back, and so for key and value lengths that do not fill a
message exactly. Produce v0-v2 may also carry RecordBatch v2 batches (Kafka
does not check the magic below v3): ``validate_records`` takes them.

Not done, where Kafka's LogValidator does more: batches are written as they came
(no recompression to the topic's compression.type, which refka does not serve);
timestamps are not bounded (refka has no message.timestamp.before/after.max.ms;
Kafka's defaults accept any timestamp too).
"""

from __future__ import annotations

from collections.abc import Sequence

from refka.protocol import ErrorCode
from refka.protocol.legacy_records import decode_message_set, to_record_batch
from refka.protocol.record_walk import walk_records
from refka.protocol.records import NO_TIMESTAMP, BatchHeader, RecordError, parse_batches, record_data

from .config import LogConfig
from .errors import LogError

# A compressed batch's records may decompress to at most this many times the topic's
# max.message.bytes (64 MiB at Kafka's default); see the module docstring.
DECOMPRESSED_SIZE_FACTOR = 64


class RecordValidationError(LogError):
    """Records a leader refuses to append. ``record_errors``: (index within its
    batch, message) of each record at fault, when the rule is about records."""

    error_code: ErrorCode

    def __init__(
        self, error_code: ErrorCode, message: str, record_errors: Sequence[tuple[int, str]] = ()
    ) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.record_errors = record_errors


def validate_records(
    records: bytes | bytearray | memoryview | None, config: LogConfig, topic: str, partition: int
) -> list[BatchHeader]:
    """The headers of ``records``, a Produce request's records for ``topic``
    ``partition``, if the module docstring's rules let them in; else
    RecordValidationError."""
    if records is None or len(records) == 0:
        raise RecordValidationError(ErrorCode.INVALID_RECORD, "the produce request contains no record batches")
    try:
        headers = parse_batches(records)
    except RecordError as e:
        raise RecordValidationError(ErrorCode(e.error_code), str(e)) from e
    max_bytes = config.max_message_bytes
    for h in headers:
        if h.length > max_bytes:
            raise RecordValidationError(
                ErrorCode.MESSAGE_TOO_LARGE, f"batch of {h.length} bytes exceeds max.message.bytes {max_bytes}"
            )
    try:
        keyless = keyless_records(records, headers, DECOMPRESSED_SIZE_FACTOR * max_bytes)
    except RecordError as e:
        raise RecordValidationError(ErrorCode(e.error_code), f"{e} in topic partition {topic}-{partition}") from e
    if keyless and config.compacts:
        why = f"Compacted topic cannot accept message without key in topic partition {topic}-{partition}."
        raise RecordValidationError(
            ErrorCode.INVALID_RECORD,
            f"One or more records have been rejected: {why}",
            [(i, why) for i in keyless],
        )
    return headers


def keyless_records(
    batches: bytes | bytearray | memoryview, headers: Sequence[BatchHeader], max_decompressed: int | None = None
) -> list[int]:
    """Walk every batch's records (record_walk.py ``walk_records``, one decompression per
    batch, to at most ``max_decompressed`` bytes) and give the indexes (within their
    batch, Kafka's ``batch_index``) of the records without a key; control batches'
    records are not counted. Raises RecordError, naming the batch, for records that
    break the format or decompress to more."""
    mv = batches if isinstance(batches, memoryview) else memoryview(batches)
    out: list[int] = []
    for h in headers:
        try:
            data = record_data(mv[h.position : h.position + h.length], max_decompressed)
            keyless = walk_records(data, h.records_count)
        except RecordError as e:
            raise type(e)(f"batch at position {h.position}: {e}") from e
        if keyless and not h.is_control:
            out += keyless
    return out


def validate_message_set(
    records: bytes | bytearray | memoryview, config: LogConfig, topic: str, partition: int
) -> tuple[memoryview, list[BatchHeader]]:
    """A Produce v0-v2 legacy message set for ``topic`` ``partition`` checked by the module
    docstring's rules and converted to one RecordBatch v2: (the batch, its header), for
    the log to append; else RecordValidationError."""
    max_bytes = config.max_message_bytes
    where = f"in topic partition {topic}-{partition}"
    try:
        message_set = decode_message_set(
            records, max_message_size=max_bytes, max_decompressed=DECOMPRESSED_SIZE_FACTOR * max_bytes
        )
    except RecordError as e:
        raise RecordValidationError(ErrorCode(e.error_code), f"{e} {where}") from e
    # Kafka fails the first batch with a record at fault, naming each of its records; an
    # uncompressed message is a batch of its own (batch_index 0), a wrapper one batch.
    compressed = bool(message_set.compression)
    faults: list[tuple[int, str]] = []
    timestamp_fault = False
    for i, m in enumerate(message_set.messages):
        index = i if compressed else 0
        if config.compacts and m.key is None:
            faults.append((index, f"Compacted topic cannot accept message without key {where}."))
        elif m.timestamp < NO_TIMESTAMP:
            faults.append((index, f"Invalid negative timestamp {m.timestamp} of message with offset {m.offset}"))
            timestamp_fault = True
        elif m.log_append_time and (config.log_append_time or m.timestamp == NO_TIMESTAMP):
            faults.append((index, "Invalid timestamp type in message: producer should not set timestamp type "
                                  "to LogAppendTime."))
            timestamp_fault = True
        if faults and not compressed:
            break
    if faults:
        if timestamp_fault:
            raise RecordValidationError(
                ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp", faults
            )
        raise RecordValidationError(
            ErrorCode.INVALID_RECORD,
            f"One or more records have been rejected due to {len(faults)} record errors: {faults[:3]}",
            faults,
        )
    batch = to_record_batch(message_set)
    if len(batch) > max_bytes:
        raise RecordValidationError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"the message set converted to a batch of {len(batch)} bytes exceeds max.message.bytes {max_bytes} {where}",
        )
    return memoryview(batch), parse_batches(batch)
