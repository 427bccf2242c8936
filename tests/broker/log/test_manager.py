"""All partition logs of a broker (refka/broker/log/manager.py): directories, loading,
creation and deletion, the retention and flush passes in a worker thread, the
high watermark checkpoints.
"""

from __future__ import annotations

import threading

import pytest

from refka.broker.log import LogConfig, LogManager, OffsetOutOfRangeError, parse_partition_dir
from refka.broker.log.manager import HIGH_WATERMARK_FILE
from tests.broker.log.helpers import SMALL, T0, FakeClock, batch, fill


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


def test_high_watermark_checkpoint_per_log_dir(tmp_path):
    # Kafka's replication-offset-checkpoint: "0", a count, "topic partition offset" lines,
    # one file per log dir holding the entries of the partitions that live there.
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
