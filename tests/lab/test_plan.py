"""``refka lab run``'s plans (refka/client/lab/plan.py) read and refused before anything
runs, its wait conditions judged from admin API answers written by hand (conditions.py),
the load's expectations (load.py's LoadReport) and the timeline file (timeline.py). No
cluster: tests/integration/test_lab_run.py runs the shipped plans on one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml

from refka.broker.faults import KINDS
from refka.cli import main
from refka.client.lab import conditions, timeline
from refka.client.lab.load import LoadReport
from refka.client.lab.plan import FAULT_KINDS, Plan, PlanError, count_steps, load_plan, parse_plan

PLANS = sorted((Path(__file__).resolve().parents[2] / "lab" / "plans").glob("*.yaml"))


def plan(text: str) -> Plan:
    return parse_plan(yaml.safe_load(text))


def refused(text: str) -> str:
    with pytest.raises(PlanError) as e:
        plan(text)
    return str(e.value)


GOOD = """
name: example
description: every action once
setup:
  topics:
    - {name: t, partitions: 2, replication_factor: 3, configs: {min.insync.replicas: 2, enable.ordered.delivery: true}}
load: {topic: t, rate: 50, keys: 4, value_bytes: 10, group: g, drain_timeout: 5, expect: {max_lost: 0, min_acknowledged: 1}}
steps:
  - wait: {isr: {topic: t, full: true}}
  - at: 1
    move_leader: {topic: t, partition: 0, to: 1}
  - after: 0.5
    elect_preferred: {topic: t, partitions: [0, 1]}
  - reassign: {topic: t, assignments: {0: [1, 2, 0], "1": [2, 0, 1]}}
  - partition_count: {topic: t, count: 3}
  - {stop: 1}
  - {kill: 2}
  - {start: 1}
  - {expire_session: 0}
  - {freeze: 0}
  - {thaw: 0}
  - fault: {name: slow, kind: latency, api: Fetch, latency_ms: 5, duration_ms: 100}
  - continue_on_error: true
    remove_fault: slow
  - clear_faults: true
  - sleep: 0.1
  - at: 2
    repeat:
      times: 3
      steps:
        - wait: {leader: {topic: t, partition: 0, not: 1}, timeout: 5}
        - after: 1
          wait: {broker_state: {broker: 1, state: live}}
        - wait: {partitions: {topic: t, count: 3}}
