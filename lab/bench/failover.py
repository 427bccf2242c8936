"""Failover benchmark: produce latency while partition leadership moves, KIP-951 hints on and off.

    python -m lab.bench.failover [--quick] [--moves N] [--client confluent|java] [--json PATH]
    python -m lab.bench --failover [...]      make bench ARGS=--failover

``--client java`` produces with Apache Kafka's Java client instead (kafka-clients
``--java-version``, default 3.9.1, from ``make java-clients``; lab/bench/java/
FailoverProducer.java in its own JVM, the same records, pacing and moves; acks=all,
linger.ms=0, its defaults otherwise: idempotent, retry.backoff.ms 100 growing to 1 s).
The Java producer retries at once on a leader change when the answer carries KIP-951's
hint, where librdkafka waits for its next metadata refresh: the hints' gain shows here.

For each variant (refka's ``leader.discovery.hints.enable`` true, then false),
in one run: ``refka serve --brokers 3`` (three brokers in one process, data dir
on disk), a 12-partition RF=3 topic, a confluent-kafka producer (acks=all,
linger.ms=0) sending one 100-byte record every millisecond round-robin over the
partitions, while the leadership of all 12 partitions is moved back and forth
(AlterPartitionReassignments with the replica list rotated by one, then
ElectLeaders PREFERRED for the 12 partitions). Reported: produce latency
p50/p99/p99.9 before the first move and during the moves, and per partition
and move the time from the move to the first record sent after it that was
acknowledged (= on the new leader). Then replicated produce throughput (RF=3,
acks=all, 3 brokers: in one process, and in three processes over a private
ZooKeeper when Debian's package is installed) next to one broker (RF=1,
acks=all).

Definitions and how to read the figures: lab/bench/README.md ("failover").
Results go to lab/bench/results/<UTC timestamp>-failover.json (or --json).
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import ElectionType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from lab.bench import probe, report, targets, workload
from refka.protocol import RequestHeader, decode_response_header, encode_request_header, join
from refka.protocol.api import Api
from refka.protocol.messages.alter_partition_reassignments import AlterPartitionReassignments
from refka.protocol.messages.metadata import Metadata
from refka.zookeeper import ZooKeeperServer, zookeeper_unavailable

PARTITIONS = 12
REPLICAS = 3
RECORD_BYTES = 100
SEND_INTERVAL_S = 0.001
FULL = {"moves": 10, "warmup_s": 5.0, "steady_s": 3.0, "gap_s": 3.0, "tput_records": 300_000}
QUICK = {"moves": 10, "warmup_s": 2.0, "steady_s": 1.0, "gap_s": 1.2, "tput_records": 30_000}
TPUT_BYTES = 1024
PRODUCER_CONFIG: dict[str, Any] = {
    "acks": "all",
    "linger.ms": 0,
    "compression.type": "none",
    # librdkafka's defaults otherwise: enable.idempotence=false, retries, retry.backoff.ms=100,
    # topic.metadata.refresh.fast.interval.ms=100, message.timeout.ms=300000.
}
RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parents[2]
JAVA_PRODUCER = Path(__file__).resolve().parent / "java" / "FailoverProducer.java"
TIMEOUT = 30.0
_I32 = struct.Struct(">i")


class BenchError(RuntimeError):
    pass


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- raw requests (confluent-kafka has no AlterPartitionReassignments)


def _call(port: int, api: Api, body: Any, version: int) -> Any:
    with socket.create_connection((targets.HOST, port), timeout=TIMEOUT) as sock:
        header = encode_request_header(RequestHeader(api.key, version, 1, "refka-bench-failover"),
                                       api.request_header_version(version))
        payload = header + join(api.encode_request(body, version))
        sock.sendall(_I32.pack(len(payload)) + payload)
        (n,) = _I32.unpack(probe._recv_exactly(sock, 4))
        frame = probe._recv_exactly(sock, n)
    _cid, pos = decode_response_header(frame, api.response_header_version(version))
    resp, _end = api.decode_response(frame, version, pos)
    return resp


def metadata(port: int, topics: list[str] | None) -> Any:
    req = Metadata.Request(topics=None if topics is None else
                           [Metadata.Request.MetadataRequestTopic(name=t) for t in topics],
                           allow_auto_topic_creation=False)
    return _call(port, Metadata, req, 12)


def leaders(port: int, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (leader id, leader epoch), as the broker at ``port`` sees it."""
    (t,) = metadata(port, [topic]).topics
    return {p.partition_index: (p.leader_id, p.leader_epoch) for p in t.partitions}


