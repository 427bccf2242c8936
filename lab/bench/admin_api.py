"""Admin API benchmark (issue 13): what serving the admin app costs the produce path, and how
soon a leader moved through it reaches a librdkafka producer.

    python -m lab.bench.admin_api [--quick] [--rounds N] [--moves N] [--json PATH]
    python -m lab.bench --admin-api [...]

1. Overhead. ``refka serve --memory`` (one broker) without ``--admin-port``, and with it
   while a poller does what an open dashboard does, harder: every second it reads ``/``,
   ``/api/cluster``, ``/api/topics``, the topic, ``/api/faults`` and ``/metrics``, and it
   keeps ``/api/timeline/stream`` open. Produce throughput as the main benchmark measures
   it (workload.produce: confluent-kafka, 1 KiB records, acks=1, one partition, a fresh
   topic per round), in the order without, with, with, without, without, with ... (so
   that going first or second weighs on both alike), medians and their ratio. Target:
   under 5% apart. On a shared machine rounds vary more than that, so also: the broker's
   CPU over 20 s idle but for the poller, against idle: the poller's share of a core.
2. Leader move. ``refka serve --brokers 3 --admin-port P`` (disk), a one-partition RF=3
   topic, a confluent-kafka producer (acks=all, linger.ms=0) sending a 100-byte record
   every millisecond; the partition's leadership moved back and forth between two brokers
   with ``POST /api/topics/{t}/partitions/0/leader``. Per move: how long the call took (it
   returns once the broker it asked names the new leader), and the time from the call to
   the first acknowledged record on the new leader: the first delivery report whose offset
   is at or above the new leader epoch's start offset (OffsetsForLeaderEpoch asked of the
   new leader for the epoch before it).

Results: lab/bench/results/<UTC timestamp>-admin-api.json (or --json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from lab.bench import failover, report, targets, workload
from refka.client import admin_cli
from refka.protocol.messages.offsets_for_leader_epoch import OffsetForLeaderEpoch

RESULTS_DIR = Path(__file__).resolve().parent / "results"
FULL = {"rounds": 4, "records": 300_000, "moves": 10, "gap_s": 2.0, "cpu_seconds": 20.0}
QUICK = {"rounds": 2, "records": 60_000, "moves": 4, "gap_s": 1.0, "cpu_seconds": 5.0}
RECORD_BYTES = 1024
POLL_PATHS = ("/", "/api/cluster", "/api/topics", "/api/topics/{topic}", "/api/faults", "/metrics")


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class AdminTarget(targets.RefkaTarget):
    """``refka serve --memory`` with or without ``--admin-port``."""

    def __init__(self, workdir: Path, admin_port: int | None) -> None:
        super().__init__(workdir, memory=True)
        self.admin_port = admin_port
        self.name = "refka-memory+admin" if admin_port is not None else "refka-memory"

    def _command(self, port: int, data_dir: Path) -> list[str]:
        extra = ["--admin-port", str(self.admin_port)] if self.admin_port is not None else []
        return super()._command(port, data_dir) + extra


class AdminCluster(failover.ClusterTarget):
    """``refka serve --brokers N --admin-port P`` (disk)."""

    def __init__(self, workdir: Path, admin_port: int) -> None:
        super().__init__(workdir, 3, {}, "admin-move")
        self.admin_port = admin_port

    def _command(self, port: int, data_dir: Path) -> list[str]:
        return super()._command(port, data_dir) + ["--admin-port", str(self.admin_port)]


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            r.read()
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


class Poller:
    """What an open dashboard asks, every second, and the timeline stream held open."""

    def __init__(self, url: str, topic: str) -> None:
        self.url = url
        self.topic = topic
        self.stop = threading.Event()
        self.statuses: dict[str, dict[int, int]] = {}
        self.errors: list[str] = []
        self.stream_events = 0
        self._threads = [threading.Thread(target=self._poll, daemon=True),
                         threading.Thread(target=self._stream, daemon=True)]

    def __enter__(self) -> Poller:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._threads[0].join(15)

    def _poll(self) -> None:
        while not self.stop.is_set():
            for p in POLL_PATHS:
                path = p.format(topic=self.topic)
                try:
                    status = _get(self.url + path)
                except OSError as e:
                    self.errors.append(f"{path}: {e}")
                    continue
                self.statuses.setdefault(p, {}).setdefault(status, 0)
                self.statuses[p][status] += 1
            self.stop.wait(1.0)

    def _stream(self) -> None:
        try:
            with urllib.request.urlopen(self.url + "/api/timeline/stream", timeout=3600) as r:
                for line in r:
                    if self.stop.is_set():
                        return
                    if line.startswith(b"data: "):
                        self.stream_events += 1
        except OSError as e:
            if not self.stop.is_set():
                self.errors.append(f"timeline stream: {e}")


def overhead(workdir: Path, cfg: dict[str, Any], stamp: str) -> dict[str, Any]:
    rounds: dict[str, list[dict[str, Any]]] = {"without": [], "with": []}
    polled: dict[str, Any] = {}
    for i in range(cfg["rounds"]):
        # without, with; then with, without: an effect of running first or second cancels out
        for variant in ("without", "with") if i % 2 == 0 else ("with", "without"):
            admin_port = failover._free_run(31000 + 10 * i, 1) if variant == "with" else None
            target = AdminTarget(workdir / f"{variant}-{i}", admin_port)
            try:
                running = target.start(timeout=30.0)
                topic = f"admin-{stamp}-{variant}-{i}"
                workload.create_topic(running.bootstrap, topic, use_create_topics=True, timeout=30.0)
                if admin_port is None:
                    res = workload.produce(running.bootstrap, topic, cfg["records"], RECORD_BYTES, running.pid, 120.0)
                else:
                    with Poller(f"http://{targets.HOST}:{admin_port}", topic) as poller:
                        res = workload.produce(running.bootstrap, topic, cfg["records"], RECORD_BYTES,
                                               running.pid, 120.0)
                    polled = {"statuses": poller.statuses, "errors": poller.errors[:5],
                              "stream_events": poller.stream_events}
                rounds[variant].append(res.as_json())
                _say(f"overhead round {i + 1} {variant} admin app: {res.mb_per_s:.1f} MB/s")
            finally:
                target.stop()
    med = {v: statistics.median(r["mb_per_s"] for r in rs) for v, rs in rounds.items()}
    pairs = [w["mb_per_s"] / wo["mb_per_s"] for w, wo in zip(rounds["with"], rounds["without"], strict=True)]
    return {"rounds": rounds, "median_mb_per_s": med, "with_over_without": med["with"] / med["without"],
            "round_ratios": pairs, "median_round_ratio": statistics.median(pairs),
            "poller_cpu": poller_cpu(workdir / "cpu", stamp, cfg["cpu_seconds"]),
            "poller_last_round": polled, "record_bytes": RECORD_BYTES, "records": cfg["records"]}


def poller_cpu(workdir: Path, stamp: str, seconds: float) -> dict[str, Any]:
    """The broker's CPU, idle but for the poller, against idle: what serving the dashboard's reads
    takes from the event loop that serves Kafka, as a share of one core (a bound on what it can
    take from produce throughput, steadier than throughput's rounds on a shared machine)."""
    admin_port = failover._free_run(33000, 1)
    target = AdminTarget(workdir, admin_port)
    try:
        running = target.start(timeout=30.0)
        topic = f"admin-cpu-{stamp}"
        workload.create_topic(running.bootstrap, topic, use_create_topics=True, timeout=30.0)
        time.sleep(1.0)

        def cpu_over(s: float) -> float:
            c0 = targets.cpu_seconds(running.pid) or 0.0
            time.sleep(s)
            return ((targets.cpu_seconds(running.pid) or 0.0) - c0) / s

        idle = cpu_over(seconds)
        with Poller(f"http://{targets.HOST}:{admin_port}", topic):
            polled = cpu_over(seconds)
        return {"seconds": seconds, "idle_core_share": idle, "polled_core_share": polled,
                "poller_core_share": polled - idle}
    finally:
        target.stop()


def _epoch_start(port: int, topic: str, epoch: int) -> int:
    """The first offset of leader epoch ``epoch`` on the broker at ``port`` (its leader)."""
    R = OffsetForLeaderEpoch.Request
    req = R(replica_id=-1, topics=[R.OffsetForLeaderTopic(topic=topic, partitions=[
        R.OffsetForLeaderTopic.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1,
                                                        leader_epoch=epoch - 1)])])
    resp = failover._call(port, OffsetForLeaderEpoch, req, 4)
    p = resp.topics[0].partitions[0]
    if p.error_code:
        raise failover.BenchError(f"OffsetsForLeaderEpoch: error {p.error_code}")
    return int(p.end_offset)