"""


def test_a_plan_with_every_action_is_read_whole() -> None:
    p = plan(GOOD)
    assert (p.name, p.description, [t.name for t in p.topics]) == ("example", "every action once", ["t"])
    assert p.topics[0].configs == {"min.insync.replicas": "2", "enable.ordered.delivery": "true"}
    assert p.load is not None and (p.load.group, p.load.expect) == ("g", {"max_lost": 0, "min_acknowledged": 1})
    assert [s.action for s in p.steps][:6] == ["wait", "move_leader", "elect_preferred", "reassign",
                                               "partition_count", "stop"]
    assert (p.steps[1].at, p.steps[2].after, p.steps[12].continue_on_error) == (1.0, 0.5, True)
    assert p.steps[3].args["assignments"] == {"0": [1, 2, 0], "1": [2, 0, 1]}
    assert p.steps[0].args == {"condition": "isr", "args": {"topic": "t", "full": True}, "timeout": 30.0}
    repeat = p.steps[-1]
    assert (repeat.path, repeat.times, [s.path for s in repeat.steps]) == ("16", 3, ["16.1", "16.2", "16.3"])
    assert count_steps(p.steps) == 15 + 3 * 3


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.stem)
def test_every_shipped_plan_is_valid_and_under_load(path: Path) -> None:
    p = load_plan(path)
    assert p.load is not None and p.load.expect.get("max_lost") == 0
    assert p.name == path.stem


def test_the_shipped_plans_are_the_four_the_readme_names() -> None:
    assert [p.stem for p in PLANS] == ["flaky-network", "kip253-expand-shrink", "leader-ping-pong",
                                       "rolling-restart"]


def test_the_fault_kinds_are_the_admin_apis() -> None:
    assert FAULT_KINDS == KINDS


@pytest.mark.parametrize(("text", "says"), [
    ("steps: [{sleep: 1}]", "plan: 'name' is missing"),
    ("name: x\nsteps: []", "steps: expected a non-empty list of steps"),
    ("name: x\nstep: [{sleep: 1}]\n", "plan: unknown key 'step'"),
    ("name: x\nsteps: [{sleep: 1, wait: {}}]", "step 1: a step has exactly one action, got 2"),
    ("name: x\nsteps: [{at: 1}]", "step 1: a step has exactly one action, got 0"),
    ("name: x\nsteps: [{sleep: 1}, {move_leader: {topic: t, partition: 0, to: x}}]",
     "step 2: move_leader.to: expected an integer, got 'x'"),
    ("name: x\nsteps: [{move_leader: {topic: t, partition: 0, too: 1}}]",
     "step 1: move_leader: unknown key 'too' (expected topic, partition, to)"),
    ("name: x\nsteps: [{move_leader: {topic: t, partition: 0}}]", "step 1: move_leader: 'to' is missing"),
    ("name: x\nsteps: [{stop: true}]", "step 1: stop: expected an integer, got True"),
    ("name: x\nsteps: [{stop: -1}]", "step 1: stop: expected an integer >= 0"),
    ("name: x\nsteps: [{sleep: 1, at: 1, after: 2}]", "step 1 (sleep): give at or after, not both"),
    ("name: x\nsteps: [{at: 5, sleep: 1}, {at: 2, sleep: 1}]", "step 2 (sleep): at 2 is before step 1's at 5"),
    ("name: x\nsteps: [{sleep: 1, after: -1}]", "step 1: after: expected a number of seconds >= 0"),
    ("name: x\nsteps: [{sleep: 1, continue_on_error: 1}]", "step 1: continue_on_error: expected true or false"),
    ("name: x\nsteps: [{sleep: 1, retries: 3}]", "step 1: unknown key 'retries'"),
    ("name: x\nsteps: [{repeat: {times: 2, steps: [{at: 1, sleep: 1}]}}]",
     "step 1.1 (sleep): 'at' is for top-level steps only: inside repeat, use 'after'"),
    ("name: x\nsteps: [{repeat: {times: 0, steps: [{sleep: 1}]}}]", "step 1: repeat.times: expected an integer >= 1"),
    ("name: x\nsteps: [{repeat: {times: 2, steps: [{sleep: 1}, {bogus: 1}]}}]", "step 1.2: unknown key 'bogus'"),
    ("name: x\nsteps: [{repeat: {times: 2}}]", "step 1: repeat: 'steps' is missing"),
    ("name: x\nsteps: [{wait: {isr: {topic: t, size: 3}, when: 1}}]", "step 1: wait: unknown condition 'when'"),
    ("name: x\nsteps: [{wait: {timeout: 3}}]", "step 1: wait: a wait has exactly one condition"),
    ("name: x\nsteps: [{wait: {isr: {topic: t, size: 3}, leader: {topic: t, partition: 0, is: 1}}}]",
     "a wait has exactly one condition (isr, leader, broker_state, partitions), got 2"),
    ("name: x\nsteps: [{wait: {isr: {topic: t, size: 3, full: true}}}]", "step 1: wait.isr: give exactly one of size, full"),
    ("name: x\nsteps: [{wait: {leader: {topic: t, partition: 0}}}]", "step 1: wait.leader: give exactly one of is, not"),
    ("name: x\nsteps: [{wait: {broker_state: {broker: 1, state: up}}}]",
     "step 1: wait.broker_state.state: expected one of live, offline, got 'up'"),
    ("name: x\nsteps: [{wait: {partitions: {topic: t, count: 0}}}]", "wait.partitions.count: expected an integer >= 1"),
    ("name: x\nsteps: [{wait: {isr: {topic: t, size: 3}, timeout: 0}}]", "step 1: wait.timeout: expected a number > 0"),
    ("name: x\nsteps: [{fault: {kind: jitter}}]", "step 1: fault.kind: expected one of error, latency"),
    ("name: x\nsteps: [{fault: {kind: latency, latency: 5}}]", "step 1: fault: unknown key 'latency'"),
    ("name: x\nsteps: [{fault: {api: Produce}}]", "step 1: fault: 'kind' is missing"),
    ("name: x\nsteps: [{remove_fault: slow}, {fault: {name: slow, kind: blackhole}}]",
     "step 1 (remove_fault): no earlier fault step is named 'slow'"),
    ("name: x\nsteps: [{clear_faults: 3}]", "step 1: clear_faults: takes no argument"),
    ("name: x\nsteps: [{reassign: {topic: t, assignments: {x: [1]}}}]", "step 1: reassign.assignments: 'x' is not a partition"),
    ("name: x\nsteps: [{reassign: {topic: t, assignments: {0: []}}}]", "reassign.assignments.0: expected a non-empty list"),
    ("name: x\nsteps: [{elect_preferred: {topic: t, partitions: 0}}]", "elect_preferred.partitions: expected a non-empty list"),
    ("name: x\nload: {topic: t, rate: 0}\nsteps: [{sleep: 1}]", "load.rate: expected a number > 0"),
    ("name: x\nload: {rate: 10}\nsteps: [{sleep: 1}]", "load: 'topic' is missing"),
    ("name: x\nload: {topic: t, expect: {lost: 0}}\nsteps: [{sleep: 1}]", "load.expect: unknown key 'lost'"),
    ("name: x\nsetup: {topics: [{name: t}, {name: t}]}\nsteps: [{sleep: 1}]", "setup.topics: a topic is named twice"),
    ("name: x\nsetup: {topics: [{name: t, partitions: 0}]}\nsteps: [{sleep: 1}]",
     "setup.topics[0].partitions: expected an integer >= 1"),
    ("name: x\nsetup: {topics: [{name: t, configs: {a: [1]}}]}\nsteps: [{sleep: 1}]", "setup.topics[0].configs"),
    ("- just a list", "plan: expected a mapping"),
])
def test_a_bad_plan_is_refused_saying_where_and_what(text: str, says: str) -> None:
    assert says in refused(text)


def test_a_file_that_is_not_yaml_or_not_there_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsteps: [\n")
    with pytest.raises(PlanError, match="not YAML"):
        load_plan(bad)
    with pytest.raises(PlanError, match="cannot read it"):
        load_plan(tmp_path / "missing.yaml")


def test_the_command_refuses_a_bad_plan_with_exit_2_before_calling_anything(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsteps:\n  - move_leader: {topic: t, partition: 0, to: two}\n")
    # An admin URL nothing listens on: a plan refused never gets that far.
    assert main(["lab", "run", str(bad), "--url", "http://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert "step 1: move_leader.to: expected an integer, got 'two'" in err


@pytest.fixture
def structlog_kept() -> Iterator[None]:
    """``refka lab run`` sends the clients' logs to stderr (structlog.configure): undone after."""
    kept = structlog.get_config()
    yield
    structlog.configure(**kept)


