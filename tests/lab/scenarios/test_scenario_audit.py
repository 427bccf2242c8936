"""The ordered-delivery audit (lab/scenarios/audit.py) on logs written by hand: each
definition of its docstring, one case at a time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lab.scenarios.audit import audit, read_jsonl

T = "t"


def d(seq: int, delivered: int, partition: int = 0, *, key: str = "k", producer: str = "p",
      consumer: str = "c0", sent: int = 0, offset: int | None = None) -> dict[str, Any]:
    return {"consumer": consumer, "topic": T, "partition": partition, "offset": seq if offset is None else offset,
            "key": key, "producer": producer, "seq": seq, "sent_ms": sent, "delivered_ms": delivered}


def a(seq: int, partition: int = 0, *, key: str = "k", producer: str = "p") -> dict[str, Any]:
    return {"producer": producer, "key": key, "seq": seq, "topic": T, "partition": partition, "offset": seq,
            "acked_ms": 0}


def test_in_order_deliveries_have_no_violation_loss_or_duplicate() -> None:
    r = audit([d(0, 10), d(1, 11), d(2, 11)], [a(0), a(1), a(2)])
    assert (r["violations"], r["losses"], r["duplicates"], r["delivered"], r["acked"]) == (0, 0, 0, 3, 3)


def test_a_record_delivered_before_a_smaller_seq_is_one_violation() -> None:
    # seq 1 first delivered at 20, seq 2 at 15: seq 2 overtook seq 1.
    r = audit([d(0, 10), d(2, 15, 1), d(1, 20)], [a(0), a(1), a(2, 1)])
    assert r["violations"] == 1 and r["keys_with_violations"] == 1
    assert r["examples"]["violations"] == [{"producer": "p", "key": "k", "seq": 2, "delivered_ms": 15,
                                            "overtook_seq": 1, "its_delivered_ms": 20}]


def test_every_record_that_overtook_counts_not_only_the_first() -> None:
    r = audit([d(0, 50), d(1, 10, 1), d(2, 11, 1), d(3, 60)], [])
    assert r["violations"] == 2 and r["keys_with_violations"] == 1


def test_the_same_millisecond_is_not_a_violation() -> None:
    assert audit([d(0, 10), d(1, 10, 1)], [])["violations"] == 0


def test_order_is_judged_on_first_deliveries_so_a_redelivery_is_a_duplicate_not_a_violation() -> None:
    # seq 0 delivered at 10 and again at 30 (a new owner after a rebalance), seq 1 at 20.
    r = audit([d(0, 10), d(1, 20), d(0, 30, consumer="c1")], [a(0), a(1)])
    assert (r["violations"], r["duplicates"], r["deliveries"], r["delivered"]) == (0, 1, 3, 2)


def test_keys_and_producers_are_judged_apart() -> None:
    r = audit([d(0, 30, key="x"), d(0, 10, key="y"), d(1, 20, key="y"), d(0, 5, producer="q")], [])
    assert r["violations"] == 0 and r["keys"] == 3


def test_an_acknowledged_record_never_delivered_is_a_loss_not_a_violation() -> None:
    r = audit([d(0, 10), d(2, 12)], [a(0), a(1), a(2)])
    assert (r["losses"], r["violations"]) == (1, 0)
    assert r["examples"]["losses"] == [{"producer": "p", "key": "k", "seq": 1, "partition": 0, "offset": 1}]


def test_a_record_the_producer_gave_up_on_is_counted_never_a_loss() -> None:
    r = audit([d(0, 10)], [a(0), {"producer": "p", "key": "k", "seq": 1, "topic": T, "error": "timed out"}])
    assert (r["losses"], r["producer_errors"], r["acked"]) == (0, 1, 1)


def test_latency_is_from_send_to_first_delivery() -> None:
    r = audit([d(i, 100 + 10 * i, sent=100) for i in range(11)] + [d(0, 999, consumer="c1", sent=100)], [])
    assert r["latency_ms"] == {"p50": 50, "p99": 100, "max": 100}


def moved_key_logs() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Key k in partition 0 (seqs 0-1), moved to partition 4 by the expansion at 100 (seqs 2-3)."""
    deliveries = [d(0, 50, 0, sent=10), d(1, 60, 0, sent=20), d(2, 150, 4, sent=110), d(3, 160, 4, sent=120)]
    timeline = [{"step": 0, "action": "create", "at_ms": 0}, {"step": 1, "action": "expand", "at_ms": 100},
                {"step": 2, "action": "changed", "at_ms": 105}]
    return deliveries, timeline


def cb(partitions: list[int], at: int, callback: str = "assigned") -> dict[str, Any]:
    return {"consumer": "c1", "callback": callback, "topic": T, "partitions": partitions, "at_ms": at}


