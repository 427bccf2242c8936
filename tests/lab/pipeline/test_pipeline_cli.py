"""``python -m lab.pipeline`` end to end, as a user runs it: synth, then audit in a process
of its own; what it writes (summary.json, Parquet tables, report.html); and how it refuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lab.pipeline import audit

pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed: make pipeline")
pytestmark = pytest.mark.timeout(300)
ROOT = Path(__file__).resolve().parents[3]


def pipeline(*args: str, env: dict[str, str] | None = None, timeout: float = 280) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lab.pipeline", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def test_synth_then_audit_writes_the_summary_the_tables_and_the_report(spark: Any, tmp_path: Path) -> None:
    # (spark: only so that the test skips where pyspark or the jars are missing.)
    logs, out = tmp_path / "logs", tmp_path / "audit"
    r = pipeline("synth", "--records", "6000", "--violations", "5", "--losses", "3", "--duplicates", "2",
                 "--bad-lines", "7", "--leader-changes", "2", "--recordings", "--rate", "500", "--out", str(logs))
    assert r.returncode == 0, r.stderr
    expected = json.loads((logs / "expected.json").read_text())
    r = pipeline("audit", "--deliveries", str(logs / "deliveries" / "deliveries-*.jsonl"), "--acks",
                 str(logs / "acks" / "acks.jsonl"), "--timeline", str(logs / "timeline.jsonl"), "--recordings",
                 str(logs / "recordings.jsonl"), "--out", str(out), "--window-ms", "2000")
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary) == ["records", "bad_lines", "bad_examples", "keys", "violations", "losses", "duplicates",
                             "latency_ms"]
    assert {k: v for k, v in summary.items() if k != "bad_examples"} == expected["summary"]
    assert json.loads(r.stdout) == summary
    assert list(summary["latency_ms"]) == ["p50", "p99", "p999", "max"]
    assert [set(e) for e in summary["bad_examples"]] == [{"input", "origin", "problem", "line"}] * audit.EXAMPLES

    written = sorted(p.name for p in out.glob("*.parquet"))
    assert written == sorted(f"{t}.parquet" for t in audit.TABLES)
    rows = {t: pq.read_table(out / f"{t}.parquet").num_rows for t in audit.TABLES}
    assert (rows["violations"], rows["losses"], rows["duplicates"], rows["bad_lines"], rows["leader_changes"]) == (
        5, 3, 2, 7, 2)
    assert rows["metadata_per_client"] == 3 and rows["latency_per_second"] >= 12  # 6000 records at 500/s
    assert pq.read_table(out / "leader_changes.parquet").column("window_ms").to_pylist() == [2000, 2000]

    page = (out / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 3  # latency, violations per key, throughput
    assert "Leader changes" in page and "Metadata traffic per client" in page
    assert not (out / ".staging").exists()


def test_missing_jars_name_the_make_target(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text("{}\n")
    r = pipeline("audit", "--deliveries", str(tmp_path / "d.jsonl"), "--out", str(tmp_path / "out"),
                 env={"REFKA_SPARK_JARS": str(tmp_path / "no-jars")}, timeout=60)
    assert r.returncode == 2
    assert "make spark-jars" in r.stderr and "spark-sql-kafka-0-10_" in r.stderr


def test_a_missing_input_is_refused_before_spark_starts(tmp_path: Path) -> None:
    r = pipeline("audit", "--deliveries", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "out"), timeout=60)
    assert r.returncode == 2 and "no such input: --deliveries" in r.stderr


def test_synth_refuses_more_faults_than_the_records_can_hold(tmp_path: Path) -> None:
    r = pipeline("synth", "--records", "100", "--violations", "50", "--out", str(tmp_path), timeout=60)
    assert r.returncode == 2 and "slots" in r.stderr
