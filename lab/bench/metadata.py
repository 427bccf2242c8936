"""KIP-526 on the broker: Metadata latency and topic creation at 10 to 100,000 topics.

    python -m lab.bench.metadata [--quick] [--sizes 10,1000,10000,100000]
                                 [--store embedded|zookeeper|both] [--json PATH]
    python -m lab.bench --metadata [...]

For each store and size, a fresh broker (``refka serve``, one broker: the
embedded store with its data dir on disk, ``--memory`` to keep logs and znodes
in memory, or ``--zookeeper`` over a private ZooKeeper, Debian's package), then:

- create: N topics of 1 partition (RF 1) through CreateTopics (max.partitions
  and max.broker.partitions set above N), ``--batch``
  topics per request, one request at a time; the seconds it took and the
  broker process's RSS after (/proc/<pid>/status VmRSS);
- settle: until the broker's CPU use over 0.5 s is below 10% (at most 60 s);
- raw: Metadata v12 latency (p50/p99) for 1 topic, 20 topics and all topics
  from refka's own connection (refka/client/connection.py; the time includes
  decoding the answer in Python, which dominates for all topics);
- confluent-kafka: ``AdminClient.list_topics(topic=t)`` (1 topic) and
  ``list_topics()`` (all topics), p50/p99 (librdkafka has no call that names
  20 topics);
- probe: while a thread sends all-topics requests back to back (answers read,
  not decoded), a second connection sends 1-topic requests back to back; the
  longest and the p99 of those 1-topic answers are how long the broker's event
  loop was held, as other connections see it.

The topics are named ``md-000000``, ``md-000001``, ... Samples are picked at
random among them. Prints a table; writes lab/bench/results/<stamp>-metadata.json.
Figures, never assertions (tests/ checks behaviour).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import struct
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab.bench import failover, probe, report, targets
from refka.client.connection import BrokerConnection
from refka.protocol import RequestHeader, encode_request_header, join
from refka.protocol.messages.create_topics import CreateTopics
from refka.protocol.messages.metadata import Metadata

FULL_SIZES = [10, 1000, 10000, 100000]
QUICK_SIZES = [10, 1000]
RESULTS_DIR = Path(__file__).resolve().parent / "results"
CLIENT_ID = "refka-bench-metadata"
VERSION = 12
TIMEOUT = 600.0
_I32 = struct.Struct(">i")


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def topic_name(i: int) -> str:
    return f"md-{i:06d}"


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def _summary(ms: list[float]) -> dict[str, Any]:
    return {"n": len(ms), "p50_ms": _pct(ms, 0.5), "p99_ms": _pct(ms, 0.99), "max_ms": max(ms) if ms else None}


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


# -- the broker


class Broker:
    """One ``refka serve`` broker on the embedded store or over ZooKeeper."""

    def __init__(self, store: str, workdir: Path, memory: bool = False, topics: int = 0) -> None:
        self.store = store
        self.memory = memory
        # KIP-578's limits (max.broker.partitions is 4,000 by default) above what is created
        limit = str(max(topics, 1) + 1000)
        self.overrides = {"max.partitions": limit, "max.broker.partitions": limit}
        self.topics = topics
        self.workdir = workdir
        self._target: targets.RefkaTarget | None = None
        self._zk: failover.ZooKeeperCluster | None = None
        self.port = 0
        self.pid = 0

    def start(self) -> None:
        if self.store == "zookeeper":
            # ZooKeeper's heap: 256 MB ran out at ~41,000 topics (~6 KB a topic); 20 KB a topic more
            heap = 256 + self.topics // 50
            self._zk = failover.ZooKeeperCluster(self.workdir, brokers=1, overrides=self.overrides, zk_heap_mb=heap)
            try:
                self._zk.start()
            except BaseException:
                self._zk.stop()
                raise
            self.port, self.pid = self._zk.ports[0], self._zk.pid(0)
        else:
            self._target = targets.RefkaTarget(self.workdir, memory=self.memory, overrides=self.overrides)
            running = self._target.start(timeout=60.0)
            self.port, self.pid = int(running.bootstrap.rpartition(":")[2]), running.pid

    @property
    def bootstrap(self) -> str:
        return f"{targets.HOST}:{self.port}"

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except OSError:
            return False
        return True

    def stop(self) -> None:
        if self._zk is not None:
            self._zk.stop()
        if self._target is not None:
            self._target.stop()


def settle(pid: int, timeout: float = 60.0) -> float:
    """Seconds until the broker's CPU use over 0.5 s drops below 10% (the tail of the creation:
    checkpoints, the journal, writeback), so the latencies are the steady state's."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        c0 = targets.cpu_seconds(pid)
        time.sleep(0.5)
        c1 = targets.cpu_seconds(pid)
        if c0 is None or c1 is None or (c1 - c0) / 0.5 < 0.10:
            break
    return time.monotonic() - t0


