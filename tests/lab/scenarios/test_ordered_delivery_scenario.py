"""KIP-253's guarantee end to end (lab/scenarios/ordered_delivery.py): producer and
consumer processes against a real 3-broker cluster while a plan expands and shrinks the
topic under load, every record audited.

- refka's reference client: every acknowledged record delivered, no key out of order, no
  moved key delivered before its on_partition_key_assigned, with keys really moved (so
  the audit had something to judge);
- confluent-kafka on the same plan and load (the control): keys out of order, which shows
  the audit catches disorder;
- the three-process ZooKeeper form with the controller killed -9 right after each change:
  the same guarantee for refka's client.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lab.scenarios import ordered_delivery
from refka.zookeeper import zookeeper_unavailable

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def run(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    rc = ordered_delivery.main([*args, "--out", str(tmp_path), "--step-seconds", "3", "--finish-timeout", "150"])
    return rc, json.loads((tmp_path / "summary.json").read_text())["results"]


def assert_in_order(r: dict[str, Any]) -> None:
    assert r["complete"], r
    assert (r["violations"], r["losses"], r["callback_misses"]) == (0, 0, 0), r["examples"]
    assert r["acked"] > 1000 and r["delivered"] >= r["acked"]
    assert r["moved_keys"] > 10 and r["moved_records"] > 100, "the plan moved keys"
    assert all(v is not None for v in r["expansion_to_first_new_delivery_ms"]), "new partitions were consumed"
    assert all(code == 0 for code in r["exit_codes"].values()), r["exit_codes"]


def test_refka_client_keeps_every_key_in_order_and_the_stock_client_does_not(tmp_path: Path) -> None:
    rc, results = run(tmp_path, "--plan", "4,8,6", "--clients", "refka,confluent")
    assert_in_order(results["refka"])
    assert rc == 0
    control = results["confluent"]
    assert control["complete"] and control["losses"] == 0, control
    assert control["violations"] > 0, "a backlog at the expansion puts a stock client's keys out of order"
    assert control["callback_misses"] is None


def test_refka_client_keeps_every_key_in_order_through_controller_kills(tmp_path: Path) -> None:
    reason = zookeeper_unavailable()
    if reason:
        pytest.skip(reason)
    rc, results = run(tmp_path, "--plan", "4,8,6,8", "--clients", "refka", "--cluster", "zookeeper",
                      "--chaos", "controller")
    assert_in_order(results["refka"])
    assert rc == 0
    timeline = [json.loads(line) for line in (tmp_path / "refka" / "timeline.jsonl").read_text().splitlines()]
    kills = [e for e in timeline if e["action"] == "kill"]
    assert len(kills) == 3 and all(e["was_controller"] for e in kills)
    assert len([e for e in timeline if e["action"] == "restarted"]) == 3
