"""``python -m lab.bench --metadata-clients`` at a small scale: every client's rows are
measured from the brokers' record file, each producer's records acknowledged, and the
figures that the README reads from a full run are there (topics named per Metadata request,
recovery after a leader move under frozen metadata, refka's refusals)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[3]


def test_a_small_run_measures_every_client(tmp_path):
    results = tmp_path / "mdc.json"
    done = subprocess.run(
        [sys.executable, "-m", "lab.bench", "--metadata-clients", "--topics", "12", "--used", "3",
         "--idle-seconds", "22", "--move-seconds", "4", "--json", str(results)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(results.read_text())
    ws = {r["client"]: r for r in data["working_set"]}
    assert set(ws) == {"confluent-kafka", "kafka-python", "refka"}
    for r in ws.values():
        assert r["failed"] == 0 and r["acked"] >= 12 and r["metadata_requests"] >= 1, r
    # refka's client (metadata_max_idle_ms 10 s) names, in the last 11 s, at most the topics still in use
    assert ws["refka"]["topics_named_max"] <= 3, ws["refka"]
    st = {r["client"]: r for r in data["stale"]}
    assert set(st) == set(ws)
    for r in st.values():
        assert r["error"] is None and r["failed"] == 0 and r["thawed"], r
        assert r["recovery_ms"] is not None and r["frozen_answer_leader"] == 1, r
    assert st["refka"]["stale_answers_refused"] is not None
    assert "working-set: Metadata requests" in done.stdout and "stale: the Metadata" in done.stdout
