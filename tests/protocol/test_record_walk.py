"""The leader's walk over a batch's records (refka/protocol/record_walk.py): each
refusal, the runs of same-layout records checked a column at a time, and the walk
held against a plain reference reader and against records.py's decoder."""

from __future__ import annotations

import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refka.protocol.record_walk import COMPILED, walk_records, walk_records_in_python
from refka.protocol.records import (
    HEADER_SIZE,
    Compression,
    CorruptRecordError,
    NewRecord,
    build_batch,
    decode_varint,
    encode_varint,
    iter_records,
    record_data,
)

# Every test runs with the walk refka uses (compiled when it was built) and with the
# Python walk (the fallback); the compiled one must also refuse with the same messages.
WALKS = {"python": walk_records_in_python, **({"compiled": walk_records} if COMPILED else {})}


@pytest.fixture(scope="module", params=sorted(WALKS))
def walk(request):
    return WALKS[request.param]


# -- a plain reference reader: the module docstring's rules, one after the other -----------


class _Refused(Exception):
    pass


def _reference(data: bytes, count: int) -> list[int]:
    """Indexes of the keyless records, or _Refused: the rules with no shortcut."""
    pos = 0

    def varint(max_bytes: int) -> int:
        nonlocal pos
        raw = shift = 0
        for _ in range(max_bytes):
            if pos >= len(data):
                raise _Refused("data ends inside a varint")
            b = data[pos]
            pos += 1
            raw |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                if raw >> (32 if max_bytes == 5 else 64):
                    raise _Refused("varint beyond its width")
                return (raw >> 1) ^ -(raw & 1)
        raise _Refused("varint too long")

    keyless = []
    for i in range(count):
        length = varint(5)
        end = pos + length
        if length <= 0 or end > len(data):
            raise _Refused("length")
        pos += 1  # attributes
        varint(10)  # timestamp delta
        if varint(5) != i:
            raise _Refused("offset delta")
        key = varint(5)
        if key < 0:
            keyless.append(i)
        else:
            pos += key
        value = varint(5)
        pos += max(value, 0)
        headers = varint(5)
        if headers < 0:
            raise _Refused("header count")
        for _ in range(headers):
            key_length = varint(5)
            if key_length < 0:
                raise _Refused("null header key")
            try:
                data[pos : pos + key_length].decode("utf-8")
            except UnicodeDecodeError:
                raise _Refused("header key not UTF-8") from None
            pos += key_length
            value_length = varint(5)
            pos += max(value_length, 0)
        if pos != end:
            raise _Refused("length does not match the fields")
    if pos != len(data):
        raise _Refused("bytes after the last record")
    return keyless


def _walk_or_refused(walk, data: bytes, count: int) -> list[int] | str:
    try:
        return walk(data, count)
    except CorruptRecordError:
        return "refused"


def _reference_or_refused(data: bytes, count: int) -> list[int] | str:
    try:
        return _reference(data, count)
    except _Refused:
        return "refused"


# -- records built by hand --------------------------------------------------------------------


def _v(value: int) -> bytes:
    return encode_varint(value)


def _record(delta: int, key: bytes | None = b"k", value: bytes = b"value", headers: bytes = b"\x00", *,
            timestamp: bytes = b"\x00", key_length: bytes | None = None, length_change: int = 0) -> bytes:
    """One record's bytes; ``headers`` is the raw header section (count and headers),
    ``key_length`` the raw key length varint if not the canonical one."""
    if key_length is None:
        key_length = _v(-1) if key is None else _v(len(key))
    body = b"\x00" + timestamp + _v(delta) + key_length + (key or b"") + _v(len(value)) + value + headers
    return _v(len(body) + length_change) + body


def test_the_records_of_a_batch_of_every_compression_walk_to_their_keyless_indexes(walk):
    items = [NewRecord(b"a", b"1"), NewRecord(None, b"2", [("h", b"x"), ("h", None)]), NewRecord(b"", None),
             NewRecord(None, None)]
    for codec in Compression:
        batch = build_batch(items, compression=codec)
        assert walk(record_data(batch), len(items)) == [1, 3], codec.name


