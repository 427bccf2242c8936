"""Legacy message sets, magic 0 and 1 (refka/protocol/legacy_records.py, and the legacy
framings of compression.py): round trips, every refusal with the Kafka error it stands
for, each codec's framing (lz4's KAFKA-3160 header checksum for magic 0), wrapper offsets
(relative for magic 1, absolute for magic 0), the conversion to RecordBatch v2 for Produce
v0-v2 and the down-conversion for Fetch v0-v3; kafka-python's and aiokafka's legacy codecs
as independent oracles in both directions."""

from __future__ import annotations

import gzip
import os
import struct
import zlib

import lz4.frame
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refka.protocol import legacy_records as lr
from refka.protocol.compression import (
    XERIAL_MAGIC,
    DecompressionError,
    compress,
    compress_legacy,
    decompress_legacy,
    xxh32,
)
from refka.protocol.legacy_records import (
    LegacyMessage,
    build_message_set,
    decode_message_set,
    down_convert,
    encode_message,
    is_message_set,
    message_entry,
    to_record_batch,
)
from refka.protocol.records import (
    Compression,
    CorruptRecordError,
    InvalidRecordError,
    NewRecord,
    RecordError,
    RecordsTooLargeError,
    TimestampType,
    UnsupportedCompressionTypeError,
    build_batch,
    iter_records,
    parse_batches,
)

CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]
T0 = 1_700_000_000_000
SAMPLE = [
    (b"k0", b"v0", T0),
    (None, b"no key", T0 + 1),
    (b"", b"", T0 + 2),
    (b"tombstone", None, T0 + 3),
    (bytes(range(256)), b"compressible " * 200, T0 + 4),
]


def _as_read(message_set, magic: int) -> list[tuple]:
    """(offset, timestamp, key, value) of ``decode_message_set``'s messages."""
    return [(m.offset, m.timestamp, m.key, m.value) for m in message_set.messages]


def _expected(records, magic: int, base: int = 0) -> list[tuple]:
    return [(base + i, ts if magic == 1 else -1, k, v) for i, (k, v, ts) in enumerate(records)]


def _refresh_crc(entry: bytearray, position: int = 0) -> None:
    """Give the message at ``position`` (with its log overhead) a valid CRC again."""
    (size,) = struct.unpack_from(">i", entry, position + 8)
    struct.pack_into(">I", entry, position + 12, zlib.crc32(entry[position + 16 : position + 12 + size]))


def _wrapper(inner: bytes, magic: int, codec: int = Compression.GZIP, offset: int = 0, timestamp: int = T0,
             attributes: int = 0) -> bytes:
    """A wrapper message around the inner message set ``inner`` (any bytes)."""
    return message_entry(offset, encode_message(magic, None, compress_legacy(codec, inner, magic), timestamp,
                                                codec | attributes))


# -- round trips ------------------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_message_sets_round_trip_in_every_codec(magic, codec):
    buf = build_message_set(SAMPLE, magic, codec, base_offset=40)
    assert is_message_set(buf)
    got = decode_message_set(buf)
    assert (got.magic, got.compression) == (magic, codec)
    assert _as_read(got, magic) == _expected(SAMPLE, magic, 40)


