"""The bounded cache of open log files (refka/broker/log/open_files.py): least recently
used files are closed, used files open again, views and owed fsyncs survive eviction."""

from __future__ import annotations

import gc
import os
import threading

import pytest

from refka.broker.log import LeaderEpochCache, LogConfig, LogManager, PartitionLog
from refka.broker.log.open_files import OpenFileCache
from refka.broker.log.store import GROWTH_STEP, FileStore
from tests.broker.log.helpers import SMALL, batch, fill, read_all


def open_descriptors(collect: bool = False) -> int:
    if collect:
        gc.collect()  # what earlier tests left for the collector closes now, not mid-test
    return len(os.listdir("/proc/self/fd"))


def stores(tmp_path, files, n):
    return [FileStore(tmp_path / f"{i:020d}.log", files) for i in range(n)]


# -- eviction -------------------------------------------------------------------------


def test_the_least_recently_used_file_is_closed_first(tmp_path):
    files = OpenFileCache(3)
    a, b, c = stores(tmp_path, files, 3)
    a.write(b"a")  # a is now the most recently used
    d = FileStore(tmp_path / "d.log", files)
    assert b not in files and not b.is_open
    assert all(f in files and f.is_open for f in (a, c, d))
    assert files.open_descriptors == 3


def test_a_mapping_holds_no_descriptor(tmp_path):
    files = OpenFileCache(4)
    (a,) = stores(tmp_path, files, 1)
    a.write(b"x" * 100)
    before = open_descriptors(collect=True)
    views = [a.view(0, 100), a.buffer()]
    assert open_descriptors() == before and files.open_descriptors == 1
    del views


def test_descriptors_stay_within_the_bound_however_many_files(tmp_path):
    before = open_descriptors(collect=True)
    files = OpenFileCache(8)
    many = stores(tmp_path, files, 100)
    for i, s in enumerate(many):
        s.write(b"%d" % i)
        assert bytes(s.view(0, s.size)) == b"%d" % i
        assert files.open_descriptors <= 8
        assert open_descriptors() - before <= 8
    assert sum(s.is_open for s in many) <= 8


def test_a_file_in_use_is_passed_over_and_the_next_one_goes(tmp_path):
    files = OpenFileCache(2)
    a, b = stores(tmp_path, files, 2)
    # An operation of another thread holds a's lock (every operation holds its file's lock).
    with a._lock:
        FileStore(tmp_path / "c.log", files)
    assert a.is_open and not b.is_open


def test_threads_evicting_each_others_files_lose_no_byte(tmp_path):
    # The event loop and a flush or retention thread open files concurrently: each
    # evicts the other's files, never one in the middle of an operation.
    files = OpenFileCache(2)
    errors: list[BaseException] = []

    def work(name: str) -> None:
        try:
            mine = [FileStore(tmp_path / f"{name}{i}.log", files) for i in range(3)]
            for n in range(300):
                s = mine[n % 3]
                s.write(b"%08d" % n)
                view = s.view(s.size - 8, s.size)
                assert bytes(view) == b"%08d" % n
                view.release()
                os.close(s.sync_fd())
            for i, s in enumerate(mine):
                assert bytes(s.buffer()[: s.size]) == b"".join(b"%08d" % n for n in range(i, 300, 3))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(name,)) for name in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert files.open_descriptors <= 2 + 2  # the bound, or the two files in use at the end


# -- using an evicted file ------------------------------------------------------------


def test_an_evicted_segment_file_opens_again_on_write_read_and_view(tmp_path):
    files = OpenFileCache(1)
    a, b = stores(tmp_path, files, 2)
    assert not a.is_open
    a.write(b"hello ")
    assert a.is_open and not b.is_open
    b.write(b"other")
    a.write(b"world")
    assert bytes(a.view(0, a.size)) == b"hello world"
    FileStore(tmp_path / "c.log", files)
    assert not a.is_open
    assert bytes(a.buffer()[6:11]) == b"world"
    assert (tmp_path / f"{0:020d}.log").read_bytes() == b"hello world"


def test_eviction_trims_a_segment_grown_ahead_of_its_data(tmp_path):
    files = OpenFileCache(1)
    (a,) = stores(tmp_path, files, 1)
    a.write(b"data")
    path = a.path
    assert path.stat().st_size == 4 + GROWTH_STEP
    FileStore(tmp_path / "b.log", files)
    assert not a.is_open and path.stat().st_size == 4
    a.write(b"more")  # grows again from the trimmed size
    assert bytes(a.view(0, 8)) == b"datamore"


def test_views_stay_valid_after_their_file_is_evicted(tmp_path):
    files = OpenFileCache(1)
    (a,) = stores(tmp_path, files, 1)
    a.write(b"kept bytes")
    view = a.view(0, 10)
    before = open_descriptors(collect=True)
    FileStore(tmp_path / "b.log", files)  # evicts a: its mapping is let go, its descriptor closed
    assert not a.is_open
    assert open_descriptors() == before  # b's descriptor for a's
    assert bytes(view) == b"kept bytes"
    view.release()