REFUSED = {
    "length zero": (_v(0), 1),
    "length past the data": (_record(0, length_change=50), 1),
    "length short of the fields": (_record(0, length_change=-1) + b"\x00", 1),
    "length beyond the fields": (_record(0, value=b"v", length_change=1) + b"\x00", 1),
    "fewer records than the count": (_record(0) + _record(1), 3),
    "bytes after the last record": (_record(0) + b"\x00\x00", 1),
    "offset delta skips one": (_record(0) + _record(2), 2),
    "offset delta repeated": (_record(0) + _record(0), 2),
    "offset delta not starting at zero": (_record(1), 1),
    "varint longer than 5 bytes": (_record(0, key_length=b"\x82\x80\x80\x80\x80\x00"), 1),
    "varint beyond 32 bits": (_record(0, key=None, key_length=b"\xff\xff\xff\xff\x7f"), 1),
    "timestamp varlong longer than 10 bytes": (_record(0, timestamp=b"\x80" * 10 + b"\x00"), 1),
    "timestamp varlong beyond 64 bits": (_record(0, timestamp=b"\x80" * 9 + b"\x02"), 1),
    "negative header count": (_record(0, headers=_v(-2)), 1),
    "more headers than bytes": (_record(0, headers=_v(1000) + _v(0) + _v(0)), 1),
    "null header key": (_record(0, headers=_v(1) + _v(-1) + _v(-1)), 1),
    "header key not UTF-8": (_record(0, headers=_v(1) + _v(2) + b"\xff\xfe" + _v(-1)), 1),
    "data ends inside a record": (_record(0)[:-3], 1),
}


@pytest.mark.parametrize("case", REFUSED)
def test_records_that_break_the_format_are_refused(case, walk):
    data, count = REFUSED[case]
    with pytest.raises(CorruptRecordError):
        walk(data, count)
    assert _reference_or_refused(data, count) == "refused"


def test_the_messages_say_which_record(walk):
    with pytest.raises(CorruptRecordError, match="record 1 has offset delta 2"):
        walk(_record(0) + _record(2), 2)
    with pytest.raises(CorruptRecordError, match="record header key is null"):
        walk(_record(0, headers=_v(1) + _v(-1) + _v(-1)), 1)
    with pytest.raises(CorruptRecordError, match="2 bytes after the last of 1 records"):
        walk(_record(0) + b"\x00\x00", 1)


def test_what_kafka_reads_as_null_or_any_value_is_accepted(walk):
    data = (_record(0, key=None, key_length=_v(-7))  # any negative key length: a null key
            + _record(1, timestamp=b"\xff" * 9 + b"\x01")  # the largest varlong
            + _record(2, key=b"", headers=_v(1) + _v(0) + _v(-5)))  # empty header key, null value
    assert walk(data, 3) == [0]
    assert walk(memoryview(data), 3) == [0]


# -- runs of records laid out alike ----------------------------------------------------------

_UNIFORM = [NewRecord(b"key-%04d" % i, b"v" * 20, [("trace", b"%08d" % i)], 1_700_000_000_000 + i // 2)
            for i in range(300)]  # timestamp and offset deltas grow from one byte to two on the way


def _record_starts(data: bytes, count: int) -> list[int]:
    starts, pos = [], 0
    for _ in range(count):
        starts.append(pos)
        length, pos = decode_varint(data, pos)
        pos += length
    return starts


def test_a_batch_of_same_layout_records_walks_like_the_reference(walk):
    data = bytes(build_batch(_UNIFORM)[HEADER_SIZE:])
    assert walk(data, len(_UNIFORM)) == _reference(data, len(_UNIFORM)) == []
    keyless = bytes(build_batch([(None, b"v" * 30)] * 5000)[HEADER_SIZE:])
    assert walk(keyless, 5000) == list(range(5000))


@pytest.mark.parametrize("index", [1, 17, 100, 299])
def test_each_byte_of_a_record_inside_a_run_is_checked_as_the_reference_checks_it(index, walk):
    """Every byte of one record, set to a few values, inside a run of records laid out
    alike: the walk refuses or accepts exactly as the reference reader does (key and
    header value bytes may be anything; the value's 20 bytes are skipped for time)."""
    base = bytes(build_batch(_UNIFORM)[HEADER_SIZE:])
    starts = _record_starts(base, len(_UNIFORM)) + [len(base)]
    value_at = base.index(b"v" * 20, starts[index])
    for at in range(starts[index], starts[index + 1]):
        if value_at <= at < value_at + 20:
            continue
        for byte in (0x00, 0x01, 0x7F, 0x80, 0xFF):
            data = bytearray(base)
            data[at] = byte
            expected = _reference_or_refused(bytes(data), len(_UNIFORM))
            assert _walk_or_refused(walk, bytes(data), len(_UNIFORM)) == expected, (at - starts[index], byte)


def test_offset_deltas_of_three_bytes_are_checked_in_runs_too(walk):
    items = [(None, b"v" * 5)] * 9000
    data = bytearray(build_batch(items)[HEADER_SIZE:])
    assert walk(bytes(data), 9000) == list(range(9000))
    start = _record_starts(bytes(data), 9000)[8500]
    data[start + 3] ^= 0x02  # the offset delta's first byte (after length, attributes, timestamp)
    with pytest.raises(CorruptRecordError, match="record 8500 has offset delta"):
        walk(bytes(data), 9000)


def test_one_record_of_another_layout_inside_a_run_is_walked_alone(walk):
    items = [(b"k", b"v" * 50)] * 500 + [(None, b"v" * 70)] + [(b"k", b"v" * 50)] * 500
    data = bytes(build_batch(items)[HEADER_SIZE:])
    assert walk(data, len(items)) == [500]


# -- the walk against the reference reader and the decoder ------------------------------------

_any_record = st.builds(
    NewRecord,
    key=st.none() | st.binary(max_size=12),
    value=st.none() | st.binary(max_size=80),
    headers=st.lists(st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=6)), max_size=2),
    timestamp=st.integers(min_value=0, max_value=2**45),
)