_records = st.lists(
    st.tuples(st.none() | st.binary(max_size=30), st.none() | st.binary(max_size=200),
              st.integers(min_value=-1, max_value=2**45)),
    min_size=1, max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(records=_records, magic=st.sampled_from([0, 1]), codec=st.sampled_from(CODECS),
       base=st.integers(min_value=0, max_value=2**40))
def test_any_records_round_trip(records, magic, codec, base):
    got = decode_message_set(build_message_set(records, magic, codec, base_offset=base))
    assert _as_read(got, magic) == _expected(records, magic, base)


def test_a_record_batch_is_not_a_message_set():
    assert not is_message_set(build_batch([(b"k", b"v")]))
    assert not is_message_set(b"") and not is_message_set(None)


# -- wrapper offsets --------------------------------------------------------------------


def test_magic_1_inner_offsets_are_relative_to_the_wrapper_offset():
    buf = build_message_set([(b"a", b"1", T0), (b"b", b"2", T0), (b"c", b"3", T0)], 1, Compression.GZIP,
                            base_offset=100)
    # As a producer writes it: inner offsets 0, 1, 2 under a wrapper at the last one's absolute offset.
    (wrapper_offset,) = struct.unpack_from(">q", buf, 0)
    assert wrapper_offset == 102
    assert [m.offset for m in decode_message_set(buf).messages] == [100, 101, 102]


def test_a_magic_1_wrapper_at_offset_0_means_base_0_as_some_librdkafka_versions_sent():
    buf = build_message_set([(b"a", b"1", T0), (b"b", b"2", T0)], 1, Compression.SNAPPY, base_offset=7,
                            wrapper_offset=0)
    assert [m.offset for m in decode_message_set(buf).messages] == [0, 1]


def test_a_magic_1_wrapper_below_its_last_inner_offset_is_invalid():
    buf = build_message_set([(b"a", b"1", T0), (b"b", b"2", T0), (b"c", b"3", T0)], 1, Compression.GZIP,
                            wrapper_offset=1)
    with pytest.raises(InvalidRecordError, match="wrapper offset '1' is less than the last inner message offset '2'"):
        decode_message_set(buf)


def test_magic_0_inner_offsets_are_absolute_whatever_the_wrapper_says():
    inner = message_entry(5, encode_message(0, b"a", b"1")) + message_entry(9, encode_message(0, b"b", b"2"))
    got = decode_message_set(_wrapper(inner, 0, offset=1234))
    assert [(m.offset, m.key) for m in got.messages] == [(5, b"a"), (9, b"b")]


def test_uncompressed_messages_keep_their_own_offsets():
    buf = message_entry(3, encode_message(1, b"a", b"1", T0)) + message_entry(3, encode_message(1, b"b", b"2", T0))
    assert [m.offset for m in decode_message_set(buf).messages] == [3, 3]


# -- timestamps -------------------------------------------------------------------------


def test_a_log_append_time_wrapper_gives_every_inner_message_its_timestamp():
    buf = build_message_set([(b"a", b"1", T0), (b"b", b"2", T0 + 5)], 1, Compression.GZIP,
                            timestamp_type=TimestampType.LOG_APPEND_TIME)
    got = decode_message_set(buf).messages
    assert [(m.timestamp, m.log_append_time) for m in got] == [(T0 + 5, True), (T0 + 5, True)]


def test_create_time_messages_keep_their_timestamps_and_magic_0_has_none():
    (m1,) = decode_message_set(build_message_set([(b"a", b"1", T0)], 1)).messages
    (m0,) = decode_message_set(build_message_set([(b"a", b"1", T0)], 0)).messages
    assert (m1.timestamp, m1.log_append_time) == (T0, False)
    assert (m0.timestamp, m0.log_append_time) == (-1, False)


# -- refusals: CORRUPT_MESSAGE ----------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
def test_a_message_failing_its_crc_is_corrupt(magic):
    buf = bytearray(build_message_set(SAMPLE, magic))
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="is corrupt") as e:
        decode_message_set(bytes(buf))
    assert e.value.error_code == 2


@pytest.mark.parametrize("magic", [0, 1])
def test_an_inner_message_failing_its_crc_is_corrupt(magic):
    inner = bytearray(message_entry(0, encode_message(magic, b"a", b"value", T0)))
    inner[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="inner message at position 0 is corrupt"):
        decode_message_set(_wrapper(bytes(inner), magic))


