"""Checking a batch's records without building them: the walk a leader makes over a
producer's records before appending them (Kafka's LogValidator reading each
DefaultRecord).

``walk_records(data, count)`` takes one batch's records section (records.py
``record_data``: the batch's own bytes, or its payload decompressed) and returns
the indexes of the records without a key, or raises CorruptRecordError at the
first record that breaks the format:

- a length that is not positive, runs past the data or does not end where the
  record's fields end;
- an offset delta other than the record's index (0, 1, 2, ...: what
  recordsCount == lastOffsetDelta + 1 leaves);
- a varint longer than Java's ``ByteUtils.readVarint`` reads (5 bytes, 32 bits)
  or, for the timestamp delta, ``readVarlong`` (10 bytes, 64 bits);
- a negative header count, a null header key, a header key that is not UTF-8;
- any byte after the last of ``count`` records.

Any negative key or value length is null, as Kafka reads it; the attributes byte
and the timestamp delta may hold any value. This is the format records.py's
``_decode_records`` reads, checked at least as strictly, so that every batch a
leader appends decodes there; tests/protocol/test_record_walk.py holds the walk
against a plain reference reader.

How it stays cheap (a Produce of 1 MB of 100-byte values holds ~8,000 records):
``_record_walk.c`` is this walk compiled (the same checks in the same order, the
same messages), built by ``pip install`` when a C compiler is there (setup.py,
``optional``): ~10 ns a record, so that a leader's check of an uncompressed
batch costs about what its CRC32C does. ``COMPILED`` says whether it is in
use. Without it, the walk below runs in Python:

- record by record: one ``data[pos]`` per varint byte, 1- and 2-byte varints
  inline, no object per record; about a microsecond a record in CPython;
- runs of records laid out like the record before them (the same length, key
  and value lengths, header keys and value lengths, and varint widths: what a
  producer of fixed-size values sends) are checked a column at a time: the
  byte at one offset of every record in the run is one strided slice
  (``data[a:b:size]``) checked in C, so a run costs about ten slices whatever
  its length (see ``_run``). A run is tried only when ``_RUN_MIN_RECORDS`` or
  more records are left and the next one starts with the byte the last one
  started with, and after a try that found none not again for ``_RUN_BACKOFF``
  records, twice as many after each further such try: records of varying
  layouts pay little for it.

No I/O.
"""

from __future__ import annotations

from collections.abc import Callable

from .records import Buffer, CorruptRecordError

_compiled_walk: Callable[[Buffer, int], list[int] | str] | None
try:
    from ._record_walk import walk as _compiled_walk
except ImportError:  # no C compiler where refka was installed: the Python walk
    _compiled_walk = None

__all__ = ["COMPILED", "walk_records"]

COMPILED = _compiled_walk is not None

# translate() table turning continuation bytes (>= 0x80) into ASCII and others not.
_FLIP_HIGH_BIT = bytes(b ^ 0x80 for b in range(256))
_RUN_FIRST_CHUNK = 64  # a run of fewer is rare, and each chunk costs a slice per checked offset
_RUN_MIN_RECORDS = 16  # fewer records left: walking them costs less than setting up a run
_RUN_BACKOFF = 8  # records walked one by one after a try that found no run; doubles while tries fail
_RUN_MAX_BACKOFF = 1024
_MAX_RUN_DELTA_WIDTH = 3  # offset deltas below 2**20; later records are walked one by one
# width -> the offset deltas 0, 1, 2, ... as varints of that width, a column per byte
# (_delta_columns).
_delta_tables: dict[int, tuple[bytes, ...]] = {}


def walk_records(data: Buffer, count: int) -> list[int]:
    """Indexes of the records without a key among the ``count`` records of ``data``
    (one batch's records section); CorruptRecordError if the module docstring's
    format is broken."""
    if _compiled_walk is None:
        return walk_records_in_python(data, count)
    result = _compiled_walk(data, count)
    if isinstance(result, str):
        raise CorruptRecordError(result)
    return result


