"""Partition logs: appends, reads, indexes, truncation, retention, recovery, epochs.

Most tests run against both storage modes (``mode`` fixture): files in Kafka's
layout and memory. Tests about files on disk (recovery, checkpoints) are file-only.
"""

from __future__ import annotations

import mmap
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from refka.broker.log import (
    InvalidConfigError,
    LogClosedError,
    LogConfig,
    LogManager,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
    parse_partition_dir,
)
from refka.broker.log.log import CLEAN_SHUTDOWN_FILE
from refka.protocol.records import (
    Compression,
    NewRecord,
    TimestampType,
    build_batch,
    iter_batches,
    iter_records,
    parse_batches,
)

T0 = 1_700_000_000_000
REPO = Path(__file__).resolve().parents[2]


class FakeClock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture(params=["file", "memory"])
def mode(request):
    return request.param


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


def batch(values, ts=T0, compression=Compression.NONE, **kw):
    """A batch of records with values ``values`` (bytes or ints), timestamps ``ts``
    (one int or one per record)."""
    values = [v if isinstance(v, bytes) else b"v%d" % v for v in values]
    stamps = ts if isinstance(ts, list) else [ts] * len(values)
    return build_batch(
        [NewRecord(None, v, (), t) for v, t in zip(values, stamps, strict=True)],
        compression=compression,
        **kw,
    )


def read_all(log: PartitionLog, offset: int = 0, max_bytes: int = 1 << 30, max_offset=None):
    """[(offset, value, leader epoch)] of every record the read returns."""
    res = log.read(offset, max_bytes, max_offset)
    data = b"".join(bytes(v) for v in res.records)
    out = []
    for h in iter_batches(data):
        for rec in iter_records(memoryview(data)[h.position : h.end]):
            out.append((h.base_offset + rec.offset_delta, rec.value, h.partition_leader_epoch))
    return out


def fill(log, n_batches, per_batch=1, epoch=0, ts=T0, start=0):
    for i in range(n_batches):
        first = start + i * per_batch
        log.append(batch(range(first, first + per_batch), ts=ts + i), leader_epoch=epoch)


SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=128)


# -- appends and reads -----------------------------------------------------------------


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


# -- truncation and log start offset ----------------------------------------------------


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


# -- retention ---------------------------------------------------------------------------


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


# -- timestamps ---------------------------------------------------------------------------


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


# -- leader epochs -----------------------------------------------------------------------


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


def test_leader_epoch_checkpoint_persisted_and_reloaded(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, SMALL)
    fill(log, 10, epoch=0)
    fill(log, 10, epoch=3, start=10)
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 10\n"
    log.close()
    assert (d / CLEAN_SHUTDOWN_FILE).exists()
    log = PartitionLog.open(d, SMALL)
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()
    assert log.epoch_entries() == [(0, 0), (3, 10)]
    log.close()
    (d / "leader-epoch-checkpoint").unlink()  # rebuilt from batch headers
    log = PartitionLog.open(d, SMALL)
    assert log.epoch_entries() == [(0, 0), (3, 10)]
    log.close()


