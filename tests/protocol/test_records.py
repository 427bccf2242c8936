"""RecordBatch v2 codec: header parsing, validation errors, in-place patches, record
decoding for every compression, and kafka-python / aiokafka as independent oracles."""

from __future__ import annotations

import struct

import pytest
import zstandard
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from refka.protocol import records as r
from refka.protocol.records import (
    HEADER_SIZE,
    BatchHeader,
    Compression,
    CorruptRecordError,
    InvalidRecordError,
    NewRecord,
    TimestampType,
    UnsupportedCompressionTypeError,
    assign_offsets,
    build_batch,
    decode_varint,
    encode_varint,
    iter_records,
    iter_valid_batches,
    parse_batches,
    set_log_append_time,
    valid_length,
)

ALL_COMPRESSIONS = list(Compression)
# Compressible enough that clients which skip useless compression still compress.
SAMPLE = [
    NewRecord(b"key-%d" % i, b"value " * 40 + b"%d" % i, [("h1", b"v1"), ("h2", None)], 1_700_000_000_000 + i)
    for i in range(20)
] + [NewRecord(None, None, (), 1_700_000_000_100), NewRecord(b"", b"", (), 1_699_999_999_000)]


def _fix_crc(buf: bytearray, position: int = 0) -> None:
    (length,) = struct.unpack_from(">i", buf, position + 8)
    crc = crc32c(memoryview(buf)[position + 21 : position + 12 + length])
    struct.pack_into(">I", buf, position + 17, crc)


# -- headers and validation -----------------------------------------------------------


def test_build_and_parse_header_fields():
    buf = build_batch(
        SAMPLE[:3],
        base_offset=42,
        producer_id=7,
        producer_epoch=3,
        base_sequence=11,
        partition_leader_epoch=5,
        is_transactional=True,
    )
    (h,) = parse_batches(buf)
    assert isinstance(h, BatchHeader)
    assert h.base_offset == 42
    assert h.length == len(buf)
    assert h.partition_leader_epoch == 5
    assert h.magic == 2
    assert h.last_offset_delta == 2 and h.records_count == 3
    assert h.last_offset == 44 and h.next_offset == 45
    assert h.base_timestamp == SAMPLE[0].timestamp
    assert h.max_timestamp == SAMPLE[2].timestamp
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 3, 11)
    assert h.is_transactional and not h.is_control
    assert h.compression == Compression.NONE
    assert h.timestamp_type == TimestampType.CREATE_TIME
    assert h.position == 0 and h.end == len(buf)


def test_concatenated_batches_report_positions():
    a = build_batch(SAMPLE[:2], timestamp=1)
    b = build_batch(SAMPLE[2:5], compression=Compression.LZ4, timestamp=1)
    c = build_batch(SAMPLE[5:6], is_control=True, timestamp=1)
    headers = parse_batches(memoryview(bytes(a + b + c)))
    assert [h.position for h in headers] == [0, len(a), len(a) + len(b)]
    assert headers[1].compression == Compression.LZ4
    assert headers[2].is_control


def test_bad_crc_is_corrupt_message():
    buf = build_batch(SAMPLE[:2], timestamp=1)
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError) as exc:
        parse_batches(buf)
    assert exc.value.error_code == 2
    assert len(parse_batches(buf, validate_crc=False)) == 1


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda b: b[:5], id="shorter-than-prefix"),
        pytest.param(lambda b: b[:-1], id="batch-beyond-buffer"),
        pytest.param(lambda b: b + b"\x00" * 7, id="trailing-partial-prefix"),
        pytest.param(
            lambda b: bytes(b[:8]) + struct.pack(">i", 20) + bytes(b[12:]), id="length-below-header"
        ),
    ],
)
def test_truncated_or_misframed_batches_are_corrupt(mutate):
    buf = bytes(build_batch(SAMPLE[:2], timestamp=1))
    with pytest.raises(CorruptRecordError) as exc:
        parse_batches(mutate(buf))
    assert exc.value.error_code == 2


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_other_magic_is_invalid_record(magic):
    buf = build_batch(SAMPLE[:1], timestamp=1)
    buf[16] = magic  # outside the CRC
    with pytest.raises(InvalidRecordError) as exc:
        parse_batches(buf)
    assert exc.value.error_code == 87


def test_records_count_must_match_last_offset_delta():
    buf = build_batch(SAMPLE[:3], timestamp=1)
    struct.pack_into(">i", buf, 57, 5)
    _fix_crc(buf)
    with pytest.raises(InvalidRecordError):
        parse_batches(buf)
    # A log read (compacted batches) does not apply the produce-time rule.
    assert parse_batches(buf, check_counts=False)[0].records_count == 5


