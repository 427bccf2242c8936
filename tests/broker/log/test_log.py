"""The running partition log (refka/broker/log/log.py): appends, reads, indexes,
truncation, DeleteRecords, retention, timestamps, epochs, follower appends, flush
and close.

Most tests run against both storage modes (``mode`` fixture, conftest.py): files in
Kafka's layout and memory. Opening a log from disk is test_loader.py's.
"""

from __future__ import annotations

import mmap

import pytest

from refka.broker.log import (
    LogClosedError,
    LogConfig,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from refka.protocol.records import TimestampType, parse_batches
from tests.broker.log.helpers import SMALL, T0, FakeClock, batch, fill, read_all


@pytest.fixture
def open_log(mode, tmp_path):
    """open_log(config=None, clock=None) -> PartitionLog in the parametrized mode."""
    opened = []

    def _open(config: LogConfig | None = None, clock=None, name: str = "topic-0") -> PartitionLog:
        log = PartitionLog.open(
            tmp_path / name, config or LogConfig(), memory=(mode == "memory"), clock=clock
        )
        opened.append(log)
        return log

    yield _open
    for log in opened:
        log.close()


# -- appends and reads ---------------------------------------------------------------------


def test_append_assigns_offsets_and_epoch(open_log):
    log = open_log()
    info = log.append(batch([1, 2, 3], ts=[T0, T0 + 5, T0 + 2]), leader_epoch=4)
    assert (info.base_offset, info.last_offset, info.records_count) == (0, 2, 3)
    assert info.max_timestamp == T0 + 5 and info.log_append_time == -1
    info = log.append(batch([4]) + batch([5, 6]), leader_epoch=4)
    assert (info.base_offset, info.last_offset, info.records_count) == (3, 5, 3)
    assert log.log_end_offset == 6 and log.log_start_offset == 0
    assert read_all(log) == [(i, b"v%d" % (i + 1), 4) for i in range(6)]
    assert log.latest_epoch() == 4


def test_append_uses_given_headers_and_rejects_foreign_ones(open_log):
    log = open_log()
    data = bytes(batch([1, 2]) + batch([3]))
    headers = parse_batches(data)
    assert log.append(data, 0, headers=headers).last_offset == 2
    with pytest.raises(ValueError):
        log.append(bytes(batch([9])), 0, headers=headers)


def test_empty_append_is_a_no_op(open_log):
    log = open_log()
    assert log.append(b"", 0).base_offset == -1
    assert log.log_end_offset == 0


def test_record_too_large(open_log):
    log = open_log(LogConfig(max_message_bytes=200))
    with pytest.raises(RecordTooLargeError) as exc:
        log.append(batch([b"x" * 500]), 0)
    assert exc.value.error_code == 10
    assert log.log_end_offset == 0


def test_appends_roll_segments_and_reads_cross_them(open_log, mode, tmp_path):
    log = open_log(SMALL)
    fill(log, 200, per_batch=2)
    bases = log.segment_base_offsets()
    assert len(bases) > 5 and bases[0] == 0 and bases == sorted(bases)
    if mode == "file":
        names = sorted(p.name for p in (tmp_path / "topic-0").glob("*.log"))
        assert names == [f"{b:020d}.log" for b in bases]
    everything = read_all(log)
    assert [o for o, _, _ in everything] == list(range(400))
    res = log.read(0, 1 << 30)
    assert len(res.records) == len(bases)
    assert res.size == log.size_in_bytes == sum(len(v) for v in res.records)
    assert res.next_offset == 400 and res.first_offset == 0


def test_every_offset_reads_from_the_batch_holding_it(open_log):
    log = open_log(LogConfig(segment_bytes=4096, index_interval_bytes=100))
    offset = 0
    for i in range(150):
        n = 1 + i % 4
        log.append(batch(range(offset, offset + n)), leader_epoch=0)
        offset += n
    for target in range(offset):
        res = log.read(target, 1)  # max_bytes 1: exactly the first batch (KIP-74)
        (h,) = parse_batches(bytes(res.records[0]), check_counts=False)
        assert h.base_offset <= target <= h.last_offset
        assert res.first_offset == h.base_offset and res.next_offset == h.last_offset + 1


def test_index_files_are_sparse_and_kafka_formatted(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(index_interval_bytes=256))
    fill(log, 100)
    index = (tmp_path / "t-0" / f"{0:020d}.index").read_bytes()
    timeindex = (tmp_path / "t-0" / f"{0:020d}.timeindex").read_bytes()
    batch_size = len(batch([0]))
    assert len(index) % 8 == 0 and 0 < len(index) // 8 <= 100 * batch_size // 256
    assert len(timeindex) % 12 == 0 and len(timeindex) > 0
    rel, pos = int.from_bytes(index[:4], "big"), int.from_bytes(index[4:8], "big")
    assert pos % batch_size == 0 and rel == pos // batch_size  # entry: batch's last offset -> its position
    log.close()


def test_read_max_bytes_and_min_one_batch(open_log):
    log = open_log()
    fill(log, 10)
    size = len(batch([0]))
    assert len(read_all(log, 0, max_bytes=int(size * 2.5))) == 2
    one = log.read(0, 5)
    assert one.size == size and one.next_offset == 1
    assert log.read(0, 5, min_one_batch=False).records == []
    assert log.read(3, 0).size == size


def test_read_stops_below_high_watermark(open_log):
    log = open_log(SMALL)
    fill(log, 60, per_batch=3)
    for hw in (0, 1, 3, 30, 31, 89, 180):
        got = read_all(log, 0, max_offset=hw)
        assert all(o < hw for o, _, _ in got)
        assert len(got) == (hw // 3) * 3  # whole batches below the HW
    res = log.read(30, 1 << 20, max_offset=30)
    assert res.records == [] and res.next_offset == 30


def test_read_out_of_range(open_log):
    log = open_log()
    fill(log, 5)
    with pytest.raises(OffsetOutOfRangeError) as exc:
        log.read(6, 100)
    assert exc.value.error_code == 1
    assert log.read(5, 100).records == []
    log.delete_records_before(2)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 100)
    assert read_all(log, 2)[0][0] == 2


def test_reads_are_zero_copy_views(open_log, mode):
    log = open_log(SMALL)
    fill(log, 30)
    res = log.read(0, 1 << 20)
    for view in res.records:
        assert isinstance(view, memoryview) and view.readonly is (mode == "file")
        assert isinstance(view.obj, mmap.mmap)  # segment files, or anonymous memory in memory mode
    before = [bytes(v) for v in res.records]
    fill(log, 30, start=30)  # the active segment grows and is remapped
    assert [bytes(v) for v in res.records] == before
    assert len(read_all(log)) == 60


def test_views_stay_valid_across_truncation_and_deletion(open_log):
    log = open_log(SMALL)
    fill(log, 40)
    res = log.read(0, 1 << 20)
    before = [bytes(v) for v in res.records]
    log.truncate_to(5)  # cuts the file under a live view: must not SIGBUS or change it
    log.append(batch([b"new"]), leader_epoch=1)
    log.delete_records_before(6)
    log.enforce_retention(T0 + 10**12)
    assert [bytes(v) for v in res.records] == before
    assert read_all(log, 6) == []


def test_segment_header_scan_stops_at_the_data(open_log):
    log = open_log()
    fill(log, 7)
    assert [h.base_offset for h in log._segments[-1].iter_headers()] == list(range(7))


# -- truncation, DeleteRecords, retention --------------------------------------------------


def test_truncate_to_cuts_segments_indexes_and_epochs(open_log):
    log = open_log(SMALL)
    fill(log, 50, epoch=1)
    fill(log, 50, epoch=2, start=50)
    assert log.epoch_entries() == [(1, 0), (2, 50)]
    assert log.truncate_to(40) == 40
    assert log.log_end_offset == 40
    assert log.epoch_entries() == [(1, 0)]
    assert [o for o, _, _ in read_all(log)] == list(range(40))
    assert log.segment_base_offsets()[-1] <= 40
    info = log.append(batch([b"after"]), leader_epoch=3)
    assert info.base_offset == 40
    assert read_all(log, 40) == [(40, b"after", 3)]
    assert log.truncate_to(1000) == 41  # beyond the end: no-op


def test_truncate_inside_a_batch_drops_the_whole_batch(open_log):
    log = open_log()
    log.append(batch([0, 1, 2]), 0)
    log.append(batch([3, 4, 5]), 0)
    assert log.truncate_to(4) == 3
    assert [o for o, _, _ in read_all(log)] == [0, 1, 2]


def test_truncate_fully_and_start_at(open_log):
    log = open_log(SMALL)
    fill(log, 50)
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset) == (500, 500)
    assert log.segment_base_offsets() == [500]
    assert log.epoch_entries() == []
    assert log.append(batch([1]), 7).base_offset == 500