def reassign(controller_port: int, topic: str, assignment: dict[int, list[int]]) -> None:
    R = AlterPartitionReassignments.Request
    req = R(timeout_ms=10_000, allow_replication_factor_change=False, topics=[R.ReassignableTopic(
        name=topic, partitions=[R.ReassignableTopic.ReassignablePartition(partition_index=p, replicas=r)
                                for p, r in assignment.items()])])
    resp = _call(controller_port, AlterPartitionReassignments, req, 1)
    bad = {(t.name, p.partition_index): p.error_code for t in resp.responses for p in t.partitions
           if p.error_code}
    if resp.error_code or bad:
        raise BenchError(f"AlterPartitionReassignments: error {resp.error_code}, partitions {bad}")


# -- the cluster


class ClusterTarget(targets.RefkaTarget):
    """``refka serve --brokers N`` (disk): N brokers in one process."""

    def __init__(self, workdir: Path, brokers: int, overrides: dict[str, str], label: str) -> None:
        super().__init__(workdir, memory=False, overrides=overrides)
        self.brokers = brokers
        self.name = label
        self.log_path = workdir / f"{label}.log"

    def _command(self, port: int, data_dir: Path) -> list[str]:
        return super()._command(port, data_dir) + ["--brokers", str(self.brokers)]

    def start(self, timeout: float = 30.0) -> targets.Running:
        """As Target.start, but on a run of ``brokers`` free ports (broker i listens on port+i) below
        the ephemeral range (where the clients' own connections could take port+1 meanwhile); a
        start that loses a port race is retried."""
        last: Exception | None = None
        for _attempt in range(5):
            port = _free_run(random.randrange(20000, 30000), self.brokers)
            self._starts += 1
            data_dir = self.workdir / f"{self.name}-data-{self._starts}"
            data_dir.mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "ab") as log:
                t0 = time.perf_counter()
                self.proc = subprocess.Popen(self._command(port, data_dir), stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, cwd=targets.REPO_ROOT)
            try:
                answered, usable = self._wait_answering(targets.HOST, port, t0, timeout)
            except targets.TargetUnavailable as e:
                last = e
                if "address already in use" not in str(e):
                    raise
                continue
            return targets.Running(f"{targets.HOST}:{port}", self.proc.pid, answered, usable)
        raise targets.TargetUnavailable(f"no free run of {self.brokers} ports: {last}")


def _free_run(start: int, n: int) -> int:
    """The first port >= start such that port .. port+n-1 can all be bound now."""
    port = start
    while True:
        socks = []
        try:
            for i in range(n):
                s = socket.socket()
                socks.append(s)
                s.bind((targets.HOST, port + i))
            return port
        except OSError:
            port += n
        finally:
            for s in socks:
                s.close()


def start_cluster(target: ClusterTarget) -> tuple[targets.Running, dict[int, int], int]:
    """(running, node id -> port, controller id) once Metadata lists every broker and a controller."""
    running = target.start(timeout=TIMEOUT)
    port = int(running.bootstrap.rpartition(":")[2])
    deadline = time.monotonic() + TIMEOUT
    while True:
        md = metadata(port, None)
        if len(md.brokers) >= target.brokers and md.controller_id >= 0:
            return running, {b.node_id: b.port for b in md.brokers}, md.controller_id
        if time.monotonic() > deadline:
            raise BenchError(f"Metadata lists {len(md.brokers)} broker(s), controller {md.controller_id}")
        time.sleep(0.05)


def _create(bootstrap: str, topic: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)],
                              operation_timeout=TIMEOUT)[topic]
    fut.result(TIMEOUT)


