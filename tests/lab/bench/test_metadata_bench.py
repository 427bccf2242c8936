"""Smoke test of the KIP-526 benchmark (lab/bench/metadata.py): ``python -m lab.bench
--metadata --quick`` with tiny sizes prints its table and writes every figure to its JSON
file, on the embedded store and over ZooKeeper (skipped, naming the reason, where Debian's
package is not installed). The figures' values are not checked (timings are not tests).

Run as a process, as a user runs it: nothing under tests/ imports lab (tests/test_layering.py).
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
HEADER = ("store", "topics", "create s", "RSS MB", "raw 1 p50/p99", "raw 20 p50/p99", "raw all p50/p99",
          "ck 1 p50/p99", "ck all p50/p99", "probe p50/p99/max")


@pytest.mark.parametrize("store", ["embedded", "zookeeper"])
def test_quick_run_prints_and_writes_every_figure(store, tmp_path):
    if store == "zookeeper" and (reason := zookeeper_unavailable()):
        pytest.skip(reason)
    results = tmp_path / "metadata.json"
    done = subprocess.run(
        [sys.executable, "-m", "lab.bench", "--metadata", "--quick", "--sizes", "3,30", "--batch", "7",
         "--store", store, "--json", str(results)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=200)
    assert done.returncode == 0, done.stderr[-3000:]
    for column in HEADER:
        assert column in done.stdout, f"{column!r} missing from:\n{done.stdout}"
    assert "error" not in done.stdout, done.stdout

    data = json.loads(results.read_text())
    assert data["config"]["stores"] == [store]
    assert [r["topics"] for r in data["runs"]] == [3, 30]
    for run in data["runs"]:
        assert "error" not in run, run
        assert run["create_seconds"] > 0 and run["rss_mb"] > 0
        for label in ("1", "20", "all"):
            assert run["raw"][label]["n"] > 0
        for label in ("1", "all"):
            assert run["confluent"][label]["n"] > 0
        assert run["probe"]["probe"]["n"] > 0 and run["probe"]["all_topics"]["n"] >= 3
    assert "raw_1_topic_p50_ratio" in data
