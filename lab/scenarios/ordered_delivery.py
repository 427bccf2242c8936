"""KIP-253's guarantee, shown: keyed records stay in order per key while a
topic's partitions are added and removed under load.

    python -m lab.scenarios.ordered_delivery [--plan 4,8,6,12,9] [--clients refka,confluent]
        [--cluster one-process|zookeeper] [--chaos none|controller|broker] [--out DIR] ...

For each client (``refka``: the reference client, refka/client/; ``confluent``:
confluent-kafka's, the control) on a fresh topic of the cluster it started:

1. a topic of plan[0] partitions (RF 3 on 3 brokers), ``--producers`` producer
   processes (lab/scenarios/workers.py) sending keyed records at ``--rate``
   each, and after ``--step-seconds`` (a backlog) a consumer group of
   ``--consumers`` processes delivering at most ``--consume-rate`` each: the
   defaults (2 x 150 produced, 3 x 120 consumed per second) keep the group
   behind for the whole plan, so each change meets a backlog;
2. 2 s later (the group has joined), each next count of the plan: CreatePartitions to
   it (a larger count expands, a smaller one shrinks, KIP-253), until every
   running broker's Metadata shows the new undeleted_partition_count. A
   shrink is then drained as an operator would: once the group's committed
   offsets of the marked partitions reach their high watermarks, DeleteRecords
   to them, and the controller's drain task removes them (the next expansion
   needs that); then ``--step-seconds`` of load before the next change;
3. with ``--chaos controller`` (the ``zookeeper`` form) the controller process
   is killed -9 just after each CreatePartitions is answered and started again
   ``--restart-after`` seconds later; with ``--chaos broker`` a broker that is
   not the controller, between the steps;
4. the producers stop (each flushes), the consumers go on until every
   acknowledged record was delivered or ``--finish-timeout`` runs out, then stop.

The logs (DIR/<client>/: acks-*.jsonl, deliveries-*.jsonl, callbacks-*.jsonl,
timeline.jsonl) are audited (audit.py) and the results printed as a table and
written to DIR/summary.json: per client, records acknowledged and delivered,
order violations, losses, duplicates, callback misses (refka's client only:
the control has no key listener), latency p50/p99 from send to first delivery,
and per expansion the delay from the CreatePartitions call to the first record
delivered from a new partition. The target: 0 violations and 0 losses with
refka's client; the control shows what a stock client does.

The refka run's deliveries must be complete before its audit means anything,
so a run whose consumers did not deliver every acknowledged record within
``--finish-timeout`` says so (``complete: false``) and exits 1, as does a
refka run with a violation, a loss or a callback miss. A plan that cannot go on
(a change not seen by every broker, a shrink whose marked partitions the
group never consumes within ``--drain-timeout``) stops there: the producers
and consumers are stopped, the logs audited all the same, and the reason is
the client's ``error`` in summary.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.bench import targets
from lab.bench.partitions import Cluster, start_cluster
from lab.scenarios.audit import audit, read_jsonl
from refka.client.connection import BrokerConnection, BrokerConnectionError
from refka.protocol import ErrorCode
from refka.protocol.messages.create_partitions import CreatePartitions
from refka.protocol.messages.create_topics import CreateTopics
from refka.protocol.messages.delete_records import DeleteRecords
from refka.protocol.messages.find_coordinator import KEY_TYPE_GROUP, FindCoordinator
from refka.protocol.messages.list_offsets import LATEST_TIMESTAMP, ListOffsets
from refka.protocol.messages.metadata import Metadata
from refka.protocol.messages.offset_fetch import OffsetFetch

E = ErrorCode
CLIENT_ID = "refka-scenario"
REQUEST_TIMEOUT = 30.0
POLL_S = 0.1
SESSION_TIMEOUT_MS = 6000  # zookeeper.session.timeout.ms of the zookeeper form: a killed broker's id is free sooner
REPO_ROOT = targets.REPO_ROOT


class ScenarioError(RuntimeError):
    pass


def _say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _err(code: int) -> str:
    try:
        return E(code).name
    except ValueError:
        return str(code)


# -- the cluster, as an operator sees it


class Admin:
    """Requests to the brokers by node id, each on its own connection, opened again after a
    broker was killed."""

    def __init__(self, ports: dict[int, int]) -> None:
        self.ports = dict(ports)
        self.down: set[int] = set()
        self._conns: dict[int, BrokerConnection] = {}

    def up(self) -> list[int]:
        return [n for n in sorted(self.ports) if n not in self.down]

    async def call(self, node: int, api: Any, body: Any, version: int | None = None) -> Any:
        conn = self._conns.get(node)
        if conn is None or conn.closed:
            conn = await BrokerConnection(targets.HOST, self.ports[node], CLIENT_ID,
                                          request_timeout=REQUEST_TIMEOUT).connect()
            self._conns[node] = conn
        return await conn.request(api, body, version)

    async def any(self, api: Any, body: Any, version: int | None = None) -> Any:
        last: Exception | None = None
        for node in self.up():
            try:
                return await self.call(node, api, body, version)
            except (BrokerConnectionError, OSError) as e:
                last = e
        raise ScenarioError(f"no broker answered {api.name}: {last}")

    async def close(self) -> None:
        for conn in self._conns.values():
            await conn.close()
        self._conns.clear()

    async def topic(self, topic: str, node: int | None = None) -> tuple[Any, int]:
        """(the topic's Metadata v12 with refka's tags, the controller id)."""
        R = Metadata.Request
        req = R(topics=[R.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False, refka_extensions=True)
        resp = await (self.any(Metadata, req, 12) if node is None else self.call(node, Metadata, req, 12))
        return resp.topics[0], resp.controller_id

    async def controller(self) -> int:
        R = Metadata.Request
        resp = await self.any(Metadata, R(topics=[], allow_auto_topic_creation=False), 12)
        return resp.controller_id

    async def create_topic(self, topic: str, partitions: int, rf: int, configs: dict[str, str]) -> None:
        R = CreateTopics.Request
        req = R(topics=[R.CreatableTopic(name=topic, num_partitions=partitions, replication_factor=rf, assignments=[],
                                         configs=[R.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                                                  for k, v in configs.items()])],
                timeout_ms=int(REQUEST_TIMEOUT * 1000), validate_only=False)
        t = (await self.call(await self.controller(), CreateTopics, req)).topics[0]
        if t.error_code:
            raise ScenarioError(f"CreateTopics {topic}: {_err(t.error_code)} {t.error_message or ''}")

    async def create_partitions(self, topic: str, count: int, timeout: float) -> None:
        """CreatePartitions to the controller until it is taken: a controller that moves or is
        killed meanwhile, or one still finishing the last change ('try again'), is asked again."""
        R = CreatePartitions.Request
        req = R(topics=[R.CreatePartitionsTopic(name=topic, count=count, assignments=None)],
                timeout_ms=int(REQUEST_TIMEOUT * 1000), validate_only=False)
        deadline = time.monotonic() + timeout
        why = ""
        while time.monotonic() < deadline:
            try:
                r = (await self.call(await self.controller(), CreatePartitions, req)).results[0]
            except (BrokerConnectionError, OSError, ScenarioError) as e:
                why = str(e)
                await asyncio.sleep(0.5)
                continue
            if r.error_code == E.NONE:
                return
            why = f"{_err(r.error_code)} {r.error_message or ''}"
            if r.error_code == E.INVALID_PARTITIONS and f"already has {count}" in (r.error_message or ""):
                return  # a first call whose answer was lost to a killed controller was taken
            if r.error_code not in (E.NOT_CONTROLLER, E.REQUEST_TIMED_OUT) and "try again" not in why:
                break
            await asyncio.sleep(0.2)
        raise ScenarioError(f"CreatePartitions {topic} to {count}: {why}")

    async def every_broker(self, topic: str, test: Callable[[Any], bool]) -> bool:
        """``test`` holds for ``topic`` in the Metadata of every broker up, now."""
        for node in self.up():
            try:
                t, _ = await self.topic(topic, node)
            except (BrokerConnectionError, OSError):
                return False
            if not test(t):
                return False
        return True

    async def until_every_broker(self, topic: str, test: Callable[[Any], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        for node in self.up():
            while True:
                try:
                    t, _ = await self.topic(topic, node)
                    if test(t):
                        break
                except (BrokerConnectionError, OSError):
                    pass
                if time.monotonic() > deadline:
                    raise ScenarioError(f"broker {node} not showing {what} after {timeout:.0f} s")
                await asyncio.sleep(POLL_S)

    async def high_watermarks(self, topic: str, partitions: list[int]) -> dict[int, int]:
        t, _ = await self.topic(topic)
        leaders: dict[int, list[int]] = defaultdict(list)
        for p in t.partitions:
            if p.partition_index in partitions and p.leader_id >= 0:
                leaders[p.leader_id].append(p.partition_index)
        R = ListOffsets.Request
        RT = R.ListOffsetsTopic
        out: dict[int, int] = {}
        for leader, ps in leaders.items():
            req = R(replica_id=-1, isolation_level=0, topics=[RT(name=topic, partitions=[
                RT.ListOffsetsPartition(partition_index=p, timestamp=LATEST_TIMESTAMP) for p in ps])])
            resp = await self.call(leader, ListOffsets, req)
            out.update({p.partition_index: p.offset for p in resp.topics[0].partitions if p.error_code == E.NONE})
        return out

    async def committed(self, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
        fc = await self.any(FindCoordinator, FindCoordinator.Request(key=group, key_type=KEY_TYPE_GROUP), 3)
        if fc.error_code != E.NONE:
            return {}
        R = OffsetFetch.Request
        resp = await self.call(fc.node_id, OffsetFetch, R(group_id=group, topics=[
            R.OffsetFetchRequestTopic(name=topic, partition_indexes=partitions)]), 7)
        if resp.error_code != E.NONE:
            return {}
        return {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions
                if p.error_code == E.NONE and p.committed_offset >= 0}

    async def delete_records(self, topic: str, offsets: dict[int, int]) -> None:
        t, _ = await self.topic(topic)
        leaders: dict[int, list[int]] = defaultdict(list)
        for p in t.partitions:
            if p.partition_index in offsets:
                leaders[p.leader_id].append(p.partition_index)
        R = DeleteRecords.Request
        for leader, ps in leaders.items():
            resp = await self.call(leader, DeleteRecords, R(topics=[R.DeleteRecordsTopic(name=topic, partitions=[
                R.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=p, offset=offsets[p]) for p in ps])],
                timeout_ms=int(REQUEST_TIMEOUT * 1000)))
            bad = {p.partition_index: _err(p.error_code) for p in resp.topics[0].partitions if p.error_code}
            if bad:
                raise ScenarioError(f"DeleteRecords {topic}: {bad}")


def _undeleted(t: Any) -> int:
    counts = t.partition_counts
    return len(t.partitions) if counts is None else counts.undeleted_partition_count


# -- one client's run


@dataclass
class Config:
    plan: list[int]
    producers: int = 2
    consumers: int = 3
    rate: float = 150.0
    consume_rate: float = 120.0
    join_seconds: float = 2.0
    keys: int = 100
    step_seconds: float = 4.0
    finish_timeout: float = 120.0
    drain_timeout: float = 120.0
    chaos: str = "none"
    restart_after: float = 3.0
    replication_factor: int = 3
    heartbeat_interval_ms: int = 500
    metadata_max_age_ms: int = 1000
    deletion_check_ms: int = 1000


@dataclass
class Run:
    client: str
    dir: Path
    topic: str
    group: str
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    timeline: list[dict[str, Any]] = field(default_factory=list)

    def event(self, action: str, **fields: Any) -> dict[str, Any]:
        e = {"step": len(self.timeline), "action": action, "topic": self.topic, "at_ms": time.time_ns() // 1_000_000,
             **fields}
        self.timeline.append(e)
        with open(self.dir / "timeline.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(e) + "\n")
        return e


def _worker(run: Run, name: str, argv: list[str]) -> None:
    with open(run.dir / f"{name}.log", "ab") as log:
        run.procs[name] = subprocess.Popen([sys.executable, "-m", "lab.scenarios.workers", *argv], stdout=log,
                                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO_ROOT)


def _stop(run: Run, names: list[str], timeout: float) -> None:
    for n in names:
        if run.procs[n].poll() is None:
            run.procs[n].send_signal(signal.SIGTERM)
    for n in names:
        try:
            run.procs[n].wait(timeout)
        except subprocess.TimeoutExpired:
            _say(f"{run.client}: {n} did not stop within {timeout:.0f} s: killed")
            run.procs[n].kill()
            run.procs[n].wait(5)


class _Progress:
    """What the logs say so far: acknowledged records not yet delivered."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.offsets: dict[Path, int] = {}
        self.acked: set[tuple[str, str, int]] = set()
        self.delivered: set[tuple[str, str, int]] = set()

    def _read(self, pattern: str, into: set[tuple[str, str, int]], skip_errors: bool) -> None:
        for path in sorted(self.run.dir.glob(pattern)):
            with open(path, encoding="utf-8") as f:
                f.seek(self.offsets.get(path, 0))
                while True:
                    line = f.readline()
                    if not line.endswith("\n"):
                        break
                    self.offsets[path] = f.tell()
                    o = json.loads(line)
                    if skip_errors and "error" in o:
                        continue
                    into.add((o["producer"], o["key"], o["seq"]))

    def missing(self) -> int:
        self._read("acks-*.jsonl", self.acked, True)
        self._read("deliveries-*.jsonl", self.delivered, False)
        return len(self.acked - self.delivered)


