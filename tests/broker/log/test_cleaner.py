"""Log compaction (refka/broker/log/cleaner.py): what stays, what goes, offsets,
producer batches, the swap, the checkpoint, the thread contract. How an
interrupted swap is finished at open is test_loader.py's.

Most tests run in both storage modes (``mode``, conftest.py); the on-disk swap and
checkpoint tests are file-only.
"""

from __future__ import annotations

import os
import threading

import pytest

from refka.broker.log import LogConfig, LogManager, OffsetOutOfRangeError, checkpoint
from refka.broker.log.cleaner import CHECKPOINT_FILE, LogCleaner
from refka.protocol.records import (
    Compression,
    TimestampType,
    build_batch,
    iter_batches,
    iter_records,
    parse_batches,
    rebuild_batch,
)
from tests.broker.log.helpers import (
    COMPACT,
    HOUR,
    T0,
    FakeClock,
    batches,
    kv,
    latest_per_key,
    records,
    updates,
)


@pytest.fixture
def manager(mode, tmp_path):
    """manager(config) -> (LogManager, PartitionLog "t-0", LogCleaner)."""
    made = []

    def _make(config: LogConfig = COMPACT, clock: FakeClock | None = None, **cleaner_kw):
        clock = clock or FakeClock()
        mgr = LogManager(None if mode == "memory" else [tmp_path], memory=mode == "memory",
                         default_config=config, clock=clock)
        made.append(mgr)
        return mgr, mgr.get_or_create("t", 0), LogCleaner(mgr, clock=clock, **cleaner_kw)

    yield _make
    for mgr in made:
        mgr.close()


# -- what stays ----------------------------------------------------------------------------


def test_keeps_the_latest_record_per_key_at_its_offset(manager):
    _mgr, log, cleaner = manager()
    updates(log, 40, roll_every=5)
    log.append(kv(("k0", "in-the-active-segment")), 0)
    before = records(log)
    leo = log.log_end_offset
    result = cleaner.clean_pass(T0 + 1000)
    assert result.logs_cleaned == 1 and result.records_removed > 0
    after = records(log)
    # Below the active segment: exactly the latest record of each key, at its offset.
    active_base = log.segment_base_offsets()[-1]
    cleaned = [r for r in after if r[0] < active_base]
    expected = sorted((o, k, v) for k, (o, v) in latest_per_key(
        [r for r in before if r[0] < active_base]).items())
    assert cleaned == expected
    # The active segment is untouched; offsets and the log end offset never move.
    assert [r for r in after if r[0] >= active_base] == [r for r in before if r[0] >= active_base]
    assert log.log_end_offset == leo and log.log_start_offset == 0
    assert set(after) <= set(before)
    # A consumer from the beginning ends with the same state as before.
    assert latest_per_key(after) == latest_per_key(before)


def test_small_segments_are_merged_and_reads_cross_the_gaps(manager):
    _mgr, log, cleaner = manager()
    updates(log, 60, keys=3, roll_every=2)
    segments_before = len(log.segment_base_offsets())
    cleaner.clean_pass(T0 + 1000)
    assert len(log.segment_base_offsets()) < segments_before
    after = records(log)
    # Fetching from any offset, gaps included, returns the first record at or after it.
    for offset in range(0, log.log_end_offset):
        res = log.read(offset, 1 << 20)
        if res.records:
            data = b"".join(bytes(v) for v in res.records)
            h = next(iter_batches(data, check_counts=False))
            assert h.base_offset + h.last_offset_delta >= offset
    assert latest_per_key(after) == {f"k{i}": latest_per_key(records(log))[f"k{i}"] for i in range(3)}


