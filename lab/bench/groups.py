"""Consumer-group benchmark: a 3-member group on refka (disk, memory) and Tansu in one run.

    python -m lab.bench.groups [--quick] [--targets refka-disk,refka-memory,tansu,mock] [--json PATH]
    python -m lab.bench --groups [...]      make bench ARGS=--groups

Three confluent-kafka consumers, each in its own process (group_member.py),
subscribe with one group.id to a 6-partition topic and commit synchronously
every 1000 records each. For each target:

- throughput: a topic preloaded with N x 1 KiB records, the members paused
  until the group has formed; records/s = N / (time from the first record any
  member consumed to the moment every record had been consumed by some
  member); records consumed twice are counted apart;
- rebalance latency: with the group stable on a continuous trickle, one member
  exits (close(): LeaveGroup; or SIGKILL: the session-timeout path), the
  times until the survivors consume again; 5 rounds each (the member is
  restarted between rounds), median and every sample.

Definitions, settings and how to read the figures: lab/bench/README.md.
Results go to lab/bench/results/<UTC timestamp>-groups.json (or --json).
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from lab.bench import report, targets, workload

PARTITIONS = 6
MEMBERS = 3
RECORD_BYTES = 1024
COMMIT_EVERY = 1000
FULL_RECORDS = 2_000_000  # 2 GB of values: ~3 s of group consumption on refka (2 CPUs)
QUICK_RECORDS = 200_000
TRICKLE_INTERVAL_S = 0.005  # one record to every partition each 5 ms: 1,200 records/s
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 100
SETTLE_S = 1.0  # a stable group must stay quiet this long before a member exits
# librdkafka sends a due heartbeat only when its main thread wakes up (a timer or
# an op: rd_kafka_cgrp_serve in rdkafka.c's main loop, "FIXME: move to
# timer-triggered"); here that was every ~500 ms whatever heartbeat.interval.ms.
# The exits are spread evenly over such a window after the settle, so that
# the samples do not all fall at the same phase of the survivors' heartbeats.
EXIT_PHASE_WINDOW_S = 0.5
RESULTS_DIR = Path(__file__).resolve().parent / "results"

# The refka targets run with these broker properties; the others have no such setting.
REFKA_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}
BROKER_SETTINGS_NOTE = {
    "tansu": "its defaults (Tansu has no group.initial.rebalance.delay.ms setting)",
    "mock": "its defaults",
}


def member_config(heartbeat_ms: int) -> dict[str, Any]:
    return {
        "enable.auto.commit": False,  # commits are the member's, every COMMIT_EVERY records
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        # librdkafka's default (3000 ms) would put up to 3 s of waiting for the
        # next heartbeat into every rebalance figure: that is the client's phase,
        # not the broker's (see the README).
        "heartbeat.interval.ms": heartbeat_ms,
        "fetch.queue.backoff.ms": 10,  # see workload.CONSUMER_CONFIG
        # partition.assignment.strategy: librdkafka's default, range,roundrobin
        # (eager: every member gives up all its partitions in each rebalance).
    }


class BenchError(RuntimeError):
    pass


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- members (one process each) and their events


class Member:
    """One group_member.py process and what it reported."""

    def __init__(self, slot: int, settings: dict[str, Any], log_path: Path) -> None:
        self.slot = slot
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "lab.bench.group_member", json.dumps(settings)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         cwd=targets.REPO_ROOT)
        if self.proc.stdin is None or self.proc.stdout is None:  # for the type checker: PIPE gives both
            raise BenchError("member started without pipes")
        self._stdin, self._stdout = self.proc.stdin, self.proc.stdout
        self._buffer = b""
        self.events: list[dict[str, Any]] = []
        self.eof = False
        self.gone = False  # left or killed: no longer counted in the group
        self.stopping = False  # told to stop: its exit is expected
        self.assignment: frozenset[int] = frozenset()
        self.assigned_at: float | None = None
        self.first_since_assign: dict[int, float] = {}

    def fileno(self) -> int:
        return self._stdout.fileno()

    def send(self, command: str) -> None:
        try:
            self._stdin.write(command.encode() + b"\n")
            self._stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def feed(self, data: bytes) -> None:
        if not data:
            self.eof = True
            return
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            ev = json.loads(line)
            self.events.append(ev)
            kind = ev["ev"]
            if kind == "assign":
                self.assignment = frozenset(ev["partitions"])
                self.assigned_at = ev["t"]
                self.first_since_assign = {}
            elif kind in ("revoke", "lost"):
                self.assignment = frozenset()
                self.assigned_at = None
                self.first_since_assign = {}
            elif kind == "first":
                self.first_since_assign.setdefault(ev["p"], ev["t"])

    def last(self, kind: str) -> dict[str, Any] | None:
        return next((e for e in reversed(self.events) if e["ev"] == kind), None)

    def consuming_everywhere(self) -> bool:
        """Assigned, and a record seen from each assigned partition since."""
        return bool(self.assignment) and all(p in self.first_since_assign for p in self.assignment)


class Group:
    """The member processes of one group, their events read as they come."""

    def __init__(self, bootstrap: str, topic: str, group_id: str, config: dict[str, Any], log_path: Path,
                 ends: dict[int, int] | None = None, hold: bool = False) -> None:
        self.settings = {"bootstrap": bootstrap, "topic": topic, "group": group_id, "config": config,
                         "commit_every": COMMIT_EVERY, "ends": {str(p): e for p, e in (ends or {}).items()},
                         "hold": hold}
        self.log_path = log_path
        self.members: list[Member] = []
        self._selector = selectors.DefaultSelector()

    def spawn(self, slot: int) -> Member:
        m = Member(slot, {**self.settings, "slot": f"{slot}.{len(self.members)}"}, self.log_path)
        self.members.append(m)
        self._selector.register(m.fileno(), selectors.EVENT_READ, m)
        return m

    def live(self) -> list[Member]:
        return [m for m in self.members if not m.gone and not m.eof]

    def pump(self, timeout: float) -> None:
        for key, _ in self._selector.select(timeout):
            m: Member = key.data
            data = os.read(key.fd, 1 << 16)
            m.feed(data)
            if m.eof:
                self._selector.unregister(key.fd)

    def wait_for(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"{what}: not within {timeout:.0f}s ({self.describe()})")
            for m in self.members:
                if not m.gone and not m.stopping and m.proc.poll() is not None and m.eof:
                    raise BenchError(f"member {m.slot} exited with code {m.proc.returncode}: "
                                     f"{_tail(self.log_path)}")
            self.pump(min(left, 0.05))

    def describe(self) -> str:
        return "; ".join(f"member {m.slot}: {sorted(m.assignment)} first {sorted(m.first_since_assign)}"
                         for m in self.live())

    def formed(self) -> bool:
        """MEMBERS live members, each with an assignment, together the topic's partitions."""
        live = self.live()
        owned = [p for m in live for p in m.assignment]
        return (len(live) == MEMBERS and all(m.assignment for m in live)
                and len(owned) == PARTITIONS and set(owned) == set(range(PARTITIONS)))

    def stable(self) -> bool:
        """Every live member assigned, the assignments a partition of the topic, and
        a record consumed from every partition under them."""
        live = self.live()
        if len(live) != MEMBERS or not all(m.consuming_everywhere() for m in live):
            return False
        owned = [p for m in live for p in m.assignment]
        return len(owned) == PARTITIONS and set(owned) == set(range(PARTITIONS))

    def wait_stable(self, timeout: float) -> None:
        """stable() and no assignment change during SETTLE_S."""
        while True:
            self.wait_for(self.stable, timeout, "group stable")
            marks = [(m, m.assigned_at) for m in self.live()]
            settle_until = time.monotonic() + SETTLE_S
            while time.monotonic() < settle_until:
                self.pump(0.05)
            if self.stable() and all(m.assigned_at == at for m, at in marks):
                return

    def stop_all(self, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Stops the live members; their summaries."""
        live = self.live()
        for m in live:
            m.stopping = True
            m.send("stop")
        self.wait_for(lambda: all(m.eof for m in live), timeout, "members stopping")
        for m in live:
            m.proc.wait(10)
        return [m.last("summary") or {} for m in live]

    def close(self) -> None:
        for m in self.members:
            if m.proc.poll() is None:
                m.proc.kill()
                m.proc.wait(10)
            for f in (m.proc.stdin, m.proc.stdout):
                if f is not None:
                    f.close()
        self._selector.close()


def _tail(path: Path, n: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


# -- topics and producers


def create_topic(bootstrap: str, topic: str, timeout: float) -> None:
    """A PARTITIONS-partition topic with a leader for each partition, or BenchError."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while admin.list_topics(timeout=timeout).controller_id < 0:  # see workload.create_topic
        if time.monotonic() > deadline:
            raise BenchError(f"no controller in Metadata after {timeout:.0f}s")
        time.sleep(0.05)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)], request_timeout=timeout,
                            operation_timeout=timeout)[topic].result(timeout=timeout + 5)
    except KafkaException as e:
        raise BenchError(f"CreateTopics {topic} with {PARTITIONS} partitions failed: {e}") from e
    last = ""
    while time.monotonic() < deadline:
        t = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        if t is not None and t.error is None:
            if len(t.partitions) != PARTITIONS:
                raise BenchError(f"topic {topic} has {len(t.partitions)} partitions, "
                                 f"{PARTITIONS} were asked for")
            if all(pm.leader >= 0 for pm in t.partitions.values()):
                return
        last = str(t.error) if t is not None else "topic missing"
        time.sleep(0.05)
    raise BenchError(f"topic {topic} has no leaders after {timeout:.0f}s: {last}")