def test_leader_epoch_checkpoint_rewritten_in_place_and_a_torn_one_rebuilt(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, SMALL)
    fill(log, 10, epoch=0)
    fill(log, 10, epoch=3, start=10)
    log.maybe_assign_epoch_start_offset(5, 20)  # a leader epoch that wrote nothing yet
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n3 10\n5 20\n"
    log.truncate_to(15)  # shrinks: the file is cut to the new content
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 10\n"
    log.close()
    # What a process killed between the in-place write of a shorter content and the
    # truncation leaves: the new lines, then the old tail. Refused; rebuilt from the batches.
    (d / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n3 10\n5 20\n")
    log = PartitionLog.open(d, SMALL)
    assert log.epoch_entries() == [(0, 0), (3, 10)]
    log.close()


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


# -- recovery and durability (files) -------------------------------------------------------


def _segment_files(d: Path, suffix: str) -> list[Path]:
    return sorted(d.glob(f"*{suffix}"))


def test_torn_tail_is_cut_at_open(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, SMALL)
    fill(log, 50, epoch=2)
    expected = read_all(log)
    # Simulate a crash: no close(), so no clean-shutdown marker; then a torn tail.
    last = _segment_files(d, ".log")[-1]
    with open(last, "ab") as f:
        f.write(bytes(batch([b"torn"]))[:40])
        f.write(b"\xde\xad\xbe\xef" * 10)
    log = PartitionLog.open(d, SMALL)
    assert log.log_end_offset == 50
    assert read_all(log) == expected
    assert log.append(batch([b"next"]), 2).base_offset == 50
    assert read_all(log, 50) == [(50, b"next", 2)]
    log.close()


def test_corrupt_batch_in_last_segment_is_cut(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, LogConfig())
    fill(log, 10)
    size = len(batch([0]))
    path = _segment_files(d, ".log")[-1]
    data = bytearray(path.read_bytes())
    data[7 * size + size - 3] ^= 0xFF  # inside the 8th batch's records: bad CRC
    path.write_bytes(bytes(data))
    log = PartitionLog.open(d, LogConfig())
    assert log.log_end_offset == 7
    log.close()


def test_missing_or_corrupt_indexes_are_rebuilt(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, SMALL)
    fill(log, 100)
    expected = [log.read(o, 1).first_offset for o in range(100)]
    log.close()
    indexes = _segment_files(d, ".index")
    indexes[0].unlink()
    indexes[1].write_bytes(b"\x00\x00\x00\x05\x00\x00\xff\xff")  # position beyond the segment
    _segment_files(d, ".timeindex")[2].write_bytes(b"\x01\x02\x03")
    log = PartitionLog.open(d, SMALL)
    assert [log.read(o, 1).first_offset for o in range(100)] == expected
    assert indexes[0].exists() and len(indexes[1].read_bytes()) % 8 == 0
    assert log.offset_for_timestamp(T0 + 50) == (50, T0 + 50, 0)
    log.close()


def test_torn_older_segment_drops_later_ones(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, SMALL)
    fill(log, 100)
    log.close()
    logs = _segment_files(d, ".log")
    with open(logs[1], "ab") as f:
        f.write(b"\x00" * 30)
    log = PartitionLog.open(d, SMALL)
    assert log.segment_base_offsets() == [int(logs[0].stem), int(logs[1].stem)]
    assert log.log_end_offset == int(logs[2].stem)
    log.close()


def test_log_start_offset_checkpoint_above_the_data(tmp_path):
    # E.g. the data was lost but the checkpoint was not: the log restarts empty there.
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, SMALL)
    fill(log, 100)
    log.close()
    (d / "log-start-offset").write_text("0\n1\n500\n")
    log = PartitionLog.open(d, SMALL)
    assert (log.log_start_offset, log.log_end_offset) == (500, 500)
    assert log.segment_base_offsets() == [500]
    assert log.append(batch([1]), 0).base_offset == 500
    log.close()


def test_appended_batches_survive_sigkill(tmp_path):
    d = tmp_path / "crash-0"
    n = 200
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from refka.broker.log import LogConfig, PartitionLog
        from refka.protocol.records import build_batch
        log = PartitionLog.open(Path({str(d)!r}), LogConfig(segment_bytes=4096))
        for i in range({n}):
            log.append(build_batch([(None, b"value-%d" % i)], timestamp={T0} + i), leader_epoch=3)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()
    log = PartitionLog.open(d, LogConfig(segment_bytes=4096))
    assert log.log_end_offset == n
    assert [v for _, v, _ in read_all(log)] == [b"value-%d" % i for i in range(n)]
    assert log.epoch_entries() == [(3, 0)]
    log.close()


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


# -- config ------------------------------------------------------------------------------------


def test_log_config_from_props():
    cfg = LogConfig.from_props(
        {
            "retention.ms": "60000",
            "segment.bytes": "2048",
            "message.timestamp.type": "LogAppendTime",
            "cleanup.policy": "delete,compact",
            "min.insync.replicas": "2",  # not a log config: ignored
        }
    )
    assert (cfg.retention_ms, cfg.segment_bytes) == (60000, 2048)
    assert cfg.log_append_time and cfg.deletes and cfg.cleanup_policy == "compact,delete"
    assert LogConfig.from_props({"retention.bytes": "10"}, base=cfg).retention_ms == 60000
    assert cfg.to_props()["segment.bytes"] == "2048"
    for bad in (
        {"segment.bytes": "abc"},
        {"segment.bytes": "1"},
        {"cleanup.policy": "nope"},
        {"message.timestamp.type": "Whenever"},
    ):
        with pytest.raises(InvalidConfigError):
            LogConfig.from_props(bad)
    broker = LogConfig.from_broker_props(
        {"log.retention.hours": "1", "log.segment.bytes": "4096", "log.roll.ms": "5"}
    )
    assert (broker.retention_ms, broker.segment_bytes, broker.segment_ms) == (3_600_000, 4096, 5)
    assert (
        LogConfig.from_broker_props({"log.retention.hours": "1", "log.retention.ms": "7"}).retention_ms == 7
    )


