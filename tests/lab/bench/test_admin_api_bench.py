"""``python -m lab.bench --admin-api`` at a small scale: both throughput variants measured
(the poller answered on every path it reads, the timeline stream delivered events), and
each leader move through the API timed to librdkafka's first acknowledgement on the new
leader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[3]


def test_a_small_run_measures_the_overhead_and_the_moves(tmp_path):
    results = tmp_path / "admin.json"
    done = subprocess.run(
        [sys.executable, "-m", "lab.bench", "--admin-api", "--rounds", "1", "--records", "20000", "--moves", "2",
         "--gap-seconds", "1.5", "--cpu-seconds", "2", "--json", str(results)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(results.read_text())
    o = data["overhead"]
    assert len(o["rounds"]["with"]) == len(o["rounds"]["without"]) == 1
    assert o["with_over_without"] > 0 and len(o["round_ratios"]) == 1
    assert o["poller_cpu"]["polled_core_share"] > 0
    polled = o["poller_last_round"]
    assert polled["errors"] == [], polled
    assert all(set(by_status) == {"200"} for by_status in polled["statuses"].values()), polled  # JSON keys
    m = data["leader_move"]
    assert [mv["to"] for mv in m["moves"]] == [1, 0]
    assert m["failed"] == 0 and m["undelivered_after_flush"] == 0
    assert all(mv["first_ack_on_new_leader_ms"] is not None and mv["epoch_start_offset"] > 0 for mv in m["moves"])
    assert "call to librdkafka's first ack on the new leader" in done.stdout
