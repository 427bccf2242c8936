"""The Spark audit of real lab runs: lab/scenarios/ordered_delivery.py through a KIP-253
expansion (4 -> 8 partitions under load, a backlog in the group), once with refka's
reference client and once with confluent-kafka's (the stock client: hashing keys over the
new count moves them, and a consumer that reads a new partition before the backlog of the
old one delivers them out of order).

The Spark audit of each run's logs (deliveries, acks and the run's timeline, as the
scenario wrote them) must agree with the scenario's own audit (lab/scenarios/audit.py, in
Python, over the same files) on every count, find the stock client's violations and
none of refka's client, and accept every line of real logs as valid.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lab.pipeline import audit
from lab.pipeline.audit import Inputs
from lab.scenarios import ordered_delivery

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def scenario_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("scenario")
    ordered_delivery.main(["--plan", "4,8", "--clients", "refka,confluent", "--out", str(out),
                           "--step-seconds", "3", "--finish-timeout", "120"])
    return out, json.loads((out / "summary.json").read_text())["results"]


@pytest.mark.parametrize("client", ["refka", "confluent"])
def test_the_spark_audit_of_a_real_run_agrees_with_the_scenarios_own(
        spark: Any, scenario_runs: tuple[Path, dict[str, Any]], client: str, tmp_path: Path) -> None:
    out, results = scenario_runs
    python = results[client]
    assert python["complete"] and python["acked"] > 500, python  # a run worth auditing
    run = out / client
    found = audit.run(spark, Inputs(deliveries=str(run / "deliveries-*.jsonl"), acks=str(run / "acks-*.jsonl"),
                                    timeline=str(run / "timeline.jsonl")), tmp_path / "audit")
    s = found.summary
    assert s["bad_lines"] == 0, s["bad_examples"]
    assert s["records"] == python["deliveries"]
    assert (s["violations"], s["losses"], s["duplicates"]) == (
        python["violations"], python["losses"], python["duplicates"])
    assert s["keys"] <= python["keys"] and s["keys"] > 0.9 * python["keys"]  # the scenario's also counts keys only acked
    if client == "confluent":
        assert s["violations"] > 0, "the stock client's disorder at the expansion is found"
        violations = spark.read.parquet(str(tmp_path / "audit" / "violations.parquet"))
        assert violations.count() == s["violations"]
        # each violation names the record and the earlier seq it overtook, on another partition
        row = violations.orderBy("producer", "key", "seq").first()
        assert row["overtaken_seq"] < row["seq"] and row["delivered_ms"] < row["overtaken_delivered_ms"]
    else:
        assert s["violations"] == 0 and s["losses"] == 0
    assert 0 <= s["latency_ms"]["p50"] <= s["latency_ms"]["p99"] <= s["latency_ms"]["max"]