def test_delete_records_before(open_log, mode, tmp_path):
    log = open_log(SMALL)
    fill(log, 100, epoch=1)
    fill(log, 20, epoch=2, start=100)
    bases = log.segment_base_offsets()
    target = bases[3] + 1
    assert log.delete_records_before(target) == target
    assert log.log_start_offset == target
    assert log.segment_base_offsets()[0] == bases[3]
    assert log.epoch_entries() == [(1, target), (2, 100)]
    assert read_all(log, target)[0][0] == target
    assert log.delete_records_before(2) == target  # never moves back
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(121)
    if mode == "file":
        d = tmp_path / "topic-0"
        assert not (d / f"{bases[0]:020d}.log").exists()
        assert not list(d.glob("*.deleted"))
        log.close()
        log = PartitionLog.open(d, SMALL)
        assert log.log_start_offset == target and log.log_end_offset == 120
        assert (d / "log-start-offset").read_text() == f"0\n1\n{target}\n"
        log.close()


def test_delete_records_up_to_end_keeps_active_segment(open_log):
    log = open_log()
    fill(log, 5)
    assert log.delete_records_before(5) == 5
    assert log.read(5, 100).records == []
    assert log.append(batch([1]), 0).base_offset == 5


def test_retention_by_time(open_log):
    clock = FakeClock()
    log = open_log(LogConfig(segment_bytes=1024, retention_ms=60_000), clock=clock)
    for i in range(60):  # one record a second
        log.append(batch([i], ts=T0 + i * 1000), 0)
    bases = log.segment_base_offsets()
    assert len(bases) > 3
    assert log.enforce_retention(T0 + 60_000) == 0  # nothing older than 60 s yet
    deleted = log.enforce_retention(T0 + 100_000)  # records before T0 + 40 s expire
    assert deleted > 0
    assert log.log_start_offset == log.segment_base_offsets()[0]
    remaining = read_all(log, log.log_start_offset)
    assert remaining[-1][0] == 59
    # Every deleted segment's newest record was older than the cut.
    assert log.log_start_offset <= 41
    # Everything expires: a fresh active segment is rolled, the log is empty.
    assert log.enforce_retention(T0 + 10**9) > 0
    assert (log.log_start_offset, log.log_end_offset) == (60, 60)
    assert log.segment_base_offsets() == [60]
    assert log.append(batch([b"x"]), 0).base_offset == 60