@pytest.mark.parametrize("mutate", [
    pytest.param(lambda b: b[:-3], id="truncated-message"),
    pytest.param(lambda b: b[:10], id="truncated-log-overhead"),
    pytest.param(lambda b: b[:8] + struct.pack(">i", 13) + b[12:], id="size-below-overhead"),
    pytest.param(lambda b: b[:16] + b"\x03" + b[17:], id="magic-3"),
])
def test_misframed_message_sets_are_corrupt(mutate):
    with pytest.raises(CorruptRecordError):
        decode_message_set(mutate(build_message_set([(b"a", b"1"), (b"b", b"2")], 0)))


def test_lengths_that_do_not_fill_the_message_are_corrupt():
    for body in (encode_message(0, b"a", b"1")[:-1] + b"", encode_message(0, b"a", b"1") + b"x"):
        entry = bytearray(message_entry(0, body))
        _refresh_crc(entry)
        with pytest.raises(CorruptRecordError):
            decode_message_set(bytes(entry))


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4], ids=lambda c: c.name)
def test_a_wrapper_value_that_does_not_decompress_is_corrupt(codec):
    entry = message_entry(0, encode_message(1, None, b"not compressed at all", T0, int(codec)))
    with pytest.raises(CorruptRecordError, match="cannot decompress the wrapper"):
        decode_message_set(entry)


def test_an_inner_message_set_ending_inside_a_message_is_corrupt():
    inner = message_entry(0, encode_message(1, b"a", b"1", T0)) + message_entry(1, encode_message(1, b"b", b"2", T0))
    with pytest.raises(CorruptRecordError, match="inner message at position"):
        decode_message_set(_wrapper(inner[:-4], 1, offset=1))


@settings(max_examples=300, deadline=None)
@given(magic=st.sampled_from([0, 1]), codec=st.sampled_from(CODECS),
       flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=1, max_value=255)), max_size=4),
       cut=st.integers(min_value=0, max_value=400), fix_crc=st.booleans())
def test_damaged_message_sets_are_refused_with_a_record_error_only(magic, codec, flips, cut, fix_crc):
    """Whatever the damage, a Kafka error to answer (a RecordError), never another exception."""
    buf = bytearray(build_message_set(SAMPLE[:3], magic, codec))
    for position, mask in flips:
        buf[position % len(buf)] ^= mask
    buf = buf[: max(len(buf) - cut, 0)]
    if fix_crc and len(buf) >= 26 and 14 <= struct.unpack_from(">i", buf, 8)[0] <= len(buf) - 12:
        _refresh_crc(buf)
    try:
        decode_message_set(bytes(buf))
    except RecordError:
        pass


@settings(max_examples=300, deadline=None)
@given(magic=st.sampled_from([0, 1]), codec=st.sampled_from(CODECS[1:]),
       flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=1, max_value=255)), max_size=4),
       cut=st.integers(min_value=0, max_value=60))
def test_damaged_inner_message_sets_are_refused_with_a_record_error_only(magic, codec, flips, cut):
    inner = bytearray(build_message_set(SAMPLE[:3], magic))
    for position, mask in flips:
        inner[position % len(inner)] ^= mask
    try:
        decode_message_set(_wrapper(bytes(inner[: max(len(inner) - cut, 0)]), magic, codec, offset=2))
    except RecordError:
        pass


# -- refusals: INVALID_RECORD, MESSAGE_TOO_LARGE, UNSUPPORTED_COMPRESSION_TYPE ---------


def test_structural_refusals_are_invalid_record():
    plain = build_message_set([(b"a", b"1", T0)], 1)
    wrapped = build_message_set([(b"a", b"1", T0)], 1, Compression.GZIP)
    cases = {
        "no message": b"",
        "more than one batch": wrapped + wrapped,
        "more than one batch ": plain + wrapped,
        "not the first message's magic": plain + build_message_set([(b"a", b"1")], 0),
        "not the first message's magic ": plain + bytes(build_batch([(b"a", b"1")])),
        "null value": message_entry(0, encode_message(1, None, None, T0, Compression.GZIP)),
        "no inner records": _wrapper(b"", 1),
        "must not be compressed": _wrapper(wrapped, 1),
        "its wrapper 1": _wrapper(build_message_set([(b"a", b"1")], 0), 1),
    }
    for why, buf in cases.items():
        with pytest.raises(InvalidRecordError, match=why.strip()) as e:
            decode_message_set(buf)
        assert e.value.error_code == 87


