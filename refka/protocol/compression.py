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

``decompress`` takes a bound on its output, so that a few kilobytes of zstd (100
MB of zeros compress to 3 KB) cannot make the caller allocate gigabytes: the
codecs stop one byte past it (gzip, lz4 and zstd stream; snappy says its
length up front).

No I/O. Errors: :class:`DecompressionError` for data a codec refuses, whatever the
library's own error type (records.py answers it as a corrupt batch), and its
subclass :class:`DecompressedTooLargeError` for output past the bound.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import lz4.frame
import zstandard

__all__ = ["XERIAL_MAGIC", "DecompressedTooLargeError", "DecompressionError", "compress", "decompress"]

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # xerial's default block size, as the Java client writes
_I32 = struct.Struct(">i")

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
_STEP = 1 << 20  # bytes a bounded lz4 or zstd decompression asks for at a time


class DecompressionError(ValueError):
    """Data its codec does not decompress."""


class DecompressedTooLargeError(DecompressionError):
    """Data that decompresses to more than the caller's bound."""


def decompress(codec: int, data: bytes, max_size: int | None = None) -> bytes:
    """``data`` decompressed with ``codec`` (1-4); DecompressionError if it does not
    decompress, DecompressedTooLargeError if it gives more than ``max_size`` bytes
    (found out producing at most one byte more)."""
    if codec not in _DECOMPRESS:
        raise ValueError(f"no compression codec {codec}")
    limit = -1 if max_size is None else max_size + 1
    try:
        out = _DECOMPRESS[codec](data, limit)
    except DecompressionError:
        raise
    except Exception as exc:  # each codec library has its own error types
        raise DecompressionError(str(exc)) from exc
    if max_size is not None and len(out) > max_size:
        raise DecompressedTooLargeError(f"decompresses to more than {max_size} bytes")
    return out


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


def _gzip_decompress(data: bytes, limit: int) -> bytes:
    """One or more gzip members (zero bytes between them skipped, as Python's gzip
    module does); stops once ``limit`` bytes are out (-1: no limit)."""
    out = bytearray()
    while True:
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)  # the gzip wrapper: header, CRC32 and size
        out += member.decompress(data, limit - len(out) if limit >= 0 else 0)
        if 0 <= limit <= len(out):
            return bytes(out)
        if not member.eof:
            raise DecompressionError("the gzip stream ends inside a member")
        data = member.unused_data.lstrip(b"\x00")
        if not data:
            return bytes(out)


def _snappy_decompress(data: bytes, limit: int) -> bytes:
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
            block = data[pos : pos + n]
            _check_snappy_length(len(out) + cramjam.snappy.decompress_raw_len(block), limit)
            out += cramjam.snappy.decompress_raw(block)
            pos += n
        return bytes(out)
    _check_snappy_length(cramjam.snappy.decompress_raw_len(data), limit)
    return bytes(cramjam.snappy.decompress_raw(data))


def _check_snappy_length(length: int, limit: int) -> None:
    """Raw snappy says its decompressed length up front: nothing to produce to find out."""
    if 0 <= limit <= length:
        raise DecompressedTooLargeError(f"decompresses to more than {limit - 1} bytes")


def _lz4_decompress(data: bytes, limit: int) -> bytes:
    """The first LZ4 frame (what follows it is ignored, as lz4.frame.decompress does)."""
    frame = lz4.frame.LZ4FrameDecompressor()
    if limit < 0:
        out = bytes(frame.decompress(data))
    else:
        # In steps: asked for up to ``limit`` bytes at once, the library allocates them first.
        parts = [frame.decompress(data, max_length=min(limit, _STEP))]
        size = len(parts[0])
        while not frame.eof and not frame.needs_input and size < limit:
            parts.append(frame.decompress(b"", max_length=min(limit - size, _STEP)))
            size += len(parts[-1])
        out = b"".join(parts)
    if not frame.eof and not 0 <= limit <= len(out):
        raise DecompressionError("the LZ4 frame ends early")
    return out


def _zstd_decompress(data: bytes, limit: int) -> bytes:
    # read_across_frames: Java's zstd-jni streams may omit the frame content size and
    # write several frames.
    if limit < 0:
        return bytes(zstandard.ZstdDecompressor().decompressobj(read_across_frames=True).decompress(data))
    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    parts: list[bytes] = []
    size = 0
    while size < limit:
        chunk = reader.read(min(limit - size, _STEP))  # in steps, as for lz4
        if not chunk:
            break
        parts.append(chunk)
        size += len(chunk)
    return b"".join(parts)


_DECOMPRESS = {GZIP: _gzip_decompress, SNAPPY: _snappy_decompress, LZ4: _lz4_decompress, ZSTD: _zstd_decompress}


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