# -- raw client


def _metadata_request(names: list[str] | None) -> Any:
    R = Metadata.Request
    return R(topics=None if names is None else [R.MetadataRequestTopic(name=n) for n in names],
             allow_auto_topic_creation=False)


async def create_topics(port: int, n: int, batch: int) -> float:
    """Seconds to create md-000000 .. md-<n-1> in requests of ``batch`` topics."""
    conn = await BrokerConnection(targets.HOST, port, CLIENT_ID, request_timeout=TIMEOUT).connect()
    R = CreateTopics.Request
    t0 = time.perf_counter()
    try:
        for start in range(0, n, batch):
            names = [topic_name(i) for i in range(start, min(n, start + batch))]
            req = R(topics=[R.CreatableTopic(name=t, num_partitions=1, replication_factor=1, assignments=[],
                                             configs=[]) for t in names],
                    timeout_ms=int(TIMEOUT * 1000), validate_only=False)
            resp = await conn.request(CreateTopics, req)
            bad = [(t.name, t.error_code) for t in resp.topics if t.error_code]
            if bad:
                raise RuntimeError(f"CreateTopics: {len(bad)} errors, first {bad[:3]}")
            if start // batch % 10 == 9:
                _say(f"  created {start + len(names):,} topics ({time.perf_counter() - t0:.1f} s)")
    finally:
        await conn.close()
    return time.perf_counter() - t0


async def raw_latencies(port: int, n: int, samples: dict[str, int]) -> dict[str, Any]:
    conn = await BrokerConnection(targets.HOST, port, CLIENT_ID, request_timeout=TIMEOUT).connect()
    rng = random.Random(526)
    out: dict[str, Any] = {}
    try:
        for label, count in samples.items():
            ms: list[float] = []
            for _ in range(count):
                if label == "all":
                    names = None
                else:
                    k = min(n, int(label))
                    names = [topic_name(i) for i in rng.sample(range(n), k)]
                req = _metadata_request(names)
                t0 = time.perf_counter()
                resp = await conn.request(Metadata, req, VERSION)
                ms.append((time.perf_counter() - t0) * 1000)
                want = n if names is None else len(names)
                if len(resp.topics) != want or any(t.error_code for t in resp.topics):
                    raise RuntimeError(f"Metadata for {label}: {len(resp.topics)} topics, expected {want}")
            out[label] = _summary(ms)
    finally:
        await conn.close()
    return out


def confluent_latencies(bootstrap: str, n: int, samples: dict[str, int]) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID})
    rng = random.Random(253)
    out: dict[str, Any] = {}
    # connected, versions negotiated; one topic, so librdkafka's own cache does not hold every topic
    # before the 1-topic samples (it did: their p50 was 0.49 ms at 100,000 topics, 0.24 at 10)
    admin.list_topics(topic=topic_name(0), timeout=TIMEOUT)
    for label, count in samples.items():
        if label not in ("1", "all"):
            out[label] = {"n": 0, "note": "librdkafka has no call that names several topics"}
            continue
        ms: list[float] = []
        for _ in range(count):
            topic = None if label == "all" else topic_name(rng.randrange(n))
            t0 = time.perf_counter()
            md = admin.list_topics(topic=topic, timeout=TIMEOUT)
            ms.append((time.perf_counter() - t0) * 1000)
            if len(md.topics) != (n if topic is None else 1):
                raise RuntimeError(f"list_topics({topic}): {len(md.topics)} topics")
        out[label] = _summary(ms)
    return out


# -- the probe: 1-topic latency on one connection while all-topics requests run on another


def _encoded(names: list[str] | None, cid: int) -> bytes:
    header = encode_request_header(RequestHeader(Metadata.key, VERSION, cid, CLIENT_ID),
                                   Metadata.request_header_version(VERSION))
    payload = header + join(Metadata.encode_request(_metadata_request(names), VERSION))
    return _I32.pack(len(payload)) + payload