def test_second_pass_finds_nothing_dirty_and_checkpoint_moves(manager):
    _mgr, log, cleaner = manager(COMPACT.__class__(**{**COMPACT.__dict__, "min_cleanable_dirty_ratio": 0.5}))
    updates(log, 20, roll_every=5)
    assert cleaner.clean_pass(T0 + 1000).logs_cleaned == 1
    first_dirty = cleaner.first_dirty_offset("t", 0)
    assert first_dirty == log.segment_base_offsets()[-1]
    assert cleaner.clean_pass(T0 + 2000).logs_cleaned == 0
    # A little new dirt (below the ratio) is left alone; a lot is cleaned.
    log.append(kv(("k0", "x")), 0)
    log.roll()
    assert cleaner.clean_pass(T0 + 3000).logs_cleaned == 0
    updates(log, 20, roll_every=5)
    assert cleaner.clean_pass(T0 + 4000).logs_cleaned == 1
    assert cleaner.first_dirty_offset("t", 0) > first_dirty


def test_delete_policy_logs_are_not_compacted(manager):
    _mgr, log, cleaner = manager(LogConfig(segment_bytes=4096, min_cleanable_dirty_ratio=0.0))
    updates(log, 20, roll_every=5)
    before = records(log)
    assert cleaner.clean_pass(T0 + 1000).logs_cleaned == 0
    assert records(log) == before


def test_compact_and_delete_policy_is_compacted(manager):
    cfg = LogConfig(**{**COMPACT.__dict__, "cleanup_policy": "compact,delete"})
    _mgr, log, cleaner = manager(cfg)
    updates(log, 20, roll_every=5)
    assert cleaner.clean_pass(T0 + 1000).logs_cleaned == 1


def test_keyless_records_are_dropped_by_the_cleaner(manager):
    _mgr, log, cleaner = manager()
    log.append(kv(("a", "1"), (None, "no key"), ("b", "2")), 0)
    log.roll()
    log.append(kv(("c", "3")), 0)
    cleaner.clean_pass(T0 + 1000)
    assert [(k, v) for _o, k, v in records(log)] == [("a", "1"), ("b", "2"), ("c", "3")]


# -- bounds: high watermark, min.compaction.lag.ms -----------------------------------------


def test_nothing_at_or_above_the_high_watermark_is_cleaned(manager):
    _mgr, log, cleaner = manager()
    updates(log, 20, roll_every=5)
    bases = log.segment_base_offsets()
    hw = bases[2]  # inside the third segment's range
    before = records(log)
    cleaner.clean_pass(T0 + 1000, high_watermark=lambda t, p: hw)
    after = records(log)
    assert [r for r in after if r[0] >= hw] == [r for r in before if r[0] >= hw]
    assert len([r for r in after if r[0] < hw]) < len([r for r in before if r[0] < hw])


def test_min_compaction_lag_keeps_recent_segments_dirty(manager):
    cfg = LogConfig(**{**COMPACT.__dict__, "min_compaction_lag_ms": 10_000})
    _mgr, log, cleaner = manager(cfg)
    updates(log, 10, ts=T0, roll_every=5)  # old segments
    updates(log, 10, ts=T0 + 60_000, roll_every=5)  # recent ones
    before = records(log)
    cleaner.clean_pass(T0 + 65_000)
    recent_start = next(o for o, _k, v in before if v.endswith("=0") and o >= 50)
    after = records(log)
    assert [r for r in after if r[0] >= recent_start] == [r for r in before if r[0] >= recent_start]
    assert len(after) < len(before)


def test_max_compaction_lag_cleans_below_the_dirty_ratio(manager):
    cfg = LogConfig(**{**COMPACT.__dict__, "min_cleanable_dirty_ratio": 0.99, "max_compaction_lag_ms": 10_000})
    _mgr, log, cleaner = manager(cfg)
    updates(log, 20, roll_every=5)
    assert cleaner.clean_pass(T0 + 1_000).logs_cleaned == 1  # never cleaned: ratio 1.0 > 0.99
    updates(log, 2, ts=T0 + 2_000)
    log.roll()
    assert cleaner.clean_pass(T0 + 3_000).logs_cleaned == 0  # little dirt, young
    assert cleaner.clean_pass(T0 + 20_000).logs_cleaned == 1  # the same dirt, older than the lag


