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

The legacy message sets (magic 0 and 1, legacy_records.py) compress a wrapper message's
value with the same codecs but frame two of them otherwise (``compress_legacy``,
``decompress_legacy``; Kafka's ``CompressionType.wrapForInput/wrapForOutput`` with the
message's magic):

- snappy: written in xerial's framing, as Kafka's SnappyOutputStream writes it; read in
  either framing (xerial's SnappyInputStream falls back to raw snappy too).
- lz4: Kafka's own LZ4 frame (``Lz4BlockOutputStream``): one frame of independent 64 KB
  blocks, no content size, no content checksum. Its header checksum (the HC byte, the
  second byte of XXH32 of the frame descriptor) is right for magic 1 and wrong for magic
  0, whose writers hashed the magic number too (KAFKA-3160): written so for magic 0,
  ignored when read (Kafka's ``ignoreFlagDescriptorChecksum``), checked for magic 1.
  Read as Kafka reads it: reserved bits 0, version 1, independent blocks only, block
  size 64 KB to 4 MB; block checksums are checked when the frame has them.
- zstd: none; it came with magic 2 (Kafka refuses a zstd wrapper).

``decompress`` takes a bound on its output, so that a few kilobytes of zstd (100
MB of zeros compress to 3 KB) cannot make the caller allocate gigabytes: the
codecs stop one byte past it (gzip, lz4 and zstd stream; snappy says its
length up front).

No I/O. Errors: :class:`DecompressionError` for data a codec refuses, whatever the
library's own error type (records.py answers it as a corrupt batch), and its
subclass :class:`DecompressedTooLargeError` for output past the bound.

Each codec's library is imported by the functions that use it, at the first batch of that
codec: a broker starts, and answers its first requests, without any of them.
"""

from __future__ import annotations

import struct
import zlib

__all__ = [
    "XERIAL_MAGIC",
    "DecompressedTooLargeError",
    "DecompressionError",
    "compress",
    "compress_legacy",
    "decompress",
    "decompress_legacy",
    "xxh32",
]

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
        import gzip  # each codec's library at its first use (the module docstring)

        return gzip.compress(data, compresslevel=6, mtime=0)
    if codec == SNAPPY:
        return _snappy_compress(data, snappy_xerial)
    if codec == LZ4:
        import lz4.frame

        return bytes(lz4.frame.compress(data, block_linked=False))
    if codec == ZSTD:
        import zstandard

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
    import cramjam

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
    import lz4.frame

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
    import zstandard

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
    import cramjam

    if not xerial:
        return bytes(cramjam.snappy.compress_raw(data))
    out = bytearray(_XERIAL_HEADER)
    mv = memoryview(data)
    for i in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(mv[i : i + _XERIAL_BLOCK]))
        out += _I32.pack(len(block))
        out += block
    return bytes(out)


# -- the legacy message sets' framings (magic 0 and 1) ------------------------------------

_LZ4_MAGIC = b"\x04\x22\x4d\x18"  # 0x184D2204, little-endian
_LZ4_FLG_RESERVED = 0x03
_LZ4_FLG_CONTENT_SIZE = 0x08
_LZ4_FLG_INDEPENDENT = 0x20
_LZ4_FLG_VERSION = 0xC0
_LZ4_BD_RESERVED = 0x8F
_LZ4_BLOCK_64KB = 4


def compress_legacy(codec: int, data: bytes, magic: int) -> bytes:
    """``data`` compressed as a magic 0 or 1 wrapper's value (the module docstring): gzip,
    xerial-framed snappy, or Kafka's LZ4 frame with ``magic``'s header checksum.
    ValueError for zstd and unknown codecs."""
    if codec == LZ4:
        import lz4.frame

        # lz4.frame without a content size writes exactly Kafka's header: FLG 0x60 (version
        # 1, independent blocks), BD 0x40 (64 KB blocks), HC; then the blocks and the end mark.
        out = bytearray(lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                                           store_size=False, content_checksum=False))
        if magic == 0:
            out[6] = _lz4_header_checksum(bytes(out[:6]))  # KAFKA-3160: hashed with the magic number
        return bytes(out)
    if codec in (GZIP, SNAPPY):
        return compress(codec, data, snappy_xerial=True)
    raise ValueError(f"no compression codec {codec} for magic {magic} messages")


def decompress_legacy(codec: int, data: bytes, magic: int, max_size: int | None = None) -> bytes:
    """A magic 0 or 1 wrapper's value decompressed (the module docstring), bounded as
    :func:`decompress` is; DecompressionError where Kafka's readers refuse it."""
    if codec == LZ4:
        data = _kafka_lz4_frame(data, magic)
    elif codec not in (GZIP, SNAPPY):
        raise ValueError(f"no compression codec {codec} for magic {magic} messages")
    return decompress(codec, data, max_size)


def _kafka_lz4_frame(data: bytes, magic: int) -> bytes:
    """``data`` checked as Kafka's ``Lz4BlockInputStream`` checks a frame's header; for magic 0
    with its header checksum replaced by the right one, so that the LZ4 library reads it."""
    if len(data) < 7 or data[:4] != _LZ4_MAGIC:
        raise DecompressionError("not an LZ4 frame (invalid magic bytes)")
    flg, bd = data[4], data[5]
    if flg & _LZ4_FLG_RESERVED or flg & _LZ4_FLG_VERSION != 0x40:
        raise DecompressionError(f"LZ4 frame flags {flg:#04x}: reserved bits set or a version other than 1")
    if not flg & _LZ4_FLG_INDEPENDENT:
        raise DecompressionError("LZ4 frame of dependent blocks: Kafka reads independent blocks only")
    if bd & _LZ4_BD_RESERVED or not _LZ4_BLOCK_64KB <= bd >> 4 <= 7:
        raise DecompressionError(f"LZ4 frame block descriptor {bd:#04x} is not Kafka's")
    hc = 14 if flg & _LZ4_FLG_CONTENT_SIZE else 6
    if len(data) <= hc:
        raise DecompressionError("the LZ4 frame ends inside its header")
    if magic == 0:
        fixed = bytearray(data)
        fixed[hc] = _lz4_header_checksum(data[4:hc])
        return bytes(fixed)
    return data


def _lz4_header_checksum(descriptor: bytes) -> int:
    """The LZ4 frame's HC byte over ``descriptor``: the second byte of its XXH32."""
    return (xxh32(descriptor) >> 8) & 0xFF


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of ``data`` (the LZ4 frame's hash), in Python: used on frame headers only, a
    few bytes (no xxhash package is needed for that)."""
    n = len(data)
    pos = 0
    if n >= 16:
        v1, v2, v3, v4 = (seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32
        while pos + 16 <= n:
            a, b, c, d = struct.unpack_from("<IIII", data, pos)
            v1 = _rotl((v1 + a * _P2) & _M32, 13) * _P1 & _M32
            v2 = _rotl((v2 + b * _P2) & _M32, 13) * _P1 & _M32
            v3 = _rotl((v3 + c * _P2) & _M32, 13) * _P1 & _M32
            v4 = _rotl((v4 + d * _P2) & _M32, 13) * _P1 & _M32
            pos += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        (w,) = struct.unpack_from("<I", data, pos)
        h = _rotl((h + w * _P3) & _M32, 17) * _P4 & _M32
        pos += 4
    while pos < n:
        h = _rotl((h + data[pos] * _P5) & _M32, 11) * _P1 & _M32
        pos += 1
    h ^= h >> 15
    h = h * _P2 & _M32
    h ^= h >> 13
    h = h * _P3 & _M32
    h ^= h >> 16
    return h