async def _drain(admin: Admin, run: Run, cfg: Config, marked: list[int]) -> None:
    """Waits for the group to have consumed (committed) the marked partitions to their high
    watermarks, then DeleteRecords to them; the controller's drain task removes them once
    their logs are empty. Records appended just before the mark but replicated only after
    that read (a loaded machine) raise the high watermark past the deleted offset: the
    partition then stays, and the group consumes and this deletes again."""
    deadline = time.monotonic() + cfg.drain_timeout
    settle = max(2.0, 3 * cfg.deletion_check_ms / 1000)
    while True:
        try:
            hw = await admin.high_watermarks(run.topic, marked)
            committed = await admin.committed(run.group, run.topic, marked)
        except (BrokerConnectionError, OSError, ScenarioError):
            hw, committed = {}, {}
        # An empty partition (high watermark 0) has nothing to consume and nothing committed.
        if len(hw) == len(marked) and all(hw[p] == 0 or committed.get(p, -1) >= hw[p] for p in marked):
            run.event("drained", partitions=marked, offsets=hw)
            await admin.delete_records(run.topic, hw)
            removed = time.monotonic() + settle
            while time.monotonic() < removed:
                if await admin.every_broker(run.topic, lambda t: len(t.partitions) == _undeleted(t)):
                    run.event("removed", partitions=marked)
                    return
                await asyncio.sleep(0.5)
        if time.monotonic() > deadline:
            raise ScenarioError(f"{run.topic}: marked partitions {marked} not consumed and removed within "
                                f"{cfg.drain_timeout:.0f} s (committed {committed}, high watermarks {hw})")
        await asyncio.sleep(0.5)