# -- tombstones ----------------------------------------------------------------------------


def test_tombstones_stay_for_delete_retention_then_go(manager):
    clock = FakeClock(T0)
    _mgr, log, cleaner = manager(clock=clock)
    updates(log, 10, keys=3, roll_every=5)
    log.append(kv(("k1", None), ts=T0 + 100), 0)  # delete k1
    log.roll()
    log.append(kv(("k0", "active")), 0)
    cleaner.clean_pass(T0 + 1000)
    state = latest_per_key(records(log))
    assert state["k1"][1] is None  # the tombstone is still there for consumers to see
    assert [r for r in records(log) if r[1] == "k1"] == [(state["k1"][0], "k1", None)]
    # Nothing new is written: the kept tombstone alone makes the log due once it is old.
    assert cleaner.clean_pass(T0 + 100 + HOUR // 2).logs_cleaned == 0
    assert cleaner.clean_pass(T0 + 100 + HOUR + 1).logs_cleaned == 1
    assert "k1" not in latest_per_key(records(log))
    assert {k for _o, k, _v in records(log)} == {"k0", "k2"}


def test_log_append_time_tombstones_age_from_the_append_time(manager):
    clock = FakeClock(T0)
    cfg = LogConfig(**{**COMPACT.__dict__, "message_timestamp_type": "LogAppendTime"})
    _mgr, log, cleaner = manager(cfg, clock=clock)
    log.append(kv(("a", "1"), ts=1), 0)  # the producer's clock is far in the past
    log.append(kv(("a", None), ts=1), 0)
    log.roll()
    cleaner.clean_pass(T0 + 1000)
    assert records(log)[-1][1:] == ("a", None)
    cleaner.clean_pass(T0 + HOUR + 1000)
    assert records(log) == []


# -- batches: rebuilt, kept, empty ---------------------------------------------------------


@pytest.mark.parametrize("codec", list(Compression))
def test_partly_cleaned_batches_keep_offsets_sequence_and_codec(manager, codec):
    _mgr, log, cleaner = manager()
    first = kv(("a", "1"), ("b", "1"), ("c", "1"), compression=codec,
               producer_id=7, producer_epoch=2, base_sequence=100)
    log.append(first, 5)
    log.append(kv(("b", "2")), 5)
    log.roll()
    cleaner.clean_pass(T0 + 1000)
    data, hs = batches(log)
    h = hs[0]
    assert (h.base_offset, h.last_offset_delta, h.records_count) == (0, 2, 2)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 2, 100)
    assert h.partition_leader_epoch == 5 and h.compression == codec
    assert parse_batches(data[h.position : h.end], check_counts=False)  # CRC is valid
    assert [(o, k, v) for o, k, v in records(log)] == [(0, "a", "1"), (2, "c", "1"), (3, "b", "2")]


def test_a_producers_last_batch_is_kept_empty(manager):
    _mgr, log, cleaner = manager()
    log.append(kv(("a", "1"), producer_id=1, producer_epoch=0, base_sequence=0), 0)
    log.append(kv(("a", "2"), producer_id=1, producer_epoch=0, base_sequence=1), 0)  # pid 1's last
    log.append(kv(("b", "1"), producer_id=2, producer_epoch=0, base_sequence=0), 0)
    log.append(kv(("a", "3"), ("b", "2")), 0)  # supersedes everything above
    log.append(kv(("c", "1")), 0)
    log.roll()
    log.append(kv(("c", "2"), producer_id=2, producer_epoch=0, base_sequence=1), 0)  # pid 2's last: active
    cleaner.clean_pass(T0 + 1000)
    _data, hs = batches(log)
    kept = [(h.base_offset, h.records_count, h.producer_id, h.base_sequence) for h in hs]
    # pid 1's first batch goes; its last stays with no records; pid 2's first goes
    # (its last batch is in the active segment).
    assert kept == [(1, 0, 1, 1), (3, 2, -1, -1), (5, 1, -1, -1), (6, 1, 2, 1)]