@pytest.mark.parametrize("magic", [0, 1])
def test_a_zstd_wrapper_is_invalid_as_zstd_needs_magic_2(magic):
    entry = message_entry(0, encode_message(magic, None, compress(4, build_message_set([(b"a", b"1")], magic)), T0, 4))
    with pytest.raises(InvalidRecordError, match="zstd"):
        decode_message_set(entry)


def test_compression_bits_naming_no_codec_are_unsupported():
    entry = message_entry(0, encode_message(1, None, b"x", T0, 5))
    with pytest.raises(UnsupportedCompressionTypeError) as e:
        decode_message_set(entry)
    assert e.value.error_code == 76


def test_sizes_above_the_bounds_are_too_large():
    buf = build_message_set([(b"a", b"x" * 1000, T0)], 1, Compression.GZIP)
    assert decode_message_set(buf, max_message_size=len(buf)).messages
    with pytest.raises(RecordsTooLargeError) as e:
        decode_message_set(buf, max_message_size=len(buf) - 1)
    assert e.value.error_code == 10
    with pytest.raises(RecordsTooLargeError, match="decompresses to more than 100 bytes"):
        decode_message_set(buf, max_decompressed=100)


# -- codec framings ---------------------------------------------------------------------

DATA = b"".join(b"message %d of a set, " % i for i in range(5000))  # > 64 KB: several lz4 blocks


def test_xxh32_matches_the_lz4_library():
    assert xxh32(b"") == 0x02CC5D05
    for n in (1, 3, 4, 15, 16, 17, 33, 100):
        data = os.urandom(n)
        frame = lz4.frame.compress(data, content_checksum=True, store_size=False)
        assert struct.unpack("<I", frame[-4:])[0] == xxh32(data)


@pytest.mark.parametrize("magic", [0, 1])
def test_lz4_is_kafkas_frame_with_magic_0s_broken_header_checksum(magic):
    framed = compress_legacy(Compression.LZ4, DATA, magic)
    assert framed[:6] == b"\x04\x22\x4d\x18\x60\x40"  # magic number, FLG (v1, independent blocks), BD 64 KB
    hashed = framed[:6] if magic == 0 else framed[4:6]  # KAFKA-3160: magic 0 hashed the magic number too
    assert framed[6] == (xxh32(hashed) >> 8) & 0xFF
    assert decompress_legacy(Compression.LZ4, framed, magic) == DATA


def test_lz4_header_checksum_is_ignored_for_magic_0_and_checked_for_magic_1():
    broken, right = compress_legacy(Compression.LZ4, DATA, 0), compress_legacy(Compression.LZ4, DATA, 1)
    assert decompress_legacy(Compression.LZ4, broken, 0) == decompress_legacy(Compression.LZ4, right, 0) == DATA
    with pytest.raises(DecompressionError):
        decompress_legacy(Compression.LZ4, broken, 1)


def test_lz4_frames_kafka_does_not_read_are_refused():
    dependent = lz4.frame.compress(DATA, block_linked=True)
    with pytest.raises(DecompressionError, match="dependent blocks"):
        decompress_legacy(Compression.LZ4, dependent, 1)
    with pytest.raises(DecompressionError, match="magic bytes"):
        decompress_legacy(Compression.LZ4, b"\x00" * 20, 1)
    content_size = lz4.frame.compress(DATA, block_linked=False, store_size=True)
    assert decompress_legacy(Compression.LZ4, content_size, 1) == DATA  # a content size is skipped


def test_snappy_is_written_xerial_framed_and_read_in_either_framing():
    assert compress_legacy(Compression.SNAPPY, DATA, 0).startswith(XERIAL_MAGIC)
    raw = compress(Compression.SNAPPY, DATA, snappy_xerial=False)
    assert decompress_legacy(Compression.SNAPPY, raw, 1) == DATA