def walk_records_in_python(data: Buffer, count: int) -> list[int]:
    """``walk_records`` in Python (the fallback, and what the tests hold the compiled
    walk against besides the reference reader)."""
    if not isinstance(data, bytes):
        # One copy: bytes index faster than a view, and slice with a step ten times faster.
        data = bytes(data)
    rv = _varint32
    pos, end = 0, len(data)
    keyless: list[int] = []
    i = 0
    try_run_at = 1
    backoff = _RUN_BACKOFF
    try:
        while i < count:
            start = pos
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    u = (b & 0x7F) | (c << 7)
                    length = (u >> 1) ^ -(u & 1)
                    pos += 2
                else:
                    length, pos = rv(data, pos)
            record_end = pos + length
            if length <= 0 or record_end > end:
                raise CorruptRecordError(f"record {i} has length {length} with {end - pos} bytes left")
            pos += 1  # attributes: unused by v2 records
            if data[pos] < 0x80:  # timestamp delta: any value
                pos += 1
            else:
                pos = _skip_varlong(data, pos)
            b = data[pos]
            if b < 0x80:
                pos += 1
                delta = (b >> 1) ^ -(b & 1)
            else:
                delta, pos = rv(data, pos)
            if delta != i:
                raise CorruptRecordError(f"record {i} has offset delta {delta}")
            b = data[pos]  # key length
            if b < 0x80:
                pos += 1
                if b & 1:
                    keyless.append(i)
                else:
                    pos += b >> 1
            else:
                n, pos = rv(data, pos)
                if n < 0:
                    keyless.append(i)
                else:
                    pos += n
            b = data[pos]  # value length
            if b < 0x80:
                pos += 1
                if not b & 1:
                    pos += b >> 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    pos += 2
                    if not b & 1:
                        pos += ((b & 0x7F) | (c << 7)) >> 1
                else:
                    n, pos = rv(data, pos)
                    if n > 0:
                        pos += n
            if data[pos] == 0:  # no headers: the common case
                pos += 1
            else:
                pos = _walk_headers(data, pos, record_end, i)
            if pos != record_end:
                raise CorruptRecordError(f"record {i} has length {length}, which does not match its fields")
            i += 1
            if i >= try_run_at and count - i >= _RUN_MIN_RECORDS and pos < end and data[pos] == data[start]:
                run = _run(data, start, pos, i, count, keyless)
                if run:
                    pos += run * (pos - start)
                    i += run
                    backoff = _RUN_BACKOFF
                else:
                    try_run_at = i + backoff
                    backoff = min(2 * backoff, _RUN_MAX_BACKOFF)
    except IndexError as exc:
        raise CorruptRecordError("record data ends inside a record") from exc
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes after the last of {count} records")
    return keyless


