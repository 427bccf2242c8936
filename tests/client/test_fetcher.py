"""The fetcher's decisions without a broker: which records of an answer are
delivered (``decode_records``), and how positions move when records are
delivered under a limit (``Fetcher.drain``)."""

from __future__ import annotations

import struct

import pytest

from refka.client.fetcher import Fetcher, decode_records
from refka.client.structs import ConsumerRecord, OffsetAndMetadata, TopicPartition
from refka.protocol.records import CorruptRecordError, TimestampType, build_batch
from tests.client.fakes import FakeCluster

TP = TopicPartition("t", 0)


def batch(base: int, values: list[bytes], **kw) -> bytearray:
    return build_batch([(None, v) for v in values], base_offset=base, timestamp=1000, **kw)


def marker(base: int, producer_id: int, abort: bool) -> bytearray:
    key = struct.pack(">hh", 0, 0 if abort else 1)
    return build_batch([(key, b"\x00\x00\x00\x00\x00\x00")], base_offset=base, producer_id=producer_id,
                       producer_epoch=0, is_transactional=True, is_control=True, timestamp=1000)


def offsets(records: list[ConsumerRecord]) -> list[int]:
    return [r.offset for r in records]


# -- decode_records -------------------------------------------------------------------------


def test_records_below_the_fetch_offset_are_dropped_and_the_end_is_past_the_last_batch():
    buf = batch(0, [b"a", b"b", b"c"]) + batch(3, [b"d", b"e"])
    records, end = decode_records(TP, buf, 1)
    assert offsets(records) == [1, 2, 3, 4]
    assert [r.value for r in records] == [b"b", b"c", b"d", b"e"]
    assert end == 5


def test_a_record_carries_its_batch_leader_epoch_sizes_and_timestamp():
    buf = build_batch([(b"key", b"value", [("h", b"1")], 1234)], base_offset=7, partition_leader_epoch=4)
    (r,), _ = decode_records(TP, buf, 7)
    assert (r.topic, r.partition, r.offset, r.leader_epoch) == ("t", 0, 7, 4)
    assert (r.key, r.value, list(r.headers)) == (b"key", b"value", [("h", b"1")])
    assert (r.serialized_key_size, r.serialized_value_size, r.checksum) == (3, 5, None)
    assert (r.timestamp, r.timestamp_type) == (1234, TimestampType.CREATE_TIME)


def test_log_append_time_batches_give_every_record_the_batch_timestamp():
    buf = build_batch([(None, b"x", [], 5), (None, b"y", [], 6)], timestamp_type=TimestampType.LOG_APPEND_TIME)
    records, _ = decode_records(TP, buf, 0)
    assert [(r.timestamp, r.timestamp_type) for r in records] == [(6, 1), (6, 1)]


def test_a_batch_cut_off_at_the_end_is_left_for_the_next_fetch():
    whole = batch(0, [b"a", b"b"])
    buf = whole + batch(2, [b"c", b"d"])[:-5]
    records, end = decode_records(TP, buf, 0)
    assert offsets(records) == [0, 1] and end == 2
    assert decode_records(TP, b"", 4) == ([], 4)


def test_control_batches_are_never_delivered_but_moved_over():
    buf = batch(0, [b"a"]) + marker(1, 9, abort=False) + batch(2, [b"b"])
    records, end = decode_records(TP, buf, 0)
    assert offsets(records) == [0, 2] and end == 3


def test_a_corrupt_first_batch_is_an_error_a_later_one_ends_the_answer():
    bad = batch(2, [b"c"])
    bad[-1] ^= 0xFF  # the CRC no longer matches
    with pytest.raises(CorruptRecordError):
        decode_records(TP, bad, 2)
    records, end = decode_records(TP, batch(0, [b"a", b"b"]) + bad, 0)
    assert offsets(records) == [0, 1] and end == 2