def test_gzip_is_plain_gzip_members():
    assert decompress_legacy(Compression.GZIP, gzip.compress(DATA[:100]) + gzip.compress(DATA[100:]), 0) == DATA


def test_zstd_has_no_legacy_framing():
    with pytest.raises(ValueError, match="no compression codec 4 for magic 1"):
        compress_legacy(Compression.ZSTD, DATA, 1)


# -- Produce v0-v2: to RecordBatch v2 ---------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_a_message_set_becomes_one_record_batch_v2_in_its_codec(magic, codec):
    batch = to_record_batch(decode_message_set(build_message_set(SAMPLE, magic, codec, base_offset=50)))
    (h,) = parse_batches(batch)
    assert (h.base_offset, h.records_count, h.compression, h.producer_id) == (0, len(SAMPLE), codec, -1)
    assert h.timestamp_type == TimestampType.CREATE_TIME
    assert h.max_timestamp == (T0 + 4 if magic == 1 else -1)
    got = [(r.offset_delta, h.base_timestamp + r.timestamp_delta, r.key, r.value, r.headers)
           for r in iter_records(batch)]
    assert got == [(i, ts, k, v, []) for i, (_o, ts, k, v) in enumerate(_expected(SAMPLE, magic))]


# -- Fetch v0-v3: down-conversion -------------------------------------------------------

V2_SAMPLE = [NewRecord(b"k%d" % i, b"value %d " % i * 20, [("h", b"dropped")], T0 + i) for i in range(6)]


def _read_back(buf: bytes, magic: int) -> list[tuple]:
    """(offset, timestamp, key, value, attributes) of every message, inner ones resolved."""
    out = []
    pos = 0
    while pos < len(buf):
        (size,) = struct.unpack_from(">i", buf, pos + 8)
        entry = buf[pos : pos + 12 + size]
        for m in decode_message_set(entry).messages:
            assert m.magic == magic
            out.append((m.offset, m.timestamp, m.key, m.value, m.attributes))
        pos += 12 + size
    return out


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_down_conversion_keeps_offsets_and_drops_headers(magic, codec):
    batch = bytes(build_batch(V2_SAMPLE, base_offset=300, compression=codec))
    out = down_convert(batch, magic, 300, 1 << 20)
    assert [(o, ts, k, v) for o, ts, k, v, _a in _read_back(out, magic)] == [
        (300 + i, r.timestamp if magic == 1 else -1, r.key, r.value) for i, r in enumerate(V2_SAMPLE)
    ]
    (first_offset,) = struct.unpack_from(">q", out, 0)
    if codec:  # one wrapper at the last record's offset, in the batch's codec
        assert first_offset == 305 and out[17] & 7 == codec
        assert len(decode_message_set(out).messages) == len(V2_SAMPLE)
    else:
        assert first_offset == 300


def test_a_compressed_batch_becomes_a_wrapper_with_relative_or_absolute_inner_offsets():
    batch = bytes(build_batch(V2_SAMPLE[:3], base_offset=70, compression=Compression.GZIP))
    for magic, inner_offsets in ((1, [0, 1, 2]), (0, [70, 71, 72])):
        out = down_convert(batch, magic, 70, 1 << 20)
        inner = gzip.decompress(decode_message_set_value(out))
        offsets = []
        pos = 0
        while pos < len(inner):
            offset, size = struct.unpack_from(">qi", inner, pos)
            offsets.append(offset)
            pos += 12 + size
        assert offsets == inner_offsets
        assert struct.unpack_from(">q", out, 0)[0] == 72


def decode_message_set_value(entry: bytes) -> bytes:
    """The raw value of the (one) wrapper ``entry``."""
    magic = entry[16]
    pos = 18 if magic == 0 else 26
    (key_len,) = struct.unpack_from(">i", entry, pos)
    pos += 4 + max(key_len, 0)
    (n,) = struct.unpack_from(">i", entry, pos)
    return entry[pos + 4 : pos + 4 + n]