@pytest.mark.parametrize("where", ["before", "after"])
def test_the_url_goes_before_or_after_run_and_an_unreachable_api_is_exit_1(tmp_path: Path, capsys, where: str,
                                                                           structlog_kept: None) -> None:
    ok = tmp_path / "ok.yaml"
    ok.write_text("name: x\nsteps: [{sleep: 0}]\n")
    url = ["--url", "http://127.0.0.1:1"]
    argv = ["lab", *url, "run", str(ok)] if where == "before" else ["lab", "run", str(ok), *url]
    assert main(argv) == 1
    assert "cannot reach http://127.0.0.1:1/api/cluster" in capsys.readouterr().err


# -- conditions ---------------------------------------------------------------------------

def topic(*parts: dict[str, Any], undeleted: int = -1) -> dict[str, Any]:
    return {"name": "t", "undeleted_partition_count": undeleted, "partitions": list(parts)}


def part(p: int, leader: int = 0, isr: list[int] | None = None, replicas: list[int] | None = None,
         marked: bool = False) -> dict[str, Any]:
    return {"partition": p, "leader": leader, "leader_epoch": 3, "isr": [0, 1, 2] if isr is None else isr,
            "replicas": replicas or [0, 1, 2], "marked_for_deletion": marked}


def test_isr_size_and_full_of_one_partition_or_every_one() -> None:
    view = topic(part(0, isr=[0, 1, 2]), part(1, isr=[1, 2]))
    assert conditions.holds("isr", {"topic": "t", "partition": 0, "size": 3}, view)[0]
    assert not conditions.holds("isr", {"topic": "t", "partition": 1, "size": 3}, view)[0]
    ok, seen = conditions.holds("isr", {"topic": "t", "full": True}, view)
    assert (ok, seen) == (False, "t-1 isr [1, 2], replicas [0, 1, 2]")
    assert conditions.holds("isr", {"topic": "t", "size": 2}, topic(part(0, isr=[0, 1]), part(1, isr=[1, 2])))[0]
    assert conditions.holds("isr", {"topic": "t", "partition": 5, "size": 1}, view) == (False, "t has no partition 5")
    assert conditions.source("isr", {"topic": "a b"}) == "/api/topics/a%20b"