def test_truncating_an_evicted_file_under_a_live_view_keeps_the_view(tmp_path):
    files = OpenFileCache(1)
    (a,) = stores(tmp_path, files, 1)
    a.write(b"0123456789")
    view = a.view(0, 10)
    FileStore(tmp_path / "b.log", files)
    a.truncate(4)
    assert bytes(view) == b"0123456789"
    assert bytes(a.view(0, a.size)) == b"0123"
    view.release()


def test_the_epoch_checkpoint_opens_again_after_eviction(tmp_path):
    files = OpenFileCache(1)
    path = tmp_path / "leader-epoch-checkpoint"
    epochs = LeaderEpochCache(path, files=files)
    epochs.assign(0, 0)
    epochs.assign(1, 10)
    epochs.assign(2, 20)
    FileStore(tmp_path / "other.log", files)
    assert epochs._file is not None and not epochs._file.is_open
    epochs.truncate_from_end(15)  # written again, shorter: reopened and truncated
    assert epochs._file.is_open
    loaded, ok = LeaderEpochCache.load(path)
    assert ok and loaded.entries() == [(0, 0), (1, 10)]


# -- durability -----------------------------------------------------------------------


@pytest.fixture
def fsynced(monkeypatch):
    """The (device, inode) of every file fsynced."""
    seen: set[tuple[int, int]] = set()
    real = os.fsync

    def fsync(fd):
        st = os.fstat(fd)
        seen.add((st.st_dev, st.st_ino))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return seen


def inode(path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def test_a_flush_fsyncs_the_files_whose_descriptors_were_evicted(tmp_path, fsynced):
    files = OpenFileCache(1)
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(index_interval_bytes=1), files=files)
    fill(log, 5, epoch=3)
    PartitionLog.open(tmp_path / "u-0", LogConfig(), files=files)  # evicts all of t-0's files
    seg = log._segments[-1]
    assert not (seg.store.is_open or seg.offset_index._file.is_open or seg.time_index._file.is_open)
    log.flush()
    for name in ("00000000000000000000.log", "00000000000000000000.index",
                 "00000000000000000000.timeindex", "leader-epoch-checkpoint"):
        assert inode(tmp_path / "t-0" / name) in fsynced, name


def test_a_rolled_and_evicted_segment_is_fsynced_by_the_next_flush(tmp_path, fsynced):
    files = OpenFileCache(2)
    log = PartitionLog.open(tmp_path / "t-0", SMALL, files=files)
    fill(log, 40)  # rolls several segments, evicting the earlier ones' files
    rolled = log.segment_base_offsets()[:-1]
    assert rolled
    log.flush()
    for base in rolled:
        assert inode(tmp_path / "t-0" / f"{base:020d}.log") in fsynced


def test_eviction_never_fsyncs(tmp_path, monkeypatch):
    def no_fsync(fd):
        raise AssertionError("eviction fsynced")

    files = OpenFileCache(1)
    log = PartitionLog.open(tmp_path / "t-0", SMALL, files=files)
    monkeypatch.setattr(os, "fsync", no_fsync)
    fill(log, 40, epoch=1)
    assert len(read_all(log)) == 40


def test_close_fsyncs_evicted_files_and_the_log_reopens_clean(tmp_path, fsynced):
    files = OpenFileCache(1)
    log = PartitionLog.open(tmp_path / "t-0", SMALL, files=files)
    fill(log, 30, epoch=2)
    log.close()
    assert inode(tmp_path / "t-0" / "leader-epoch-checkpoint") in fsynced
    assert files.open_descriptors == 0
    again = PartitionLog.open(tmp_path / "t-0", SMALL, files=files)
    assert len(read_all(again)) == 30 and again.latest_epoch() == 2


# -- a manager's logs -----------------------------------------------------------------


def test_a_managers_logs_share_one_bounded_cache_across_a_restart(tmp_path):
    before = open_descriptors(collect=True)
    mgr = LogManager([tmp_path], default_config=SMALL, max_open_files=16)
    logs = [mgr.get_or_create("t", p) for p in range(60)]
    for p, log in enumerate(logs):
        log.append(batch([p, p + 1]), leader_epoch=p % 3)
        log.append(batch([p + 2]), leader_epoch=5)
        assert open_descriptors() - before <= 16
    for p, log in enumerate(logs):
        assert [v for _, v, _ in read_all(log)] == [b"v%d" % (p + i) for i in range(3)]
        assert open_descriptors() - before <= 16
    mgr.close()
    assert open_descriptors() <= before
    again = LogManager([tmp_path], default_config=SMALL, max_open_files=16)
    assert open_descriptors() - before <= 16
    assert all(again.get("t", p).epoch_entries() == [(p % 3, 0), (5, 2)] for p in range(60))
    again.close()