def test_a_log_append_time_batch_gives_magic_1_its_append_time_and_attribute_bit():
    for codec in (Compression.NONE, Compression.SNAPPY):
        batch = bytearray(build_batch(V2_SAMPLE[:2], compression=codec, timestamp_type=TimestampType.LOG_APPEND_TIME))
        struct.pack_into(">q", batch, 35, T0 + 999)  # max timestamp: the append time
        got = _read_back(down_convert(bytes(batch), 1, 0, 1 << 20), 1)
        assert [(ts, a & 0x08) for _o, ts, _k, _v, a in got] == [(T0 + 999, 0x08)] * 2
        assert {a & 0x08 for _o, _ts, _k, _v, a in _read_back(down_convert(bytes(batch), 0, 0, 1 << 20), 0)} == {0}


def test_an_uncompressed_batch_read_from_its_middle_starts_at_the_fetch_offset_a_compressed_one_whole():
    plain = bytes(build_batch(V2_SAMPLE, base_offset=10))
    assert [o for o, *_ in _read_back(down_convert(plain, 1, 13, 1 << 20), 1)] == [13, 14, 15]
    packed = bytes(build_batch(V2_SAMPLE, base_offset=10, compression=Compression.LZ4))
    assert [o for o, *_ in _read_back(down_convert(packed, 1, 13, 1 << 20), 1)] == list(range(10, 16))


def test_whole_messages_only_within_max_bytes_and_the_first_one_always():
    plain = bytes(build_batch(V2_SAMPLE, base_offset=0))
    every = down_convert(plain, 0, 0, 1 << 20)
    one = len(message_entry(0, encode_message(0, V2_SAMPLE[0].key, V2_SAMPLE[0].value)))
    assert [o for o, *_ in _read_back(down_convert(plain, 0, 0, 2 * one + 1), 0)] == [0, 1]
    assert [o for o, *_ in _read_back(down_convert(plain, 0, 0, 1), 0)] == [0]  # min_one
    assert down_convert(plain, 0, 0, 1, min_one=False) == b""
    assert down_convert([memoryview(plain)[:0], memoryview(plain)], 0, 0, 1 << 20) == every


def test_a_hard_limit_answers_the_overflow_filler_when_the_first_message_does_not_fit():
    plain = bytes(build_batch(V2_SAMPLE, base_offset=0))
    one = len(message_entry(0, encode_message(1, V2_SAMPLE[0].key, V2_SAMPLE[0].value, T0)))
    assert down_convert(plain, 1, 0, one - 1, hard_limit=True) == lr.overflow_filler(one - 1)
    assert [o for o, *_ in _read_back(down_convert(plain, 1, 0, one, hard_limit=True), 1)] == [0]
    filler = lr.overflow_filler(100)
    assert len(filler) == 100 and struct.unpack_from(">qi", filler) == (-1, 101)
    assert filler[12:] == bytes(88)
    assert lr.overflow_filler(5) == b"\xff" * 5 and lr.overflow_filler(0) == b""
    assert struct.unpack_from(">qi", lr.overflow_filler(20)) == (-1, 61)  # at least a batch header's length
    # What a client of Fetch v0-v2 makes of it: a message longer than the answer, nothing whole.
    with pytest.raises(CorruptRecordError, match="extends past the data"):
        decode_message_set(filler)


def test_control_batches_are_skipped_and_several_views_read_in_order():
    control = bytes(build_batch([(b"\x00\x00\x00\x00", b"")], base_offset=0, is_control=True, producer_id=1))
    data = bytes(build_batch(V2_SAMPLE[:2], base_offset=1))
    more = bytes(build_batch(V2_SAMPLE[2:3], base_offset=3, compression=Compression.GZIP))
    got = _read_back(down_convert([control + data, memoryview(more)], 1, 0, 1 << 20), 1)
    assert [o for o, *_ in got] == [1, 2, 3]


