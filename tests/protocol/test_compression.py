"""The record batch codecs (refka/protocol/compression.py): each round-trips, data a
codec does not take is a DecompressionError whatever the library raised, and output
past the caller's bound is refused without being produced."""

from __future__ import annotations

import tracemalloc

import pytest

from refka.protocol.compression import (
    XERIAL_MAGIC,
    DecompressedTooLargeError,
    DecompressionError,
    compress,
    decompress,
)

CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
DATA = b"".join(b"record %d of a batch, " % i for i in range(5000))  # > 32 KiB: several xerial blocks


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_every_codec_round_trips(codec):
    assert decompress(codec, compress(codec, DATA)) == DATA
    assert decompress(codec, compress(codec, b"")) == b""


def test_snappy_reads_both_java_framing_and_raw():
    xerial, raw = compress(2, DATA, snappy_xerial=True), compress(2, DATA, snappy_xerial=False)
    assert xerial.startswith(XERIAL_MAGIC) and not raw.startswith(XERIAL_MAGIC)
    assert decompress(2, xerial) == decompress(2, raw) == DATA


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_data_a_codec_does_not_take_is_a_decompression_error(codec):
    garbled = bytearray(compress(codec, DATA))
    for i in range(4, len(garbled)):
        garbled[i] ^= 0x5A
    for data in (b"not compressed at all", bytes(garbled)):
        with pytest.raises(DecompressionError):
            decompress(codec, data)


def test_a_truncated_xerial_block_is_a_decompression_error():
    xerial = compress(2, DATA, snappy_xerial=True)
    with pytest.raises(DecompressionError, match="xerial snappy block extends past the data"):
        decompress(2, xerial[:-10])


def test_no_codec_has_id_0_or_5():
    for codec in (0, 5):
        with pytest.raises(ValueError, match=f"no compression codec {codec}"):
            compress(codec, DATA)
        with pytest.raises(ValueError, match=f"no compression codec {codec}"):
            decompress(codec, DATA)


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_output_past_the_bound_is_too_large(codec):
    for snappy_xerial in (True, False):
        compressed = compress(codec, DATA, snappy_xerial)
        assert decompress(codec, compressed, max_size=len(DATA)) == DATA
        with pytest.raises(DecompressedTooLargeError, match=f"decompresses to more than {len(DATA) - 1} bytes"):
            decompress(codec, compressed, max_size=len(DATA) - 1)


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_a_bomb_is_refused_without_producing_what_it_says(codec):
    bomb = compress(codec, bytes(50_000_000))  # 3 KB of zstd, 50 KB of gzip, ...
    tracemalloc.start()
    try:
        with pytest.raises(DecompressedTooLargeError):
            decompress(codec, bomb, max_size=1_000_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10_000_000