def _wait(what: Any, timeout: float, why: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (v := what()):
        if time.monotonic() > deadline:
            raise BenchError(f"timed out waiting for {why}")
        time.sleep(0.02)
    return v


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


# -- one variant


def failover_variant(label: str, hints: bool, workdir: Path, cfg: dict[str, Any], stamp: str,
                     java: str | None = None) -> dict[str, Any]:
    """One variant on a fresh cluster; ``java``: the Java client's version to produce with,
    else confluent-kafka's producer."""
    overrides = {"leader.discovery.hints.enable": "true" if hints else "false"}
    target = ClusterTarget(workdir, REPLICAS, overrides, label)
    out: dict[str, Any] = {"overrides": overrides}
    try:
        running, ports, controller = start_cluster(target)
        bootstrap = running.bootstrap
        out["bootstrap"] = bootstrap
        nodes = sorted(ports)
        topic = f"failover-{stamp}"
        base = [[nodes[(p + i) % len(nodes)] for i in range(REPLICAS)] for p in range(PARTITIONS)]
        rotated = [r[1:] + r[:1] for r in base]
        _create(bootstrap, topic, base)
        cport = ports[controller]
        _wait(lambda: all(leaders(ports[n], topic).get(p, (-1, -1))[0] == base[p][0]
                          for n in nodes for p in range(PARTITIONS)), TIMEOUT, "the first leaders")
        _say(f"{label}: cluster up at {bootstrap}, brokers {nodes}, controller {controller}; topic {topic}")
        if java:
            out.update(run_moves_java(bootstrap, topic, cport, ports, base, rotated, cfg, label, java))
        else:
            out.update(run_moves(bootstrap, topic, cport, ports, base, rotated, cfg, label))
        out["broker_log_tail"] = targets._tail(target.log_path, 5)
    except (BenchError, KafkaException, OSError, targets.TargetUnavailable) as e:
        died = target.proc is None or target.proc.poll() is not None
        out["error"] = f"{label}: {e}" + (" (broker process exited)" if died else "")
        _say(out["error"])
    finally:
        target.stop()
    return out


class Mover:
    """The leader moves, in a thread: after the warm-up, ``cfg["moves"]`` times, the 12
    partitions' replica lists rotated (AlterPartitionReassignments) and a preferred election,
    each waited for until every broker's Metadata names the new leaders, ``gap_s`` apart.
    ``stop`` is set when the moves are done (or failed: ``error``)."""

    def __init__(self, bootstrap: str, topic: str, cport: int, ports: dict[int, int], base: list[list[int]],
                 rotated: list[list[int]], cfg: dict[str, Any], label: str) -> None:
        self.bootstrap, self.topic, self.cport, self.ports = bootstrap, topic, cport, ports
        self.base, self.rotated, self.cfg, self.label = base, rotated, cfg, label
        self.moves: list[dict[str, Any]] = []
        self.error: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="mover", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def join(self) -> None:
        self.thread.join(TIMEOUT)
        if self.error:
            raise BenchError(f"moving leaders: {self.error[0]}")

    def _run(self) -> None:
        topic, cport, ports, cfg, label = self.topic, self.cport, self.ports, self.cfg, self.label
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        try:
            time.sleep(cfg["warmup_s"])
            for i in range(cfg["moves"]):
                target_lists = self.rotated if i % 2 == 0 else self.base
                before = leaders(cport, topic)
                t_call = time.monotonic()
                reassign(cport, topic, dict(enumerate(target_lists)))
                t_reassigned = time.monotonic()
                result = admin.elect_leaders(ElectionType.PREFERRED, tps).result(TIMEOUT)
                t_move = time.monotonic()
                wall_move = time.time()  # to line up with librdkafka's debug log (wall clock)
                errs = {}
                for tp, err in result.items():
                    err = err if err is not None else tp.error
                    if err is not None:
                        errs[tp.partition] = str(err)
                want = {p: target_lists[p][0] for p in range(PARTITIONS)}

                def all_see(want: dict[int, int] = want) -> bool:
                    return all({p: v[0] for p, v in leaders(port, topic).items()} == want
                               for port in ports.values())

                _wait(all_see, TIMEOUT, f"move {i + 1}: every broker's Metadata to name the new leaders")
                t_seen = time.monotonic()
                self.moves.append({"move": i + 1, "wall_move": wall_move, "t_call": t_call, "t_move": t_move,
                                   "t_all_metadata": t_seen,
                                   "reassign_ms": (t_reassigned - t_call) * 1000,
                                   "elect_ms": (t_move - t_reassigned) * 1000,
                                   "metadata_after_ms": (t_seen - t_move) * 1000,
                                   "leaders_before": {p: v[0] for p, v in before.items()},
                                   "leaders_after": want, "elect_errors": errs})
                _say(f"{label}: move {i + 1}: reassign {(t_reassigned - t_call) * 1000:.0f} ms, "
                     f"elect {(t_move - t_reassigned) * 1000:.0f} ms"
                     + (f", errors {errs}" if errs else ""))
                time.sleep(cfg["gap_s"])
        except Exception as e:  # noqa: BLE001 - reported in the results, the producer loop stops
            self.error.append(f"{type(e).__name__}: {e}")
        finally:
            self.stop.set()


def run_moves(bootstrap: str, topic: str, cport: int, ports: dict[int, int], base: list[list[int]],
              rotated: list[list[int]], cfg: dict[str, Any], label: str) -> dict[str, Any]:
    """confluent-kafka's producer (in this process) through the moves."""
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG})
    producer.list_topics(topic, timeout=TIMEOUT)
    # (partition, send time, ack time or None, error or None); appended from poll(), this thread
    records: list[tuple[int, float, float | None, str | None]] = []
    value = os.urandom(RECORD_BYTES)

    def report_cb(partition: int, sent: float) -> Any:
        def cb(err: Any, msg: Any) -> None:
            if err is None:
                lat = msg.latency()
                records.append((partition, sent, sent + lat if lat is not None else time.monotonic(), None))
            else:
                records.append((partition, sent, None, str(err)))
        return cb

    mover = Mover(bootstrap, topic, cport, ports, base, rotated, cfg, label)
    stop = mover.stop
    t_start = time.monotonic()
    mover.start()
    produce = producer.produce
    poll = producer.poll
    n = 0
    buffer_full = 0
    next_at = time.monotonic()
    while not stop.is_set():
        now = time.monotonic()
        if now < next_at:
            poll(max(0.0, next_at - now))  # serves delivery reports while waiting for the next slot
            continue
        p = n % PARTITIONS
        sent = time.monotonic()
        try:
            produce(topic, value, partition=p, on_delivery=report_cb(p, sent))
            n += 1
        except BufferError:
            buffer_full += 1
        next_at += SEND_INTERVAL_S
        if next_at < now - 0.05:  # far behind (a stall of this loop): do not burst to catch up
            next_at = now
        poll(0)
    left = producer.flush(TIMEOUT)
    mover.join()
    t_end = time.monotonic()
    return analyse(records, mover.moves, t_start, t_end, n, left, buffer_full, cfg["steady_s"])


