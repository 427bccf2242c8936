"""``refka lab run`` end to end: every plan lab/plans/ ships, run through the command (a
subprocess) against a real ``refka serve --brokers 3 --memory --admin-port``: exit 0, each
step printed, the timeline file's plan steps and the cluster's changes they caused (leader
changes, faults fired), and a load that lost nothing. Then a plan that fails: the failure
printed (``--json``), a ``continue_on_error`` step passed over, exit 1, and the faults it
added removed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from refka.client.lab.plan import Step, load_plan
from tests.brokers import admin_call, with_admin_api

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]
PLANS = sorted((ROOT / "lab" / "plans").glob("*.yaml"))
# Actions after which the partitions' leaders or leader epochs change.
LEADER_MOVING = {"move_leader", "elect_preferred", "reassign", "partition_count", "stop", "kill"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with with_admin_api(tmp_path_factory.mktemp("lab") / "data", brokers=3) as served:
        yield served


def lab_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "refka.cli", "lab", "run", *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


def unrolled(steps: tuple[Step, ...]) -> list[Step]:
    out: list[Step] = []
    for s in steps:
        out.extend(unrolled(s.steps) * s.times if s.action == "repeat" else [s])
    return out


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.stem)
def test_a_shipped_plan_runs_end_to_end(cluster, path: Path, tmp_path: Path) -> None:
    _b, url = cluster
    plan = load_plan(path)
    out = tmp_path / "timeline.jsonl"
    done = lab_run(str(path.relative_to(ROOT)), "--url", url, "--timeline", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    steps = unrolled(plan.steps)
    for s in steps:
        assert f"#{s.path}" in done.stdout
    assert f"plan {plan.name}: OK" in done.stdout

    lines = read_jsonl(out)
    assert [e["t_ms"] for e in lines] == sorted(e["t_ms"] for e in lines)
    assert {e["source"] for e in lines} == {"plan", "cluster"}
    ran = [e for e in lines if e["type"] == "plan_step" and not e["step"].startswith("setup.")]
    assert [e["step"] for e in ran] == [s.path for s in steps]
    assert [e["action"] for e in ran] == [s.action for s in steps]
    assert all(e["outcome"] == "ok" and e["error"] is None for e in lines if e["type"] == "plan_step")
    (finished,) = [e for e in lines if e["type"] == "plan_finished"]
    assert finished["outcome"] == "ok"

    (report,) = [e for e in lines if e["type"] == "load_report"]
    assert report["lost"] == 0 and report["violations"] == [] and report["drained"]
    assert report["acknowledged"] > 0 and report["consumed"] >= report["acknowledged"]

    started = next(e["t_ms"] for e in lines if e["type"] == "plan_started")
    changes = [e for e in lines if e["source"] == "cluster"]
    assert all(e["t_ms"] >= started for e in changes)
    topics = {t.name for t in plan.topics}
    assert any(e["type"] == "topic_created" and e["topic"] in topics for e in changes)
    if any(s.action in LEADER_MOVING for s in steps):
        assert any(e["type"] == "leader_changed" and e["topic"] in topics for e in changes)
    if any(s.action == "fault" for s in steps):
        assert any(e["type"] == "fault_fired" for e in changes)


def test_a_failing_plan_stops_at_its_failure_and_removes_its_faults(cluster, tmp_path: Path) -> None:
    _b, url = cluster
    path = tmp_path / "failing.yaml"
    path.write_text("""
name: failing
steps:
  - fault: {name: idle, kind: latency, api: ApiVersions, client_id: no-such-client, latency_ms: 1}
  - continue_on_error: true
    move_leader: {topic: no-such-topic, partition: 0, to: 1}
  - wait: {leader: {topic: no-such-topic, partition: 0, is: 1}, timeout: 0.5}
  - sleep: 0
""")
    done = lab_run(str(path), "--url", url, "--json", "--timeline", str(tmp_path / "t.jsonl"))
    assert done.returncode == 1, done.stdout + done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    steps = [e for e in events if e["type"] == "plan_step"]
    assert [(e["step"], e["outcome"]) for e in steps] == [("1", "ok"), ("2", "error"), ("3", "error")]
    assert "no-such-topic" in steps[1]["error"] and "timed out after 0.5s" in steps[2]["error"]
    (finished,) = [e for e in events if e["type"] == "plan_finished"]
    assert (finished["outcome"], finished["failed_step"]) == ("failed", "3")
    fault_id = steps[0]["result"]["id"]
    status, faults = admin_call(url, "/api/faults")
    assert status == 200 and fault_id not in {f["id"] for f in faults["faults"]}
    assert read_jsonl(tmp_path / "t.jsonl")[-1]["type"] == "plan_finished"