@st.composite
def _same_layout_records(draw) -> list[NewRecord]:
    key = draw(st.none() | st.binary(max_size=6))
    value = draw(st.binary(max_size=40))
    headers = draw(st.lists(st.tuples(st.text(max_size=3), st.none() | st.binary(max_size=4)), max_size=2))
    count = draw(st.integers(min_value=1, max_value=200))
    step = draw(st.integers(min_value=0, max_value=90))
    return [NewRecord(key, value, headers, 1_700_000_000_000 + i * step) for i in range(count)]


_mutation = st.tuples(st.sampled_from(["set", "insert", "delete"]), st.integers(min_value=0), st.integers(0, 255))


def _mutate(data: bytes, mutations: list[tuple[str, int, int]]) -> bytes:
    out = bytearray(data)
    for op, where, value in mutations:
        if not out:
            break
        i = where % len(out)
        if op == "set":
            out[i] = value
        elif op == "insert":
            out.insert(i, value)
        else:
            del out[i]
    return bytes(out)


def _check_against_reference_and_decoder(walk, data: bytes, count: int) -> None:
    expected = _reference_or_refused(data, count)
    assert _walk_or_refused(walk, data, count) == expected
    if COMPILED and expected == "refused":
        assert _message(walk_records, data, count) == _message(walk_records_in_python, data, count)
    if expected != "refused":
        # What the walk lets in, records.py decodes: offsets in order, the same keyless records.
        header = bytearray(build_batch([(b"k", b"v")] * count)[:HEADER_SIZE])
        header[8:12] = (len(header) - 12 + len(data)).to_bytes(4, "big")
        decoded = list(iter_records(bytes(header) + data))
        assert [r.offset_delta for r in decoded] == list(range(count))
        assert [i for i, r in enumerate(decoded) if r.key is None] == expected


@settings(max_examples=300, deadline=None)
@given(items=st.lists(_any_record, min_size=1, max_size=12), mutations=st.lists(_mutation, max_size=3),
       count_change=st.sampled_from([0, 0, 0, -1, 1]))
def test_the_walk_agrees_with_the_reference_on_damaged_records(items, mutations, count_change, walk):
    data = _mutate(bytes(build_batch(items)[HEADER_SIZE:]), mutations)
    _check_against_reference_and_decoder(walk, data, max(len(items) + count_change, 1))


@settings(max_examples=300, deadline=None)
@given(items=_same_layout_records(), mutations=st.lists(_mutation, max_size=2))
def test_the_walk_agrees_with_the_reference_on_damaged_runs(items, mutations, walk):
    data = _mutate(bytes(build_batch(items)[HEADER_SIZE:]), mutations)
    _check_against_reference_and_decoder(walk, data, len(items))


def _message(walk, data: bytes, count: int) -> str:
    try:
        walk(data, count)
    except CorruptRecordError as e:
        return str(e)
    raise AssertionError("not refused")


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler: refka installs with the Python walk")
def test_the_compiled_walk_is_built_where_a_compiler_is():
    assert COMPILED, "refka/protocol/_record_walk.c was not built: run pip install -e . (setup.py)"


@pytest.mark.skipif(not COMPILED, reason="the compiled walk is not built")
@pytest.mark.parametrize("case", REFUSED)
def test_the_compiled_walk_refuses_with_the_python_walks_messages(case):
    data, count = REFUSED[case]
    assert _message(walk_records, data, count) == _message(walk_records_in_python, data, count)


@pytest.mark.skipif(not COMPILED, reason="the compiled walk is not built")
def test_the_compiled_walk_takes_any_buffer_and_refuses_other_arguments():
    data = _record(0, key=None) + _record(1)
    for buf in (data, bytearray(data), memoryview(data), memoryview(b"xx" + data)[2:]):
        assert walk_records(buf, 2) == [0]
    with pytest.raises(TypeError):
        walk_records("not bytes", 1)  # type: ignore[arg-type]