def test_moved_records_delivered_after_on_partition_key_assigned_are_no_miss() -> None:
    deliveries, timeline = moved_key_logs()
    r = audit(deliveries, [], [cb([4], 140)], timeline)
    assert (r["moved_keys"], r["moved_records"], r["callback_misses"]) == (1, 2, 0)


def test_moved_records_delivered_before_the_call_are_misses() -> None:
    deliveries, timeline = moved_key_logs()
    r = audit(deliveries, [], [cb([4], 155)], timeline)  # after seq 2's delivery at 150, before seq 3's
    assert r["callback_misses"] == 1
    assert r["examples"]["callback_misses"][0]["seq"] == 2


def test_a_call_before_the_step_that_moved_the_key_does_not_count() -> None:
    deliveries, timeline = moved_key_logs()
    # Called at 90 (another, earlier change), or for another partition, or maybe_revoked.
    r = audit(deliveries, [], [cb([4], 90), cb([5], 140), cb([4], 140, "maybe_revoked")], timeline)
    assert r["callback_misses"] == 2


def test_only_plan_steps_bound_the_call_not_drains_or_kills() -> None:
    deliveries, timeline = moved_key_logs()
    timeline.append({"step": 3, "action": "removed", "topic": T, "partitions": [5], "at_ms": 108})  # before the moved records were sent
    timeline.append({"step": 4, "action": "kill", "at_ms": 109})
    assert audit(deliveries, [], [cb([4], 104)], timeline)["callback_misses"] == 0


def test_keys_that_never_moved_need_no_call_and_no_listener_means_no_check() -> None:
    r = audit([d(0, 10), d(1, 20)], [], [], [])
    assert (r["moved_keys"], r["callback_misses"]) == (0, 0)
    deliveries, timeline = moved_key_logs()
    assert audit(deliveries, [], None, timeline)["callback_misses"] is None


def test_read_jsonl_skips_a_torn_last_line(tmp_path: Path) -> None:
    f = tmp_path / "deliveries-c0.jsonl"
    f.write_text(json.dumps(d(0, 1)) + "\n" + json.dumps(d(1, 2)) + "\n" + '{"consumer": "c0", "top')
    assert [o["seq"] for o in read_jsonl([f])] == [0, 1]


def test_a_key_moved_from_a_partition_removed_before_the_delivery_needs_no_call() -> None:
    """A shrink at 100 marks partition 6 (the key's) and moves the key to 2; 6 is drained and
    removed at 200. A consumer given partition 2 after that has no hold to lift, so no call:
    a delivery after the removal is no miss, one before it is."""
    deliveries = [d(0, 50, 6, sent=10), d(1, 150, 2, sent=110), d(2, 250, 2, sent=120)]
    timeline = [{"step": 0, "action": "create", "at_ms": 0}, {"step": 1, "action": "shrink", "at_ms": 100},
                {"step": 2, "action": "removed", "topic": T, "partitions": [6, 7], "at_ms": 200}]
    r = audit(deliveries, [], [], timeline)
    assert r["callback_misses"] == 1
    assert r["examples"]["callback_misses"][0]["seq"] == 1
    # A removal of another partition, or one before the step, excuses nothing.
    timeline[2]["partitions"] = [7]
    assert audit(deliveries, [], [], timeline)["callback_misses"] == 2


def test_a_key_unsent_across_a_step_is_judged_by_the_step_that_moved_it() -> None:
    """The expansion at 100 moves the key from 1 to 5; its first record after that is sent only
    after the next step (a shrink at 300, which leaves it in 5). The call for 5 at 150 (the
    expansion's creation hold released) covers it; one made before 100 does not."""
    deliveries = [d(0, 50, 1, sent=10), d(1, 350, 5, sent=310)]
    timeline = [{"step": 0, "action": "create", "at_ms": 0}, {"step": 1, "action": "expand", "at_ms": 100},
                {"step": 2, "action": "shrink", "at_ms": 300}]
    assert audit(deliveries, [], [cb([5], 150)], timeline)["callback_misses"] == 0
    assert audit(deliveries, [], [cb([5], 90)], timeline)["callback_misses"] == 1


def test_a_record_sent_to_the_old_partition_just_after_a_step_does_not_hide_the_step() -> None:
    """The producer's metadata lagged: its last record in partition 1 was sent at 105, after the
    expansion at 100, and the next one went to 5. The expansion is still the step."""
    deliveries = [d(0, 150, 1, sent=105), d(1, 200, 5, sent=120)]
    timeline = [{"step": 0, "action": "create", "at_ms": 0}, {"step": 1, "action": "expand", "at_ms": 100}]
    assert audit(deliveries, [], [cb([5], 130)], timeline)["callback_misses"] == 0
    assert audit(deliveries, [], [cb([5], 90)], timeline)["callback_misses"] == 1