def java_classpath(version: str) -> str:
    """The Java client's jars as ``make java-clients`` copies them; BenchError if missing."""
    jars = REPO / ".cache" / "java" / f"kafka-clients-{version}"
    if not (jars / ".refka-installed").exists():
        raise BenchError(f"no kafka-clients {version} in {jars}: run `make java-clients`")
    return f"{jars}/*"


def run_moves_java(bootstrap: str, topic: str, cport: int, ports: dict[int, int], base: list[list[int]],
                   rotated: list[list[int]], cfg: dict[str, Any], label: str, version: str) -> dict[str, Any]:
    """The Java client's producer (lab/bench/java/FailoverProducer.java, its own JVM) through
    the moves: the same records, partitions and pacing as confluent-kafka's; its send and ack
    times are CLOCK_MONOTONIC, this process's time.monotonic()."""
    cmd = ["java", "-cp", java_classpath(version), str(JAVA_PRODUCER), bootstrap, topic, str(PARTITIONS),
           str(RECORD_BYTES), str(round(SEND_INTERVAL_S * 1_000_000))]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        first = proc.stdout.readline().strip()
        if first != "ready":
            raise BenchError(f"the Java producer did not start: {first!r} {proc.stderr.read()[-2000:] if proc.stderr else ''}")
        mover = Mover(bootstrap, topic, cport, ports, base, rotated, cfg, label)
        t_start = time.monotonic()
        mover.start()
        mover.stop.wait()
        # communicate() closes its standard input: the producer stops sending, flushes and reports
        out, err = proc.communicate(timeout=TIMEOUT + 60)
        t_end = time.monotonic()
        mover.join()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    records: list[tuple[int, float, float | None, str | None]] = []
    sent = left = -1
    for line in out.splitlines():
        kind, *rest = line.split()
        if kind == "r":
            records.append((int(rest[0]), int(rest[1]) / 1e9, int(rest[2]) / 1e9, None))
        elif kind == "e":
            records.append((int(rest[0]), int(rest[1]) / 1e9, None, rest[2]))
        elif kind == "done":
            sent, left = int(rest[0]), int(rest[1])
    if sent < 0:
        raise BenchError(f"the Java producer's report is incomplete (exit {proc.returncode}): {err[-2000:]}")
    return analyse(records, mover.moves, t_start, t_end, sent, left, 0, cfg["steady_s"])