def preload(bootstrap: str, topic: str, count: int, timeout: float) -> tuple[dict[int, int], float]:
    """count records round-robin over the partitions: (partition -> end offset, seconds)."""
    producer = Producer({"bootstrap.servers": bootstrap, **workload.PRODUCER_CONFIG})
    value = os.urandom(RECORD_BYTES)
    failed: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    t0 = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.001)
        if not i & 0x3FFF:
            producer.poll(0)
    left = producer.flush(timeout)
    seconds = time.perf_counter() - t0
    if left or failed:
        raise BenchError(f"preload: {left} undelivered, {len(failed)} failed ({failed[:1]})")
    # A fresh topic: partition p holds offsets 0 .. its record count - 1.
    return {p: count // PARTITIONS + (1 if p < count % PARTITIONS else 0) for p in range(PARTITIONS)}, seconds


class Trickle:
    """One record to every partition each TRICKLE_INTERVAL_S, on a thread, until stop()."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer: Producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
        self.topic = topic
        self.sent = 0
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed += 1

    def _run(self) -> None:
        value = os.urandom(RECORD_BYTES)
        next_at = time.monotonic()
        while not self._stop.is_set():
            for p in range(PARTITIONS):
                try:
                    self.producer.produce(self.topic, value, partition=p, on_delivery=self._on_delivery)
                    self.sent += 1
                except BufferError:
                    self.failed += 1
            self.producer.poll(0)
            next_at += TRICKLE_INTERVAL_S
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(10)
        left = self.producer.flush(10)
        del self.producer  # its connections close now, not when the broker stops under them
        return {"sent": self.sent, "failed": self.failed, "undelivered": left,
                "records_per_s": PARTITIONS / TRICKLE_INTERVAL_S}


# -- the phases


def _coverage(summaries: list[dict[str, Any]], ends: dict[int, int]) -> tuple[int, int, list[str]]:
    """(records consumed, distinct records, problems): every offset 0..end-1 of every
    partition must have been consumed by some member."""
    total = sum(s.get("records", 0) for s in summaries)
    distinct = 0
    problems = []
    for p, end in ends.items():
        runs = sorted((a, b) for s in summaries for a, b in s.get("runs", {}).get(str(p), []))
        covered, reach = 0, 0
        for a, b in runs:
            if a > reach:
                problems.append(f"partition {p}: offsets {reach}..{a - 1} never consumed")
            if b > reach:
                covered += b - max(a, reach)
                reach = b
        if reach < end:
            problems.append(f"partition {p}: consumed up to {reach}, end is {end}")
        distinct += covered
    return total, distinct, problems


def throughput_round(bootstrap: str, topic: str, group_id: str, ends: dict[int, int], broker_pid: int,
                     config: dict[str, Any], log_path: Path, timeout: float) -> dict[str, Any]:
    group = Group(bootstrap, topic, group_id, config, log_path, ends, hold=True)
    try:
        members = [group.spawn(slot) for slot in range(MEMBERS)]
        group.wait_for(lambda: all(m.last("ready") for m in members), timeout, "members ready")
        t_go = time.monotonic()
        for m in members:  # all subscribe at once
            m.send("go")
        # The members keep their partitions paused until the group has formed: the
        # figure is three members consuming, not the join (timed apart, see README).
        group.wait_for(group.formed, timeout, "the group formed")
        formed_ms = 1000 * (time.monotonic() - t_go)
        bcpu0 = targets.cpu_seconds(broker_pid)
        for m in members:
            m.send("resume")
        ended: dict[int, float] = {}

        def all_ended() -> bool:
            for m in members:
                for ev in m.events:
                    if ev["ev"] == "end":
                        ended[ev["p"]] = min(ended.get(ev["p"], ev["t"]), ev["t"])
            return len(ended) == len(ends)

        group.wait_for(all_ended, timeout, "every record consumed")
        bcpu1 = targets.cpu_seconds(broker_pid)
        summaries = group.stop_all()
    finally:
        group.close()
    firsts = [ev["t"] for m in members for ev in m.events if ev["ev"] == "first"]
    t_first, t_last = min(firsts), max(ended.values())
    # Records that reached a member before its resume (fetched in the instant
    # between assign and pause): counted, and the clock starts with them.
    early = 0
    for m in members:
        resumed = m.last("resumed")
        early += sum(1 for ev in m.events if ev["ev"] == "first" and resumed is not None and ev["t"] < resumed["t"])
    records = sum(ends.values())
    total, distinct, problems = _coverage(summaries, ends)
    if problems:
        raise BenchError("; ".join(problems[:3]))
    seconds = t_last - t_first
    commit_seconds = sorted(x for s in summaries for x in s.get("commit_seconds", []))
    failures: dict[str, int] = {}
    for s in summaries:
        for k, v in s.get("commit_failures", {}).items():
            failures[k] = failures.get(k, 0) + v
    client_cpu = sum(s.get("cpu_seconds", 0.0) for s in summaries)
    return {
        "records": records, "seconds": seconds,
        "records_per_s": records / seconds, "mb_per_s": records * RECORD_BYTES / seconds / 1e6,
        "records_consumed": total, "duplicates": total - distinct,
        "assignments_per_member": [s.get("assignments", 0) for s in summaries],
        "formed_ms": formed_ms,
        "partitions_fetched_before_resume": early,
        "commits": len(commit_seconds), "commit_failures": failures,
        "commit_median_ms": statistics.median(commit_seconds) * 1000 if commit_seconds else None,
        "commit_p99_ms": commit_seconds[int(0.99 * (len(commit_seconds) - 1))] * 1000 if commit_seconds else None,
        "broker_cpu_percent": None if bcpu0 is None or bcpu1 is None else 100 * (bcpu1 - bcpu0) / seconds,
        "members_cpu_percent": 100 * client_cpu / seconds,
    }


def _first_after(m: Member, t_exit: float) -> dict[int, float]:
    """partition -> time of the first record m consumed from it under an assignment
    it received after t_exit."""
    out: dict[int, float] = {}
    assigned_after = False
    for ev in m.events:
        kind = ev["ev"]
        if kind == "assign":
            assigned_after = ev["t"] > t_exit
        elif kind in ("revoke", "lost"):
            assigned_after = False
        elif kind == "first" and assigned_after and ev["p"] not in out:
            out[ev["p"]] = ev["t"]
    return out


def _after_exit(survivors: list[Member], t_exit: float) -> dict[int, float]:
    """partition -> the first time a survivor consumed it under a post-exit assignment."""
    out: dict[int, float] = {}
    for m in survivors:
        for p, t in _first_after(m, t_exit).items():
            out[p] = min(out.get(p, t), t)
    return out


def _first_event_after(m: Member, kinds: tuple[str, ...], t_exit: float) -> float | None:
    return next((ev["t"] for ev in m.events if ev["ev"] in kinds and ev["t"] > t_exit), None)


def _ms_after(times: list[float | None], t0: float) -> float | None:
    """ms from t0 to the latest of times; None if one is missing."""
    if any(t is None for t in times) or not times:
        return None
    return 1000 * (max(t for t in times if t is not None) - t0)


def _exit_round(group: Group, variant: str, rnd: int, rounds: int, exit_timeout: float) -> dict[str, Any]:
    """One member of the stable group exits; the survivors' times, from its exit."""
    phase = EXIT_PHASE_WINDOW_S * (rnd + 0.5) / rounds
    until = time.monotonic() + phase
    while time.monotonic() < until:
        group.pump(max(0.0, min(0.05, until - time.monotonic())))
    leaver = group.live()[rnd % MEMBERS]
    owned = sorted(leaver.assignment)
    survivors = [m for m in group.live() if m is not leaver]
    leaver.gone = True
    close_ms = None
    if variant == "kill":
        t_exit = time.monotonic()
        leaver.proc.kill()
    else:
        leaver.send("leave")
        group.wait_for(lambda: leaver.last("left") is not None, exit_timeout, "close() returning")
        left = leaver.last("left") or {}
        t_exit, close_ms = left["t"], 1000 * left["close_seconds"]
    group.wait_for(lambda: len(_after_exit(survivors, t_exit)) == PARTITIONS, exit_timeout,
                   f"round {rnd + 1}: all partitions consumed again after {variant}")
    leaver.proc.wait(30)
    firsts = _after_exit(survivors, t_exit)
    sample: dict[str, Any] = {
        "leaver_slot": leaver.slot,
        "leaver_partitions": owned,
        "exit_phase_ms": 1000 * phase,
        "to_first_record_ms": 1000 * (min(firsts[p] for p in owned) - t_exit),
        "to_all_partitions_ms": 1000 * (max(firsts.values()) - t_exit),
        "to_survivors_revoked_ms": _ms_after(
            [_first_event_after(m, ("revoke", "lost"), t_exit) for m in survivors], t_exit),
        "to_survivors_assigned_ms": _ms_after(
            [_first_event_after(m, ("assign",), t_exit) for m in survivors], t_exit),
    }
    if sample["to_survivors_revoked_ms"] is not None:
        # From the moment every survivor knew to all partitions consuming: the
        # JoinGroup/SyncGroup round and the first fetches, without the wait for
        # the survivors' next heartbeat (see the README).
        sample["revoked_to_all_ms"] = sample["to_all_partitions_ms"] - sample["to_survivors_revoked_ms"]
    if close_ms is not None:
        sample["close_ms"] = close_ms
    return sample


def _rejoin(group: Group, slot: int, timeout: float) -> float | None:
    """A new member in ``slot`` joins the Stable group: ms from its subscribe to
    every partition consuming under the new assignment."""
    newcomer = group.spawn(slot)
    group.wait_for(lambda: newcomer.last("ready") is not None, timeout, "restarted member ready")
    t_go = time.monotonic()
    newcomer.send("go")
    group.wait_stable(timeout)
    joined = _after_exit(group.live(), t_go)
    return 1000 * (max(joined.values()) - t_go) if len(joined) == PARTITIONS else None


def rebalance_rounds(variant: str, rounds: int, bootstrap: str, topic: str, group_id: str,
                     config: dict[str, Any], log_path: Path, timeout: float) -> dict[str, Any]:
    """``rounds`` exits of one member ("close" or "kill") from a stable group on a
    trickle; the member is restarted after each."""
    group = Group(bootstrap, topic, group_id, config, log_path)
    samples: list[dict[str, Any]] = []
    joins_ms: list[float] = []
    exit_timeout = timeout + (SESSION_TIMEOUT_MS / 1000 if variant == "kill" else 0)
    try:
        for slot in range(MEMBERS):
            group.spawn(slot)
        group.wait_for(lambda: all(m.last("ready") for m in group.members), timeout, "members ready")
        for m in group.members:
            m.send("go")

        # A partition with no committed offset yet would be reset by its new owner
        # (auto.offset.reset: a ListOffsets librdkafka sends ~100 ms later), which
        # would be measured as rebalance time: start once every partition has one.
        def all_committed() -> bool:
            done = {p for m in group.members for ev in m.events if ev["ev"] == "commit" for p in ev["partitions"]}
            return done >= set(range(PARTITIONS))

        group.wait_for(all_committed, timeout, "a committed offset for every partition")
        group.wait_stable(timeout)
        for rnd in range(rounds):
            sample = _exit_round(group, variant, rnd, rounds, exit_timeout)
            samples.append(sample)
            _say(f"  {variant} round {rnd + 1}: first record of a leaver's partition after "
                 f"{sample['to_first_record_ms']:.0f} ms, all partitions after "
                 f"{sample['to_all_partitions_ms']:.0f} ms")
            joined_ms = _rejoin(group, sample["leaver_slot"], timeout)
            if joined_ms is not None:
                joins_ms.append(joined_ms)
        group.stop_all()
    finally:
        group.close()
    out: dict[str, Any] = {"rounds": rounds, "samples": samples}
    for key in ("to_first_record_ms", "to_all_partitions_ms", "to_survivors_revoked_ms",
                "to_survivors_assigned_ms", "revoked_to_all_ms", "close_ms"):
        values = [s[key] for s in samples if s.get(key) is not None]
        if values:
            out[key] = statistics.median(values)
    out["join_samples_ms"] = joins_ms
    if joins_ms:
        out["join_ms"] = statistics.median(joins_ms)
    return out


# -- one target


def run_target(name: str, workdir: Path, records: int, repeats: int, rounds: dict[str, int],
               heartbeat_ms: int, timeout: float, stamp: str) -> dict[str, Any]:
    target = targets.make(name, workdir, refka_overrides=REFKA_OVERRIDES)
    out: dict[str, Any] = {"available": False}
    if isinstance(target, targets.RefkaTarget):
        out["broker_settings"] = {k: v for k, v in REFKA_OVERRIDES.items()}
    else:
        out["broker_settings"] = BROKER_SETTINGS_NOTE.get(name, "its defaults")
    try:
        target.check()
        out["version"] = target.version()
        if not target.create_topics:
            # librdkafka's mock does serve classic consumer groups, but not a 6-partition topic.
            raise targets.TargetUnavailable(
                f"no CreateTopics: its topics are auto-created with {target.partitions_per_topic} partitions, "
                f"the benchmark needs {PARTITIONS} (it does serve classic consumer groups)")
        running = target.start(timeout=30.0)
    except targets.TargetUnavailable as e:
        target.stop()
        out["reason"] = f"{name}: {e}"
        _say(f"{name}: n/a ({e})")
        return out
    out["available"] = True
    out["bootstrap"] = running.bootstrap
    log_path = workdir / f"{name}-members.log"
    config = member_config(heartbeat_ms)
    _say(f"{name}: up at {running.bootstrap}")
    try:
        topic = f"groups-{stamp}"
        try:
            create_topic(running.bootstrap, topic, timeout)
            ends, preload_s = preload(running.bootstrap, topic, records, timeout)
            _say(f"{name}: preloaded {records:,} x 1 KiB into {PARTITIONS} partitions in {preload_s:.1f} s")
            samples = []
            for rep in range(repeats):
                s = throughput_round(running.bootstrap, topic, f"groups-tput-{stamp}-{rep}", ends, running.pid,
                                     config, log_path, timeout)
                samples.append(s)
                _say(f"{name}: group consumed {records:,} records in {s['seconds']:.2f} s: "
                     f"{s['records_per_s']:,.0f} records/s, {s['duplicates']} duplicates")
            ordered = sorted(samples, key=lambda s: s["records_per_s"])
            out["throughput"] = dict(ordered[(len(ordered) - 1) // 2], median_of=len(samples),
                                     all_records_per_s=[s["records_per_s"] for s in samples],
                                     preload_seconds=preload_s)
            workload.delete_topic(running.bootstrap, topic)
        except (BenchError, KafkaException) as e:
            out["throughput"] = {"error": _failure(name, target, e)}
            _say(f"{name}: throughput: {out['throughput']['error']}")
            if target.proc is None or target.proc.poll() is not None:
                return out
        trickle_topic = f"groups-trickle-{stamp}"
        out["rebalance"] = {}
        try:
            create_topic(running.bootstrap, trickle_topic, timeout)
        except (BenchError, KafkaException) as e:
            for variant in rounds:
                out["rebalance"][variant] = {"error": _failure(name, target, e)}
            return out
        for variant, n in rounds.items():
            trickle = Trickle(running.bootstrap, trickle_topic)
            try:
                _say(f"{name}: rebalance after {variant}, {n} round(s)")
                out["rebalance"][variant] = rebalance_rounds(variant, n, running.bootstrap, trickle_topic,
                                                             f"groups-{variant}-{stamp}", config, log_path,
                                                             timeout)
            except (BenchError, KafkaException) as e:
                out["rebalance"][variant] = {"error": _failure(name, target, e)}
                _say(f"{name}: rebalance after {variant}: {out['rebalance'][variant]['error']}")
            finally:
                out["rebalance"].setdefault("trickle", {})[variant] = trickle.stop()
            if target.proc is None or target.proc.poll() is not None:
                break
    finally:
        target.stop()
    return out


def _failure(name: str, target: targets.Target, e: Exception) -> str:
    died = target.proc is None or target.proc.poll() is not None
    return f"{name}: {e}" + (" (broker process exited)" if died else "")


# -- the table


def _fmt(node: Any, path: tuple[str, ...], fmt: str, notes: list[str], reason: str | None) -> str:
    if reason is None:
        for key in path:
            if not isinstance(node, dict) or key not in node:
                node = {"error": "not measured"}
                break
            if isinstance(node.get(key), dict) and "error" in node[key]:
                node = node[key]
                break
            node = node[key]
        if not (isinstance(node, dict) and "error" in node):
            if node is None:
                return "-"
            if isinstance(node, list):
                return "/".join(format(x, fmt) for x in node)
            return format(node, fmt) if isinstance(node, int | float) else str(node)
        reason = str(node["error"])
    if reason not in notes:
        notes.append(reason)
    return f"n/a [{notes.index(reason) + 1}]"


def table(results: dict[str, Any]) -> str:
    names = list(results["targets"])
    cfg = results["config"]
    notes: list[str] = []
    rows: list[tuple[str, list[str]] | str] = []

    def row(label: str, path: tuple[str, ...], fmt: str) -> None:
        cells = []
        for n in names:
            t = results["targets"][n]
            reason = None if t.get("available") else t.get("reason", "unavailable")
            cells.append(_fmt(t, path, fmt, notes, reason))
        rows.append((label, cells))

    rows.append(f"throughput: {cfg['records']:,} x 1 KiB preloaded, median of {cfg['repeats']} run(s)")
    row("  records/s (first to last record of the group)", ("throughput", "records_per_s"), ",.0f")
    row("  MB/s", ("throughput", "mb_per_s"), ",.1f")
    row("  duplicates (records consumed twice)", ("throughput", "duplicates"), "d")
    row("  assignments seen per member", ("throughput", "assignments_per_member"), "d")
    row("  ms from subscribe to the group formed (not timed)", ("throughput", "formed_ms"), ",.0f")
    row("  sync commits", ("throughput", "commits"), "d")
    row("  sync commit median ms", ("throughput", "commit_median_ms"), ".1f")
    row("  CPU % of one core, broker", ("throughput", "broker_cpu_percent"), ".0f")
    row("  CPU % of one core, 3 members", ("throughput", "members_cpu_percent"), ".0f")
    for variant, title in (("close", "close() (LeaveGroup)"),
                           ("kill", f"SIGKILL (session.timeout.ms={SESSION_TIMEOUT_MS})")):
        n = cfg["rounds"].get(variant)
        if not n:
            continue
        rows.append(f"rebalance after a member's {title}, ms from its exit, median of {n}")
        row("  to a survivor's first record of the leaver's partitions", ("rebalance", variant, "to_first_record_ms"), ",.0f")
        row("    samples", ("rebalance", variant, "samples_first"), ".0f")
        row("  to all 6 partitions consuming again", ("rebalance", variant, "to_all_partitions_ms"), ",.0f")
        row("    samples", ("rebalance", variant, "samples_all"), ".0f")
        row("  to the last survivor's revoke (heard of it)", ("rebalance", variant, "to_survivors_revoked_ms"), ",.0f")
        row("  to the last survivor's new assignment", ("rebalance", variant, "to_survivors_assigned_ms"), ",.0f")
        row("  last survivor's revoke to all 6 consuming", ("rebalance", variant, "revoked_to_all_ms"), ",.0f")
        if variant == "close":
            row("  close() took", ("rebalance", variant, "close_ms"), ",.0f")
        row("  restarted member's join to all consuming", ("rebalance", variant, "join_ms"), ",.0f")
    lines_rows = [r for r in rows if isinstance(r, tuple)]
    label_w = max(len(r[0]) for r in lines_rows)
    col_w = [max(len(n), *(len(r[1][i]) for r in lines_rows)) for i, n in enumerate(names)]
    head = f"{'':<{label_w}}  " + "  ".join(f"{n:>{w}}" for n, w in zip(names, col_w, strict=True))
    lines = [head, "-" * len(head)]
    for r in rows:
        if isinstance(r, str):
            lines.append(r)
        else:
            label, cells = r
            lines.append(f"{label:<{label_w}}  " + "  ".join(f"{c:>{w}}" for c, w in zip(cells, col_w, strict=True)))
    lines.extend(f"[{i}] {note}" for i, note in enumerate(notes, 1))
    return "\n".join(lines)


def _add_sample_lists(results: dict[str, Any]) -> None:
    """samples_first / samples_all: the per-round figures, for the table."""
    for t in results["targets"].values():
        for variant, r in t.get("rebalance", {}).items():
            if variant == "trickle" or not isinstance(r, dict) or "samples" not in r:
                continue
            r["samples_first"] = [s["to_first_record_ms"] for s in r["samples"]]
            r["samples_all"] = [s["to_all_partitions_ms"] for s in r["samples"]]


# -- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.bench.groups", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_RECORDS:,} records, one throughput run, 2 close rounds, 1 kill round "
                             "(well under 2 min)")
    parser.add_argument("--targets", default=",".join(targets.ALL),
                        help=f"comma-separated subset of {','.join(targets.ALL)}")
    parser.add_argument("--json", type=Path, default=None,
                        help="results file (default lab/bench/results/<UTC timestamp>-groups.json)")
    parser.add_argument("--records", type=int, default=None,
                        help=f"records preloaded for the throughput runs (default {FULL_RECORDS:,})")
    parser.add_argument("--repeat", type=int, default=None, help="throughput runs, the median is reported "
                                                                 "(default 3, 1 with --quick)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="member exits per variant (default 5; --quick: 2 close, 1 kill)")
    parser.add_argument("--variants", default="close,kill", help="close, kill or both (default)")
    parser.add_argument("--heartbeat-ms", type=int, default=HEARTBEAT_INTERVAL_MS,
                        help=f"the members' heartbeat.interval.ms (default {HEARTBEAT_INTERVAL_MS}; "
                             "librdkafka's own default is 3000)")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.targets.split(",") if n.strip()]
    unknown = [n for n in names if n not in targets.ALL]
    if unknown or not names:
        parser.error(f"unknown target(s) {', '.join(unknown)}; choose from {', '.join(targets.ALL)}")
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants or any(v not in ("close", "kill") for v in variants):
        parser.error("--variants: close, kill or close,kill")
    records = args.records or (QUICK_RECORDS if args.quick else FULL_RECORDS)
    repeats = args.repeat or (1 if args.quick else 3)
    default_rounds = {"close": 2, "kill": 1} if args.quick else {"close": 5, "kill": 5}
    rounds = {v: args.rounds or default_rounds[v] for v in variants}
    timeout = 30.0 if args.quick else 60.0
    started = datetime.now(UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    results: dict[str, Any] = {
        "started_at": started.isoformat(),
        "quick": args.quick,
        "machine": report.machine_info(),
        "config": {
            "benchmark": "groups",
            "members": MEMBERS, "partitions": PARTITIONS, "record_bytes": RECORD_BYTES,
            "records": records, "repeats": repeats, "rounds": rounds,
            "commit": f"commit(asynchronous=False) every {COMMIT_EVERY} records per member",
            "member_config": member_config(args.heartbeat_ms),
            "trickle_records_per_s": PARTITIONS / TRICKLE_INTERVAL_S,
            "refka_overrides": REFKA_OVERRIDES,
            "mb": "10^6 bytes of record values",
        },
        "targets": {},
    }
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="refka-bench-groups-") as tmp:
        for name in names:
            results["targets"][name] = run_target(name, Path(tmp), records, repeats, rounds, args.heartbeat_ms,
                                                  timeout, stamp)
    results["finished_at"] = datetime.now(UTC).isoformat()
    results["loadavg_1min_end"] = os.getloadavg()[0]
    results["wall_seconds"] = time.monotonic() - t0
    _add_sample_lists(results)

    m = results["machine"]
    print(f"\nrefka bench --groups{' --quick' if args.quick else ''}: {m['nproc']} CPUs ({m['cpu_model']}), "
          f"Python {m['python']}, confluent-kafka {m['confluent_kafka']} / librdkafka {m['librdkafka']}")
    print(f"{MEMBERS} members (one process each), {PARTITIONS} partitions, 1 KiB records, "
          f"commit(asynchronous=False) every {COMMIT_EVERY} records per member; "
          f"session.timeout.ms={SESSION_TIMEOUT_MS}, heartbeat.interval.ms={args.heartbeat_ms}, "
          "assignment range,roundrobin (eager)")
    print("refka: " + ", ".join(f"{k}={v}" for k, v in REFKA_OVERRIDES.items())
          + f"; tansu: {BROKER_SETTINGS_NOTE['tansu']}; trickle {PARTITIONS / TRICKLE_INTERVAL_S:,.0f} records/s "
          + "during the rebalance rounds")
    print("load average before/after: {:.2f} / {:.2f}\n".format(m["loadavg_1min"], results["loadavg_1min_end"]))
    print(table(results))
    path = args.json or RESULTS_DIR / f"{stamp}-groups.json"
    report.write_json(results, path)
    print(f"\nresults: {path}  ({results['wall_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