def test_read_committed_drops_aborted_transactions_and_keeps_committed_ones():
    txn = {"producer_epoch": 0, "is_transactional": True}
    buf = (batch(0, [b"a1", b"a2"], producer_id=5, **txn)      # aborted
           + batch(2, [b"c1"], producer_id=6, **txn)           # committed
           + marker(3, 5, abort=True)
           + marker(4, 6, abort=False)
           + batch(5, [b"a3"], producer_id=5, **txn)           # producer 5 again, a new transaction
           + batch(6, [b"plain"]))
    records, end = decode_records(TP, buf, 0, read_committed=True, aborted=[(5, 0)])
    assert [r.value for r in records] == [b"c1", b"a3", b"plain"]
    assert end == 7
    uncommitted, _ = decode_records(TP, buf, 0)
    assert [r.value for r in uncommitted] == [b"a1", b"a2", b"c1", b"a3", b"plain"]


# -- delivery and positions ----------------------------------------------------------------


def fetcher(limits: dict[TopicPartition, int] | None = None) -> Fetcher:
    limits = limits or {}
    return Fetcher(FakeCluster(), limit=limits.get, on_metadata_wanted=lambda: None,  # type: ignore[arg-type]
                   on_stale_counts=lambda topic: None)


def buffered(f: Fetcher, tp: TopicPartition, position: int, values: int, next_fetch: int | None = None) -> None:
    s = f.states[tp]
    s.seek(position)
    records, end = decode_records(tp, batch(position, [b"v%d" % i for i in range(values)]), position)
    s.records.extend(records)
    s.next_fetch = end if next_fetch is None else next_fetch


async def test_a_limit_holds_records_and_the_position_moves_only_over_delivered_ones():
    limits = {TP: 3}
    f = fetcher(limits)
    f.assign([TP], committed_first=False)
    buffered(f, TP, 0, 5)
    assert offsets(f.drain((), None)[TP]) == [0, 1, 2]
    assert f.positions()[TP] == (3, -1)  # the epoch of the last record delivered (none here)
    assert f.drain((), None) == {}
    assert f.states[TP].position == 3  # held records are not moved over
    limits[TP] = 10
    assert offsets(f.drain((), None)[TP]) == [3, 4]
    assert f.states[TP].position == 5


async def test_a_limit_of_zero_holds_everything():
    f = fetcher({TP: 0})
    f.assign([TP], committed_first=False)
    buffered(f, TP, 0, 2)
    assert f.drain((), None) == {} and f.states[TP].position == 0


async def test_an_emptied_buffer_moves_the_position_over_a_control_tail():
    f = fetcher()
    f.assign([TP], committed_first=False)
    buffered(f, TP, 0, 2, next_fetch=4)  # offsets 2-3 were a transaction marker
    assert offsets(f.drain((), None)[TP]) == [0, 1]
    assert f.states[TP].position == 4


async def test_max_records_takes_partitions_in_turn_each_in_offset_order():
    tps = [TopicPartition("t", p) for p in range(3)]
    f = fetcher()
    f.assign(tps, committed_first=False)
    for tp in tps:
        buffered(f, tp, 0, 4)
    firsts = set()
    seen: dict[TopicPartition, list[int]] = {tp: [] for tp in tps}
    for _ in range(6):
        got = f.drain((), 2)
        assert sum(len(v) for v in got.values()) == 2
        firsts.add(next(iter(got)))
        for tp, records in got.items():
            seen[tp] += offsets(records)
    assert all(seen[tp] == [0, 1, 2, 3] for tp in tps)
    assert len(firsts) > 1  # no partition is always served first


async def test_drain_of_named_partitions_leaves_the_others_buffered():
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    f = fetcher()
    f.assign([a, b], committed_first=False)
    buffered(f, a, 0, 2)
    buffered(f, b, 0, 2)
    assert list(f.drain((b,), None)) == [b]
    assert list(f.drain((), None)) == [a]


async def test_committed_offsets_apply_only_to_partitions_not_sought_since():
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    f = fetcher()
    tokens = f.assign([a, b], committed_first=True)
    assert f.positions() == {}
    f.seek(b, 40)
    f.apply_committed({a: OffsetAndMetadata(7, "", 3), b: OffsetAndMetadata(9, "", 3)}, tokens)
    assert f.positions() == {a: (7, 3), b: (40, -1)}
