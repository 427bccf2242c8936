"""Validation of a client's records before a leader appends them (Kafka's LogValidator).

``validate_records`` takes one partition's records from a Produce request and
returns their batch headers, from which the log appends without parsing again;
or it refuses them with a ``RecordValidationError`` carrying the Kafka error the
partition is answered with. The rules, in the order they are checked:

- No batch at all: INVALID_RECORD.
- A batch that breaks RecordBatch v2 (records.py reads each header and checks
  its CRC): a bad CRC or a truncated batch is CORRUPT_MESSAGE; magic < 2 (v3+
  requires v2) or recordsCount != lastOffsetDelta + 1 INVALID_RECORD;
  compression bits naming no codec (5-7) UNSUPPORTED_COMPRESSION_TYPE.
- A batch above the topic's max.message.bytes: MESSAGE_TOO_LARGE.
- On a compacted topic (cleanup.policy has compact), a record without a key:
  INVALID_RECORD, each such record named in ``record_errors`` (its index within
  its batch, KIP-467), as Kafka 2.4+ answers (older Kafka said CORRUPT_MESSAGE).
  Records that do not decode there: CORRUPT_MESSAGE. Control batches are not
  looked at.

Cost, on the Produce hot path: one header read and one CRC32C call per batch and
a size comparison; records are decoded only on compacted topics, the one rule
that needs them.

Not done, where Kafka's LogValidator does more: batches are written as they came
(no recompression to the topic's compression.type, which refka does not serve);
timestamps are not bounded (refka has no message.timestamp.before/after.max.ms;
Kafka's defaults accept any timestamp too).
"""

from __future__ import annotations

from collections.abc import Sequence

from refka.protocol import ErrorCode
from refka.protocol.records import BatchHeader, RecordError, iter_records, parse_batches

from .config import LogConfig
from .errors import LogError


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
    if config.compacts:
        _check_keys(records, headers, topic, partition)
    return headers


def _check_keys(
    records: bytes | bytearray | memoryview, headers: Sequence[BatchHeader], topic: str, partition: int
) -> None:
    try:
        keyless = keyless_records(records, headers)
    except RecordError as e:
        raise RecordValidationError(ErrorCode.CORRUPT_MESSAGE, str(e)) from e
    if keyless:
        why = f"Compacted topic cannot accept message without key in topic partition {topic}-{partition}."
        raise RecordValidationError(
            ErrorCode.INVALID_RECORD,
            f"One or more records have been rejected: {why}",
            [(i, why) for i in keyless],
        )


def keyless_records(batches: bytes | bytearray | memoryview, headers: Sequence[BatchHeader]) -> list[int]:
    """Indexes (within their batch, Kafka's ``batch_index``) of the records without a
    key. Control batches are not looked at."""
    mv = batches if isinstance(batches, memoryview) else memoryview(batches)
    out: list[int] = []
    for h in headers:
        if h.is_control:
            continue
        for i, r in enumerate(iter_records(mv[h.position : h.position + h.length])):
            if r.key is None:
                out.append(i)
    return out
