"""Record validation before a leader appends (refka/broker/log/validator.py): each
refusal, with the Kafka error a Produce client gets, for every codec."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from refka.broker.log import LogConfig
from refka.broker.log.validator import (
    DECOMPRESSED_SIZE_FACTOR,
    RecordValidationError,
    keyless_records,
    validate_records,
)
from refka.protocol import ErrorCode
from refka.protocol.compression import compress
from refka.protocol.records import (
    HEADER_SIZE,
    Compression,
    CorruptRecordError,
    RecordError,
    build_batch,
    encode_varint,
    parse_batches,
)
from tests.broker.log.helpers import T0, kv

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


def test_records_that_do_not_decode_are_corrupt_on_every_topic():
    data = kv(("a", "1"))
    _patch(data, 61, ">B", 0x7E)  # the first record's length: 63 bytes, past the batch
    for config in (LogConfig(), COMPACTED):
        with pytest.raises(RecordValidationError) as exc:
            validate_records(data, config, "t", 0)
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


# -- records a valid CRC covers that do not read back: the walk, for every codec --------------

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CODECS = [c for c in Compression if c]


def _v(value: int) -> bytes:
    return encode_varint(value)


def _record(delta: int, key: bytes | None = b"key", headers: bytes = b"\x00", *, length_change: int = 0,
            key_length: bytes | None = None) -> bytes:
    """One record's bytes; ``headers`` is the raw header section (count, then headers)."""
    if key_length is None:
        key_length = _v(-1) if key is None else _v(len(key))
    body = b"\x00\x00" + _v(delta) + key_length + (key or b"") + _v(5) + b"value" + headers
    return _v(len(body) + length_change) + body


def _batch(records: bytes, count: int, codec: Compression = Compression.NONE) -> bytearray:
    """A batch whose header says ``count`` records and whose records section is
    ``records`` compressed with ``codec``, under a valid CRC: only its contents can be wrong."""
    payload = compress(codec, records) if codec else records
    out = bytearray(HEADER_SIZE) + payload
    _HEADER.pack_into(out, 0, 0, len(out) - 12, -1, 2, 0, int(codec), count - 1, T0, T0, -1, -1, -1, count)
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return out


# name: (records section, recordsCount in the header)
BROKEN_RECORDS = {
    "record_length_past_the_batch": (_record(0, length_change=40), 1),
    "record_length_short_of_its_fields": (_record(0, length_change=-2) + b"\x00\x00", 1),
    "fewer_records_than_the_count": (_record(0) + _record(1), 3),
    "bytes_after_the_last_record": (_record(0) + _record(1) + b"\x00\x00\x00", 2),
    "offset_deltas_out_of_order": (_record(0) + _record(2) + _record(1), 3),
    "varint_longer_than_5_bytes": (_record(0, key_length=b"\x86\x80\x80\x80\x80\x00"), 1),
    "negative_header_count": (_record(0, headers=_v(-3)), 1),
    "null_header_key": (_record(0, headers=_v(1) + _v(-1) + _v(2) + b"hv"), 1),
    "header_key_not_utf8": (_record(0, headers=_v(1) + _v(1) + b"\xc3" + _v(-1)), 1),
}


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
@pytest.mark.parametrize("case", BROKEN_RECORDS)
def test_records_that_do_not_read_back_are_corrupt_whatever_the_codec(case, codec):
    records, count = BROKEN_RECORDS[case]
    data = _batch(records, count, codec)
    assert parse_batches(data)  # the header and the CRC are fine
    for config in (LogConfig(), COMPACTED):
        with pytest.raises(RecordValidationError) as exc:
            validate_records(memoryview(data), config, "orders", 3)
        assert exc.value.error_code == ErrorCode.CORRUPT_MESSAGE
        assert exc.value.message.endswith("in topic partition orders-3") and not exc.value.record_errors
        assert isinstance(exc.value.__cause__, CorruptRecordError)