def _run(data: bytes, start: int, stop: int, first: int, count: int, keyless: list[int]) -> int:
    """How many records from ``stop`` on (the first of them at index ``first``) are
    laid out like the walked record at [start, stop); their keyless indexes go to
    ``keyless``. 0 if none, or if that record's offset delta is wider than
    ``_MAX_RUN_DELTA_WIDTH`` bytes.

    A record of the run is valid because its bytes at every offset the layout fixes
    (the length, key length, value length and header count varints, and each
    header's key length, key and value length) are the walked record's, its
    timestamp delta has the same continuation bits, and its offset delta is the
    varint of its index, as wide as the walked record's: so it reads as the same
    lengths and widths, its fields end where it ends, its header keys are the
    walked record's, and its offset delta is right. Key, value and header value
    bytes, attributes and the timestamp's value may be anything, as in the walk.
    Each of those offsets is checked in all records of a chunk at once, with one
    strided slice; chunks double in size.
    """
    size = stop - start
    pos = _varint_end(data, start)
    fixed = list(range(pos - start))  # the length
    timestamp_at = pos + 1 - start  # after the attributes
    pos = _varint_end(data, pos + 1)
    timestamp_width = pos - start - timestamp_at
    delta_at = pos - start
    pos = _varint_end(data, pos)
    delta_width = pos - start - delta_at
    if delta_width > _MAX_RUN_DELTA_WIDTH:
        return 0
    key_length = 0
    for field in range(3):  # key, value, headers
        n, after = _varint32(data, pos)
        fixed += range(pos - start, after - start)
        pos = after
        if field == 0:
            key_length = n
        if field < 2:
            pos += max(n, 0)
            continue
        for _ in range(n):
            key_n, after = _varint32(data, pos)
            fixed += range(pos - start, after + key_n - start)  # the key's length and bytes
            value_n, pos = _varint32(data, after + key_n)
            fixed += range(after + key_n - start, pos - start)
            pos += max(value_n, 0)
    limit = min(count - first, (len(data) - stop) // size, (1 << (7 * delta_width - 1)) - first)
    if limit <= 0:
        return 0
    deltas = _delta_columns(delta_width, first + limit)
    done = 0
    chunk = _RUN_FIRST_CHUNK
    while done < limit:
        n = min(chunk, limit - done)
        a = stop + done * size
        b = a + n * size
        index = first + done
        if not (
            all(data[a + f : b : size].count(data[start + f]) == n for f in fixed)
            and all(
                data[a + timestamp_at + k : b : size].translate(_FLIP_HIGH_BIT).isascii()
                for k in range(timestamp_width - 1)
            )
            and data[a + timestamp_at + timestamp_width - 1 : b : size].isascii()
            and all(
                data[a + delta_at + k : b : size] == column[index : index + n] for k, column in enumerate(deltas)
            )
        ):
            break
        done += n
        chunk *= 2
    if key_length < 0 and done:
        keyless.extend(range(first, first + done))
    return done


def _delta_columns(width: int, stop: int) -> tuple[bytes, ...]:
    """The offset deltas 0, 1, ... up to at least ``stop`` - 1 (at most the last that
    fits) as zigzag varints of ``width`` bytes, a column of bytes per varint byte."""
    tables = _delta_tables.get(width)
    if tables is None or len(tables[0]) < stop:
        size = min(1 << max(stop - 1, 1).bit_length(), 1 << (7 * width - 1))
        last = width - 1
        tables = tuple(
            bytes((((2 * i) >> (7 * k)) & 0x7F) | (0x80 if k < last else 0) for i in range(size))
            for k in range(width)
        )
        _delta_tables[width] = tables
    return tables


def _walk_headers(data: bytes, pos: int, record_end: int, index: int) -> int:
    count, pos = _varint32(data, pos)
    # Each header takes at least two bytes: a count beyond that is not worth looping over.
    if count < 0 or count > (record_end - pos) // 2:
        raise CorruptRecordError(f"record {index} has {count} headers")
    for _ in range(count):
        n, pos = _varint32(data, pos)
        if n < 0:
            raise CorruptRecordError("record header key is null")
        try:
            data[pos : pos + n].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError("record header key is not UTF-8") from exc
        pos += n
        n, pos = _varint32(data, pos)
        if n > 0:
            pos += n
    return pos


def _varint32(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, next position) of the zigzag varint at ``pos`` as Java's
    ``ByteUtils.readVarint`` takes it: at most 5 bytes, within 32 bits."""
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 28:
            raise CorruptRecordError("varint longer than 5 bytes")
    if result >> 32:
        raise CorruptRecordError("varint beyond 32 bits")
    return (result >> 1) ^ -(result & 1), pos


def _skip_varlong(buf: bytes, pos: int) -> int:
    """The position after the varlong at ``pos`` as Java's ``ByteUtils.readVarlong``
    takes it: at most 10 bytes, within 64 bits (the 10th byte holds bit 63 only)."""
    for i in range(pos, pos + 10):
        if buf[i] < 0x80:
            if i == pos + 9 and buf[i] > 1:
                raise CorruptRecordError("varlong beyond 64 bits")
            return i + 1
    raise CorruptRecordError("varlong longer than 10 bytes")


def _varint_end(buf: bytes, pos: int) -> int:
    """The position after the varint at ``pos``, one the walk has read already."""
    while buf[pos] & 0x80:
        pos += 1
    return pos + 1