def leader_moves(workdir: Path, cfg: dict[str, Any], stamp: str) -> dict[str, Any]:
    admin_port = failover._free_run(32000, 1)
    target = AdminCluster(workdir, admin_port)
    url = f"http://{targets.HOST}:{admin_port}"
    out: dict[str, Any] = {}
    try:
        running, ports, _controller = failover.start_cluster(target)
        topic = f"admin-move-{stamp}"
        failover._create(running.bootstrap, topic, [[0, 1, 2]])
        failover._wait(lambda: all(failover.leaders(p, topic).get(0, (-1, -1))[0] == 0 for p in ports.values()),
                       failover.TIMEOUT, "the first leader")
        producer = Producer({"bootstrap.servers": running.bootstrap, **failover.PRODUCER_CONFIG})
        producer.list_topics(topic, timeout=failover.TIMEOUT)
        acks: list[tuple[int, float]] = []  # (offset, ack time), from poll() on this thread
        failed: list[str] = []

        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                acks.append((msg.offset(), time.monotonic()))
            else:
                failed.append(str(err))

        moves: list[dict[str, Any]] = []
        errors: list[str] = []
        stop = threading.Event()

        def mover() -> None:
            try:
                time.sleep(cfg["gap_s"])
                for i in range(cfg["moves"]):
                    to = 1 if i % 2 == 0 else 0
                    t_call = time.monotonic()
                    body, _ = admin_cli.call(url, f"/api/topics/{topic}/partitions/0/leader", method="POST",
                                             payload={"broker": to})
                    moved = json.loads(body)
                    t_done = time.monotonic()
                    start = _epoch_start(ports[to], topic, moved["leader_epoch"])
                    moves.append({"move": i + 1, "to": to, "leader_epoch": moved["leader_epoch"],
                                  "epoch_start_offset": start, "t_call": t_call,
                                  "call_ms": (t_done - t_call) * 1000})
                    time.sleep(cfg["gap_s"])
            except Exception as e:  # noqa: BLE001 - reported; the producer loop stops
                errors.append(f"{type(e).__name__}: {e}")
            finally:
                stop.set()

        thread = threading.Thread(target=mover, daemon=True)
        thread.start()
        value = os.urandom(100)
        next_at = time.monotonic()
        sent = 0
        while not stop.is_set():
            now = time.monotonic()
            if now < next_at:
                producer.poll(next_at - now)
                continue
            try:
                producer.produce(topic, value, partition=0, on_delivery=on_delivery)
                sent += 1
            except BufferError:
                pass
            next_at = max(next_at + 0.001, now - 0.05)
            producer.poll(0)
        left = producer.flush(failover.TIMEOUT)
        thread.join(failover.TIMEOUT)
        if errors:
            raise failover.BenchError(f"moving the leader: {errors[0]}")
        for m in moves:
            firsts = [t for off, t in acks if off >= m["epoch_start_offset"] and t >= m["t_call"]]
            m["first_ack_on_new_leader_ms"] = (min(firsts) - m.pop("t_call")) * 1000 if firsts else None
        rec = [m["first_ack_on_new_leader_ms"] for m in moves if m["first_ack_on_new_leader_ms"] is not None]
        out = {"moves": moves, "sent": sent, "acked": len(acks), "failed": len(failed),
               "failed_errors": sorted(set(failed))[:5], "undelivered_after_flush": left,
               "call_ms_median": statistics.median(m["call_ms"] for m in moves) if moves else None,
               "first_ack_ms_median": statistics.median(rec) if rec else None,
               "first_ack_ms_max": max(rec) if rec else None}
    finally:
        target.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.bench.admin_api", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, records and moves")
    parser.add_argument("--rounds", type=int, default=None, help="throughput rounds per variant")
    parser.add_argument("--moves", type=int, default=None, help="leader moves")
    parser.add_argument("--records", type=int, default=None, help="records per throughput round")
    parser.add_argument("--gap-seconds", type=float, default=None, help="seconds between leader moves")
    parser.add_argument("--cpu-seconds", type=float, default=None,
                        help="seconds of each of the two broker CPU measurements (idle, polled)")
    parser.add_argument("--json", type=Path, default=None, help="results file")
    args = parser.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    if args.rounds is not None:
        cfg["rounds"] = args.rounds
    for key, value in (("moves", args.moves), ("records", args.records), ("gap_s", args.gap_seconds),
                       ("cpu_seconds", args.cpu_seconds)):
        if value is not None:
            cfg[key] = value
    if cfg["rounds"] < 1 or cfg["moves"] < 1 or cfg["records"] < 1 or cfg["gap_s"] <= 0 or cfg["cpu_seconds"] <= 0:
        parser.error("--rounds, --moves and --records must be at least 1, --gap-seconds and --cpu-seconds above 0")
    started = datetime.now(UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    results: dict[str, Any] = {"started_at": started.isoformat(), "config": cfg, "machine": report.machine_info()}
    with tempfile.TemporaryDirectory(prefix="refka-bench-admin-") as tmp:
        results["overhead"] = overhead(Path(tmp), cfg, stamp)
        results["leader_move"] = leader_moves(Path(tmp) / "moves", cfg, stamp)
    results["loadavg_1min_end"] = os.getloadavg()[0]
    o, m = results["overhead"], results["leader_move"]
    print(f"\nrefka bench --admin-api: {os.cpu_count()} CPUs; load average at the end "
          f"{results['loadavg_1min_end']:.2f}\n")
    print("produce 1 KiB, acks=1, MB/s (median of rounds)   without admin app   with app + poller   ratio")
    print(f"{'':48}{o['median_mb_per_s']['without']:>12.1f}{o['median_mb_per_s']['with']:>20.1f}"
          f"{o['with_over_without']:>9.3f}")
    print(f"each round's with/without: {', '.join(f'{r:.3f}' for r in o['round_ratios'])} "
          f"(median {o['median_round_ratio']:.3f})")
    c = o["poller_cpu"]
    print(f"broker CPU, idle {c['idle_core_share'] * 100:.1f}% of a core, with the poller "
          f"{c['polled_core_share'] * 100:.1f}%: the poller costs {c['poller_core_share'] * 100:.1f}% of a core")
    print(f"\nleader moved through the API ({len(m['moves'])} moves): call median {m['call_ms_median']:.0f} ms; "
          f"call to librdkafka's first ack on the new leader: median {m['first_ack_ms_median']:.0f} ms, "
          f"max {m['first_ack_ms_max']:.0f} ms; {m['failed']} failed deliveries")
    path = args.json or RESULTS_DIR / f"{stamp}-admin-api.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, default=str))
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
