"""KIP-253 benchmark: partitions added and removed, and ConsumerGroupPosition calls per second.

    python -m lab.bench.partitions [--quick] [--cluster zookeeper|one-process] [--json PATH]
    python -m lab.bench --partitions [...]      make bench ARGS=--partitions

The cluster: three ``refka serve --zookeeper ... --broker-id N`` processes over a
private ZooKeeper (Debian's package, refka/zookeeper.py), started by the
benchmark, once per ``partition.deletion.check.interval.ms`` measured (a broker
property: the controller reads it at start-up). That is the form README's
"Clusters" gives for a real deployment, and the one where KIP-253's steps go
through a real ZooKeeper, as the seed's fault-tolerance argument assumes; each
broker has its own process (its own core and GIL), so the coordinator's CPU
below is one broker's. ``--cluster one-process`` runs ``refka serve --brokers 3``
instead (three brokers and the controller in one process over the embedded
store; the fallback, said so in the output, where ZooKeeper is not installed).

Three figures, all from refka's own client code (refka/client/connection.py;
requests built with refka.protocol):

1. Expansion and shrink. Per round, a fresh topic of N partitions (100; RF 3:
   every broker hosts every partition, the most work a 3-broker cluster does
   for a change of count, and the replication factor production uses) is grown
   to 2N and shrunk back to N by CreatePartitions sent to the controller's
   broker (as Kafka's admin clients send it). Timed from just before the call to
   the moment every broker has answered Metadata v12 with the new count, polled
   on one connection per broker every 10 ms while the call runs: for the
   expansion, 2N partitions listed, each with a leader, and the topic's
   ``undeleted_partition_count`` tag 2N; for the shrink, the tag N (partitions
   N.. stay listed, marked for deletion, for consumers to drain). The time the
   CreatePartitions answer took is shown too (refka answers once the answering
   broker's own metadata shows the change). Median and max over the rounds.
2. Drain. Between the two, one record is produced (acks=all) to each new
   partition, so that the marked partitions are not empty; after the shrink,
   DeleteRecords to the high watermark of each marked partition goes to its
   leader (all leaders at once). Timed from the last DeleteRecords answer to
   every broker's Metadata listing only partitions 0..N-1 (the controller's
   drain task found them empty, removed them, and sent UpdateMetadata). The
   task runs every interval whatever happens, so expect interval/2 plus the
   removal on average, anything from the removal alone to a whole interval.
   A round starts right after the previous one saw the task's last removal,
   so with the same work before each DeleteRecords every round would meet the
   task at the same point of its cycle (a first run gave 20.6, 20.7 and 23.7 s
   at 30000 ms): round r (from 0) waits r/rounds of the interval before its
   DeleteRecords, which spreads them over the cycle. At the default
   interval (30000 ms) the run does 3 rounds (they wait 0, 10 and 20 s, and
   each drain takes up to 30 s), at 1000 ms 5; ``--rounds`` /
   ``--rounds-default`` change that.
   After each round the topic is deleted, so every round starts on an idle
   cluster.
3. ConsumerGroupPosition (api 10254) calls per second that one coordinator
   answers. A consumer group of N members (10) formed on the wire (JoinGroup v5
   and SyncGroup v3 over BrokerConnection, the leader's SyncGroup carrying a
   consumer-protocol assignment of 3 partitions to each member of a 3N-partition
   topic, so the coordinator knows who consumes what). Then M connections (10),
   connection j speaking for member j mod N, each keep a window of W requests
   (16) in flight for a fixed time (10 s, after 1 s of warm-up): each request
   reports its member's 3 positions and asks for the 3 partitions of the next
   member (6 partitions a call), as a KIP-253 consumer blocked by another's
   partition would. Reported: answers per second, the coordinator process's
   CPU (% of one core), answers per CPU second of the coordinator (on a shared
   machine the coordinator may not get a whole core), and this process's CPU. The members' session timeout is 5
   minutes and they send no heartbeats: the group stays Stable throughout.
   These connections are not BrokerConnection: its per-request work (a
   future, a timeout context, the shield, a full decode) makes this process,
   on the same 2 cores, a bottleneck (tried once, 10 x 16 in flight, load
   average 3.2: 3,400 calls/s with the coordinator at 52% CPU and this process
   at 46%, against 4,900 calls/s, 76% and 25% this way). Each connection
   instead sends the request encoded once by refka.protocol (only the
   correlation id changes) and reads the answers' frames, checking each one's
   correlation id and error code; its first and last answers are decoded in
   full and kept in the JSON. The brokers run with
   ``group.initial.rebalance.delay.ms=500`` (the members join at once; the
   default 3 s, extended as each joins, would only be waited out).

Prints a table of figures (no figure is checked against a target) and writes
everything to lab/bench/results/<UTC timestamp>-partitions.json (or --json).
``--quick`` (a smoke run, ~30 s): only the 1000 ms interval, 1 round, a
10-partition topic, 2 s of ConsumerGroupPosition calls with 3 members.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import struct
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, cast

import uvloop

from lab.bench import failover, report, targets
from refka.client.connection import BrokerConnection
from refka.protocol import ErrorCode, RequestHeader, decode_response_header, encode_request_header, join
from refka.protocol.messages.consumer_group_position import ConsumerGroupPosition
from refka.protocol.messages.create_partitions import CreatePartitions
from refka.protocol.messages.create_topics import CreateTopics
from refka.protocol.messages.delete_records import DeleteRecords
from refka.protocol.messages.delete_topics import DeleteTopics
from refka.protocol.messages.find_coordinator import FindCoordinator
from refka.protocol.messages.join_group import JoinGroup
from refka.protocol.messages.metadata import Metadata
from refka.protocol.messages.produce import Produce
from refka.protocol.messages.sync_group import SyncGroup
from refka.protocol.records import build_batch
from refka.zookeeper import zookeeper_unavailable

DEFAULT_INTERVAL_MS = 30_000
FULL: dict[str, Any] = {"partitions": 100, "replication_factor": 3, "intervals_ms": [DEFAULT_INTERVAL_MS, 1000],
                        "rounds": 5, "rounds_default": 3, "members": 10, "connections": 10, "window": 16,
                        "seconds": 10.0, "warmup_s": 1.0}
QUICK: dict[str, Any] = {**FULL, "partitions": 10, "intervals_ms": [1000], "rounds": 1, "members": 3,
                         "connections": 3, "seconds": 2.0, "warmup_s": 0.5}
PARTITIONS_PER_MEMBER = 3
POLL_S = 0.010  # Metadata polling period per broker: the resolution of the count figures
SETTLE_S = 1.0  # before each timed change: the previous one's follow-up work (followers, checks) done
TIMEOUT = 60.0
SESSION_TIMEOUT_MS = 300_000
CLIENT_ID = "refka-bench-partitions"
RESULTS_DIR = Path(__file__).resolve().parent / "results"


class BenchError(RuntimeError):
    pass


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- the cluster


@dataclass
class Cluster:
    form: str  # "zookeeper" or "one-process"
    ports: dict[int, int]  # node id -> port
    pids: dict[int, int]  # node id -> the process serving it
    stop: Callable[[], None]
    zk: failover.ZooKeeperCluster | None = None  # the "zookeeper" form's processes (kill, restart)


def start_cluster(form: str, workdir: Path, overrides: dict[str, str]) -> Cluster:
    if form == "zookeeper":
        zk = failover.ZooKeeperCluster(workdir, overrides=overrides)
        try:
            zk.start()
        except BaseException:
            zk.stop()
            raise
        return Cluster(form, dict(zk.ports), {n: zk.pid(n) for n in zk.ports}, zk.stop, zk)
    target = failover.ClusterTarget(workdir, 3, overrides, "one-process")
    try:
        running, ports, _controller = failover.start_cluster(target)
    except BaseException:
        target.stop()
        raise
    return Cluster(form, ports, {n: running.pid for n in ports}, target.stop)


# -- requests


def _err(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


async def _connect(port: int) -> BrokerConnection:
    return await BrokerConnection(targets.HOST, port, CLIENT_ID, request_timeout=TIMEOUT).connect()


def _metadata_request(topic: str | None) -> Any:
    R = Metadata.Request
    return R(topics=None if topic is None else [R.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False,
             refka_extensions=True)


async def topic_metadata(conn: BrokerConnection, topic: str) -> Any:
    (t,) = (await conn.request(Metadata, _metadata_request(topic), 12)).topics
    return t


async def create_topic(conn: BrokerConnection, topic: str, partitions: int, rf: int) -> None:
    R = CreateTopics.Request
    resp = await conn.request(CreateTopics, R(topics=[R.CreatableTopic(
        name=topic, num_partitions=partitions, replication_factor=rf, assignments=[], configs=[])],
        timeout_ms=int(TIMEOUT * 1000), validate_only=False))
    t = resp.topics[0]
    if t.error_code:
        raise BenchError(f"CreateTopics {topic}: {_err(t.error_code)} {t.error_message or ''}")


async def delete_topic(conns: dict[int, BrokerConnection], controller: int, topic: str) -> None:
    """DeleteTopics, then until no broker lists the topic (not timed)."""
    R = DeleteTopics.Request
    resp = await conns[controller].request(DeleteTopics, R(topics=[R.DeleteTopicState(name=topic)],
                                                           topic_names=[topic], timeout_ms=int(TIMEOUT * 1000)))
    if resp.responses[0].error_code:
        raise BenchError(f"DeleteTopics {topic}: {_err(resp.responses[0].error_code)}")
    await until_every_broker(conns, topic, lambda t: t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             time.perf_counter(), TIMEOUT, "the topic gone")


async def create_partitions(conn: BrokerConnection, topic: str, count: int) -> tuple[float, int]:
    """CreatePartitions to ``count``; (seconds from the call to its answer, calls refused with
    'try again': the controller had not finished the previous change, the call is repeated)."""
    R = CreatePartitions.Request
    req = R(topics=[R.CreatePartitionsTopic(name=topic, count=count, assignments=None)],
            timeout_ms=int(TIMEOUT * 1000), validate_only=False)
    t0 = time.perf_counter()
    for again in range(20):
        r = (await conn.request(CreatePartitions, req)).results[0]
        if r.error_code == ErrorCode.NONE:
            return time.perf_counter() - t0, again
        if r.error_code != ErrorCode.INVALID_PARTITIONS or "try again" not in (r.error_message or ""):
            break
        await asyncio.sleep(0.1)
    raise BenchError(f"CreatePartitions {topic} to {count}: {_err(r.error_code)} {r.error_message or ''}")


def _by_leader(t: Any, partitions: range) -> dict[int, list[int]]:
    out: dict[int, list[int]] = defaultdict(list)
    for p in t.partitions:
        if p.partition_index in partitions:
            out[p.leader_id].append(p.partition_index)
    if -1 in out or sum(map(len, out.values())) != len(partitions):
        raise BenchError(f"partitions without a leader among {partitions}")
    return out


async def produce_one_each(conns: dict[int, BrokerConnection], t: Any, partitions: range) -> None:
    """One acks=all record to each of ``partitions``, each to its leader."""
    P = Produce.Request
    batch = bytes(build_batch([(None, b"to be drained")]))

    async def to(leader: int, ps: list[int]) -> None:
        resp = await conns[leader].request(Produce, P(transactional_id=None, acks=-1, timeout_ms=int(TIMEOUT * 1000),
                                                      topic_data=[P.TopicProduceData(name=t.name, partition_data=[
                                                          P.TopicProduceData.PartitionProduceData(index=p, records=batch)
                                                          for p in ps])]), 9)
        bad = {p.index: _err(p.error_code) for p in resp.responses[0].partition_responses if p.error_code}
        if bad:
            raise BenchError(f"Produce to {t.name}: {bad}")

    await asyncio.gather(*(to(leader, ps) for leader, ps in _by_leader(t, partitions).items()))


async def delete_records(conns: dict[int, BrokerConnection], t: Any, partitions: range) -> float:
    """DeleteRecords to the high watermark of each of ``partitions``, to every leader at once;
    the perf_counter time of the last answer."""
    R = DeleteRecords.Request
    answered: list[float] = []

    async def to(leader: int, ps: list[int]) -> None:
        resp = await conns[leader].request(DeleteRecords, R(topics=[R.DeleteRecordsTopic(name=t.name, partitions=[
            R.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=p, offset=-1) for p in ps])],
            timeout_ms=int(TIMEOUT * 1000)))
        answered.append(time.perf_counter())
        bad = {p.partition_index: _err(p.error_code) if p.error_code else f"low watermark {p.low_watermark}"
               for p in resp.topics[0].partitions if p.error_code or p.low_watermark != 1}
        if bad:
            raise BenchError(f"DeleteRecords {t.name}: {bad}")

    await asyncio.gather(*(to(leader, ps) for leader, ps in _by_leader(t, partitions).items()))
    return max(answered)


async def until_every_broker(conns: dict[int, BrokerConnection], topic: str, test: Callable[[Any], bool],
                             t0: float, timeout: float, what: str) -> dict[int, float]:
    """Polls each broker's Metadata v12 of ``topic`` every POLL_S until ``test`` holds for its
    answer; node id -> seconds from ``t0`` (perf_counter) to that answer."""
    req = _metadata_request(topic)

    async def one(conn: BrokerConnection) -> float:
        while True:
            (t,) = (await conn.request(Metadata, req, 12)).topics
            now = time.perf_counter()
            if test(t):
                return now - t0
            if now - t0 > timeout:
                raise BenchError(f"{conn.host}:{conn.port} not showing {what} after {timeout:.0f} s")
            await asyncio.sleep(POLL_S)

    seen = await asyncio.gather(*(one(c) for c in conns.values()))
    return dict(zip(conns, seen, strict=True))


def _undeleted(t: Any) -> int:
    counts = t.partition_counts
    return -1 if counts is None else counts.undeleted_partition_count


def _led(t: Any, n: int) -> bool:
    """``n`` partitions listed, each with a leader, and undeleted_partition_count ``n``."""
    return (t.error_code == ErrorCode.NONE and len(t.partitions) == n and _undeleted(t) == n
            and all(p.leader_id >= 0 for p in t.partitions))


# -- one round: create, expand, fill, shrink, drain, delete


async def run_round(conns: dict[int, BrokerConnection], controller: int, topic: str, n: int, rf: int,
                    interval_ms: int, wait_s: float) -> dict[str, Any]:
    """One round on ``topic``; ``wait_s`` is waited before the DeleteRecords."""
    ctrl = conns[controller]
    await create_topic(ctrl, topic, n, rf)
    await until_every_broker(conns, topic, lambda t: _led(t, n) and t.partition_counts.initial_partition_count == n,
                             time.perf_counter(), TIMEOUT, f"{n} partitions")
    out: dict[str, Any] = {"topic": topic}
    for step, count, test in (("expansion", 2 * n, lambda t: _led(t, 2 * n)),
                              ("shrink", n, lambda t: t.error_code == 0 and _undeleted(t) == n)):
        await asyncio.sleep(SETTLE_S)
        t0 = time.perf_counter()
        (answered, again), seen = await asyncio.gather(create_partitions(ctrl, topic, count),
                                                       until_every_broker(conns, topic, test, t0, TIMEOUT, step))
        out[step] = {"ms": max(seen.values()) * 1000, "answer_ms": answered * 1000, "refused_try_again": again,
                     "by_broker_ms": {b: s * 1000 for b, s in seen.items()}}
        if step == "expansion":
            await produce_one_each(conns, await topic_metadata(ctrl, topic), range(n, 2 * n))
    t = await topic_metadata(ctrl, topic)
    if sorted(p.partition_index for p in t.partitions) != list(range(2 * n)):
        raise BenchError(f"{topic}: marked partitions gone before DeleteRecords (not drained by us)")
    await asyncio.sleep(wait_s)
    t_last = await delete_records(conns, t, range(n, 2 * n))
    seen = await until_every_broker(conns, topic, lambda t: sorted(p.partition_index for p in t.partitions)
                                    == list(range(n)), t_last, 2 * interval_ms / 1000 + TIMEOUT, "the drain")
    out["drain"] = {"ms": max(seen.values()) * 1000, "by_broker_ms": {b: s * 1000 for b, s in seen.items()},
                    "waited_before_s": wait_s}
    await delete_topic(conns, controller, topic)
    return out


async def run_rounds(cluster: Cluster, interval_ms: int, rounds: int, cfg: dict[str, Any],
                     stamp: str) -> dict[str, Any]:
    conns = {node: await _connect(port) for node, port in sorted(cluster.ports.items())}
    try:
        controller = (await next(iter(conns.values())).request(Metadata, _metadata_request(None), 12)).controller_id
        samples: list[dict[str, Any]] = []
        for r in range(rounds):
            # Each round starts right after the last one saw a drain task's check, so without a wait
            # every round's DeleteRecords would meet the task at the same point of its cycle (the
            # rounds' fixed work after it): round r waits r/rounds of the interval first.
            sample = await run_round(conns, controller, f"k253-{interval_ms}-{r}-{stamp}", cfg["partitions"],
                                     cfg["replication_factor"], interval_ms, r / rounds * interval_ms / 1000)
            samples.append(sample)
            _say(f"interval {interval_ms} ms, round {r + 1}/{rounds}: expansion {sample['expansion']['ms']:.0f} ms, "
                 f"shrink {sample['shrink']['ms']:.0f} ms, drain {sample['drain']['ms']:.0f} ms")
    finally:
        for c in conns.values():
            await c.close()
    out: dict[str, Any] = {"controller": controller, "rounds": samples}
    for step in ("expansion", "shrink", "drain"):
        ms = [s[step]["ms"] for s in samples]
        out[step] = {"median_ms": statistics.median(ms), "max_ms": max(ms), "min_ms": min(ms),
                     "mean_ms": statistics.fmean(ms), "samples": len(ms)}
        if step != "drain":
            out[step]["answer_median_ms"] = statistics.median(s[step]["answer_ms"] for s in samples)
    return out


# -- ConsumerGroupPosition


def _consumer_bytes(topic: str, partitions: list[int] | None) -> bytes:
    """ConsumerProtocolSubscription v0 of ``topic`` (partitions None), or ConsumerProtocolAssignment
    v0 of its ``partitions``; no user data."""
    head = struct.pack(">hih", 0, 1, len(topic)) + topic.encode()
    if partitions is not None:
        head += struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    return head + struct.pack(">i", -1)


@dataclass
class Group:
    group_id: str
    topic: str
    generation: int
    members: list[str]  # member i consumes partitions owned[i]
    owned: list[list[int]]
    joins: int = 0


async def form_group(port: int, group_id: str, topic: str, n: int) -> Group:
    """n members of ``group_id`` joined and synced on the coordinator at ``port`` (each JoinGroup
    round until all n are in one generation and every SyncGroup is answered)."""
    conns = [await _connect(port) for _ in range(n)]
    J, S = JoinGroup.Request, SyncGroup.Request
    subscription = _consumer_bytes(topic, None)
    owned = [list(range(i * PARTITIONS_PER_MEMBER, (i + 1) * PARTITIONS_PER_MEMBER)) for i in range(n)]
    member_ids = [""] * n
    try:
        for attempt in range(1, 11):
            async def joined(i: int) -> Any:
                req = J(group_id=group_id, session_timeout_ms=SESSION_TIMEOUT_MS, rebalance_timeout_ms=30_000,
                        member_id=member_ids[i], group_instance_id=None, protocol_type="consumer",
                        protocols=[J.JoinGroupRequestProtocol(name="range", metadata=subscription)])
                resp = await conns[i].request(JoinGroup, req, 5)
                if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                    req.member_id = resp.member_id
                    resp = await conns[i].request(JoinGroup, req, 5)
                if resp.member_id:
                    member_ids[i] = resp.member_id
                return resp

            js = await asyncio.gather(*(joined(i) for i in range(n)))
            if any(j.error_code for j in js) or len({j.generation_id for j in js}) != 1:
                continue
            generation, leader = js[0].generation_id, js[0].leader

            async def synced(i: int, generation: int = generation, leader: str = leader) -> Any:
                plan = [S.SyncGroupRequestAssignment(member_id=m, assignment=_consumer_bytes(topic, owned[k]))
                        for k, m in enumerate(member_ids)] if member_ids[i] == leader else []
                return await conns[i].request(SyncGroup, S(group_id=group_id, generation_id=generation,
                                                           member_id=member_ids[i], group_instance_id=None,
                                                           assignments=plan), 3)

            ss = await asyncio.gather(*(synced(i) for i in range(n)))
            if all(s.error_code == ErrorCode.NONE for s in ss):
                return Group(group_id, topic, generation, list(member_ids), owned, attempt)
        raise BenchError(f"group {group_id}: no stable generation of {n} members after 10 join rounds")
    finally:
        for c in conns:
            await c.close()


class PositionCalls(asyncio.Protocol):
    """One connection's ConsumerGroupPosition calls: ``window`` requests in flight, one sent per
    answer received while ``running``. The request is one encoded frame in which only the
    correlation id changes; the answers' frames are counted and checked (correlation id in order,
    error code, the int16 before the final empty tag section)."""

    def __init__(self, prefix: bytes, tail: bytes, window: int) -> None:
        self.prefix, self.tail, self.window = prefix, tail, window
        self.sent = self.answered = 0
        self.errors: Counter[int] = Counter()
        self.running = True
        self.first: bytes | None = None
        self.last: bytes | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._buf = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is one, though not a subclass
        self._send(self.window)

    def _send(self, k: int) -> None:
        if self._transport is None or k <= 0:
            return
        cids = range(self.sent, self.sent + k)
        self._transport.write(b"".join(self.prefix + c.to_bytes(4, "big") + self.tail for c in cids))
        self.sent += k

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        pos, k = 0, 0
        while len(buf) - pos >= 4:
            size = int.from_bytes(buf[pos:pos + 4], "big")
            if len(buf) - pos - 4 < size:
                break
            frame = bytes(buf[pos + 4:pos + 4 + size])
            pos += 4 + size
            if int.from_bytes(frame[:4], "big") != self.answered + k:
                self._lost(BenchError(f"answer {self.answered + k} has correlation id {frame[:4].hex()}"))
                return
            error = int.from_bytes(frame[-3:-1], "big", signed=True)
            if error:
                self.errors[error] += 1
            if self.first is None:
                self.first = frame
            k += 1
        del buf[:pos]
        if k:
            self.last = frame
            self.answered += k
            if self.running:
                self._send(k)
            elif self.answered == self.sent:
                self._finish(None)

    def stop(self) -> None:
        self.running = False
        if self.answered == self.sent:
            self._finish(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost(BenchError(f"connection lost after {self.answered} answers: {exc!r}"))

    def _lost(self, error: BenchError) -> None:
        if self._transport is not None:
            self._transport.close()
        self._finish(error)

    def _finish(self, error: BenchError | None) -> None:
        if not self.done.done():
            if error is None:
                self.done.set_result(None)
            else:
                self.done.set_exception(error)
        if self._transport is not None and error is None:
            self._transport.close()
            self._transport = None


def _position_frame(group: Group, j: int) -> tuple[bytes, bytes]:
    """Connection ``j``'s request as (size + api key + version, what follows the correlation id):
    member j mod N reports its partitions' positions and asks for the next member's."""
    R = ConsumerGroupPosition.Request
    T = R.ConsumerGroupPositionRequestTopic
    P = T.ConsumerGroupPositionRequestPartition
    i = j % len(group.members)
    asked = group.owned[(i + 1) % len(group.members)]
    req = R(group_id=group.group_id, generation_id=group.generation, member_id=group.members[i], topics=[T(
        topic=group.topic, partitions=[P(partition=p, need_position=False, position=1000 + j) for p in group.owned[i]]
        + [P(partition=p, need_position=True, position=-1) for p in asked])])
    api = ConsumerGroupPosition
    header = encode_request_header(RequestHeader(api.key, 0, 0, CLIENT_ID), api.request_header_version(0))
    body = header + join(api.encode_request(req, 0))
    return struct.pack(">i", len(body)) + body[:4], body[8:]


def _decoded(frame: bytes | None) -> Any:
    if frame is None:
        return None
    api = ConsumerGroupPosition
    _cid, pos = decode_response_header(frame, api.response_header_version(0))
    resp, _end = api.decode_response(frame, 0, pos)
    return {"error_code": resp.error_code, "partitions": [
        [p.partition, p.need_position, p.position] for t in resp.topics for p in t.partitions]}


async def position_calls(cluster: Cluster, cfg: dict[str, Any], stamp: str) -> dict[str, Any]:
    n, m = cfg["members"], cfg["connections"]
    any_port = next(iter(cluster.ports.values()))
    conn = await _connect(any_port)
    try:
        topic, group_id = f"k253-cgp-{stamp}", f"k253-cgp-{stamp}"
        await create_topic(conn, topic, n * PARTITIONS_PER_MEMBER, 1)
        deadline = time.perf_counter() + TIMEOUT
        # COORDINATOR_NOT_AVAILABLE until __consumer_offsets, created by the first FindCoordinator, is led.
        while (fc := await conn.request(FindCoordinator, FindCoordinator.Request(key=group_id), 2)).error_code:
            if fc.error_code != ErrorCode.COORDINATOR_NOT_AVAILABLE or time.perf_counter() > deadline:
                raise BenchError(f"FindCoordinator {group_id}: {_err(fc.error_code)}")
            await asyncio.sleep(0.1)
        controller = (await conn.request(Metadata, _metadata_request(None), 12)).controller_id
    finally:
        await conn.close()
    coordinator = fc.node_id
    port = cluster.ports[coordinator]
    t_form = time.perf_counter()
    group = await form_group(port, group_id, topic, n)
    formed_s = time.perf_counter() - t_form
    _say(f"ConsumerGroupPosition: group of {n} formed on broker {coordinator} in {formed_s:.1f} s "
         f"({group.joins} join round(s)); {m} connections x {cfg['window']} in flight")
    loop = asyncio.get_running_loop()
    calls: list[PositionCalls] = []
    for j in range(m):
        prefix, tail = _position_frame(group, j)
        _t, proto = await loop.create_connection(partial(PositionCalls, prefix, tail, cfg["window"]),
                                                 targets.HOST, port)
        calls.append(proto)

    def snapshot() -> tuple[float, int, float | None, float]:
        return (time.perf_counter(), sum(c.answered for c in calls), targets.cpu_seconds(cluster.pids[coordinator]),
                time.process_time())

    await asyncio.sleep(cfg["warmup_s"])
    a = snapshot()
    # A connection's ``done`` completes before the stop only when it failed: then stop at once.
    await asyncio.wait([c.done for c in calls], timeout=cfg["seconds"], return_when=asyncio.FIRST_COMPLETED)
    b = snapshot()
    for c in calls:
        c.stop()
    await asyncio.wait_for(asyncio.gather(*(c.done for c in calls)), TIMEOUT)
    errors: Counter[int] = sum((c.errors for c in calls), Counter())
    if b[1] == a[1]:
        raise BenchError("no ConsumerGroupPosition answer while counting")
    elapsed = b[0] - a[0]
    return {
        "coordinator": coordinator, "controller": controller, "group_formed_s": formed_s, "join_rounds": group.joins,
        "members": n, "connections": m, "window": cfg["window"], "seconds": elapsed,
        "partitions_per_call": 2 * PARTITIONS_PER_MEMBER,
        "calls_per_s": (b[1] - a[1]) / elapsed,
        # Machine-independent-ish: what one core of the coordinator answers (the machine is shared).
        "calls_per_coordinator_cpu_s": None if a[2] is None or b[2] is None or b[2] == a[2]
        else (b[1] - a[1]) / (b[2] - a[2]),
        "coordinator_cpu_percent": None if a[2] is None or b[2] is None else (b[2] - a[2]) / elapsed * 100,
        "client_cpu_percent": (b[3] - a[3]) / elapsed * 100,
        "answers": sum(c.answered for c in calls),
        "errors": {_err(code): k for code, k in errors.items()},
        "first_answer": _decoded(calls[0].first), "last_answer": _decoded(calls[0].last),
    }


# -- one cluster, the table, main


def measure_cluster(form: str, workdir: Path, interval_ms: int, cfg: dict[str, Any], with_positions: bool,
                    stamp: str) -> dict[str, Any]:
    out: dict[str, Any] = {"cluster": form, "interval_ms": interval_ms}
    rounds = cfg["rounds_default"] if interval_ms == DEFAULT_INTERVAL_MS else cfg["rounds"]
    try:
        cluster = start_cluster(form, workdir / f"interval-{interval_ms}", {
            "partition.deletion.check.interval.ms": str(interval_ms),
            # The members join at once: the default 3 s (extended per joining member) is only waiting.
            "group.initial.rebalance.delay.ms": "500"})
    except (BenchError, OSError, RuntimeError, targets.TargetUnavailable) as e:
        out["error"] = f"cluster did not start: {e}"
        _say(out["error"])
        return out
    _say(f"interval {interval_ms} ms: {form} cluster up, brokers {cluster.ports}")

    async def go() -> None:
        # BrokerConnectionError is an OSError; a part that fails is n/a with its reason.
        try:
            out.update(await run_rounds(cluster, interval_ms, rounds, cfg, stamp))
        except (BenchError, OSError, TimeoutError) as e:
            out["error"] = f"{type(e).__name__}: {e}"
            _say(f"interval {interval_ms} ms: {out['error']}")
        if with_positions:
            try:
                out["positions"] = await position_calls(cluster, cfg, stamp)
            except (BenchError, OSError, TimeoutError) as e:
                out["positions"] = {"error": f"{type(e).__name__}: {e}"}
                _say(f"ConsumerGroupPosition: {out['positions']['error']}")

    try:
        uvloop.run(go())
    finally:
        cluster.stop()
    return out


def _f(v: Any, fmt: str = ",.0f") -> str:
    return "-" if v is None else format(v, fmt)


def table(results: dict[str, Any]) -> str:
    cfg = results["config"]
    n = cfg["partitions"]
    cols = results["intervals"]
    names = [f"interval {k} ms" for k in cols]
    rows: list[tuple[str, list[str]] | str] = []

    def row(label: str, get: Callable[[dict[str, Any]], Any], fmt: str = ",.0f") -> None:
        rows.append((label, ["n/a" if "error" in v or "drain" not in v else _f(get(v), fmt) for v in cols.values()]))

    rows.append(f"expansion {n} -> {2 * n} (RF {cfg['replication_factor']}), ms from CreatePartitions to every "
                "broker's Metadata listing them, led")
    row("  median", lambda v: v["expansion"]["median_ms"])
    row("  max", lambda v: v["expansion"]["max_ms"])
    row("  CreatePartitions answered (median)", lambda v: v["expansion"]["answer_median_ms"])
    rows.append(f"shrink {2 * n} -> {n}, ms from CreatePartitions to every broker's undeleted_partition_count {n}")
    row("  median", lambda v: v["shrink"]["median_ms"])
    row("  max", lambda v: v["shrink"]["max_ms"])
    row("  CreatePartitions answered (median)", lambda v: v["shrink"]["answer_median_ms"])
    rows.append(f"drain, ms from the last DeleteRecords answer to every broker listing only 0..{n - 1} "
                "(round r waits r/rounds of the interval before it, meeting the task at spread points of its cycle)")
    row("  median", lambda v: v["drain"]["median_ms"])
    row("  mean", lambda v: v["drain"]["mean_ms"])
    row("  min / max", lambda v: f"{v['drain']['min_ms']:,.0f} / {v['drain']['max_ms']:,.0f}", "s")
    row("  rounds", lambda v: v["drain"]["samples"], "d")
    label_rows = [r for r in rows if isinstance(r, tuple)]
    lw = max(len(r[0]) for r in label_rows)
    cw = [max(len(name), *(len(r[1][i]) for r in label_rows)) for i, name in enumerate(names)]
    head = f"{'':<{lw}}  " + "  ".join(f"{name:>{w}}" for name, w in zip(names, cw, strict=True))
    lines = [head, "-" * len(head)]
    for r in rows:
        if isinstance(r, str):
            lines.append(r)
        else:
            lines.append(f"{r[0]:<{lw}}  " + "  ".join(f"{c:>{w}}" for c, w in zip(r[1], cw, strict=True)))
    for k, v in cols.items():
        if "error" in v:
            lines.append(f"interval {k} ms: n/a: {v['error']}")
    pos = next((v["positions"] for v in cols.values() if "positions" in v), None)
    if pos is not None and "error" in pos:
        lines += ["", f"ConsumerGroupPosition: n/a: {pos['error']}"]
    elif pos is not None:
        lines += ["", f"ConsumerGroupPosition (api 10254) on one coordinator (broker {pos['coordinator']}; controller "
                      f"{pos['controller']}): {pos['members']} members, {pos['connections']} connections x "
                      f"{pos['window']} in flight, {pos['partitions_per_call']} partitions a call, "
                      f"{pos['seconds']:.1f} s"]
        figures = [
            ("calls/s", _f(pos["calls_per_s"])),
            ("coordinator CPU %", _f(pos["coordinator_cpu_percent"])
             + ("  (its process: all three brokers)" if cfg["cluster"] == "one-process" else "")),
            ("calls per coordinator CPU second", _f(pos["calls_per_coordinator_cpu_s"])),
            ("this process's CPU %", _f(pos["client_cpu_percent"])),
            ("answers with an error", f"{sum(pos['errors'].values())}" + (f" {pos['errors']}" if pos["errors"] else "")),
        ]
        fw = max(len(label) for label, _v in figures)
        lines += [f"  {label:<{fw}}  {value}" for label, value in figures]
    elif cfg["positions"]:
        lines += ["", "ConsumerGroupPosition: n/a (its cluster did not start)"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.bench.partitions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run (~30 s): the 1000 ms interval only, 1 round, 10 partitions, "
                             "2 s of ConsumerGroupPosition calls with 3 members")
    parser.add_argument("--cluster", choices=("zookeeper", "one-process"), default=None,
                        help="three processes over a private ZooKeeper (the default, where Debian's package is "
                             "installed) or refka serve --brokers 3")
    parser.add_argument("--topic-partitions", dest="partitions", type=int, default=None,
                        help="the topic's partition count N, grown to 2N and shrunk back (default 100)")
    parser.add_argument("--replication-factor", type=int, default=None, help="the topic's (default 3)")
    parser.add_argument("--intervals", default=None,
                        help="partition.deletion.check.interval.ms values, comma-separated, a cluster each "
                             "(default 30000,1000; 1000 with --quick)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds (fresh topic each) per interval other than the default (default 5)")
    parser.add_argument("--rounds-default", type=int, default=None,
                        help="rounds at the default interval, 30000 ms (default 3: each waits up to 30 s)")
    parser.add_argument("--members", type=int, default=None, help="consumer group members (default 10)")
    parser.add_argument("--connections", type=int, default=None,
                        help="connections sending ConsumerGroupPosition (default 10)")
    parser.add_argument("--window", type=int, default=None, help="requests in flight per connection (default 16)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="how long ConsumerGroupPosition calls are counted (default 10)")
    parser.add_argument("--no-positions", action="store_true", help="skip the ConsumerGroupPosition part")
    parser.add_argument("--json", type=Path, default=None,
                        help="results file (default lab/bench/results/<UTC timestamp>-partitions.json)")
    args = parser.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    for key in ("partitions", "replication_factor", "rounds", "rounds_default", "members", "connections", "window",
                "seconds"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    if args.intervals is not None:
        cfg["intervals_ms"] = [int(v) for v in args.intervals.split(",") if v.strip()]
    if min(cfg["partitions"], cfg["rounds"], cfg["rounds_default"], cfg["members"], cfg["connections"],
           cfg["window"]) < 1 or not cfg["intervals_ms"]:
        parser.error("counts must be at least 1, and at least one interval given")
    cfg["positions"] = not args.no_positions
    unavailable = zookeeper_unavailable()
    form = args.cluster or ("one-process" if unavailable else "zookeeper")
    if form == "zookeeper" and unavailable:
        parser.error(f"--cluster zookeeper: {unavailable}")
    started = datetime.now(UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    results: dict[str, Any] = {
        "started_at": started.isoformat(), "quick": args.quick, "machine": report.machine_info(),
        "config": {**cfg, "benchmark": "partitions", "cluster": form,
                   "cluster_note": None if args.cluster or not unavailable else f"one-process: {unavailable}",
                   "poll_ms": POLL_S * 1000, "settle_s": SETTLE_S, "partitions_per_member": PARTITIONS_PER_MEMBER,
                   "session_timeout_ms": SESSION_TIMEOUT_MS},
        "intervals": {},
    }
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="refka-bench-partitions-") as tmp:
        for k, interval_ms in enumerate(cfg["intervals_ms"]):
            # ConsumerGroupPosition does not depend on the interval: measured on the first cluster.
            results["intervals"][interval_ms] = measure_cluster(form, Path(tmp), interval_ms, cfg,
                                                                cfg["positions"] and k == 0, stamp)
    results["finished_at"] = datetime.now(UTC).isoformat()
    results["loadavg_1min_end"] = os.getloadavg()[0]
    results["wall_seconds"] = time.monotonic() - t0
    m = results["machine"]
    print(f"\nrefka bench --partitions{' --quick' if args.quick else ''}: {m['nproc']} CPUs ({m['cpu_model']}), "
          f"Python {m['python']}")
    print(f"cluster: {'three refka serve processes over a private ZooKeeper' if form == 'zookeeper' else 'refka serve --brokers 3 (one process)'}"
          + (f" ({results['config']['cluster_note']})" if results["config"]["cluster_note"] else "")
          + f"; Metadata polled every {POLL_S * 1000:.0f} ms per broker; load average before/after: "
          f"{m['loadavg_1min']:.2f} / {results['loadavg_1min_end']:.2f}\n")
    print(table(results))
    path = args.json or RESULTS_DIR / f"{stamp}-partitions.json"
    report.write_json(results, path)
    print(f"\nresults: {path}  ({results['wall_seconds']:.0f} s)")
    failed = any("error" in v or "error" in v.get("positions", {}) for v in results["intervals"].values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