async def _chaos(cluster: Cluster, admin: Admin, run: Run, cfg: Config, what: str) -> None:
    """kill -9 of the controller (or of another broker), started again after restart_after."""
    zk = cluster.zk
    assert zk is not None, "chaos needs the zookeeper form (parse_args refuses it otherwise)"
    controller = await admin.controller()
    victim = controller if what == "controller" else next(n for n in admin.up() if n != controller)
    zk.kill(victim)
    admin.down.add(victim)
    run.event("kill", broker=victim, was_controller=victim == controller)
    _say(f"{run.client}: killed broker {victim} ({'controller' if victim == controller else 'not the controller'})")
    await asyncio.sleep(cfg.restart_after)
    # Started again until it registers: as Kafka's, a broker whose id is still registered by its
    # killed predecessor's ZooKeeper session (until that session expires) refuses to start.
    deadline = time.monotonic() + SESSION_TIMEOUT_MS / 1000 + 60
    starts = 0
    while True:
        if starts == 0 or zk.procs[victim].poll() is not None:
            zk.restart(victim)
            starts += 1
        if await _registered(admin, victim):
            break
        if time.monotonic() > deadline:
            raise ScenarioError(f"broker {victim} not back {deadline:.0f} s after its kill ({starts} starts)")
        await asyncio.sleep(0.5)
    admin.down.discard(victim)
    run.event("restarted", broker=victim)