def test_a_wholly_superseded_segment_keeps_its_last_batch_empty(manager):
    _mgr, log, cleaner = manager(LogConfig(**{**COMPACT.__dict__, "segment_bytes": 100}))
    log.append(kv(("a", "1")), 0)
    log.roll()
    log.append(kv(("a", "2")), 0)
    log.roll()
    log.append(kv(("a", "3")), 0)
    log.roll()
    cleaner.clean_pass(T0 + 1000)
    _data, hs = batches(log)
    # Groups of one segment (segment.bytes=100): each old segment ends where it did.
    assert [(h.base_offset, h.records_count) for h in hs] == [(0, 0), (1, 0), (2, 1)]
    assert [(o, v) for o, _k, v in records(log)] == [(2, "3")]


def test_rebuild_batch_keeps_header_fields_and_recomputes_max_timestamp():
    b = kv(("a", "1"), ("b", "2"), ("c", "3"), ts=T0)
    recs = list(iter_records(b))
    out = rebuild_batch(b, [recs[0]])
    h = parse_batches(out, check_counts=False)[0]
    assert (h.last_offset_delta, h.records_count, h.max_timestamp) == (2, 1, T0)
    empty = parse_batches(rebuild_batch(build_batch([(b"k", b"v")], compression=Compression.ZSTD,
                                                    timestamp_type=TimestampType.LOG_APPEND_TIME), []),
                          check_counts=False)[0]
    assert empty.records_count == 0 and empty.compression == Compression.NONE
    assert empty.timestamp_type == TimestampType.LOG_APPEND_TIME


# -- concurrency, the swap, the checkpoint -------------------------------------------------


def test_a_log_that_changed_under_the_pass_is_left_alone(manager, mode, tmp_path):
    _mgr, log, cleaner = manager()
    updates(log, 20, roll_every=5)
    snapshot = log.snapshot_for_cleaning

    def snapshot_then_delete_records():
        snap = snapshot()
        log.delete_records_before(log.segment_base_offsets()[1])  # drops the first segment
        return snap

    log.snapshot_for_cleaning = snapshot_then_delete_records
    before = records(log)
    result = cleaner.clean_pass(T0 + 1000)
    assert result.logs_aborted == 1 and result.logs_cleaned == 0
    assert records(log) == [r for r in before if r[0] >= log.log_start_offset]  # only DeleteRecords's doing
    if mode == "file":
        assert not [p for p in (tmp_path / "t-0").iterdir() if p.name.endswith((".cleaned", ".swap"))]
    del log.snapshot_for_cleaning
    assert cleaner.clean_pass(T0 + 2000).logs_cleaned == 1


def test_clean_pass_in_a_thread_alongside_appends_and_reads(tmp_path):
    clock = FakeClock()
    cfg = LogConfig(**{**COMPACT.__dict__, "segment_bytes": 1024})
    mgr = LogManager([tmp_path], default_config=cfg, clock=clock)
    log = mgr.get_or_create("t", 0)
    cleaner = LogCleaner(mgr, clock=clock)
    stop = threading.Event()
    errors: list[BaseException] = []

    def clean():
        try:
            while not stop.is_set():
                cleaner.clean_pass(T0 + 1000)
                mgr.retention_pass(T0 + 1000)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    worker = threading.Thread(target=clean)
    worker.start()
    try:
        for i in range(400):
            log.append(kv((f"k{i % 7}", str(i))), 0)
            try:
                res = log.read(0, 1 << 20)
            except OffsetOutOfRangeError:  # pragma: no cover - compaction never moves the start
                raise
            data = b"".join(bytes(v) for v in res.records)
            offsets = [h.base_offset for h in iter_batches(data, check_counts=False)]
            assert offsets == sorted(offsets)
    finally:
        stop.set()
        worker.join()
    assert not errors
    cleaner.clean_pass(T0 + 1000)
    state = latest_per_key(records(log))
    assert {k: v for k, (_o, v) in state.items()} == {f"k{j}": str(max(i for i in range(400) if i % 7 == j))
                                                      for j in range(7)}
    assert log.log_end_offset == 400
    mgr.close()
    # And the cleaned log opens again as it was.
    mgr2 = LogManager([tmp_path], default_config=cfg, clock=clock)
    assert latest_per_key(records(mgr2.get("t", 0))) == state
    mgr2.close()