def analyse(records: list[tuple[int, float, float | None, str | None]], moves: list[dict[str, Any]],
            t_start: float, t_end: float, sent: int, left: int, buffer_full: int,
            steady_s: float) -> dict[str, Any]:
    first_move = moves[0]["t_move"] if moves else t_end
    first_call = moves[0]["t_call"] if moves else t_end
    ok = [r for r in records if r[2] is not None]
    failed = [r for r in records if r[2] is None]
    # steady: the last steady_s seconds before the first move (the first seconds after the
    # cluster's start are slower: connections, follower fetch sessions)
    steady = [(r[2] - r[1]) * 1000 for r in ok  # type: ignore[operator]
              if first_call - steady_s <= r[1] < first_call]
    early = [(r[2] - r[1]) * 1000 for r in ok if r[1] < first_call - steady_s]  # type: ignore[operator]
    during = [(r[2] - r[1]) * 1000 for r in ok if r[1] >= first_call]  # type: ignore[operator]
    by_part: dict[int, list[tuple[float, float]]] = {}
    for p, s, a, _ in ok:
        by_part.setdefault(p, []).append((s, a))  # type: ignore[arg-type]
    for v in by_part.values():
        v.sort()
    recov: list[dict[str, Any]] = []
    all_ms: list[float] = []
    for m in moves:
        per_part: dict[int, float | None] = {}
        for p in range(PARTITIONS):
            # The first acknowledged record sent at or after the move; the moves are seconds
            # apart, so a record sent before the next move.
            acks = [a for s, a in by_part.get(p, []) if s >= m["t_move"]]
            per_part[p] = (min(acks) - m["t_move"]) * 1000 if acks else None
        vals = [v for v in per_part.values() if v is not None]
        all_ms.extend(vals)
        recov.append({"move": m["move"], "per_partition_ms": per_part,
                      "median_ms": statistics.median(vals) if vals else None,
                      "max_ms": max(vals) if vals else None,
                      "missing": sum(1 for v in per_part.values() if v is None)})
    # The median gap between consecutive sends to one partition: the resolution of the recovery figure.
    gaps = [b[0] - a[0] for v in by_part.values() for a, b in zip(v, v[1:], strict=False)]
    return {
        "sent": sent, "acked": len(ok), "failed": len(failed), "undelivered_after_flush": left,
        "buffer_full": buffer_full,
        "failed_errors": sorted({r[3] for r in failed if r[3]})[:5],
        "send_rate_per_s": sent / (t_end - t_start),
        "partition_send_gap_ms": statistics.median(gaps) * 1000 if gaps else None,
        "latency_steady_ms": {"n": len(steady), "p50": _pct(steady, 0.5), "p99": _pct(steady, 0.99),
                              "p999": _pct(steady, 0.999), "max": max(steady) if steady else None},
        "latency_warmup_ms": {"n": len(early), "p50": _pct(early, 0.5), "p99": _pct(early, 0.99),
                              "max": max(early) if early else None},
        "latency_moves_ms": {"n": len(during), "p50": _pct(during, 0.5), "p99": _pct(during, 0.99),
                             "p999": _pct(during, 0.999), "max": max(during) if during else None},
        "recovery_median_ms": statistics.median(all_ms) if all_ms else None,
        "recovery_p90_ms": _pct(all_ms, 0.9),
        "recovery_max_ms": max(all_ms) if all_ms else None,
        "recovery_per_move_max_median_ms": statistics.median([r["max_ms"] for r in recov if r["max_ms"] is not None])
        if recov else None,
        "recovery_samples": len(all_ms),
        "recovery_missing": sum(r["missing"] for r in recov),
        "recovery_by_move": recov,
        "moves": [{k: v for k, v in m.items() if not k.startswith("t_")} for m in moves],
        "elect_ms_median": statistics.median([m["elect_ms"] for m in moves]) if moves else None,
        "reassign_ms_median": statistics.median([m["reassign_ms"] for m in moves]) if moves else None,
        "metadata_after_ms_median": statistics.median([m["metadata_after_ms"] for m in moves]) if moves else None,
        "first_move_after_s": first_move - t_start,
    }


# -- replicated throughput