def _answer(sock: socket.socket) -> int:
    (size,) = _I32.unpack(probe._recv_exactly(sock, 4))
    got = 0
    while got < size:
        chunk = sock.recv(min(1 << 20, size - got))
        if not chunk:
            raise ConnectionError("closed")
        got += len(chunk)
    return size


def probe_while_loaded(port: int, n: int, all_requests: int) -> dict[str, Any]:
    """``all_requests`` all-topics requests back to back from a thread; meanwhile 1-topic
    requests back to back on a second connection."""
    all_req = _encoded(None, 1)
    done = threading.Event()
    both_connected = threading.Barrier(2, timeout=TIMEOUT)
    loader: dict[str, Any] = {"ms": [], "bytes": 0}

    def load() -> None:
        try:
            with socket.create_connection((targets.HOST, port), timeout=TIMEOUT) as s:
                both_connected.wait()
                for _ in range(all_requests):
                    t0 = time.perf_counter()
                    s.sendall(all_req)
                    loader["bytes"] = _answer(s)
                    loader["ms"].append((time.perf_counter() - t0) * 1000)
        except (OSError, threading.BrokenBarrierError) as e:
            loader["error"] = repr(e)
            both_connected.abort()
        finally:
            done.set()

    rng = random.Random(7)
    ms: list[float] = []
    with socket.create_connection((targets.HOST, port), timeout=TIMEOUT) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reqs = [_encoded([topic_name(rng.randrange(n))], 2) for _ in range(64)]
        t = threading.Thread(target=load, daemon=True)
        t.start()
        # the loader starts once the probe is ready too (at small sizes it could otherwise finish
        # before the first probe), and there is at least one probe even if it outlasts the load
        both_connected.wait()
        i = 0
        while not i or not done.is_set():
            t0 = time.perf_counter()
            s.sendall(reqs[i % len(reqs)])
            _answer(s)
            ms.append((time.perf_counter() - t0) * 1000)
            i += 1
        t.join()
    return {"probe": _summary(ms), "all_topics": _summary(loader["ms"]), "answer_bytes": loader["bytes"],
            **({"error": loader["error"]} if "error" in loader else {})}


# -- one size


