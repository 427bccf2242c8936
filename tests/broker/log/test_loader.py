"""Opening a partition log from disk (refka/broker/log/loader.py): torn tails and bad
indexes recovered, the log start offset and leader-epoch checkpoints, a crash
(kill -9), and a log cleaner's swap cut short. File-only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from refka.broker.log import LogConfig, LogManager, PartitionLog
from refka.broker.log import cleaner as cleaner_mod
from refka.broker.log.cleaner import LogCleaner
from refka.broker.log.loader import CLEAN_SHUTDOWN_FILE
from tests.broker.log.helpers import (
    COMPACT,
    SMALL,
    T0,
    FakeClock,
    batch,
    fill,
    latest_per_key,
    read_all,
    records,
    updates,
)

REPO = Path(__file__).resolve().parents[3]


def _segment_files(d: Path, suffix: str) -> list[Path]:
    return sorted(d.glob(f"*{suffix}"))


# -- segments ------------------------------------------------------------------------------


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


# -- checkpoints: log start offset, leader epochs ------------------------------------------


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


# -- a log cleaner's swap cut short --------------------------------------------------------


def _crash_after_commit(tmp_path, monkeypatch, fail_install: bool):
    """Clean once but stop after the .swap commit: either before the old segments
    are touched (the log refuses the swap, the files stay) or in the middle of the
    install (old segments renamed *.deleted, the .swap files not yet renamed)."""
    clock = FakeClock()
    mgr = LogManager([tmp_path], default_config=COMPACT, clock=clock)
    log = mgr.get_or_create("t", 0)
    updates(log, 20, roll_every=5)
    expected = latest_per_key(records(log))
    monkeypatch.setattr(cleaner_mod, "_discard", lambda new: new.close())
    if fail_install:
        def broken_installer(new):
            def install():
                raise OSError("simulated crash during the install")
            return install
        monkeypatch.setattr(LogCleaner, "_installer", staticmethod(broken_installer))
    else:
        monkeypatch.setattr(PartitionLog, "replace_segments", lambda *a, **k: False)
    LogCleaner(mgr, clock=clock).clean_pass(T0 + 1000)
    directory = tmp_path / "t-0"
    assert list(directory.glob("*.log.swap"))
    monkeypatch.undo()
    # kill -9: no clean close.
    for seg_log in mgr.logs().values():
        seg_log.close_without_flush()
    (directory / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
    return directory, expected


@pytest.mark.parametrize("fail_install", [False, True], ids=["before-install", "during-install"])
def test_an_interrupted_swap_is_completed_at_open(tmp_path, monkeypatch, fail_install):
    directory, expected = _crash_after_commit(tmp_path, monkeypatch, fail_install)
    mgr = LogManager([tmp_path], default_config=COMPACT, clock=FakeClock())
    log = mgr.get("t", 0)
    recs = records(log)
    assert latest_per_key(recs) == expected
    assert len(recs) < 100  # the cleaned segment, not the old ones
    offsets = [o for o, _k, _v in recs]
    assert offsets == sorted(set(offsets))
    assert not [p for p in directory.iterdir() if p.name.endswith((".swap", ".cleaned", ".deleted"))]
    assert log.log_end_offset == 100
    mgr.close()


def test_leftover_cleaned_files_are_removed_at_open(tmp_path):
    mgr = LogManager([tmp_path], default_config=COMPACT, clock=FakeClock())
    log = mgr.get_or_create("t", 0)
    updates(log, 10, roll_every=5)
    before = records(log)
    mgr.close()
    directory = tmp_path / "t-0"
    (directory / "00000000000000000000.log.cleaned").write_bytes(b"half written")
    (directory / "00000000000000000000.index.swap").write_bytes(b"")  # no .log.swap: never committed
    mgr = LogManager([tmp_path], default_config=COMPACT, clock=FakeClock())
    assert records(mgr.get("t", 0)) == before
    assert sorted(p.name for p in directory.iterdir() if not p.name.endswith((".log", "index", "checkpoint",
                                                                              ".snapshot", "offset"))) == []
    mgr.close()