class ZooKeeperCluster:
    """Three ``refka serve --zookeeper ... --broker-id i`` processes over a private
    ZooKeeper (Debian's package, refka/zookeeper.py): the cluster's multi-process form.
    ``overrides``: broker properties, passed to each as ``--override key=value``."""

    def __init__(self, workdir: Path, brokers: int = 3, overrides: dict[str, str] | None = None,
                 zk_heap_mb: int = 256) -> None:
        self.workdir = workdir / "zk-cluster"
        self.brokers = brokers
        self.zk_heap_mb = zk_heap_mb
        self.overrides = dict(overrides or {})
        self.zk: ZooKeeperServer | None = None
        self.procs: list[subprocess.Popen[bytes]] = []
        self.ports: dict[int, int] = {}

    def start(self) -> str:
        reason = zookeeper_unavailable()
        if reason:
            raise targets.TargetUnavailable(reason)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.zk = ZooKeeperServer(self.workdir / "zookeeper", heap_mb=self.zk_heap_mb)
        self.zk.start()
        base = _free_run(random.randrange(30000, 31000), self.brokers)
        for i in range(self.brokers):
            self.ports[i] = base + i
            self.procs.append(self._spawn(i))
        _wait(lambda: _lists_brokers(base, self.brokers), TIMEOUT, "three registered brokers")
        return ",".join(f"{targets.HOST}:{p}" for p in self.ports.values())

    def _spawn(self, node_id: int) -> subprocess.Popen[bytes]:
        assert self.zk is not None
        with open(self.workdir / f"broker-{node_id}.log", "ab") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "refka.cli", "serve", "--zookeeper", f"{self.zk.connect}/bench",
                 "--broker-id", str(node_id), "--port", str(self.ports[node_id]),
                 "--data-dir", str(self.workdir / f"data{node_id}"),
                 *(a for k, v in self.overrides.items() for a in ("--override", f"{k}={v}"))],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=targets.REPO_ROOT)

    def pid(self, node_id: int) -> int:
        return self.procs[node_id].pid

    def kill(self, node_id: int) -> None:
        """kill -9 of broker ``node_id``'s process (no controlled shutdown, no goodbye)."""
        self.procs[node_id].kill()
        self.procs[node_id].wait(10)

    def restart(self, node_id: int) -> None:
        """Broker ``node_id`` again, on its port and its data dir."""
        self.procs[node_id] = self._spawn(node_id)

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        if self.zk is not None:
            self.zk.stop()


def _lists_brokers(port: int, n: int) -> bool:
    try:
        md = metadata(port, None)
    except OSError:
        return False
    return len(md.brokers) >= n and md.controller_id >= 0


def throughput(workdir: Path, records: int, stamp: str) -> dict[str, Any]:
    """1 KiB records to one partition, workload.produce's loop with acks=all: one broker (RF=1),
    three brokers in one process (RF=3), and three processes over ZooKeeper (RF=3; broker CPU
    is the leader process's)."""
    out: dict[str, Any] = {}
    saved = workload.PRODUCER_CONFIG
    workload.PRODUCER_CONFIG = {**saved, "acks": "all"}
    try:
        for label, brokers in (("1 broker, RF=1", 1), ("3 brokers, RF=3", 3)):
            target = ClusterTarget(workdir, brokers, {}, f"tput-{brokers}")
            try:
                running, ports, _controller = start_cluster(target)
                topic = f"failover-tput-{brokers}-{stamp}"
                _create(running.bootstrap, topic, [sorted(ports)[:brokers]])
                p = workload.produce(running.bootstrap, topic, records, TPUT_BYTES, running.pid, TIMEOUT * 4)
                out[label] = p.as_json()
                _say(f"throughput {label}: {p.mb_per_s:,.1f} MB/s, {p.records_per_s:,.0f} records/s")
            except (BenchError, KafkaException, OSError, workload.PhaseFailed, targets.TargetUnavailable) as e:
                out[label] = {"error": str(e)}
                _say(f"throughput {label}: {e}")
            finally:
                target.stop()
        label = "3 processes, RF=3"
        zk = ZooKeeperCluster(workdir)
        try:
            bootstrap = zk.start()
            topic = f"failover-tput-zk-{stamp}"
            _create(bootstrap, topic, [[0, 1, 2]])
            p = workload.produce(bootstrap, topic, records, TPUT_BYTES, zk.pid(0), TIMEOUT * 4)
            out[label] = p.as_json()
            _say(f"throughput {label}: {p.mb_per_s:,.1f} MB/s, {p.records_per_s:,.0f} records/s")
        except (BenchError, KafkaException, OSError, RuntimeError, workload.PhaseFailed,
                targets.TargetUnavailable) as e:
            out[label] = {"error": str(e)}
            _say(f"throughput {label}: {e}")
        finally:
            zk.stop()
    finally:
        workload.PRODUCER_CONFIG = saved
    return out