def test_retention_by_size(open_log):
    log = open_log(LogConfig(segment_bytes=1024, retention_bytes=3000))
    fill(log, 100)
    seg_count = len(log.segment_base_offsets())
    removed = log.enforce_retention(T0)
    assert removed > 0 and len(log.segment_base_offsets()) == seg_count - removed
    # The remaining segments fit in retention.bytes, and one more would not have.
    assert log.size_in_bytes <= 3000 + 1024
    assert log.size_in_bytes > 3000 - 1024
    assert log.enforce_retention(T0) == 0


def test_retention_keeps_segments_above_high_watermark(open_log):
    log = open_log(LogConfig(segment_bytes=1024, retention_ms=1))
    fill(log, 50)
    bases = log.segment_base_offsets()
    removed = log.enforce_retention(T0 + 10**9, high_watermark=bases[2])
    assert removed == 2 and log.segment_base_offsets()[0] == bases[2]


def test_retention_skipped_under_compact_policy(open_log):
    log = open_log(LogConfig(segment_bytes=1024, retention_ms=1, cleanup_policy="compact"))
    fill(log, 50)
    assert log.enforce_retention(T0 + 10**9) == 0


def test_segment_ms_rolls_on_record_time(open_log):
    log = open_log(LogConfig(segment_ms=10_000))
    log.append(batch([1], ts=T0), 0)
    log.append(batch([2], ts=T0 + 5_000), 0)
    assert log.segment_base_offsets() == [0]
    log.append(batch([3], ts=T0 + 10_001), 0)
    assert log.segment_base_offsets() == [0, 2]


# -- timestamps ----------------------------------------------------------------------------


