"""__consumer_offsets record formats (storage.py), checked against Kafka's bytes, and
reading them back for loading."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import pytest
import structlog
from crc32c import crc32c

from refka.broker.group import storage
from refka.broker.group.offsets import CommittedOffset
from refka.protocol.records import Compression, build_batch


def test_offset_values_round_trip_in_kafkas_versions():
    o = CommittedOffset(42, 7, "meta", 1234)
    v = storage.offset_value(o)
    assert v[:2] == b"\x00\x03"
    assert storage.decode_offset_value(v) == o
    o4 = CommittedOffset(42, 7, "meta", 1234, topic_epoch=9)
    v4 = storage.offset_value(o4)
    assert v4[:2] == b"\x00\x04" and storage.decode_offset_value(v4) == o4
    o1 = CommittedOffset(42, -1, "", 1234, expire_timestamp=5678)
    v1 = storage.offset_value(o1)
    assert v1[:2] == b"\x00\x01" and storage.decode_offset_value(v1) == o1
    # v0 as old Kafka wrote it: offset, metadata, commit timestamp.
    v0 = struct.pack(">hqh", 0, 5, 2) + b"md" + struct.pack(">q", 99)
    assert storage.decode_offset_value(v0) == CommittedOffset(5, -1, "md", 99)


def test_keys_are_kafkas():
    k = storage.offset_key("grp", "top", 3)
    assert k == struct.pack(">hh", 1, 3) + b"grp" + struct.pack(">h", 3) + b"top" + struct.pack(">i", 3)
    assert storage.decode_key(k) == storage.OffsetKey("grp", "top", 3)
    assert storage.group_key("grp") == struct.pack(">hh", 2, 3) + b"grp"
    with pytest.raises(storage.StorageFormatError):
        storage.decode_key(struct.pack(">h", 9))


def test_group_values_round_trip_and_old_versions_decode():
    g = storage.StoredGroup("consumer", 3, "range", "m1", 777, [
        storage.StoredMember("m1", "inst", "cid", "/1.2.3.4", 30000, 10000, b"sub", b"asg"),
        storage.StoredMember("m2", None, "cid", "/1.2.3.4", 30000, 10000, b"", b""),
    ])
    assert storage.decode_group_value(storage.group_value(g)) == g

    def s(x):
        return struct.pack(">h", len(x)) + x.encode()

    # v0: no rebalance timeout, no state timestamp, no instance id.
    v0 = (struct.pack(">h", 0) + s("consumer") + struct.pack(">i", 2) + s("range") + s("m1") + struct.pack(">i", 1)
          + s("m1") + s("cid") + s("/h") + struct.pack(">i", 6000) + struct.pack(">i", 3) + b"sub"
          + struct.pack(">i", 1) + b"a")
    d = storage.decode_group_value(v0)
    assert d.generation == 2 and d.current_state_timestamp == -1
    assert d.members == [storage.StoredMember("m1", None, "cid", "/h", 6000, 6000, b"sub", b"a")]


def test_strings_fit_only_up_to_an_int16_length_and_writing_a_longer_one_says_so():
    assert storage.fits("x" * storage.MAX_STRING_BYTES)
    assert not storage.fits("x" * (storage.MAX_STRING_BYTES + 1))
    assert not storage.fits("é" * (storage.MAX_STRING_BYTES // 2 + 1))  # bytes of UTF-8, not characters
    with pytest.raises(ValueError, match="does not fit a non-flexible record"):
        storage.group_key("g" * (storage.MAX_STRING_BYTES + 1))


async def test_loading_skips_a_batch_whose_records_do_not_decode(memory_log):
    """A batch stored before leaders walked records (an older refka) that does not
    decompress: the records before and after it load, and one warning names it."""
    plog = memory_log()
    before = [(storage.offset_key("g", "t", 0), storage.offset_value(CommittedOffset(1, -1, "", 10)))]
    after = [(storage.offset_key("g", "t", 1), storage.offset_value(CommittedOffset(2, -1, "", 20)))]
    plog.append(build_batch(before), leader_epoch=0)
    not_lz4 = build_batch([(b"k", b"v")], timestamp=10)
    struct.pack_into(">h", not_lz4, 21, int(Compression.LZ4))  # compression bits LZ4, records as they are
    struct.pack_into(">I", not_lz4, 17, crc32c(bytes(not_lz4[21:])))
    plog.append(not_lz4, leader_epoch=0)
    plog.append(build_batch(after), leader_epoch=0)
    store = storage.LogStore(lambda topic, index: SimpleNamespace(log=plog))
    with structlog.testing.capture_logs() as logs:
        read = [kv async for kv in store.read(0)]
    assert read == before + after
    [warning] = [e for e in logs if e["log_level"] == "warning"]
    assert (warning["event"], warning["partition"], warning["offset"]) == ("group_batch_unreadable", 0, 1)