def test_checkpoint_is_kafkas_file_and_survives_a_restart(tmp_path):
    clock = FakeClock()
    mgr = LogManager([tmp_path], default_config=COMPACT, clock=clock)
    log = mgr.get_or_create("t", 0)
    updates(log, 20, roll_every=5)
    LogCleaner(mgr, clock=clock).clean_pass(T0 + 1000)
    first_dirty = log.segment_base_offsets()[-1]
    lines = (tmp_path / CHECKPOINT_FILE).read_text().splitlines()
    assert lines == ["0", "1", f"t 0 {first_dirty}"]
    assert checkpoint.read_partition_offsets(tmp_path / CHECKPOINT_FILE) == {("t", 0): first_dirty}
    mgr.close()
    mgr = LogManager([tmp_path], default_config=COMPACT, clock=clock)
    cleaner = LogCleaner(mgr, clock=clock)
    assert cleaner.first_dirty_offset("t", 0) == first_dirty
    assert cleaner.clean_pass(T0 + 2000).logs_cleaned == 0
    mgr.close()


def test_an_unreadable_checkpoint_is_ignored(tmp_path):
    # The next pass then cleans from the log start offset: more work, nothing else.
    clock = FakeClock()
    mgr = LogManager([tmp_path], default_config=COMPACT, clock=clock)
    log = mgr.get_or_create("t", 0)
    updates(log, 20, roll_every=5)
    (tmp_path / CHECKPOINT_FILE).write_text("0\n2\nt 0 15\n")  # a count the lines do not match
    cleaner = LogCleaner(mgr, clock=clock)
    assert cleaner.first_dirty_offset("t", 0) is None
    assert cleaner.clean_pass(T0 + 1000).logs_cleaned == 1
    assert checkpoint.read_partition_offsets(tmp_path / CHECKPOINT_FILE) == {
        ("t", 0): log.segment_base_offsets()[-1]
    }
    mgr.close()


def test_cleaned_segments_keep_their_modification_time(tmp_path):
    """Retention by time falls back on a segment's mtime: cleaning must not make it young."""
    clock = FakeClock(T0)
    mgr = LogManager([tmp_path], default_config=COMPACT, clock=clock)
    log = mgr.get_or_create("t", 0)
    updates(log, 10, roll_every=5)
    clock.now = T0 + HOUR
    LogCleaner(mgr, clock=clock).clean_pass()
    path = tmp_path / "t-0" / "00000000000000000000.log"
    assert os.stat(path).st_mtime_ns // 1_000_000 == T0  # the old segments' last append
    mgr.close()


def test_shutdown_stops_a_pass(manager):
    _mgr, log, cleaner = manager()
    updates(log, 20, roll_every=5)
    before = records(log)
    cleaner.shutdown()
    result = cleaner.clean_pass(T0 + 1000)
    assert result.logs_cleaned == 0
    assert records(log) == before


def test_map_limit_cleans_in_several_passes(manager):
    _mgr, log, cleaner = manager(max_map_keys=3)
    for r in range(4):
        for i in range(3):
            log.append(kv((f"s{r}k{i}", "1")), 0)  # 3 fresh keys per segment
        log.append(kv((f"s{r}k0", "2")), 0)
        log.roll()
    cleaner.clean_pass(T0 + 1000)
    first = cleaner.first_dirty_offset("t", 0)
    assert 0 < first < log.segment_base_offsets()[-1]
    cleaner.clean_pass(T0 + 2000)
    assert cleaner.first_dirty_offset("t", 0) > first