# -- the table


def _f(v: Any, fmt: str = ",.1f") -> str:
    return "-" if v is None else format(v, fmt)


def table(results: dict[str, Any]) -> str:
    names = list(results["variants"])
    rows: list[tuple[str, list[str]] | str] = []

    def row(label: str, get: Any, fmt: str = ",.1f") -> None:
        cells = []
        for n in names:
            v = results["variants"][n]
            cells.append("n/a" if "error" in v else _f(get(v), fmt))
        rows.append((label, cells))

    cfg = results["config"]
    rows.append(f"produce latency ms (send to ack): the {cfg['steady_s']:g} s before the first move, "
                "and from the first move on")
    for q in ("p50", "p99", "p999"):
        row(f"  {q.replace('p999', 'p99.9')} before", lambda v, q=q: v["latency_steady_ms"][q])
        row(f"  {q.replace('p999', 'p99.9')} during moves", lambda v, q=q: v["latency_moves_ms"][q])
    row("  max during moves", lambda v: v["latency_moves_ms"]["max"])
    rows.append(f"recovery ms: move (elect_leaders returned) to the partition's first ack of a record sent after it; "
                f"{cfg['moves']} moves x {PARTITIONS} partitions")
    row("  median", lambda v: v["recovery_median_ms"])
    row("  p90", lambda v: v["recovery_p90_ms"])
    row("  max", lambda v: v["recovery_max_ms"])
    row("  median over moves of the last partition's", lambda v: v["recovery_per_move_max_median_ms"])
    row("  samples (missing)", lambda v: f"{v['recovery_samples']} ({v['recovery_missing']})", "s")
    rows.append("the moves, ms (medians)")
    row("  AlterPartitionReassignments call", lambda v: v["reassign_ms_median"])
    row("  ElectLeaders call (elect_leaders().result())", lambda v: v["elect_ms_median"])
    row("  elect returned to all brokers' Metadata naming it", lambda v: v["metadata_after_ms_median"])
    rows.append("records")
    row("  sent / acked / failed", lambda v: f"{v['sent']} / {v['acked']} / {v['failed']}", "s")
    row("  send rate /s", lambda v: v["send_rate_per_s"], ",.0f")
    row("  ms between two sends to a partition (median)", lambda v: v["partition_send_gap_ms"])
    lines_rows = [r for r in rows if isinstance(r, tuple)]
    lw = max(len(r[0]) for r in lines_rows)
    cw = [max(len(n), *(len(r[1][i]) for r in lines_rows)) for i, n in enumerate(names)]
    head = f"{'':<{lw}}  " + "  ".join(f"{n:>{w}}" for n, w in zip(names, cw, strict=True))
    lines = [head, "-" * len(head)]
    for r in rows:
        if isinstance(r, str):
            lines.append(r)
        else:
            lines.append(f"{r[0]:<{lw}}  " + "  ".join(f"{c:>{w}}" for c, w in zip(r[1], cw, strict=True)))
    for n in names:
        if "error" in results["variants"][n]:
            lines.append(f"{n}: n/a: {results['variants'][n]['error']}")
    for n in names:
        v = results["variants"][n]
        if "recovery_by_move" in v:
            lines.append(f"{n}: recovery median per move, ms: "
                         + " ".join(_f(r["median_ms"], ".0f") for r in v["recovery_by_move"])
                         + f"; warm-up (not in the table) latency p50/p99 "
                         f"{_f(v['latency_warmup_ms']['p50'])}/{_f(v['latency_warmup_ms']['p99'])} ms")
    on, off = (results["variants"].get(k, {}) for k in ("hints-on", "hints-off"))
    if on.get("recovery_median_ms") and off.get("recovery_median_ms"):
        lines.append(f"recovery median, hints off / on: {off['recovery_median_ms'] / on['recovery_median_ms']:.1f}x "
                     "(target: at least 5x)")
    tp = results.get("throughput")
    if not tp:
        return "\n".join(lines)
    lines.append("")
    lines.append(f"produce throughput, {cfg['tput_records']:,} x 1 KiB to one partition, acks=all, "
                 "linger.ms=5, batch.size=1 MiB (workload.py's producer)")
    for label, v in tp.items():
        if "error" in v:
            lines.append(f"  {label:<16} n/a: {v['error']}")
        else:
            lines.append(f"  {label:<16} {v['mb_per_s']:7,.1f} MB/s  {v['records_per_s']:9,.0f} records/s  "
                         f"broker CPU {v.get('broker_cpu_percent', 0):.0f}%  client CPU {v['client_cpu_percent']:.0f}%")
    return "\n".join(lines)


