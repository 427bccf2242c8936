"""The ordered-delivery audit: what a scenario's logs say about order, loss and
duplicates, as pure functions over the JSON objects the workers wrote (no I/O
here; ``read_jsonl`` is the one helper that reads files). The Spark pipeline
(issue "The data pipeline on Spark") reads the same logs with the same
definitions.

Inputs, one JSON object per line:

- deliveries: ``{"consumer", "topic", "partition", "offset", "key", "producer",
  "seq", "sent_ms", "delivered_ms"}``, one per record a consumer delivered;
- acks: ``{"producer", "key", "seq", "topic", "partition", "offset", "acked_ms"}``,
  one per record a producer had acknowledged (a line with ``"error"`` is a
  record the producer gave up on: counted, never a loss);
- callbacks (optional): ``{"consumer", "callback": "assigned" | "maybe_revoked",
  "topic", "partitions": [int], "at_ms"}``, the key listener's calls;
- timeline (optional): ``{"step", "action", "topic", "at_ms", ...}``, what the
  scenario did and when; the actions ``create``, ``expand`` and ``shrink`` (the
  moment the change was asked for) are the plan's steps.

Definitions, per (producer, key); a record is one seq of its key:

- a record's *first delivery* is its delivery with the smallest delivered_ms
  (any consumer); deliveries beyond the first are *duplicates*;
- an *order violation* is a record whose first delivery came strictly before
  the first delivery of a smaller seq of its key (the smaller one overtaken);
  a seq never delivered is a *loss* when it was acknowledged, never a
  violation;
- a key *moved* to partition q at seq s when s is in q and the key's previous
  delivered seq was in another partition; the records of that run (s and the
  seqs after it while they stay in q) are *moved records*. Each delivery of a
  moved record must come at or after an ``on_partition_key_assigned`` naming
  (topic, q), by any consumer of the group, made no earlier than the plan
  step that moved the key (the first timeline step after the key's last
  record in its old partition was sent, if that step is not after s was
  sent, else the last step before s was sent: a key may go unsent across a
  step, and a producer may still send to the old partition for a moment after
  one; without a timeline, any earlier call counts), unless the partition the
  key moved from had been removed (a timeline ``removed`` event after that
  step) before the delivery: the seed's holds, and so its calls, are only for
  marked partitions not yet removed, and a consumer assigned q once the
  marked partition is gone has nothing to wait for (it was drained, so no
  older record of the key can come; a delivery before that would be an order
  violation). A delivery without either is a *callback miss*. Without a
  callbacks log (a stock client has no key listener) the check is not made.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

# Timeline actions that change a topic's partitioning (others, a drain or a kill, move no key).
PLAN_STEPS = frozenset({"create", "expand", "shrink"})


def read_jsonl(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """The objects of JSON-lines files; a torn last line (a worker killed while
    writing it) is skipped."""
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.endswith("\n"):
                    break
                if line.strip():
                    yield json.loads(line)


def _percentile(sorted_values: list[int], q: float) -> int | None:
    if not sorted_values:
        return None
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


def audit(deliveries: Iterable[Mapping[str, Any]], acks: Iterable[Mapping[str, Any]],
          callbacks: Iterable[Mapping[str, Any]] | None = None,
          timeline: Iterable[Mapping[str, Any]] | None = None, *, examples: int = 5) -> dict[str, Any]:
    """The counts of the module's definitions, and a few examples of each problem."""
    # (producer, key) -> seq -> [first delivered_ms, partition, topic, sent_ms, deliveries]
    records: dict[tuple[str, str], dict[int, list[Any]]] = defaultdict(dict)
    delivery_list: list[Mapping[str, Any]] = []
    n_deliveries = 0
    for d in deliveries:
        n_deliveries += 1
        delivery_list.append(d)
        seqs = records[(d["producer"], d["key"])]
        r = seqs.get(d["seq"])
        if r is None:
            seqs[d["seq"]] = [d["delivered_ms"], d["partition"], d["topic"], d["sent_ms"], 1]
        else:
            r[4] += 1
            if d["delivered_ms"] < r[0]:
                r[0] = d["delivered_ms"]

    acked: dict[tuple[str, str], dict[int, Mapping[str, Any]]] = defaultdict(dict)
    producer_errors = 0
    for a in acks:
        if "error" in a:
            producer_errors += 1
            continue
        acked[(a["producer"], a["key"])][a["seq"]] = a

    out: dict[str, Any] = {
        "keys": len(set(records) | set(acked)),
        "acked": sum(len(s) for s in acked.values()),
        "producer_errors": producer_errors,
        "deliveries": n_deliveries,
        "delivered": sum(len(s) for s in records.values()),
        "duplicates": 0, "losses": 0, "violations": 0, "keys_with_violations": 0,
        "examples": {"losses": [], "violations": [], "callback_misses": []},
    }
    ex = out["examples"]
    latencies: list[int] = []
    # (producer, key) -> seq -> (the sent_ms of the key's last record before its moved run, the
    # sent_ms of the run's first record, the partition it moved from)
    moved: dict[tuple[str, str], dict[int, tuple[int, int, int]]] = {}
    for pk, seqs in records.items():
        running_max = None
        had_violation = False
        previous_partition: tuple[str, int] | None = None
        previous_sent = 0
        run_start: tuple[int, int, int] | None = None  # the current moved run's (before, first, from)
        moved_seqs: dict[int, tuple[int, int, int]] = {}
        for seq in sorted(seqs):
            first, partition, topic, sent_ms, n = seqs[seq]
            out["duplicates"] += n - 1
            latencies.append(first - sent_ms)
            if running_max is not None and running_max[0] > first:
                out["violations"] += 1
                had_violation = True
                if len(ex["violations"]) < examples:
                    ex["violations"].append({"producer": pk[0], "key": pk[1], "seq": seq, "delivered_ms": first,
                                             "overtook_seq": running_max[1], "its_delivered_ms": running_max[0]})
            if running_max is None or first > running_max[0]:
                running_max = (first, seq)
            if previous_partition is not None and previous_partition != (topic, partition):
                run_start = (previous_sent, sent_ms, previous_partition[1])  # the key moved here: a new run
            if run_start is not None:
                moved_seqs[seq] = run_start
            previous_partition = (topic, partition)
            previous_sent = sent_ms
        if had_violation:
            out["keys_with_violations"] += 1
        if moved_seqs:
            moved[pk] = moved_seqs
    for pk, seqs in acked.items():
        delivered = records.get(pk, {})
        for seq in sorted(seqs):
            if seq not in delivered:
                out["losses"] += 1
                if len(ex["losses"]) < examples:
                    a = seqs[seq]
                    ex["losses"].append({"producer": pk[0], "key": pk[1], "seq": seq, "partition": a["partition"],
                                         "offset": a["offset"]})
    latencies.sort()
    out["latency_ms"] = {"p50": _percentile(latencies, 0.5), "p99": _percentile(latencies, 0.99),
                         "max": latencies[-1] if latencies else None}
    out["moved_keys"] = len(moved)
    out["moved_records"] = sum(len(m) for m in moved.values())
    if callbacks is None:
        out["callback_misses"] = None
        return out
    out["callback_misses"] = _callback_misses(delivery_list, moved, callbacks, timeline, ex["callback_misses"], examples)
    return out