async def run_client(client: str, cluster: Cluster, out: Path, cfg: Config) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    run = Run(client, out / client, f"ordered-{client}-{tag}", f"ordered-{client}-{tag}")
    run.dir.mkdir(parents=True, exist_ok=True)
    admin = Admin(cluster.ports)
    bootstrap = ",".join(f"{targets.HOST}:{p}" for p in cluster.ports.values())
    rf = min(cfg.replication_factor, len(cluster.ports))
    try:
        run.event("create", partitions=cfg.plan[0])
        await admin.create_topic(run.topic, cfg.plan[0], rf, {"min.insync.replicas": str(min(2, rf))})
        await admin.until_every_broker(run.topic, lambda t: t.error_code == 0 and len(t.partitions) == cfg.plan[0]
                                       and all(p.leader_id >= 0 for p in t.partitions), 60, "the topic")
        common = ["--client", client, "--bootstrap", bootstrap, "--topic", run.topic,
                  "--metadata-max-age-ms", str(cfg.metadata_max_age_ms)]
        consumers = [f"c{i}" for i in range(cfg.consumers)]
        producers = [f"p{i}" for i in range(cfg.producers)]
        for p in producers:
            _worker(run, p, ["produce", *common, "--id", p, "--rate", str(cfg.rate), "--keys", str(cfg.keys),
                             "--out", str(run.dir / f"acks-{p}.jsonl")])
        # The group starts once a backlog has built up, and catches up only slowly (consume_rate
        # just above rate): the partitions change while the group is behind, as under real load.
        await asyncio.sleep(cfg.step_seconds)
        for c in consumers:
            _worker(run, c, ["consume", *common, "--id", c, "--group", run.group, "--rate", str(cfg.consume_rate),
                             "--out", str(run.dir / f"deliveries-{c}.jsonl"),
                             "--callbacks", str(run.dir / f"callbacks-{c}.jsonl"),
                             "--heartbeat-interval-ms", str(cfg.heartbeat_interval_ms)])
        _say(f"{client}: topic {run.topic}, {len(producers)} producers, {len(consumers)} consumers, plan {cfg.plan}")
        await asyncio.sleep(cfg.join_seconds)
        current = cfg.plan[0]
        error = None
        try:
            for count in cfg.plan[1:]:
                action = "expand" if count > current else "shrink"
                run.event(action, partitions_from=current, partitions_to=count)
                _say(f"{client}: {action} {current} -> {count}")
                await admin.create_partitions(run.topic, count, 120)
                if cfg.chaos == "controller":
                    await _chaos(cluster, admin, run, cfg, "controller")
                await admin.until_every_broker(run.topic, lambda t, n=count: t.error_code == 0 and _undeleted(t) == n
                                               and len(t.partitions) >= n, 120, f"{count} undeleted partitions")
                run.event("changed", partitions_to=count)
                if count < current:
                    await _drain(admin, run, cfg, list(range(count, current)))
                current = count
                if cfg.chaos == "broker":
                    await _chaos(cluster, admin, run, cfg, "broker")
                await asyncio.sleep(cfg.step_seconds)
        except ScenarioError as e:
            # The plan could not go on (a group that never consumed the marked partitions, a
            # change not seen everywhere): said in the results, and the logs are audited still.
            error = str(e)
            run.event("plan_failed", error=error)
            _say(f"{client}: the plan stopped: {error}")
        run.event("producers_stopping")
        _stop(run, producers, 90)
        progress = _Progress(run)
        deadline = time.monotonic() + (cfg.finish_timeout if error is None else 10)
        while (missing := progress.missing()) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        run.event("consumers_stopping", missing=missing)
        _say(f"{client}: {len(progress.acked)} acknowledged, {missing} not delivered yet; stopping the consumers")
        _stop(run, consumers, 60)
    finally:
        for name in run.procs:
            if run.procs[name].poll() is None:
                run.procs[name].kill()
        await admin.close()
    result = audit(read_jsonl(sorted(run.dir.glob("deliveries-*.jsonl"))),
                   read_jsonl(sorted(run.dir.glob("acks-*.jsonl"))),
                   read_jsonl(sorted(run.dir.glob("callbacks-*.jsonl"))) if client == "refka" else None,
                   run.timeline)
    result["complete"] = missing == 0
    result["error"] = error
    result["expansion_to_first_new_delivery_ms"] = _first_new_deliveries(run)
    result["topic"] = run.topic
    result["exit_codes"] = {n: p.returncode for n, p in run.procs.items()}
    return result