def test_unknown_compression_bits():
    buf = build_batch(SAMPLE[:1], timestamp=1)
    struct.pack_into(">h", buf, 21, 6)
    _fix_crc(buf)
    with pytest.raises(UnsupportedCompressionTypeError) as exc:
        parse_batches(buf)
    assert exc.value.error_code == 76


def test_iter_valid_batches_stops_at_torn_tail():
    a = build_batch(SAMPLE[:2], timestamp=1)
    b = build_batch(SAMPLE[2:4], timestamp=1)
    torn = bytes(a + b) + bytes(build_batch(SAMPLE[4:6], timestamp=1))[:30]
    assert [h.position for h in iter_valid_batches(torn)] == [0, len(a)]
    assert valid_length(torn) == len(a) + len(b)
    garbage = bytes(a) + b"\xde\xad\xbe\xef" * 40
    assert valid_length(garbage) == len(a)
    bad_crc = bytearray(a + b)
    bad_crc[-1] ^= 1
    assert valid_length(bad_crc) == len(a)
    assert valid_length(b"") == 0


# -- in-place patches -----------------------------------------------------------------


def test_assign_offsets_keeps_crc_valid():
    a = build_batch(SAMPLE[:3], timestamp=1)
    b = build_batch(SAMPLE[3:4], timestamp=1)
    buf = bytearray(a + b)
    headers = parse_batches(buf)
    assign_offsets(buf, headers[0].position, 1000, 9)
    assign_offsets(memoryview(buf), headers[1].position, 1003, 9)
    h0, h1 = parse_batches(buf)  # validates the CRC
    assert (h0.base_offset, h0.partition_leader_epoch) == (1000, 9)
    assert (h1.base_offset, h1.last_offset) == (1003, 1003)
    kp = pytest.importorskip("kafka.record.default_records")
    batch = kp.DefaultRecordBatch(bytes(buf[: h0.length]))
    assert batch.validate_crc()
    assert [rec.offset for rec in batch] == [1000, 1001, 1002]


def test_set_log_append_time():
    buf = build_batch(SAMPLE[:3], compression=Compression.GZIP, timestamp=1)
    set_log_append_time(buf, 0, 1_800_000_000_000)
    (h,) = parse_batches(buf)
    assert h.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert h.max_timestamp == 1_800_000_000_000
    assert h.base_timestamp == SAMPLE[0].timestamp
    assert h.compression == Compression.GZIP
    kp = pytest.importorskip("kafka.record.default_records")
    batch = kp.DefaultRecordBatch(bytes(buf))
    assert batch.validate_crc()
    assert {rec.timestamp for rec in batch} == {1_800_000_000_000}


# -- records --------------------------------------------------------------------------


def _decoded(buf) -> list[tuple]:
    (h,) = parse_batches(buf)
    out = []
    for rec in iter_records(buf):
        ts = (
            h.max_timestamp
            if h.timestamp_type == TimestampType.LOG_APPEND_TIME
            else h.base_timestamp + rec.timestamp_delta
        )
        out.append((h.base_offset + rec.offset_delta, ts, rec.key, rec.value, rec.headers))
    return out


def _expected(items, base_offset=0) -> list[tuple]:
    return [(base_offset + i, x.timestamp, x.key, x.value, list(x.headers)) for i, x in enumerate(items)]


@pytest.mark.parametrize("compression", ALL_COMPRESSIONS, ids=lambda c: c.name)
def test_round_trip_every_compression(compression):
    buf = build_batch(SAMPLE, base_offset=10, compression=compression)
    assert parse_batches(buf)[0].compression == compression
    assert _decoded(buf) == _expected(SAMPLE, 10)


def test_snappy_raw_and_xerial_framing_both_decode():
    big = [NewRecord(b"k", bytes(range(256)) * 300, (), 5)] * 3  # > 32 KiB: several xerial blocks
    xerial = build_batch(big, compression=Compression.SNAPPY)
    raw = build_batch(big, compression=Compression.SNAPPY, snappy_xerial=False)
    assert bytes(xerial[HEADER_SIZE : HEADER_SIZE + 8]) == b"\x82SNAPPY\x00"
    assert bytes(raw[HEADER_SIZE : HEADER_SIZE + 8]) != b"\x82SNAPPY\x00"
    assert _decoded(xerial) == _decoded(raw) == _expected(big)


def test_zstd_frame_without_content_size_decodes():
    # Java's zstd-jni streaming output omits the frame content size.
    body = build_batch(SAMPLE, timestamp=1)
    payload = zstandard.ZstdCompressor(write_content_size=False).compress(bytes(body[HEADER_SIZE:]))
    buf = bytearray(body[:HEADER_SIZE]) + payload
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">h", buf, 21, int(Compression.ZSTD))
    _fix_crc(buf)
    assert _decoded(buf) == _expected(SAMPLE)


