"""Smoke test of the KIP-253 benchmark (lab/bench/partitions.py): ``python -m lab.bench
--partitions --quick`` with tiny sizes prints every figure of its table and writes them to
its JSON file. The figures' values are not checked (timings are not tests).

Run as a process, as a user runs it: nothing under tests/ imports lab (tests/test_layering.py).
Once per cluster form: three processes over a private ZooKeeper (skipped, naming the reason,
where Debian's package is not installed) and ``refka serve --brokers 3``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.zk import zookeeper_unavailable

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[3]
ROWS = (
    "expansion 3 -> 6 (RF 3)", "shrink 6 -> 3", "drain, ms from the last DeleteRecords answer",
    "  median ", "  max ", "  CreatePartitions answered (median) ", "  mean ", "  min / max ", "  rounds ",
    "ConsumerGroupPosition (api 10254) on one coordinator", "  calls/s ", "  coordinator CPU % ",
    "  calls per coordinator CPU second ", "  this process's CPU % ", "  answers with an error ",
)


@pytest.mark.parametrize("form", ["zookeeper", "one-process"])
def test_quick_run_prints_and_writes_every_figure(form, tmp_path):
    if form == "zookeeper" and (reason := zookeeper_unavailable()):
        pytest.skip(reason)
    results = tmp_path / "partitions.json"
    done = subprocess.run(
        [sys.executable, "-m", "lab.bench", "--partitions", "--quick", "--cluster", form, "--topic-partitions", "3",
         "--members", "2", "--connections", "2", "--window", "4", "--seconds", "1", "--json", str(results)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=200)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for row in ROWS:
        assert row in out, f"{row!r} missing from:\n{out}"
    assert "n/a" not in out, out

    data = json.loads(results.read_text())
    assert data["config"]["cluster"] == form
    (interval,) = data["intervals"].values()
    assert interval["interval_ms"] == 1000
    for step in ("expansion", "shrink", "drain"):
        assert interval[step]["samples"] == 1
        assert {"median_ms", "max_ms"} <= interval[step].keys()
        assert set(interval["rounds"][0][step]["by_broker_ms"]) == {"0", "1", "2"}  # every broker polled
    positions = interval["positions"]
    assert positions["calls_per_s"] > 0 and positions["errors"] == {}
    # The last answer of member 0's connection: the next member's positions, reported by its connection.
    assert positions["last_answer"]["error_code"] == 0
    assert [p[0] for p in positions["last_answer"]["partitions"]] == [0, 1, 2, 3, 4, 5]