def test_leader_is_and_is_not() -> None:
    view = topic(part(0, leader=2), part(1, leader=-1))
    assert conditions.holds("leader", {"topic": "t", "partition": 0, "is": 2}, view) == (True, "t-0 leader 2 (epoch 3)")
    assert not conditions.holds("leader", {"topic": "t", "partition": 0, "not": 2}, view)[0]
    assert conditions.holds("leader", {"topic": "t", "partition": 1, "is": -1}, view)[0]
    assert conditions.holds("leader", {"topic": "t", "partition": 1, "not": 2}, view)[0]


def test_broker_state_is_registration_in_the_clusters_metadata() -> None:
    cluster = {"brokers": [{"id": 0}, {"id": 2}]}
    assert conditions.source("broker_state", {"broker": 1}) == "/api/cluster"
    assert conditions.holds("broker_state", {"broker": 1, "state": "offline"}, cluster)[0]
    assert not conditions.holds("broker_state", {"broker": 1, "state": "live"}, cluster)[0]
    assert conditions.holds("broker_state", {"broker": 2, "state": "live"}, cluster)[0]


def test_partitions_holds_once_an_expansion_is_led_and_a_shrink_is_marked() -> None:
    count3 = {"topic": "t", "count": 3}
    assert conditions.holds("partitions", count3, topic(part(0), part(1), part(2), undeleted=3))[0]
    assert conditions.holds("partitions", count3, topic(part(0), part(1), part(2)))[0]  # a plain topic
    assert not conditions.holds("partitions", count3, topic(part(0), part(1), part(2, leader=-1), undeleted=3))[0]
    assert not conditions.holds("partitions", count3, topic(part(0), part(1), undeleted=2))[0]
    shrunk = topic(part(0), part(1), part(2), part(3, marked=True), undeleted=3)
    assert conditions.holds("partitions", count3, shrunk) == (True, "t: 3 partitions (+1 marked for deletion)")
    # the count written, the partition not marked yet: not done
    assert not conditions.holds("partitions", count3, topic(part(0), part(1), part(2), part(3), undeleted=3))[0]


# -- the load's report and the timeline file ---------------------------------------------

def test_expectations_are_maxima_and_minima_of_the_reports_counters() -> None:
    r = LoadReport(topic="t", sent=10, acknowledged=9, failed=1, consumed=8, lost=1, duplicates=0, drained=False)
    assert r.violations({"max_lost": 0, "max_duplicates": 0, "min_acknowledged": 5, "min_consumed": 9}) == [
        "lost 1, expected at most 0", "consumed 8, expected at least 9"]
    assert r.violations({"max_lost": 1}) == []
    assert LoadReport(topic="t", consumer_error="boom").violations({}) == ["the consumer failed: boom"]


def test_the_timeline_file_is_every_event_sorted_by_time_one_json_object_a_line(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    plan_events = [{"t_ms": 1.0, "source": "plan", "type": "plan_started"},
                   {"t_ms": 5.0, "source": "plan", "type": "plan_finished"}]
    cluster = [{"t_ms": 3.0, "source": "cluster", "seq": 7, "time_ms": 3.0, "type": "leader_changed", "broker": 0}]
    assert timeline.write(out, plan_events, cluster) == 3
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [e["type"] for e in lines] == ["plan_started", "leader_changed", "plan_finished"]