# -- log manager ---------------------------------------------------------------------------------


def test_parse_partition_dir():
    assert parse_partition_dir("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir("t-0") == ("t", 0)
    for bad in ("topic", "-1", "t-x", "t-0.abcdef-delete", "t-"):
        assert parse_partition_dir(bad) is None


def test_log_manager_loads_creates_and_deletes(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    mgr = LogManager(dirs, default_config=SMALL)
    log = mgr.get_or_create("orders-eu-west", 3)
    fill(log, 30)
    mgr.get_or_create("other", 0)
    assert {p.parent for p in (dirs[0].glob("*-*"))} | {p.parent for p in dirs[1].glob("*-*")} == set(dirs)
    assert mgr.get_or_create("orders-eu-west", 3) is log
    mgr.close()

    mgr = LogManager(dirs, default_config=SMALL)
    assert set(mgr) == {("orders-eu-west", 3), ("other", 0)}
    assert mgr.get("orders-eu-west", 3).log_end_offset == 30
    assert mgr.get("missing", 0) is None
    assert mgr.delete("orders-eu-west", 3)
    assert not mgr.delete("orders-eu-west", 3)
    assert list(tmp_path.glob("*/*-delete"))
    assert mgr.retention_pass(T0).dirs_deleted == 1
    assert not list(tmp_path.glob("*/*-delete"))
    assert ("orders-eu-west", 3) not in mgr and len(mgr) == 1
    mgr.close()


def test_log_manager_memory_mode():
    mgr = LogManager(None, memory=True)
    log = mgr.get_or_create("t", 0, LogConfig(segment_bytes=1024, retention_ms=1))
    fill(log, 50)
    assert log.memory
    assert mgr.retention_pass(T0 + 10**9).segments_removed > 0
    assert log.log_start_offset == log.log_end_offset == 50
    mgr.close()


def test_retention_pass_in_a_thread_alongside_appends(tmp_path):
    clock = FakeClock()
    cfg = LogConfig(segment_bytes=1024, retention_ms=1000, file_delete_delay_ms=0)
    mgr = LogManager([tmp_path], default_config=cfg, clock=clock)
    log = mgr.get_or_create("t", 0)
    stop = threading.Event()
    errors: list[BaseException] = []

    def retention():
        try:
            while not stop.is_set():
                mgr.retention_pass(T0 + 10**9)
                mgr.flush_pass(T0)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    worker = threading.Thread(target=retention)
    worker.start()
    try:
        for i in range(300):
            log.append(batch([i], ts=T0), 0)
            try:
                res = log.read(log.log_start_offset, 1 << 20)
            except OffsetOutOfRangeError:
                continue  # retention moved the log start offset in between: a real race
            assert res.size == sum(len(v) for v in res.records)
            assert res.first_offset >= res.log_start_offset or not res.records
    finally:
        stop.set()
        worker.join()
    assert not errors
    mgr.retention_pass(T0 + 10**9)
    assert log.log_end_offset == 300
    assert log.log_start_offset == log.segment_base_offsets()[0]
    assert not list((tmp_path / "t-0").glob("*.deleted"))
    mgr.close()


def test_segment_deletion_waits_for_file_delete_delay(tmp_path):
    clock = FakeClock()
    mgr = LogManager(
        [tmp_path], default_config=LogConfig(segment_bytes=1024, file_delete_delay_ms=60_000), clock=clock
    )
    log = mgr.get_or_create("t", 0)
    fill(log, 50)
    log.delete_records_before(40)
    assert list((tmp_path / "t-0").glob("*.log.deleted"))
    assert mgr.retention_pass(T0 + 1000).files_deleted == 0
    assert mgr.retention_pass(T0 + 61_000).files_deleted > 0
    assert not list((tmp_path / "t-0").glob("*.deleted"))
    mgr.close()


def test_log_manager_rejects_illegal_names_and_uses_config_for(tmp_path):
    mgr = LogManager([tmp_path])
    for topic, partition in (("../evil", 0), ("a/b", 0), ("", 0), ("..", 0), ("t", -1), ("x" * 250, 0)):
        with pytest.raises(ValueError):
            mgr.get_or_create(topic, partition)
    mgr.get_or_create("compacted", 0)
    mgr.get_or_create("plain", 0)
    mgr.close()
    mgr = LogManager(
        [tmp_path],
        config_for=lambda t: LogConfig(cleanup_policy="compact") if t == "compacted" else LogConfig(),
    )
    assert mgr.get("compacted", 0).config.cleanup_policy == "compact"
    assert mgr.get("plain", 0).config == LogConfig()
    new = LogConfig(retention_ms=5)
    assert mgr.get_or_create("plain", 0, new).config == new
    mgr.close()


def test_partition_log_delete_removes_directory(open_log, mode, tmp_path):
    log = open_log(SMALL)
    fill(log, 20)
    log.delete()
    assert not (tmp_path / "topic-0").exists()
    with pytest.raises(LogClosedError):
        log.append(batch([1]), 0)


# -- leader-epoch cache rules (Kafka's LeaderEpochFileCache) ------------------------------------


def test_epoch_cache_assign_drops_diverged_entries(tmp_path):
    from refka.broker.log import LeaderEpochCache

    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    assert cache.assign(1, 0) and cache.assign(3, 10) and cache.assign(5, 20)
    assert not cache.assign(5, 25)  # same epoch, later offset: no change
    assert not cache.assign(-1, 30)
    assert cache.assign(4, 15)  # lower epoch: entries with epoch >= 4 or start >= 15 go
    assert cache.entries() == [(1, 0), (3, 10), (4, 15)]
    cache.truncate_from_start(12)
    assert cache.entries() == [(3, 12), (4, 15)]
    cache.truncate_from_end(15)
    assert cache.entries() == [(3, 12)]
    loaded, ok = LeaderEpochCache.load(tmp_path / "leader-epoch-checkpoint")
    assert ok and loaded.entries() == [(3, 12)]
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n2\n5 10\n4 20\n")  # not increasing
    assert LeaderEpochCache.load(tmp_path / "leader-epoch-checkpoint")[1] is False


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


def test_segment_header_scan_stops_at_the_data(open_log):
    log = open_log()
    fill(log, 7)
    assert [h.base_offset for h in log._segments[-1].iter_headers()] == list(range(7))


def test_high_watermark_checkpoint_per_log_dir(tmp_path):
    # Kafka's replication-offset-checkpoint: "0", a count, "topic partition offset" lines,
    # one file per log dir holding the entries of the partitions that live there.
    from refka.broker.log.manager import HIGH_WATERMARK_FILE, LogManager

    dirs = [tmp_path / "a", tmp_path / "b"]
    m = LogManager(dirs)
    for tp in [("t", 0), ("t", 1), ("my-topic", 3)]:
        m.get_or_create(*tp)
    m.write_high_watermarks({("t", 0): 5, ("t", 1): 7, ("my-topic", 3): 0, ("gone", 0): 9})
    texts = sorted((d / HIGH_WATERMARK_FILE).read_text() for d in dirs)
    assert sum(len(t.splitlines()) - 2 for t in texts) == 3
    assert all(t.startswith("0\n") for t in texts)
    m.close()
    again = LogManager(dirs)
    assert again.read_high_watermarks() == {("t", 0): 5, ("t", 1): 7, ("my-topic", 3): 0}
    again.close()
    # A torn or foreign file is ignored (high watermarks then start at the log start).
    (dirs[0] / HIGH_WATERMARK_FILE).write_text("0\n3\nt 0 5\n")
    third = LogManager(dirs)
    assert set(third.read_high_watermarks()) <= {("t", 0), ("t", 1), ("my-topic", 3)}
    assert len(third.read_high_watermarks()) < 3
    third.close()
