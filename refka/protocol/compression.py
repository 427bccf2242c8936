"""The compression codecs of RecordBatch v2 (its attributes' bits 0-2): gzip (1), snappy
(2), lz4 (3) and zstd (4), as Kafka's clients write them.

A compressed batch's records section is one compressed stream (records.py owns the
batch around it). What each codec accepts, as Kafka's Java readers do:

- gzip: one or more gzip members (``gzip.decompress``).
- snappy: raw snappy (librdkafka) or Java's xerial framing (``SnappyOutputStream``:
  the 16-byte header, then int32-length-prefixed raw blocks); xerial's version and
  compat fields are ignored, as librdkafka and kafka-python do.
- lz4: one LZ4 frame with independent blocks (Kafka's Java reader does not support
  linked blocks, so they are never written).
- zstd: frames with or without a content size (Java's zstd-jni streams omit it).

No I/O. Errors: :class:`DecompressionError` for data a codec refuses, whatever the
library's own error type; records.py answers it as a corrupt batch.
"""

from __future__ import annotations

import gzip
import struct

import cramjam
import lz4.frame
import zstandard

__all__ = ["XERIAL_MAGIC", "DecompressionError", "compress", "decompress"]

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # xerial's default block size, as the Java client writes
_I32 = struct.Struct(">i")

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4


class DecompressionError(ValueError):
    """Data its codec does not decompress."""


def decompress(codec: int, data: bytes) -> bytes:
    """``data`` decompressed with ``codec`` (1-4); DecompressionError if it does not."""
    try:
        if codec == GZIP:
            return gzip.decompress(data)
        if codec == SNAPPY:
            return _snappy_decompress(data)
        if codec == LZ4:
            return bytes(lz4.frame.decompress(data))
        if codec == ZSTD:
            # decompressobj: Java's zstd-jni streams may omit the frame content size.
            return bytes(zstandard.ZstdDecompressor().decompressobj(read_across_frames=True).decompress(data))
    except DecompressionError:
        raise
    except Exception as exc:  # each codec library has its own error types
        raise DecompressionError(str(exc)) from exc
    raise ValueError(f"no compression codec {codec}")


def compress(codec: int, data: bytes, snappy_xerial: bool = True) -> bytes:
    """``data`` compressed with ``codec`` (1-4); ``snappy_xerial`` picks Java's framed
    snappy (True) or librdkafka's raw snappy."""
    if codec == GZIP:
        return gzip.compress(data, compresslevel=6, mtime=0)
    if codec == SNAPPY:
        return _snappy_compress(data, snappy_xerial)
    if codec == LZ4:
        return bytes(lz4.frame.compress(data, block_linked=False))
    if codec == ZSTD:
        return bytes(zstandard.ZstdCompressor().compress(data))
    raise ValueError(f"no compression codec {codec}")


def _snappy_decompress(data: bytes) -> bytes:
    if data[:8] == XERIAL_MAGIC and len(data) >= 16:
        out = bytearray()
        pos, end = 16, len(data)
        while pos < end:
            if end - pos < 4:
                raise DecompressionError("truncated xerial snappy block length")
            (n,) = _I32.unpack_from(data, pos)
            pos += 4
            if n < 0 or pos + n > end:
                raise DecompressionError("xerial snappy block extends past the data")
            out += cramjam.snappy.decompress_raw(data[pos : pos + n])
            pos += n
        return bytes(out)
    return bytes(cramjam.snappy.decompress_raw(data))


def _snappy_compress(data: bytes, xerial: bool) -> bytes:
    if not xerial:
        return bytes(cramjam.snappy.compress_raw(data))
    out = bytearray(_XERIAL_HEADER)
    mv = memoryview(data)
    for i in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(mv[i : i + _XERIAL_BLOCK]))
        out += _I32.pack(len(block))
        out += block
    return bytes(out)