# -- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.bench.failover", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter gaps between moves, 30k records (< 2 min)")
    parser.add_argument("--moves", type=int, default=None, help="leadership moves per variant (default 10)")
    parser.add_argument("--retry-backoff-ms", type=int, default=None,
                        help="the producer's retry.backoff.ms (librdkafka's default 100 is the floor of "
                             "every recovery figure, see the README)")
    parser.add_argument("--variants", default="hints-on,hints-off",
                        help="the variants in the order they run (default hints-on,hints-off)")
    parser.add_argument("--no-throughput", action="store_true", help="skip the throughput part")
    parser.add_argument("--client", choices=("confluent", "java"), default="confluent",
                        help="the producer through the moves: confluent-kafka's (this process), or the Java "
                             "client's (lab/bench/java/FailoverProducer.java, make java-clients' jars)")
    parser.add_argument("--java-version", default="3.9.1", help="--client java: kafka-clients version (3.9.1)")
    parser.add_argument("--json", type=Path, default=None,
                        help="results file (default lab/bench/results/<UTC timestamp>-failover.json)")
    args = parser.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    if args.moves:
        cfg["moves"] = args.moves
    if args.retry_backoff_ms is not None:
        PRODUCER_CONFIG["retry.backoff.ms"] = args.retry_backoff_ms
    started = datetime.now(UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    results: dict[str, Any] = {
        "started_at": started.isoformat(), "quick": args.quick, "machine": report.machine_info(),
        "config": {**cfg, "benchmark": "failover", "partitions": PARTITIONS, "replication_factor": REPLICAS,
                   "record_bytes": RECORD_BYTES, "send_interval_ms": SEND_INTERVAL_S * 1000,
                   "client": "confluent-kafka" if args.client == "confluent" else f"kafka-clients {args.java_version}",
                   "producer": PRODUCER_CONFIG if args.client == "confluent"
                   else {"acks": "all", "linger.ms": 0, "compression.type": "none", "(else)": "the Java client's defaults"},
                   "move": "AlterPartitionReassignments (replica list rotated by one, same set) then "
                           "AdminClient.elect_leaders(PREFERRED) on the 12 partitions; t_move = elect "
                           "returned"},
        "variants": {},
    }
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="refka-bench-failover-") as tmp:
        for label in [v.strip() for v in args.variants.split(",") if v.strip()]:
            if label not in ("hints-on", "hints-off"):
                parser.error(f"unknown variant {label!r}: hints-on, hints-off")
            hints = label == "hints-on"
            results["variants"][label] = failover_variant(label, hints, Path(tmp), cfg, stamp,
                                                          args.java_version if args.client == "java" else None)
        if not args.no_throughput:
            results["throughput"] = throughput(Path(tmp), cfg["tput_records"], stamp)
    results["finished_at"] = datetime.now(UTC).isoformat()
    results["loadavg_1min_end"] = os.getloadavg()[0]
    results["wall_seconds"] = time.monotonic() - t0
    m = results["machine"]
    print(f"\nrefka bench --failover{' --quick' if args.quick else ''}: {m['nproc']} CPUs ({m['cpu_model']}), "
          f"Python {m['python']}, confluent-kafka {m['confluent_kafka']} / librdkafka {m['librdkafka']}")
    print(f"refka serve --brokers 3 (one process, disk); {PARTITIONS} partitions RF={REPLICAS}; one "
          f"{RECORD_BYTES}-byte record every {SEND_INTERVAL_S * 1000:.0f} ms round-robin; producer "
          f"{results['config']['client']}: "
          + ", ".join(f"{k}={v}" for k, v in results["config"]["producer"].items()) + "; "
          f"{cfg['moves']} moves, {cfg['gap_s']} s apart after a {cfg['warmup_s']} s warm-up")
    print("load average before/after: {:.2f} / {:.2f}\n".format(m["loadavg_1min"], results["loadavg_1min_end"]))
    print(table(results))
    path = args.json or RESULTS_DIR / f"{stamp}-failover.json"
    report.write_json(results, path)
    print(f"\nresults: {path}  ({results['wall_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
