"""Synthetic lab logs with known faults, so that the audit can be checked at any size.

    python -m lab.pipeline synth --records N [--violations K] [--losses L] [--duplicates D]
        [--producer-errors E] [--bad-lines B] [--leader-changes C] [--recordings] --out DIR ...

Writes DIR/deliveries/deliveries-<consumer>.jsonl (or ``--files`` files), DIR/acks/acks.jsonl,
DIR/timeline.jsonl, DIR/recordings.jsonl (with ``--recordings``) and DIR/expected.json: the
summary the audit must find (every count exact, the latency percentiles too) and what
the timeline and recordings hold.

The run: record i (0 <= i < N) is seq i // S of key i % S (S = producers x keys, key
``k<j>`` of producer ``p<n>``), sent at start + i / rate, in partition key % partitions,
consumed by consumer partition % consumers. Its normal delivery is sent + 5 ms + a
jitter of up to 19 ms, pushed to the end of a leader change's outage when it falls in
one (``--outage-ms`` after each change, on the changed partition), rounded up to the
consumer's batch (``--batch-ms``: the records of a batch share their delivered_ms, the
equal times the audit must take as in order) and never before the key's previous
record (in order, as a correct client delivers).

Faults are planted in *slots*: seqs 3m, 3m+1, 3m+2 of one key, slot t being key t % S,
m = t // S, so no two faults touch. Slots 0.. are violations, then losses, duplicates
and producer errors, in that order:

- a violation delays seq 3m to 1 ms after seq 3m+1's delivery (3m+1 overtook it: one
  violation), and seq 3m+2 comes strictly after 3m+1 (so that the delayed record
  overtakes nothing else but ties with, or precedes, what follows);
- a loss: seq 3m+1 acknowledged, never delivered;
- a duplicate: seq 3m+1 delivered again, 1 s later, by the next consumer;
- a producer error: seq 3m+1's ack line is an ``error`` line, and it is never delivered.

Bad lines (``--bad-lines``) are extra delivery lines, one of each BAD_KINDS in turn,
spread through the files. ``--shuffle`` shuffles each file's lines (in memory: for
tests), so that nothing can depend on their order; lines are otherwise in send order
but for the delayed and duplicate ones.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from lab.pipeline.audit import QUANTILES, WINDOW_MS, percentile_of_histogram

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the same logs every time
TOPIC = "synth"
BROKERS = 3
BAD_KINDS = ("not JSON", "JSON array", "missing field", "wrong type (integer)", "wrong type (string)",
             "null field", "JSON scalar")


@dataclass
class Plan:
    records: int
    violations: int = 0
    losses: int = 0
    duplicates: int = 0
    producer_errors: int = 0
    bad_lines: int = 0
    leader_changes: int = 0
    recordings: bool = False
    producers: int = 2
    keys: int = 50
    partitions: int = 8
    consumers: int = 3
    files: int = 0  # 0: one per consumer
    rate: int = 10_000
    batch_ms: int = 10
    outage_ms: int = 300
    shuffle: bool = False
    seed: int = 1

    @property
    def key_count(self) -> int:
        return self.producers * self.keys

    def slots(self) -> int:
        """Slots whose three seqs all exist."""
        s = self.key_count
        return sum(max(0, self._seqs(k) // 3) for k in range(min(s, self.records)))

    def _seqs(self, k: int) -> int:
        return (self.records - k + self.key_count - 1) // self.key_count if k < self.records else 0

    def check(self) -> None:
        planted = self.violations + self.losses + self.duplicates + self.producer_errors
        if min(self.records, self.producers, self.keys, self.partitions, self.consumers, self.rate,
               self.batch_ms) < 1:
            raise ValueError("records, producers, keys, partitions, consumers, rate and batch-ms must be >= 1")
        if planted > self.slots():
            raise ValueError(f"{planted} planted faults need {planted} slots of three seqs of a key; "
                             f"{self.records} records over {self.key_count} keys have {self.slots()}")


def _slot_roles(plan: Plan) -> dict[tuple[int, int], str]:
    """(key index, m) -> the fault planted in that slot."""
    roles: dict[tuple[int, int], str] = {}
    order = ["violation"] * plan.violations + ["loss"] * plan.losses + ["duplicate"] * plan.duplicates + \
        ["producer_error"] * plan.producer_errors
    t = 0
    for role in order:
        while True:
            k, m = t % plan.key_count, t // plan.key_count
            t += 1
            if 3 * m + 2 < plan._seqs(k):
                break
        roles[(k, m)] = role
    return roles


def _leader_changes(plan: Plan) -> list[tuple[int, int]]:
    """(time_ms, partition) of each leader change, spread evenly over the run."""
    duration = plan.records * 1000 // plan.rate
    return [(START_MS + (j + 1) * duration // (plan.leader_changes + 1), j % plan.partitions)
            for j in range(plan.leader_changes)]


def _delivery(consumer: str, partition: int, offset: int, key: str, producer: str, seq: int, sent: int,
              delivered: int) -> str:
    return (f'{{"consumer":"{consumer}","topic":"{TOPIC}","partition":{partition},"offset":{offset},'
            f'"key":"{key}","producer":"{producer}","seq":{seq},"sent_ms":{sent},"delivered_ms":{delivered}}}\n')


def _bad_line(kind: str, n: int) -> str:
    good = {"consumer": "c0", "topic": TOPIC, "partition": 0, "offset": n, "key": "k0", "producer": "p0",
            "seq": n, "sent_ms": START_MS, "delivered_ms": START_MS + 5}
    if kind == "not JSON":
        return json.dumps(good)[:40] + "\n"  # a torn line
    if kind == "JSON array":
        return json.dumps(list(good.values())) + "\n"
    if kind == "missing field":
        del good["seq"]
    elif kind == "wrong type (integer)":
        good["seq"] = str(n)
    elif kind == "wrong type (string)":
        good["key"] = n
    elif kind == "null field":
        good["delivered_ms"] = None
    elif kind == "JSON scalar":
        return "42\n"
    return json.dumps(good) + "\n"


class _Files:
    def __init__(self, directory: Path, names: list[str], shuffle: bool, rng: random.Random) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.shuffle, self.rng = shuffle, rng
        self.buffers: list[list[str]] = [[] for _ in names]
        self.files: list[TextIO] = [open(directory / n, "w", encoding="utf-8") for n in names]  # noqa: SIM115

    def write(self, i: int, line: str) -> None:
        buf = self.buffers[i]
        buf.append(line)
        if not self.shuffle and len(buf) >= 4096:
            self.files[i].writelines(buf)
            buf.clear()

    def close(self) -> None:
        for f, buf in zip(self.files, self.buffers, strict=True):
            if self.shuffle:
                self.rng.shuffle(buf)
            f.writelines(buf)
            f.close()


def generate(plan: Plan, out: Path) -> dict[str, Any]:
    """Write the logs of ``plan`` into ``out``; returns (and writes) expected.json's content."""
    plan.check()
    rng = random.Random(plan.seed)
    roles = _slot_roles(plan)
    changes = _leader_changes(plan)
    outages: dict[int, list[int]] = {}
    for t, p in changes:
        outages.setdefault(p, []).append(t)
    consumers = [f"c{c}" for c in range(plan.consumers)]
    n_files = plan.files or plan.consumers
    names = ([f"deliveries-{c}.jsonl" for c in consumers] if n_files == plan.consumers
             else [f"deliveries-{f}.jsonl" for f in range(n_files)])
    deliveries = _Files(out / "deliveries", names, plan.shuffle, rng)
    acks = _Files(out / "acks", ["acks.jsonl"], plan.shuffle, rng)

    S = plan.key_count
    last_normal = [0] * S  # each key's previous normal delivery
    running_max = [0] * S  # each key's max first delivery so far, in seq order
    held: dict[int, tuple[int, str, int, int, int]] = {}  # key -> the delayed record (seq, consumer, ...)
    next_offset = [0] * plan.partitions
    latencies: Counter[int] = Counter()
    counts = Counter[str]()
    bad_at = {(j + 1) * plan.records // (plan.bad_lines + 1): j for j in range(plan.bad_lines)}

    # Per leader change (time, partition): its first delivery after, deliveries in the window before and after.
    around = {(t, p): [None, 0, 0] for t, p in changes}
    changes_of: dict[int, list[int]] = {}
    for t, p in changes:
        changes_of.setdefault(p, []).append(t)

    def first_delivery(k: int, partition: int, delivered: int, sent: int) -> None:
        for t in changes_of.get(partition, ()):
            a = around[(t, partition)]
            if delivered >= t and (a[0] is None or delivered < a[0]):
                a[0] = delivered
            if t - WINDOW_MS <= delivered < t:
                a[1] += 1
            elif t <= delivered < t + WINDOW_MS:
                a[2] += 1
        if delivered < running_max[k]:
            counts["violations"] += 1
        elif delivered == running_max[k]:
            counts["ties"] += 1
        running_max[k] = max(running_max[k], delivered)
        latencies[delivered - sent] += 1

    for i in range(plan.records):
        if i in bad_at:
            j = bad_at[i]
            deliveries.write(j % n_files, _bad_line(BAD_KINDS[j % len(BAD_KINDS)], j))
        k, seq = i % S, i // S
        producer, key = f"p{k // plan.keys}", f"k{k % plan.keys}"
        m, pos = divmod(seq, 3)
        role = roles.get((k, m))
        partition = k % plan.partitions
        if role == "violation" and pos == 1:  # the key moved: its next record overtakes from another partition
            partition = (partition + 1) % plan.partitions
        c = partition % plan.consumers
        sent = START_MS + i * 1000 // plan.rate
        raw = sent + 5 + (i * 7919) % 20
        raw = -(-raw // plan.batch_ms) * plan.batch_ms
        for t in outages.get(partition, ()):
            if t <= raw < t + plan.outage_ms:
                raw = t + plan.outage_ms
        normal = max(raw, last_normal[k] + (1 if role == "violation" and pos == 2 else 0))
        last_normal[k] = normal
        if role == "producer_error" and pos == 1:
            acks.write(0, f'{{"producer":"{producer}","key":"{key}","seq":{seq},"topic":"{TOPIC}",'
                          f'"error":"KafkaTimeoutError"}}\n')
            counts["producer_errors"] += 1
            continue  # never written to the log, never delivered
        offset = next_offset[partition]
        next_offset[partition] += 1
        acks.write(0, f'{{"producer":"{producer}","key":"{key}","seq":{seq},"topic":"{TOPIC}",'
                      f'"partition":{partition},"offset":{offset},"acked_ms":{sent + 2}}}\n')
        if role == "loss" and pos == 1:
            counts["losses"] += 1
            continue
        if role == "violation" and pos == 0:
            held[k] = (seq, consumers[c], partition, offset, sent)
            continue
        if role == "violation" and pos == 1:
            h_seq, h_consumer, h_partition, h_offset, h_sent = held.pop(k)
            delayed = normal + 1
            deliveries.write(h_partition % plan.consumers % n_files,
                             _delivery(h_consumer, h_partition, h_offset, key, producer, h_seq, h_sent, delayed))
            counts["lines"] += 1
            first_delivery(k, h_partition, delayed, h_sent)
        deliveries.write(c % n_files, _delivery(consumers[c], partition, offset, key, producer, seq, sent, normal))
        counts["lines"] += 1
        first_delivery(k, partition, normal, sent)
        if role == "duplicate" and pos == 1:
            again = (c + 1) % plan.consumers
            deliveries.write(again % n_files, _delivery(consumers[again], partition, offset, key, producer, seq,
                                                        sent, normal + 1000))
            counts["lines"] += 1
            counts["duplicates"] += 1
    deliveries.close()
    acks.close()
    if counts["violations"] != plan.violations:  # the plan's promise, checked as it was written
        raise AssertionError(f"planted {plan.violations} violations, wrote {counts['violations']}")

    timeline = _write_timeline(plan, out / "timeline.jsonl", changes)
    for row, (t, p) in zip(timeline, changes, strict=True):
        first, before, after = around[(t, p)]
        row.update(first_delivery_after_ms=first, before_records=before, after_records=after)
    recordings = _write_recordings(out / "recordings.jsonl") if plan.recordings else None
    hist = sorted(latencies.items())

    expected = {
        "summary": {
            "records": counts["lines"],
            "bad_lines": plan.bad_lines,
            "keys": min(plan.records, S),
            "violations": counts["violations"],
            "losses": counts["losses"],  # with --acks; without: null
            "duplicates": counts["duplicates"],
            "latency_ms": {**{k: percentile_of_histogram(hist, q) for k, q in QUANTILES.items()},
                           "max": hist[-1][0] if hist else None},
        },
        "ties": counts["ties"],
        "producer_errors": counts["producer_errors"],
        "bad_kinds": [BAD_KINDS[j % len(BAD_KINDS)] for j in range(plan.bad_lines)],
        "leader_changes": timeline,  # the window: audit.WINDOW_MS
        "recordings": recordings,
        "plan": asdict(plan),
    }
    (out / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")
    return expected


def _write_timeline(plan: Plan, path: Path, changes: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """The plan's and the cluster's lines (refka/client/lab/timeline.py's format) around each
    change: a plan step, a fault fired, the leader change seen by every broker (ms apart), an
    ISR change. Returns the changes as the audit's leader_changes table has them."""
    lines: list[dict[str, Any]] = [{"t_ms": START_MS, "source": "plan", "type": "plan_started",
                                    "plan": "synth", "steps": len(changes)}]
    seqs = [0] * BROKERS
    epochs = [0] * plan.partitions
    out = []
    for j, (t, p) in enumerate(changes):
        old, new = j % BROKERS, (j + 1) % BROKERS
        lines.append({"t_ms": t - 100, "source": "plan", "type": "plan_step", "step": str(j), "action": "move_leader",
                      "args": {"topic": TOPIC, "partition": p}})
        lines.append({"t_ms": t - 50.5, "source": "cluster", "seq": 0, "time_ms": t - 50.5, "broker": old,
                      "type": "fault_fired", "fault": j, "fault_kind": "latency", "request": "Produce"})
        for b in range(BROKERS):
            seqs[b] += 1
            lines.append({"t_ms": t + b * 1.5, "source": "cluster", "seq": seqs[b], "time_ms": t + b * 1.5,
                          "broker": b, "type": "leader_changed", "topic": TOPIC, "partition": p, "old_leader": old,
                          "new_leader": new, "old_epoch": epochs[p], "new_epoch": epochs[p] + 1})
            seqs[b] += 1
            lines.append({"t_ms": t + b * 1.5 + 1, "source": "cluster", "seq": seqs[b], "time_ms": t + b * 1.5 + 1,
                          "broker": b, "type": "isr_changed", "topic": TOPIC, "partition": p, "old_isr": [0, 1, 2],
                          "new_isr": [new], "leader": new})
        out.append({"topic": TOPIC, "partition": p, "change_ms": float(t), "old_leader": old, "new_leader": new,
                    "new_epoch": epochs[p] + 1, "brokers_seen": BROKERS})
        epochs[p] += 1
    lines.sort(key=lambda e: e["t_ms"])
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(e, separators=(",", ":")) + "\n" for e in lines)
    return out


# (client_id, software name, version, Metadata requests, topics each names or "all")
CLIENTS = (("refka-producer", "refka-python", "0.1.0", 20, 3), ("legacy", "kafka-python", "2.0.2", 10, "all"),
           ("anonymous", None, None, 4, 1))


def _write_recordings(path: Path) -> dict[str, dict[str, int]]:
    """Recording lines (refka/broker/recording.py's entry_dict) of CLIENTS' Metadata requests,
    plus Produce requests of the first; returns what metadata_per_client must show."""
    expected: dict[str, dict[str, int]] = {}
    with open(path, "w", encoding="utf-8") as f:
        t = float(START_MS)
        for client, name, version, n, topics in CLIENTS:
            for r in range(n):
                t += 10.25
                named = "all" if topics == "all" else [f"topic-{r % 5}-{x}" for x in range(int(topics))]
                entry = {"time_ms": t, "broker": r % BROKERS, "listener": "PLAINTEXT", "peer": "127.0.0.1:50000",
                         "client_id": client if name is not None else None, "software_name": name,
                         "software_version": version, "api_key": 3, "api": "Metadata", "api_version": 12,
                         "correlation_id": r, "topics": named, "request_bytes": 40 + 10 * (0 if named == "all"
                                                                                               else len(named)),
                         "response_bytes": 500, "latency_ms": 0.5, "error_codes": []}
                f.write(json.dumps(entry) + "\n")
            expected[client if name is not None else ""] = {
                "metadata_requests": n, "all_topics_requests": n if topics == "all" else 0,
                "topics_named": 0 if topics == "all" else n * int(topics)}
        for r in range(30):
            t += 1
            f.write(json.dumps({"time_ms": t, "broker": 0, "listener": "PLAINTEXT", "peer": "127.0.0.1:50000",
                                "client_id": CLIENTS[0][0], "software_name": CLIENTS[0][1],
                                "software_version": CLIENTS[0][2], "api_key": 0, "api": "Produce", "api_version": 9,
                                "correlation_id": 100 + r, "request_bytes": 1000, "response_bytes": 60,
                                "latency_ms": 1.25, "error_codes": ["NONE"]}) + "\n")
    return expected


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = Plan(records=0)
    p.add_argument("--records", type=int, required=True, help="records produced (distinct producer/key/seq)")
    p.add_argument("--violations", type=int, default=0, help="records that overtake an earlier seq of their key")
    p.add_argument("--losses", type=int, default=0, help="acknowledged records never delivered")
    p.add_argument("--duplicates", type=int, default=0, help="records delivered a second time")
    p.add_argument("--producer-errors", type=int, default=0, help="records the producer gave up on (ack 'error')")
    p.add_argument("--bad-lines", type=int, default=0, help="malformed delivery lines, one of each kind in turn")
    p.add_argument("--leader-changes", type=int, default=0, help="leader changes in the timeline, with outages")
    p.add_argument("--recordings", action="store_true", help="also write recordings.jsonl (KIP-526 clients)")
    p.add_argument("--producers", type=int, default=d.producers)
    p.add_argument("--keys", type=int, default=d.keys, help="keys per producer")
    p.add_argument("--partitions", type=int, default=d.partitions)
    p.add_argument("--consumers", type=int, default=d.consumers)
    p.add_argument("--files", type=int, default=0, help="delivery files (default: one per consumer)")
    p.add_argument("--rate", type=int, default=d.rate, help="records sent per second")
    p.add_argument("--batch-ms", type=int, default=d.batch_ms, help="deliveries share their time per batch")
    p.add_argument("--outage-ms", type=int, default=d.outage_ms, help="no delivery from a partition after a change")
    p.add_argument("--shuffle", action="store_true", help="shuffle each file's lines (in memory)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--out", type=Path, required=True)


def plan_of(a: argparse.Namespace) -> Plan:
    return Plan(records=a.records, violations=a.violations, losses=a.losses, duplicates=a.duplicates,
                producer_errors=a.producer_errors, bad_lines=a.bad_lines, leader_changes=a.leader_changes,
                recordings=a.recordings, producers=a.producers, keys=a.keys, partitions=a.partitions,
                consumers=a.consumers, files=a.files, rate=a.rate, batch_ms=a.batch_ms, outage_ms=a.outage_ms,
                shuffle=a.shuffle, seed=a.seed)
