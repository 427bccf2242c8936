"""What real clients do with their metadata, read from refka's recordings (issue 12).

    python -m lab.bench.metadata_clients [--study working-set|stale|both] [--quick] [--json PATH]
    python -m lab.bench --metadata-clients [...]

One ``refka serve --brokers 3 --admin-port P --record FILE`` (disk); every request
of every client is in FILE (recording.py's JSON lines), which is what is counted.
Three producers, each in turn: confluent-kafka (librdkafka), kafka-python and
refka's reference ``Producer``.

- working-set (KIP-526, "the number and size of metadata RPCs"): 1,000 topics of
  one partition; the producer sends one record to each, then for ``--idle-seconds``
  (60; 20 with --quick) only to 10 of them, one record every 100 ms. Each client's
  refresh knob is set to 5 s so that refreshes happen within the run
  (librdkafka ``topic.metadata.refresh.interval.ms``, kafka-python and refka
  ``metadata_max_age_ms``; refka also ``metadata_max_idle_ms`` 10 s, Java's
  ``metadata.max.idle.ms``): the table gives, for the Metadata requests of the
  last half of the 10-topic phase, how many there were and how many topics each
  named ("all" for an all-topics request).
- stale (KIP-232): a topic of one partition on brokers [1, 2] (leader 1). The
  producer sends one record every 20 ms; after 3 s the Metadata of brokers 0 and 1
  is frozen (``POST /api/brokers/N/metadata/freeze``: every broker but the new
  leader answers what it knew before the move, as brokers whose UpdateMetadata
  lags), then the leader moves to broker 2 (AlterPartitionReassignments + a
  preferred ElectLeaders); 12 s later both are thawed. The table gives the
  records acknowledged and failed, the time from the move to the first
  acknowledgement of a record sent after it, the Metadata requests each broker
  answered after the move (brokers 0's and 1's named the old leader), the
  Produce requests answered NOT_LEADER_OR_FOLLOWER, whether the client sent to
  broker 1 again after it had produced to broker 2 (back to the old leader on
  stale metadata), and, for refka's client, the answers it refused as older.

Figures, not a test (tests/integration/test_stale_metadata.py and
test_client_recordings.py check behaviour). Writes
lab/bench/results/<stamp>-metadata-clients.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from lab.bench import failover, report, targets
from refka.client.connection import BrokerConnection
from refka.client.producer import Producer as RefkaProducer
from refka.protocol.messages.create_topics import CreateTopics

RESULTS_DIR = Path(__file__).resolve().parent / "results"
CLIENTS = ("confluent-kafka", "kafka-python", "refka")
TOPICS = 1000
USED = 10
OVERRIDES = {"max.partitions": "5000", "max.broker.partitions": "5000", "auto.create.topics.enable": "false",
             "refka.recording.ring.size": "16"}
TIMEOUT = 60.0
FROZEN = (0, 1)  # the stale study's frozen brokers: all but the new leader


def _say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class StudyCluster(failover.ClusterTarget):
    """``refka serve --brokers 3`` with the admin API and a record file."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, 3, OVERRIDES, "metadata-clients")
        self.admin_port = failover._free_run(31000, 1)
        self.record_path = workdir / "requests.jsonl"

    def _command(self, port: int, data_dir: Path) -> list[str]:
        return super()._command(port, data_dir) + ["--admin-port", str(self.admin_port),
                                                   "--record", str(self.record_path)]

    def admin(self, path: str, method: str = "GET") -> Any:
        req = urllib.request.Request(f"http://{targets.HOST}:{self.admin_port}{path}", method=method)
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
            return json.loads(resp.read())

    def recorded(self, client_id: str, since_ms: float = 0.0) -> list[dict[str, Any]]:
        """The record file's requests of ``client_id`` read at or after ``since_ms`` (wall ms)."""
        time.sleep(1.0)  # the record file is written by a thread
        out = []
        with open(self.record_path) as f:
            for line in f:
                r = json.loads(line)
                if r.get("client_id") == client_id and r["time_ms"] >= since_ms:
                    out.append(r)
        return out