def test_zstd_batches_are_not_down_converted():
    zstd = bytes(build_batch(V2_SAMPLE[:2], base_offset=5, compression=Compression.ZSTD))
    plain = bytes(build_batch(V2_SAMPLE[:2], base_offset=3))
    with pytest.raises(UnsupportedCompressionTypeError, match="zstandard"):
        down_convert(zstd, 1, 5, 1 << 20)
    # The messages before it are answered; the next fetch starts at the zstd batch.
    assert [o for o, *_ in _read_back(down_convert(plain + zstd, 1, 3, 1 << 20), 1)] == [3, 4]


def test_a_produced_message_set_reads_back_down_converted_the_same():
    for magic in (0, 1):
        for codec in CODECS:
            sent = build_message_set(SAMPLE, magic, codec)
            stored = bytearray(to_record_batch(decode_message_set(sent)))
            struct.pack_into(">q", stored, 0, 0)
            back = down_convert(bytes(stored), magic, 0, 1 << 20)
            assert [(o, ts, k, v) for o, ts, k, v, _a in _read_back(back, magic)] == _expected(SAMPLE, magic)


# -- independent implementations --------------------------------------------------------

_ORACLES = []
try:
    from kafka.record import legacy_records as _kafka_python

    _ORACLES.append(pytest.param(_kafka_python, id="kafka-python"))
except ImportError:  # pragma: no cover
    pass
try:
    from aiokafka.record import legacy_records as _aiokafka

    _ORACLES.append(pytest.param(_aiokafka, id="aiokafka"))
except ImportError:  # pragma: no cover
    pass


def _oracle_can(magic: int, codec: int) -> bool:
    # Magic 0 lz4 (KAFKA-3160's broken header checksum): aiokafka does not write or read
    # it, kafka-python only with the xxhash package; librdkafka does (the integration tests).
    return not (magic == 0 and codec == Compression.LZ4)


@pytest.mark.skipif(not _ORACLES, reason="neither kafka-python nor aiokafka installed")
@pytest.mark.parametrize("oracle", _ORACLES)
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_oracle_message_sets_decode_with_ours(oracle, magic, codec):
    if not _oracle_can(magic, codec):
        pytest.skip("the Python clients do not write magic 0 lz4")
    builder = oracle.LegacyRecordBatchBuilder(magic, int(codec), 1 << 20)
    for i, (k, v, ts) in enumerate(SAMPLE):
        builder.append(i, ts if magic else None, k, v)
    got = decode_message_set(bytes(builder.build()))
    assert got.compression == codec
    assert _as_read(got, magic) == _expected(SAMPLE, magic)


@pytest.mark.skipif(not _ORACLES, reason="neither kafka-python nor aiokafka installed")
@pytest.mark.parametrize("oracle", _ORACLES)
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_our_down_converted_messages_decode_with_the_oracle(oracle, magic, codec):
    if not _oracle_can(magic, codec):
        pytest.skip("the Python clients do not read magic 0 lz4")
    out = down_convert(bytes(build_batch(V2_SAMPLE, base_offset=20, compression=codec)), magic, 20, 1 << 20)
    got = []
    pos = 0
    while pos < len(out):
        (size,) = struct.unpack_from(">i", out, pos + 8)
        batch = oracle.LegacyRecordBatch(out[pos : pos + 12 + size], magic)
        assert batch.validate_crc()
        got += [(r.offset, r.timestamp, r.key, r.value) for r in batch]
        pos += 12 + size
    assert got == [(20 + i, r.timestamp if magic else None, r.key, r.value) for i, r in enumerate(V2_SAMPLE)]


def test_module_exports_are_defined():
    assert all(hasattr(lr, name) for name in lr.__all__)
    assert LegacyMessage._fields[:4] == ("offset", "magic", "attributes", "timestamp")