async def _registered(admin: Admin, node: int) -> bool:
    """``node`` answers Metadata, and the cluster lists it."""
    try:
        resp = await admin.call(node, Metadata, Metadata.Request(topics=[], allow_auto_topic_creation=False), 12)
    except (BrokerConnectionError, OSError):
        return False
    return any(b.node_id == node for b in resp.brokers)


def _first_new_deliveries(run: Run) -> list[int | None]:
    """Per expansion: from its CreatePartitions call to the first record delivered from one of
    the partitions it created."""
    expansions = [e for e in run.timeline if e["action"] == "expand"]
    firsts: dict[int, list[int]] = defaultdict(list)  # partition -> delivery times
    for d in read_jsonl(sorted(run.dir.glob("deliveries-*.jsonl"))):
        firsts[d["partition"]].append(d["delivered_ms"])
    out: list[int | None] = []
    for e in expansions:
        times = [t for p in range(e["partitions_from"], e["partitions_to"]) for t in firsts.get(p, ())
                 if t >= e["at_ms"]]
        out.append(min(times) - e["at_ms"] if times else None)
    return out


# -- the command line


def table(results: dict[str, Any]) -> str:
    rows = [("", *results)]

    def row(label: str, get: Callable[[dict[str, Any]], Any]) -> None:
        rows.append((label, *(str(get(r)) for r in results.values())))

    row("acknowledged", lambda r: r["acked"])
    row("delivered (distinct)", lambda r: r["delivered"])
    row("deliveries", lambda r: r["deliveries"])
    row("complete", lambda r: r["complete"])
    row("plan", lambda r: "done" if r["error"] is None else "stopped (summary.json says why)")
    row("order violations", lambda r: r["violations"])
    row("keys with violations", lambda r: f"{r['keys_with_violations']} of {r['keys']}")
    row("losses", lambda r: r["losses"])
    row("duplicates", lambda r: r["duplicates"])
    row("callback misses", lambda r: "n/a (no key listener)" if r["callback_misses"] is None else r["callback_misses"])
    row("producer errors", lambda r: r["producer_errors"])
    row("moved keys / records", lambda r: f"{r['moved_keys']} / {r['moved_records']}")
    row("latency p50 / p99 ms", lambda r: f"{r['latency_ms']['p50']} / {r['latency_ms']['p99']}")
    row("expansion -> first new ms", lambda r: ", ".join("-" if v is None else str(v)
                                                          for v in r["expansion_to_first_new_delivery_ms"]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m lab.scenarios.ordered_delivery",
                                 description="KIP-253 ordered delivery under partition changes, audited",
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--plan", default="4,8,6,12,9", help="partition counts: the first is created, each next "
                    "expands or shrinks to it (default 4,8,6,12,9)")
    ap.add_argument("--clients", default="refka,confluent", help="refka, confluent or both, in that order")
    ap.add_argument("--cluster", choices=("one-process", "zookeeper"), default="one-process",
                    help="refka serve --brokers 3, or three processes over a private ZooKeeper")
    ap.add_argument("--chaos", choices=("none", "controller", "broker"), default="none",
                    help="kill -9 the controller after each change, or another broker between changes "
                         "(needs --cluster zookeeper)")
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--consumers", type=int, default=3)
    ap.add_argument("--rate", type=float, default=150.0, help="records per second per producer")
    ap.add_argument("--consume-rate", type=float, default=120.0,
                    help="at most records per second per consumer (0: no limit)")
    ap.add_argument("--keys", type=int, default=100)
    ap.add_argument("--step-seconds", type=float, default=4.0, help="load between the changes")
    ap.add_argument("--finish-timeout", type=float, default=120.0)
    ap.add_argument("--drain-timeout", type=float, default=120.0)
    ap.add_argument("--restart-after", type=float, default=3.0)
    ap.add_argument("--deletion-check-ms", type=int, default=500,
                    help="partition.deletion.check.interval.ms of the brokers")
    ap.add_argument("--out", type=Path, help="where the logs go (default: lab/scenarios/runs/<UTC stamp>)")
    a = ap.parse_args(argv)
    a.plan_counts = [int(x) for x in a.plan.split(",")]
    a.client_list = [c for c in a.clients.split(",") if c]
    if len(a.plan_counts) < 1 or any(n < 1 for n in a.plan_counts):
        ap.error("--plan: positive partition counts, e.g. 4,8,6")
    if any(c not in ("refka", "confluent") for c in a.client_list):
        ap.error("--clients: refka and/or confluent")
    if a.chaos != "none" and a.cluster != "zookeeper":
        ap.error("--chaos needs --cluster zookeeper (one process cannot lose one broker)")
    return a


async def _run_all(a: argparse.Namespace, cluster: Cluster, out: Path) -> dict[str, Any]:
    cfg = Config(plan=a.plan_counts, producers=a.producers, consumers=a.consumers, rate=a.rate,
                 consume_rate=a.consume_rate, keys=a.keys, step_seconds=a.step_seconds,
                 finish_timeout=a.finish_timeout, drain_timeout=a.drain_timeout, chaos=a.chaos,
                 restart_after=a.restart_after, deletion_check_ms=a.deletion_check_ms)
    results: dict[str, Any] = {}
    for client in a.client_list:
        results[client] = await run_client(client, cluster, out, cfg)
    return results


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    out = a.out or REPO_ROOT / "lab" / "scenarios" / "runs" / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    overrides = {"partition.deletion.check.interval.ms": str(a.deletion_check_ms),
                 "group.initial.rebalance.delay.ms": "0", "auto.create.topics.enable": "false"}
    if a.cluster == "zookeeper":
        overrides["zookeeper.session.timeout.ms"] = str(SESSION_TIMEOUT_MS)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the cluster and the workers are stopped on the way out
    _say(f"starting a {a.cluster} cluster (logs in {out})")
    cluster = start_cluster(a.cluster, out, overrides)
    t0 = time.monotonic()
    try:
        results = asyncio.run(_run_all(a, cluster, out))
    finally:
        cluster.stop()
    summary = {"plan": a.plan_counts, "cluster": a.cluster, "chaos": a.chaos, "producers": a.producers,
               "consumers": a.consumers, "rate": a.rate, "consume_rate": a.consume_rate, "keys": a.keys,
               "seconds": round(time.monotonic() - t0, 1), "load_average": os.getloadavg(), "results": results}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(table(results))
    print(f"(logs and summary.json in {out})")
    refka = results.get("refka")
    if refka is not None and not (refka["complete"] and refka["error"] is None and refka["violations"] == 0
                                  and refka["losses"] == 0 and refka["callback_misses"] == 0):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