async def _create_topics(port: int, names: list[str], assignment: list[int] | None = None) -> None:
    conn = await BrokerConnection(targets.HOST, port, "metadata-clients-admin", request_timeout=TIMEOUT).connect()
    R = CreateTopics.Request
    try:
        for start in range(0, len(names), 500):
            batch = names[start:start + 500]
            topics = [R.CreatableTopic(
                name=t, num_partitions=-1 if assignment else 1, replication_factor=-1 if assignment else 1,
                assignments=[R.CreatableTopic.CreatableReplicaAssignment(partition_index=0, broker_ids=assignment)]
                if assignment else [], configs=[]) for t in batch]
            resp = await conn.request(CreateTopics, R(topics=topics, timeout_ms=int(TIMEOUT * 1000),
                                                      validate_only=False))
            bad = [(t.name, t.error_code) for t in resp.topics if t.error_code]
            if bad:
                raise failover.BenchError(f"CreateTopics: {bad[:3]}")
    finally:
        await conn.close()


# -- one producer behind one interface: send(topic, value), flush(), close(), counters


class _Sender:
    acked = 0
    failed = 0
    first_ack_after: float | None = None  # monotonic time of the first ack of a record sent after `mark`
    mark = float("inf")

    def _acked(self, sent: float) -> None:
        self.acked += 1
        if sent >= self.mark and self.first_ack_after is None:
            self.first_ack_after = time.monotonic()


class ConfluentSender(_Sender):
    def __init__(self, bootstrap: str, client_id: str) -> None:
        self.p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                           "topic.metadata.refresh.interval.ms": 5000, "message.timeout.ms": 30000})

    def send(self, topic: str, value: bytes) -> None:
        sent = time.monotonic()

        def cb(err: Any, _msg: Any) -> None:
            if err is None:
                self._acked(sent)
            else:
                self.failed += 1
        self.p.produce(topic, value, callback=cb)
        self.p.poll(0)

    def flush(self) -> None:
        self.p.flush(TIMEOUT)

    def close(self) -> None:
        self.p.flush(TIMEOUT)


class KafkaPythonSender(_Sender):
    def __init__(self, bootstrap: str, client_id: str) -> None:
        from kafka import KafkaProducer

        self.p = KafkaProducer(bootstrap_servers=bootstrap.split(","), client_id=client_id, linger_ms=5,
                               metadata_max_age_ms=5000, retries=1000, request_timeout_ms=30000)

    def send(self, topic: str, value: bytes) -> None:
        sent = time.monotonic()
        fut = self.p.send(topic, value)
        fut.add_callback(lambda _m: self._acked(sent))
        fut.add_errback(lambda _e: setattr(self, "failed", self.failed + 1))

    def flush(self) -> None:
        self.p.flush(TIMEOUT)

    def close(self) -> None:
        self.p.close(TIMEOUT)