def test_the_same_records_well_formed_are_accepted_whatever_the_codec():
    records = _record(0) + _record(1, key=None) + _record(2, headers=_v(1) + _v(1) + b"h" + _v(-1))
    for codec in Compression:
        data = _batch(records, 3, codec)
        assert validate_records(data, LogConfig(), "t", 0) == parse_batches(data)
        with pytest.raises(RecordValidationError) as exc:
            validate_records(data, COMPACTED, "orders", 3)
        assert (exc.value.error_code, [i for i, _ in exc.value.record_errors]) == (ErrorCode.INVALID_RECORD, [1])


@pytest.mark.parametrize("codec", _CODECS, ids=lambda c: c.name.lower())
def test_a_compressed_payload_that_does_not_decompress_is_corrupt(codec):
    data = kv(*((f"k{i}", "value " * 20) for i in range(20)), compression=codec)
    for i in range(HEADER_SIZE + 4, len(data) - 4):
        data[i] ^= 0x5A
    _patch(data, 57, ">i", 20)  # the same count: just a fresh CRC over the garbled payload
    with pytest.raises(RecordValidationError) as exc:
        validate_records(data, LogConfig(), "t", 0)
    assert exc.value.error_code == ErrorCode.CORRUPT_MESSAGE


def test_a_batch_flagged_lz4_that_is_not_lz4_is_corrupt():
    # The batch of issue 16's reproducer: an uncompressed record, compression bits 3.
    data = bytes.fromhex(
        "00000000000000000000004dffffffff02ceadf41d000300000000000001a2120e87ee000001a2120e87ee"
        "ffffffffffffffffffffffffffff0000000136000000026b2876767676767676767676767676767676767676"
        "7600"
    )
    with pytest.raises(RecordValidationError) as exc:
        validate_records(data, LogConfig(), "repro-lz4", 0)
    assert exc.value.error_code == ErrorCode.CORRUPT_MESSAGE
    assert "cannot decompress records (LZ4)" in exc.value.message


def test_a_null_header_key_is_corrupt():
    data = _batch(_record(0, headers=_v(1) + _v(-1) + _v(-1)), 1)
    with pytest.raises(RecordValidationError) as exc:
        validate_records(data, LogConfig(), "t", 0)
    assert exc.value.error_code == ErrorCode.CORRUPT_MESSAGE
    assert "record header key is null" in exc.value.message


def test_a_broken_batch_after_good_ones_refuses_the_whole_request():
    good = kv(("a", "1"))
    bad = _batch(_record(0) + _record(0), 2, Compression.ZSTD)
    with pytest.raises(RecordValidationError) as exc:
        validate_records(good + bad, LogConfig(), "t", 0)
    assert exc.value.error_code == ErrorCode.CORRUPT_MESSAGE
    assert exc.value.message.startswith(f"batch at position {len(good)}: record 1 has offset delta 0")


def test_control_batches_are_walked_too():
    data = _batch(_record(0, key=None, headers=_v(1) + _v(-1) + _v(-1)), 1)
    struct.pack_into(">h", data, 21, 0x20)  # control
    struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:]))
    with pytest.raises(RecordValidationError) as exc:
        validate_records(data, COMPACTED, "t", 0)
    assert exc.value.error_code == ErrorCode.CORRUPT_MESSAGE


# Not snappy: it compresses 21 times at most, so it cannot pass 64 times max.message.bytes.
@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4, Compression.ZSTD], ids=lambda c: c.name.lower())
def test_records_that_decompress_past_64_times_max_message_bytes_are_too_large(codec):
    config = LogConfig(max_message_bytes=1000)
    bound = DECOMPRESSED_SIZE_FACTOR * 1000
    one = _record(0, key=b"k" * (bound - 16))  # the record alone takes the whole bound
    assert len(one) == bound
    assert validate_records(_batch(one, 1, codec), config, "t", 0)
    bomb = _batch(bytes(bound + 1), 1, codec)  # zeros: a few bytes once compressed
    assert len(bomb) < 1000
    with pytest.raises(RecordValidationError) as exc:
        validate_records(bomb, config, "t", 0)
    assert exc.value.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert exc.value.message == (f"batch at position 0: records ({codec.name}) decompress to more than {bound} "
                                 "bytes in topic partition t-0")