@pytest.mark.parametrize("compression", [c for c in ALL_COMPRESSIONS if c], ids=lambda c: c.name)
def test_garbled_compressed_payload_is_corrupt(compression):
    buf = build_batch(SAMPLE, compression=compression)
    for i in range(HEADER_SIZE + 4, len(buf)):
        buf[i] ^= 0x5A
    _fix_crc(buf)
    with pytest.raises(CorruptRecordError):
        list(iter_records(buf))


def test_record_count_beyond_data_is_corrupt():
    buf = build_batch(SAMPLE[:2], timestamp=1)
    struct.pack_into(">i", buf, 57, 3)
    with pytest.raises(CorruptRecordError):
        list(iter_records(buf))


def test_log_append_time_batch_built_directly():
    buf = build_batch(SAMPLE[:2], timestamp_type=TimestampType.LOG_APPEND_TIME)
    assert parse_batches(buf)[0].timestamp_type == TimestampType.LOG_APPEND_TIME


def test_build_batch_rejects_empty():
    with pytest.raises(ValueError):
        build_batch([])


def test_plain_tuples_and_default_timestamp():
    buf = build_batch([(b"k", b"v"), (b"k2", b"v2", [("a", b"b")]), (None, b"v3", (), 123)], timestamp=100)
    assert _decoded(buf) == [
        (0, 100, b"k", b"v", []),
        (1, 100, b"k2", b"v2", [("a", b"b")]),
        (2, 123, None, b"v3", []),
    ]
    assert parse_batches(buf)[0].max_timestamp == 123


# -- varints and hypothesis round trips -------------------------------------------------


@pytest.mark.parametrize(
    "value,encoded",
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (300, b"\xd8\x04"),
    ],
)
def test_varint_known_encodings(value, encoded):
    assert encode_varint(value) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varint_round_trip(value):
    data = b"\xff" + encode_varint(value) + b"\x00"
    assert decode_varint(data, 1) == (value, len(data) - 1)


def test_overlong_varint_is_corrupt():
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\xff" * 11, 0)


_record = st.builds(
    NewRecord,
    key=st.none() | st.binary(max_size=40),
    value=st.none() | st.binary(max_size=300),
    headers=st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=3),
    timestamp=st.integers(min_value=0, max_value=2**45),
)


@settings(max_examples=60, deadline=None)
@given(
    items=st.lists(_record, min_size=1, max_size=15),
    compression=st.sampled_from(ALL_COMPRESSIONS),
    base_offset=st.integers(min_value=0, max_value=2**40),
)
def test_record_round_trip(items, compression, base_offset):
    buf = build_batch(items, base_offset=base_offset, compression=compression)
    (h,) = parse_batches(buf)
    assert h.max_timestamp == max(x.timestamp for x in items)
    assert _decoded(buf) == _expected(items, base_offset)


# -- independent implementations ---------------------------------------------------------

_ORACLES = []
try:
    from kafka.record import default_records as _kafka_python

    _ORACLES.append(pytest.param(_kafka_python, id="kafka-python"))
except ImportError:  # pragma: no cover
    pass
try:
    from aiokafka.record import default_records as _aiokafka

    _ORACLES.append(pytest.param(_aiokafka, id="aiokafka"))
except ImportError:  # pragma: no cover
    pass


@pytest.mark.skipif(not _ORACLES, reason="neither kafka-python nor aiokafka installed")
@pytest.mark.parametrize("oracle", _ORACLES)
@pytest.mark.parametrize("compression", ALL_COMPRESSIONS, ids=lambda c: c.name)
def test_our_batches_decode_with_oracle(oracle, compression):
    buf = build_batch(
        SAMPLE, base_offset=77, compression=compression, producer_id=5, producer_epoch=1, base_sequence=9
    )
    batch = oracle.DefaultRecordBatch(bytes(buf))
    assert batch.validate_crc()
    assert batch.compression_type == int(compression)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (5, 1, 9)
    got = [(x.offset, x.timestamp, x.key, x.value, list(x.headers)) for x in batch]
    assert got == _expected(SAMPLE, 77)


@pytest.mark.skipif(not _ORACLES, reason="neither kafka-python nor aiokafka installed")
@pytest.mark.parametrize("oracle", _ORACLES)
@pytest.mark.parametrize("compression", ALL_COMPRESSIONS, ids=lambda c: c.name)
def test_oracle_batches_decode_with_ours(oracle, compression):
    builder = oracle.DefaultRecordBatchBuilder(2, int(compression), 0, -1, -1, -1, 1 << 20)
    for i, x in enumerate(SAMPLE):
        builder.append(i, x.timestamp, x.key, x.value, list(x.headers))
    buf = builder.build()
    (h,) = parse_batches(bytes(buf))
    assert h.compression == compression, "oracle skipped compression: sample not compressible?"
    assert _decoded(bytes(buf)) == _expected(SAMPLE)


def test_module_exports_are_defined():
    assert all(hasattr(r, name) for name in r.__all__)