class RefkaSender(_Sender):
    """refka's asyncio Producer on a loop in a thread, driven from this one."""

    def __init__(self, bootstrap: str, client_id: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.p = RefkaProducer(bootstrap_servers=bootstrap, client_id=client_id, linger_ms=5,
                               metadata_max_age_ms=5000, metadata_max_idle_ms=10000)
        self._call(self.p.start())

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(TIMEOUT * 2)

    def send(self, topic: str, value: bytes) -> None:
        sent = time.monotonic()

        async def go() -> None:
            fut = await self.p.send(topic, value)

            def done(f: asyncio.Future[Any]) -> None:
                if f.exception() is None:
                    self._acked(sent)
                else:
                    self.failed += 1
            fut.add_done_callback(done)
        self._call(go())

    def flush(self) -> None:
        self._call(self.p.flush())

    def close(self) -> None:
        self._call(self.p.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)

    @property
    def stale_answers(self) -> int:
        return self.p._cluster.metadata.stale_answers


SENDERS: dict[str, Callable[[str, str], _Sender]] = {
    "confluent-kafka": ConfluentSender, "kafka-python": KafkaPythonSender, "refka": RefkaSender}


# -- the studies


def working_set(cluster: StudyCluster, bootstrap: str, port: int, client: str, idle_seconds: float,
                stamp: str, topics: int = TOPICS, used: int = USED) -> dict[str, Any]:
    names = [f"ws-{stamp[-6:]}-{client}-{i:04d}" for i in range(topics)]
    t0 = time.monotonic()
    asyncio.run(_create_topics(port, names))
    _say(f"working-set {client}: {topics:,} topics created in {time.monotonic() - t0:.1f} s")
    client_id = f"ws-{client}"
    s = SENDERS[client](bootstrap, client_id)
    try:
        for t in names:
            s.send(t, b"x")
        s.flush()
        _say(f"working-set {client}: one record to each of {topics:,} topics; now only to {used}")
        start_ms = time.time() * 1000
        half_ms = start_ms + idle_seconds * 500
        end = time.monotonic() + idle_seconds
        i = 0
        while time.monotonic() < end:
            s.send(names[i % used], b"y")
            i += 1
            time.sleep(0.1)
        s.flush()
    finally:
        s.close()
    meta = [r for r in cluster.recorded(client_id, half_ms) if r["api"] == "Metadata"]
    sizes = [topics if r["topics"] == "all" else len(r["topics"]) for r in meta]
    named = sorted(sizes)
    return {"client": client, "software": next((f"{r['software_name']} {r['software_version']}" for r in meta
                                                if r.get("software_name")), ""),
            "acked": s.acked, "failed": s.failed, "metadata_requests": len(meta),
            "all_topics_requests": sum(r["topics"] == "all" for r in meta),
            "topics_named_median": named[len(named) // 2] if named else None,
            "topics_named_max": max(named) if named else None,
            "window_seconds": idle_seconds / 2, "topics": topics, "used": used}


def stale(cluster: StudyCluster, bootstrap: str, ports: dict[int, int], controller: int, client: str,
          stamp: str, move_seconds: float) -> dict[str, Any]:
    topic = f"stale-{stamp[-6:]}-{client}"
    asyncio.run(_create_topics(ports[0], [topic], assignment=[1, 2]))
    failover._wait(lambda: all(failover.leaders(p, topic).get(0, (-1, 0))[0] == 1 for p in ports.values()),
                   TIMEOUT, "broker 1 to lead everywhere")
    client_id = f"stale-{client}"
    s = SENDERS[client](bootstrap, client_id)
    stop = threading.Event()
    error: list[str] = []

    def pump() -> None:
        try:
            i = 0
            while not stop.is_set():
                s.send(topic, b"%d" % i)
                i += 1
                time.sleep(0.02)
        except Exception as e:  # noqa: BLE001 (reported, not raised: a client's trouble is a finding)
            error.append(f"{type(e).__name__}: {e}")

    th = threading.Thread(target=pump, daemon=True)
    th.start()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        time.sleep(3.0)
        for frozen_broker in FROZEN:
            cluster.admin(f"/api/brokers/{frozen_broker}/metadata/freeze", "POST")
        failover.reassign(ports[controller], topic, {0: [2, 1]})
        s.mark = time.monotonic()
        move_ms = time.time() * 1000
        admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(TIMEOUT)
        failover._wait(lambda: failover.leaders(ports[2], topic)[0][0] == 2, TIMEOUT, "broker 2 to lead")
        frozen_leader = failover.leaders(ports[1], topic)[0][0]  # what the old leader's Metadata still says
        time.sleep(move_seconds)
    finally:
        stop.set()
        th.join(TIMEOUT)
        states = [cluster.admin(f"/api/brokers/{n}/metadata/thaw", "POST") for n in FROZEN]
        try:
            s.close()
        except Exception as e:  # noqa: BLE001
            error.append(f"close: {type(e).__name__}: {e}")
    rows = cluster.recorded(client_id, move_ms)
    meta = {b: sum(1 for r in rows if r["api"] == "Metadata" and r["broker"] == b) for b in range(3)}
    not_leader = sum(1 for r in rows if r["api"] == "Produce" and "NOT_LEADER_OR_FOLLOWER" in r["error_codes"])
    produce_to = [r["broker"] for r in sorted(rows, key=lambda r: r["time_ms"]) if r["api"] == "Produce"]
    went_back = 2 in produce_to and 1 in produce_to[produce_to.index(2):]
    return {"client": client, "acked": s.acked, "failed": s.failed,
            "recovery_ms": (s.first_ack_after - s.mark) * 1000 if s.first_ack_after is not None else None,
            "metadata_after_move": meta, "not_leader_answers": not_leader,
            "produce_to_old_leader_after_new": went_back, "frozen_answer_leader": frozen_leader,
            "stale_answers_refused": getattr(s, "stale_answers", None), "error": "; ".join(error) or None,
            "thawed": not any(st["frozen"] for st in states)}


def _f(v: Any) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if isinstance(v, float) else str(v)


def tables(results: dict[str, Any]) -> str:
    out = []
    if results.get("working_set"):
        first = results["working_set"][0]
        out.append(f"working-set: Metadata requests of the last {first['window_seconds']:.0f} s "
                   f"of producing to {first['used']} of {first['topics']:,} topics")
        out.append(f"{'client':<16} {'software':<28} {'requests':>8} {'all-topics':>10} {'named p50':>9} "
                   f"{'named max':>9} {'acked':>6} {'failed':>6}")
        for r in results["working_set"]:
            out.append(f"{r['client']:<16} {r['software']:<28} {r['metadata_requests']:>8} "
                       f"{r['all_topics_requests']:>10} {_f(r['topics_named_median']):>9} "
                       f"{_f(r['topics_named_max']):>9} {r['acked']:>6} {r['failed']:>6}")
    if results.get("stale"):
        out.append("")
        out.append("stale: the Metadata of brokers 0 and 1 frozen, the leader moved 1 -> 2 (Metadata requests per "
                   "broker after the move)")
        out.append(f"{'client':<16} {'acked':>6} {'failed':>6} {'recovery ms':>11} {'md b0/b1/b2':>12} "
                   f"{'NOT_LEADER':>10} {'back to 1':>9} {'refused':>7}  error")
        for r in results["stale"]:
            m = r["metadata_after_move"]
            out.append(f"{r['client']:<16} {r['acked']:>6} {r['failed']:>6} {_f(r['recovery_ms']):>11} "
                       f"{m[0]:>4}/{m[1]}/{m[2]:<5} {r['not_leader_answers']:>10} "
                       f"{'yes' if r['produce_to_old_leader_after_new'] else 'no':>9} "
                       f"{_f(r['stale_answers_refused']):>7}  {r['error'] or ''}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.bench.metadata_clients", description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", choices=["working-set", "stale", "both"], default="both")
    parser.add_argument("--clients", default=",".join(CLIENTS), help=f"subset of {','.join(CLIENTS)}")
    parser.add_argument("--quick", action="store_true", help="a 20 s 10-topic phase and 6 s after the move")
    parser.add_argument("--idle-seconds", type=float, default=None, help="the 10-topic phase (default 60)")
    parser.add_argument("--topics", type=int, default=TOPICS, help=f"topics of the working-set study ({TOPICS})")
    parser.add_argument("--used", type=int, default=USED, help=f"of which the producer keeps using ({USED})")
    parser.add_argument("--move-seconds", type=float, default=None,
                        help="the stale study's time after the move (12; 6 with --quick)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    clients = [c for c in args.clients.split(",") if c]
    if not clients or any(c not in CLIENTS for c in clients):
        parser.error(f"--clients: a subset of {','.join(CLIENTS)}")
    if not 1 <= args.used <= args.topics:
        parser.error("--used must be between 1 and --topics")
    idle = args.idle_seconds or (20.0 if args.quick else 60.0)
    started = datetime.now(UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    results: dict[str, Any] = {"started_at": started.isoformat(), "machine": report.machine_info(),
                               "config": {"study": args.study, "clients": clients, "idle_seconds": idle,
                                          "topics": args.topics, "used": args.used, "overrides": OVERRIDES}}
    with tempfile.TemporaryDirectory(prefix="refka-bench-mdclients-") as tmp:
        cluster = StudyCluster(Path(tmp))
        try:
            _running, ports, controller = failover.start_cluster(cluster)
            bootstrap = ",".join(f"{targets.HOST}:{p}" for p in sorted(ports.values()))
            _say(f"cluster up: brokers {ports}, admin port {cluster.admin_port}")
            if args.study in ("working-set", "both"):
                results["working_set"] = [working_set(cluster, bootstrap, ports[0], c, idle, stamp, args.topics,
                                                      args.used) for c in clients]
            if args.study in ("stale", "both"):
                move = args.move_seconds or (6.0 if args.quick else 12.0)
                results["stale"] = [stale(cluster, bootstrap, ports, controller, c, stamp, move) for c in clients]
        except (failover.BenchError, OSError, RuntimeError) as e:
            results["error"] = f"{type(e).__name__}: {e}"
            _say(results["error"])
        finally:
            cluster.stop()
    results["loadavg_1min_end"] = os.getloadavg()[0]
    m = results["machine"]
    print(f"\nrefka bench --metadata-clients: {m['nproc']} CPUs, refka {m['refka']}, confluent-kafka "
          f"{m['confluent_kafka']} / librdkafka {m['librdkafka']}; load average {m['loadavg_1min']:.2f} / "
          f"{results['loadavg_1min_end']:.2f}\n")
    print(tables(results))
    path = args.json or RESULTS_DIR / f"{stamp}-metadata-clients.json"
    report.write_json(results, path)
    print(f"\nresults: {path}")
    return 1 if "error" in results else 0


if __name__ == "__main__":
    raise SystemExit(main())