def test_offset_for_timestamp_matches_a_scan(open_log):
    log = open_log(LogConfig(segment_bytes=2048, index_interval_bytes=150))
    stamps = []
    for i in range(120):
        # Mostly rising, some records out of order inside and across batches.
        ts = [T0 + i * 100 + d for d in (0, 50, -120)]
        stamps.extend(ts)
        log.append(batch([3 * i, 3 * i + 1, 3 * i + 2], ts=ts), leader_epoch=i // 40)
    for target in range(T0 - 500, T0 + 12_500, 37):
        want = next(((o, t) for o, t in enumerate(stamps) if t >= target), None)
        got = log.offset_for_timestamp(target)
        if want is None:
            assert got is None
        else:
            assert got[:2] == want, target
            assert got[2] == want[0] // 120
    assert log.offset_for_timestamp(T0 + 10**9) is None
    log.delete_records_before(100)
    assert log.offset_for_timestamp(T0)[0] == 100


def test_max_timestamp_offset(open_log):
    log = open_log(SMALL)
    assert log.max_timestamp_offset() is None
    fill(log, 30)
    log.append(batch([1, 2, 3], ts=[T0, T0 + 10**6, T0 + 5]), leader_epoch=3)
    fill(log, 30, start=33)
    assert log.max_timestamp_offset() == (31, T0 + 10**6, 3)


def test_log_append_time(open_log):
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append(batch([1, 2], ts=1), 0, log_append_time_ms=T0 + 42)
    assert info.log_append_time == T0 + 42 and info.max_timestamp == T0 + 42
    (h,) = parse_batches(bytes(log.read(0, 1 << 20).records[0]))
    assert h.timestamp_type == TimestampType.LOG_APPEND_TIME and h.max_timestamp == T0 + 42
    assert log.offset_for_timestamp(T0) == (0, T0 + 42, 0)


# -- leader epochs, follower appends -------------------------------------------------------


def test_end_offset_for_epoch(open_log):
    log = open_log()
    assert log.end_offset_for_epoch(0) == (-1, -1)
    fill(log, 10, epoch=2)
    fill(log, 10, epoch=4, start=10)
    fill(log, 10, epoch=7, start=20)
    assert log.epoch_entries() == [(2, 0), (4, 10), (7, 20)]
    assert log.end_offset_for_epoch(7) == (7, 30)  # latest: log end offset
    assert log.end_offset_for_epoch(4) == (4, 20)
    assert log.end_offset_for_epoch(5) == (4, 20)  # unknown, between: lower epoch
    assert log.end_offset_for_epoch(1) == (1, 0)  # below all known
    assert log.end_offset_for_epoch(8) == (-1, -1)  # above all known
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    assert log.epoch_for_offset(15) == 4
    log.maybe_assign_epoch_start_offset(9, log.log_end_offset)
    assert log.end_offset_for_epoch(7) == (7, 30) and log.latest_epoch() == 9


def test_truncating_at_the_log_end_drops_an_epoch_that_wrote_nothing(tmp_path):
    # This broker led epoch 7 from offset 20 and lost leadership before writing in it; its
    # new leader has no epoch 7. Truncating to where they agree (20 = the log end) cuts no
    # record, but epoch 7 must go: the next fetch names epoch 3 as the last fetched one.
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, SMALL)
    fill(log, 10, epoch=0)
    fill(log, 10, epoch=3, start=10)
    log.maybe_assign_epoch_start_offset(7, 20)
    assert log.latest_epoch() == 7
    assert log.truncate_to(20) == 20
    assert log.latest_epoch() == 3 and log.epoch_entries() == [(0, 0), (3, 10)]
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 10\n"
    log.close()


def test_follower_append_keeps_offsets_and_epochs(open_log):
    leader = open_log(SMALL, name="leader-0")
    follower = open_log(SMALL, name="follower-0")
    fill(leader, 20, epoch=1)
    fill(leader, 20, epoch=5, start=20)
    res = leader.read(0, 1 << 30)
    for view in res.records:
        follower.append_as_follower(view)
    assert follower.log_end_offset == 40
    assert follower.epoch_entries() == leader.epoch_entries() == [(1, 0), (5, 20)]
    assert read_all(follower) == read_all(leader)
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(res.records[-1])
    # Truncate to the leader's end of epoch 1, then catch up again.
    end = leader.end_offset_for_epoch(1)
    assert end == (1, 20)
    follower.truncate_to(end[1])
    assert follower.epoch_entries() == [(1, 0)]
    follower.append_as_follower(b"".join(bytes(v) for v in leader.read(20, 1 << 30).records))
    assert read_all(follower) == read_all(leader)


# -- flush, close, delete ------------------------------------------------------------------


def test_flush_paths(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=1024, flush_messages=1, flush_ms=0))
    fill(log, 40)
    assert log.maybe_flush(T0 * 2) in (True, False)
    log.flush()
    log.close()


def test_closed_log_refuses_calls(open_log):
    log = open_log()
    fill(log, 3)
    log.close()
    with pytest.raises(LogClosedError):
        log.append(batch([1]), 0)
    with pytest.raises(LogClosedError):
        log.read(0, 100)


def test_partition_log_delete_removes_directory(open_log, mode, tmp_path):
    log = open_log(SMALL)
    fill(log, 20)
    log.delete()
    assert not (tmp_path / "topic-0").exists()
    with pytest.raises(LogClosedError):
        log.append(batch([1]), 0)


def test_files_hold_exactly_the_data_after_roll_and_close(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, SMALL)
    fill(log, 60)
    sizes = {p.name: p.stat().st_size for p in d.glob("*.log")}
    active = f"{log.segment_base_offsets()[-1]:020d}.log"
    # Rolled segments are trimmed; the active one may be grown ahead (a sparse hole).
    assert sum(v for k, v in sizes.items() if k != active) == log.size_in_bytes - log._segments[-1].size
    total = log.size_in_bytes
    log.close()
    assert sum(p.stat().st_size for p in d.glob("*.log")) == total
