"""Record validation before a leader appends (refka/broker/log/validator.py): each
refusal, with the Kafka error a Produce client gets."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from refka.broker.log import LogConfig
from refka.broker.log.validator import RecordValidationError, keyless_records, validate_records
from refka.protocol import ErrorCode
from refka.protocol.records import Compression, RecordError, build_batch, parse_batches
from tests.broker.log.helpers import kv

COMPACTED = LogConfig(cleanup_policy="compact")


def _patch(data: bytearray, position: int, fmt: str, value: int) -> None:
    """Change one field of the (first) batch and give it a valid CRC again."""
    struct.pack_into(fmt, data, position, value)
    (batch_length,) = struct.unpack_from(">i", data, 8)
    struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21 : 12 + batch_length]))


# -- keys on compacted topics --------------------------------------------------------------


def test_keyless_records_finds_records_without_keys():
    data = kv(("a", "1"), (None, "x")) + kv((None, "y"), ("b", "2"))
    assert keyless_records(data, parse_batches(data)) == [1, 0]
    ok = kv(("a", "1"))
    assert keyless_records(ok, parse_batches(ok)) == []


def test_a_record_without_a_key_is_refused_on_a_compacted_topic_only():
    data = kv(("a", "1"), (None, "x")) + kv((None, "y"), ("b", "2"))
    with pytest.raises(RecordValidationError) as exc:
        validate_records(data, COMPACTED, "orders", 3)
    why = "Compacted topic cannot accept message without key in topic partition orders-3."
    assert exc.value.error_code == ErrorCode.INVALID_RECORD
    assert exc.value.message == f"One or more records have been rejected: {why}"
    assert exc.value.record_errors == [(1, why), (0, why)]
    assert validate_records(data, LogConfig(), "orders", 3) == parse_batches(data)


def test_records_that_do_not_decode_on_a_compacted_topic_are_corrupt():
    data = kv(("a", "1"))
    _patch(data, 61, ">B", 0x7E)  # the first record's length: 63 bytes, past the batch
    assert validate_records(data, LogConfig(), "t", 0) == parse_batches(data)  # not decoded there
    with pytest.raises(RecordValidationError) as exc:
        validate_records(data, COMPACTED, "t", 0)
    assert exc.value.error_code == ErrorCode.CORRUPT_MESSAGE and not exc.value.record_errors


def test_control_batches_are_not_looked_at_for_keys():
    data = build_batch([(None, b"marker")], is_control=True)
    assert validate_records(data, COMPACTED, "t", 0) == parse_batches(data)


# -- the batch format, the size --------------------------------------------------------------


@pytest.mark.parametrize("records", [None, b"", memoryview(b"")])
def test_no_batch_at_all_is_an_invalid_record(records):
    with pytest.raises(RecordValidationError) as exc:
        validate_records(records, LogConfig(), "t", 0)
    assert exc.value.error_code == ErrorCode.INVALID_RECORD
    assert exc.value.message == "the produce request contains no record batches"


def _bad_crc(data: bytearray) -> None:
    data[-1] ^= 0xFF


def _truncated(data: bytearray) -> None:
    del data[-5:]


def _magic_1(data: bytearray) -> None:
    _patch(data, 16, ">b", 1)


def _count_mismatch(data: bytearray) -> None:
    _patch(data, 57, ">i", 5)


def _unknown_codec(data: bytearray) -> None:
    _patch(data, 21, ">h", 5)


@pytest.mark.parametrize(
    ("damage", "error_code"),
    [
        (_bad_crc, ErrorCode.CORRUPT_MESSAGE),
        (_truncated, ErrorCode.CORRUPT_MESSAGE),
        (_magic_1, ErrorCode.INVALID_RECORD),
        (_count_mismatch, ErrorCode.INVALID_RECORD),
        (_unknown_codec, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    ],
    ids=lambda v: v.__name__.strip("_") if callable(v) else v.name,
)
def test_a_batch_that_breaks_the_v2_format_is_refused(damage, error_code):
    data = kv(("a", "1")) + kv(("b", "2"))
    damage(data)
    with pytest.raises(RecordValidationError) as exc:
        validate_records(memoryview(data), LogConfig(), "t", 0)
    assert exc.value.error_code == error_code and exc.value.message
    assert isinstance(exc.value.__cause__, RecordError)


def test_a_batch_above_max_message_bytes_is_too_large():
    small, big = kv(("a", "1")), kv(("b", "x" * 500))
    config = LogConfig(max_message_bytes=len(big) - 1)
    assert validate_records(small, config, "t", 0) == parse_batches(small)
    with pytest.raises(RecordValidationError) as exc:
        validate_records(small + big, config, "t", 0)
    assert exc.value.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert exc.value.message == f"batch of {len(big)} bytes exceeds max.message.bytes {len(big) - 1}"


def test_rules_apply_in_order_format_then_size_then_keys():
    keyless_and_big = kv((None, "x" * 500))
    small_limit = LogConfig(cleanup_policy="compact", max_message_bytes=100)
    with pytest.raises(RecordValidationError) as exc:
        validate_records(keyless_and_big, small_limit, "t", 0)
    assert exc.value.error_code == ErrorCode.MESSAGE_TOO_LARGE
    _bad_crc(keyless_and_big)
    with pytest.raises(RecordValidationError) as exc:
        validate_records(keyless_and_big, small_limit, "t", 0)
    assert exc.value.error_code == ErrorCode.CORRUPT_MESSAGE


def test_valid_records_give_their_headers_for_the_append():
    data = kv(("a", "1")) + kv(("b", "2"), ("c", "3"), compression=Compression.ZSTD)
    headers = validate_records(memoryview(data), COMPACTED, "t", 0)
    assert headers == parse_batches(data)
    assert [(h.position, h.records_count) for h in headers] == [(0, 1), (headers[0].length, 2)]