def _callback_misses(deliveries: list[Mapping[str, Any]],
                     moved: Mapping[tuple[str, str], dict[int, tuple[int, int, int]]],
                     callbacks: Iterable[Mapping[str, Any]], timeline: Iterable[Mapping[str, Any]] | None,
                     sink: list[dict[str, Any]], examples: int) -> int:
    assigned: dict[tuple[str, int], list[int]] = defaultdict(list)  # (topic, partition) -> sorted call times
    for c in callbacks:
        if c.get("callback") == "assigned":
            for p in c["partitions"]:
                assigned[(c["topic"], p)].append(c["at_ms"])
    for times in assigned.values():
        times.sort()
    events = list(timeline or ())
    steps = sorted(s["at_ms"] for s in events if s.get("action") in PLAN_STEPS)
    removed: dict[tuple[str, int], list[int]] = defaultdict(list)  # (topic, partition) -> removal times
    for e in events:
        if e.get("action") == "removed":
            for p in e["partitions"]:
                removed[(e["topic"], p)].append(e["at_ms"])
    misses = 0
    for d in deliveries:
        run = moved.get((d["producer"], d["key"]), {}).get(d["seq"])
        if run is None:
            continue
        before, run_start, from_partition = run
        # The step that moved the key came after its last record in the old partition was sent:
        # the first step after that one, if it is not after the run's first record; else the
        # last step before the run (a record sent in the old partition after a step, by a
        # producer whose metadata had not caught up yet).
        step_i = bisect.bisect_right(steps, before)
        if step_i >= len(steps) or steps[step_i] > run_start:
            step_i = bisect.bisect_right(steps, run_start) - 1
        not_before = steps[step_i] if step_i >= 0 else None
        if any((not_before is None or t >= not_before) and t <= d["delivered_ms"]
               for t in removed.get((d["topic"], from_partition), ())):
            continue  # moved from a marked partition removed before this delivery
        times = assigned.get((d["topic"], d["partition"]), [])
        lo = 0 if not_before is None else bisect.bisect_left(times, not_before)
        if bisect.bisect_right(times, d["delivered_ms"]) > lo:
            continue
        misses += 1
        if len(sink) < examples:
            sink.append({"consumer": d["consumer"], "topic": d["topic"], "partition": d["partition"],
                         "offset": d["offset"], "producer": d["producer"], "key": d["key"], "seq": d["seq"],
                         "delivered_ms": d["delivered_ms"], "step_ms": not_before})
    return misses