def samples_for(n: int, quick: bool) -> dict[str, int]:
    few = 100 if quick else 400
    return {"1": few, "20": few, "all": max(3, min(100 if quick else 200, 300_000 // max(n, 1)))}


def run_size(store: str, n: int, quick: bool, batch: int, workdir: Path, memory: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"topics": n, "store": store + (" (--memory)" if memory else "")}
    broker = Broker(store, workdir / f"{store}-{n}", memory, n)
    try:
        broker.start()
        out["rss_mb_empty"] = rss_mb(broker.pid)
        out["create_seconds"] = asyncio.run(create_topics(broker.port, n, batch))
        out["rss_mb"] = rss_mb(broker.pid)
        out["settle_seconds"] = settle(broker.pid)
        _say(f"{store} {n:,}: created in {out['create_seconds']:.1f} s, RSS {out['rss_mb']:.0f} MB")
        samples = samples_for(n, quick)
        out["raw"] = asyncio.run(raw_latencies(broker.port, n, samples))
        _say(f"{store} {n:,}: raw {_fmt_lat(out['raw'])}")
        out["confluent"] = confluent_latencies(broker.bootstrap, n, {"1": samples["1"] // 2,
                                                                     "all": samples["all"]})
        _say(f"{store} {n:,}: confluent {_fmt_lat(out['confluent'])}")
        out["probe"] = probe_while_loaded(broker.port, n, max(3, samples["all"] // 2))
        _say(f"{store} {n:,}: probe {out['probe']['probe']}")
        out["rss_mb_end"] = rss_mb(broker.pid)
    except Exception as e:  # noqa: BLE001 - a size that fails is reported, the others still run
        out["error"] = f"{type(e).__name__}: {e}"
        out["broker_alive"] = broker.alive()
        _say(f"{store} {n:,}: {out['error']}")
    finally:
        broker.stop()
    return out


def _fmt_lat(d: dict[str, Any]) -> str:
    return ", ".join(f"{k}: {v['p50_ms']:.2f}/{v['p99_ms']:.2f} ms" for k, v in d.items() if v.get("n"))


def _f(v: Any, fmt: str = "{:.2f}") -> str:
    return "n/a" if v is None else fmt.format(v)


def table(runs: list[dict[str, Any]]) -> str:
    head = ("store", "topics", "create s", "RSS MB", "raw 1 p50/p99", "raw 20 p50/p99", "raw all p50/p99",
            "ck 1 p50/p99", "ck all p50/p99", "probe p50/p99/max")
    rows = [head]
    for r in runs:
        if "error" in r and "probe" not in r:
            rows.append((r["store"], f"{r['topics']:,}", _f(r.get("create_seconds"), "{:.1f}"),
                         _f(r.get("rss_mb"), "{:.0f}"), f"error: {r['error'][:80]}", "", "", "", "", ""))
            continue

        def pp(d: dict[str, Any] | None, max_too: bool = False) -> str:
            if not d or not d.get("n"):
                return "n/a"
            s = f"{d['p50_ms']:.2f}/{d['p99_ms']:.2f}"
            return s + (f"/{d['max_ms']:.2f}" if max_too else "")

        rows.append((r["store"], f"{r['topics']:,}", _f(r["create_seconds"], "{:.1f}"), _f(r["rss_mb"], "{:.0f}"),
                     pp(r["raw"].get("1")), pp(r["raw"].get("20")), pp(r["raw"].get("all")),
                     pp(r["confluent"].get("1")), pp(r["confluent"].get("all")), pp(r["probe"]["probe"], True)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.bench.metadata", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="sizes 10,1000 and fewer samples")
    parser.add_argument("--sizes", default=None, help="comma-separated topic counts (default 10,1000,10000,100000)")
    parser.add_argument("--store", default="embedded", choices=("embedded", "zookeeper", "both"))
    parser.add_argument("--memory", action="store_true",
                        help="embedded store only: refka serve --memory (logs and znodes in memory: no partition "
                             "log is created on disk, so creation time is the metadata path's alone)")
    parser.add_argument("--batch", type=int, default=1000, help="topics per CreateTopics request (default 1000)")
    parser.add_argument("--json", type=Path, default=None,
                        help="results file (default lab/bench/results/<UTC timestamp>-metadata.json)")
    args = parser.parse_args(argv)
    try:
        sizes = [int(s.replace("_", "")) for s in args.sizes.split(",")] if args.sizes else (
            QUICK_SIZES if args.quick else FULL_SIZES)
    except ValueError:
        parser.error("--sizes takes comma-separated integers")
    if any(s < 1 for s in sizes) or args.batch < 1:
        parser.error("sizes and --batch must be at least 1")
    stores = ["embedded", "zookeeper"] if args.store == "both" else [args.store]
    if args.memory and stores != ["embedded"]:
        parser.error("--memory is for the embedded store only")
    started = datetime.now(UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    results: dict[str, Any] = {"started_at": started.isoformat(), "quick": args.quick, "machine": report.machine_info(),
                               "config": {"sizes": sizes, "stores": stores, "batch": args.batch, "memory": args.memory,
                                          "metadata_version": VERSION}, "runs": []}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="refka-bench-md-") as tmp:
        for store in stores:
            for n in sizes:
                results["runs"].append(run_size(store, n, args.quick, args.batch, Path(tmp), args.memory))
    results["finished_at"] = datetime.now(UTC).isoformat()
    results["loadavg_1min_end"] = os.getloadavg()[0]
    results["wall_seconds"] = time.monotonic() - t0
    ok = {r["topics"]: r for r in results["runs"] if r["store"].startswith(stores[0]) and "raw" in r}
    if ok:
        lo, hi = ok[min(ok)], ok[max(ok)]
        results["raw_1_topic_p50_ratio"] = hi["raw"]["1"]["p50_ms"] / lo["raw"]["1"]["p50_ms"]
    m = results["machine"]
    print(f"\nrefka bench --metadata{' --quick' if args.quick else ''}: {m['nproc']} CPUs ({m['cpu_model']}), "
          f"Python {m['python']}, confluent-kafka {m['confluent_kafka']} / librdkafka {m['librdkafka']}; "
          f"Metadata v{VERSION}, CreateTopics batches of {args.batch}; load average before/after: "
          f"{m['loadavg_1min']:.2f} / {results['loadavg_1min_end']:.2f}\n")
    print(table(results["runs"]))
    if "raw_1_topic_p50_ratio" in results:
        print(f"\nraw 1-topic p50, {max(ok):,} topics / {min(ok):,} topics: {results['raw_1_topic_p50_ratio']:.2f}x")
    path = args.json or RESULTS_DIR / f"{stamp}-metadata.json"
    report.write_json(results, path)
    print(f"\nresults: {path}  ({results['wall_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
