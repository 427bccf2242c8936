"""``python -m lab.bench.failover --client java`` at its smallest: the Java client's producer
(lab/bench/java/FailoverProducer.java) in its own JVM through two leader moves, its send and
ack times lined up with the moves. Every record sent is accounted for and the recovery
figures exist; their values are not checked (timings are not tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
JARS = ROOT / ".cache" / "java" / "kafka-clients-3.9.1"


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_the_java_producer_goes_through_the_moves_and_every_record_is_accounted_for(tmp_path: Path) -> None:
    if not (JARS / ".refka-installed").exists():
        pytest.skip(f"no kafka-clients 3.9.1 in {JARS}: run `make java-clients`")
    results = tmp_path / "failover.json"
    done = subprocess.run([sys.executable, "-m", "lab.bench.failover", "--client", "java", "--quick", "--moves", "2",
                           "--variants", "hints-on", "--no-throughput", "--json", str(results)],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=280)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "producer kafka-clients 3.9.1" in done.stdout and "recovery ms" in done.stdout, done.stdout
    v = json.loads(results.read_text())["variants"]["hints-on"]
    assert "error" not in v, v
    assert v["sent"] > 500 and v["acked"] + v["failed"] + v["undelivered_after_flush"] == v["sent"]
    assert len(v["moves"]) == 2 and v["recovery_samples"] + v["recovery_missing"] == 2 * 12
    assert v["recovery_samples"] > 0 and v["recovery_median_ms"] > 0
