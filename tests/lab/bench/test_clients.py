"""Smoke test of the client benchmark (lab/bench/clients.py): ``python -m lab.bench --clients
--quick`` with a few hundred records measures every row (refka's reference Producer and
Consumer and confluent-kafka's, on one ``refka serve --brokers 3``), each with a positive
figure, every produced record landed and every one consumed exactly once. The figures'
values are not checked (timings are not tests).

Run as a process, as a user runs it: nothing under tests/ imports lab (tests/test_layering.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

ROOT = Path(__file__).resolve().parents[3]
RECORDS = 600
ROWS = [
    ("produce", "refka", "acks=1"), ("produce", "refka", "idempotent, acks=all"),
    ("produce", "confluent-kafka", "acks=1"), ("produce", "confluent-kafka", "idempotent, acks=all"),
    ("consume", "refka", "group, ordered delivery on"), ("consume", "refka", "group, ordered delivery off"),
    ("consume", "confluent-kafka", "group"),
]


def test_quick_run_measures_every_row_and_consumes_every_record(tmp_path):
    results = tmp_path / "clients.json"
    done = subprocess.run(
        [sys.executable, "-m", "lab.bench", "--clients", "--quick", "--records", str(RECORDS), "--json", str(results)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=80)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "n/a" not in done.stdout, done.stdout

    data = json.loads(results.read_text())
    assert data["config"]["records"] == RECORDS
    rows = data["rows"]
    assert [(r["phase"], r["client"], r["mode"]) for r in rows] == ROWS
    for r in rows:
        label = f"{r['phase']} {r['client']} {r['mode']}"
        assert "error" not in r, f"{label}: {r['error']}"
        assert r["records"] == RECORDS, label
        assert r["seconds"] > 0 and r["mb_per_s"] > 0 and r["records_per_s"] > 0, label
        assert f"{r['phase']}, {r['mode']}" in done.stdout, label
    source = rows[0]["extra"]["topic"]  # what refka's acks=1 producer wrote: every consumer reads it
    for r in rows[4:]:
        assert r["extra"]["topic"] == source
        counts, last = r["extra"]["counts"], r["extra"]["last"]
        assert sum(counts.values()) == RECORDS, f"{r['client']} {r['mode']}: {counts}"
        # Each partition read once to its end: the last offset is its record count - 1.
        assert all(last[p] == n - 1 for p, n in counts.items()), (counts, last)
    assert len({r["extra"]["group_id"] for r in rows[4:]}) == 3  # a fresh group each
