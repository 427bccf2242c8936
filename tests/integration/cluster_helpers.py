"""Helpers for clusters: a raw Kafka connection, three ``refka serve``
processes over a private ZooKeeper (one per broker id, each with its own
rack) and three brokers in this process (``InProcessCluster``), so a test can
stop, kill, restart or SIGTERM one broker; metadata read over the wire; the
divergent-tail set-up of the failover tests."""

from __future__ import annotations

import asyncio
import signal
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from refka.broker.config import BrokerConfig
from refka.broker.server import Cluster, broker_configs
from refka.client.connection import connect
from refka.protocol import RequestHeader, decode_response_header, encode_request_header, join
from refka.protocol.api import Api
from refka.protocol.messages.metadata import Metadata
from refka.protocol.messages.produce import Produce
from refka.protocol.records import build_batch
from tests.brokers import BrokerProcess, free_port_block
from tests.waiting import wait_until
from tests.zk import ZooKeeperServer

TIMEOUT = 30.0
_I32 = struct.Struct(">i")
# Replication settings that make followers react in a fraction of a second.
FAST = {"replica.fetch.wait.max.ms": "100", "replica.fetch.backoff.ms": "100",
        "replica.lag.time.max.ms": "10000"}



class Raw:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.cid = 100

    def close(self) -> None:
        self.sock.close()

    def _exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("connection closed")
            out += chunk
        return bytes(out)

    def call_bytes(self, request: bytes) -> bytes:
        """Sends ``request`` (a whole frame, size prefix included) as it is; the response frame."""
        self.sock.sendall(request)
        (n,) = _I32.unpack(self._exactly(4))
        return self._exactly(n)

    def call_raw(self, api: Api, body: Any, version: int) -> tuple[Any, bytes]:
        """The decoded response and its body bytes (the frame after the response header)."""
        self.cid += 1
        header = encode_request_header(
            RequestHeader(api.key, version, self.cid, "kip951-test"), api.request_header_version(version)
        )
        payload = header + join(api.encode_request(body, version))
        self.sock.sendall(_I32.pack(len(payload)) + payload)
        (n,) = _I32.unpack(self._exactly(4))
        frame = self._exactly(n)
        cid, pos = decode_response_header(frame, api.response_header_version(version))
        assert cid == self.cid
        resp, end = api.decode_response(frame, version, pos)
        assert end == len(frame), f"{api.name} v{version}: {len(frame) - end} bytes left"
        return resp, frame[pos:]



def metadata(port: int, *topics: str) -> Any:
    """Metadata v12 for ``topics`` from the broker at ``port``, refka's tagged fields asked for."""
    raw = Raw(port)
    try:
        md, _ = raw.call_raw(Metadata, Metadata.Request(
            topics=[Metadata.Request.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False, refka_extensions=True), 12)
    finally:
        raw.close()
    return md


class ZkCluster:
    """``n`` (3) ``refka serve`` processes over a private ZooKeeper, broker ids
    0..n-1, racks zone-0..; a stopped or killed one starts again on its port."""

    def __init__(self, zookeeper: ZooKeeperServer, root: Path, overrides: dict[str, str] | None = None,
                 n: int = 3) -> None:
        self.connect = f"{zookeeper.connect}/c{uuid.uuid4().hex[:8]}"
        self.procs = [
            BrokerProcess(root / f"data{i}", overrides={"broker.rack": f"zone-{i}", **(overrides or {})},
                          extra_args=["--zookeeper", self.connect, "--broker-id", str(i)])
            for i in range(n)
        ]

    def start(self) -> ZkCluster:
        for p in self.procs:
            p.start()
        return self

    def stop(self) -> None:
        for p in self.procs:
            p.stop()

    def restart(self, node_id: int) -> None:
        self.procs[node_id].start(timeout=60)

    def running(self) -> list[int]:
        return [i for i, p in enumerate(self.procs) if p.proc is not None and p.proc.poll() is None]

    def port(self, node_id: int) -> int:
        return self.procs[node_id].port  # type: ignore[return-value]

    @property
    def bootstrap(self) -> str:
        return ",".join(self.procs[i].bootstrap for i in self.running())

    def bootstrap_without(self, node_id: int) -> str:
        return ",".join(self.procs[i].bootstrap for i in self.running() if i != node_id)

    def create_topic(self, topic: str, assignment: list[int] | list[list[int]]) -> None:
        """One partition per entry: a broker id (one replica) or a replica list."""
        replicas = [[a] if isinstance(a, int) else list(a) for a in assignment]
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        fut = admin.create_topics([NewTopic(topic, num_partitions=len(replicas), replica_assignment=replicas)],
                                  operation_timeout=TIMEOUT)[topic]
        fut.result(TIMEOUT)

    def wait_leader(self, topic: str, partition: int, leader: int, min_epoch: int = 0) -> tuple[bytes, int]:
        """Poll every broker until each names ``leader`` (epoch >= min_epoch); (topic id, epoch)."""
        seen: list[tuple[Any, Any, Any]] = []

        def agreed() -> tuple[bytes, int] | None:
            seen.clear()
            for node_id in self.running():
                (t,) = metadata(self.port(node_id), topic).topics
                parts = {p.partition_index: p for p in t.partitions}
                p = parts.get(partition)
                seen.append((t.topic_id, p.leader_id if p else None, p.leader_epoch if p else None))
            if all(s[1] == leader and s[2] is not None and s[2] >= min_epoch for s in seen) \
                    and len({s[2] for s in seen}) == 1:
                return seen[0][0], seen[0][2]
            return None

        return wait_until(agreed, timeout=TIMEOUT, interval=0.05,
                          message=lambda: f"{topic}-{partition} led by {leader}; brokers see {seen}")


def create_rf3_topic(bootstrap: str, topic: str, partitions: int = 1, **config: str) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap})
    fut = a.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2", **config})],
                          operation_timeout=TIMEOUT)[topic]
    fut.result(TIMEOUT)


def partition_metadata(bootstrap: str, topic: str) -> dict[int, Any]:
    """partition -> Metadata v12 partition (leader_id, leader_epoch, isr_nodes), asked over the wire."""

    async def go() -> dict[int, Any]:
        conn = await connect(bootstrap, "replication-test")
        try:
            R = Metadata.Request
            resp = await conn.request(Metadata, R(topics=[R.MetadataRequestTopic(name=topic)],
                                                  allow_auto_topic_creation=False), version=12)
        finally:
            await conn.close()
        (t,) = resp.topics
        assert t.error_code == 0, t.error_code
        return {p.partition_index: p for p in t.partitions}

    result: dict[int, Any] = asyncio.run(asyncio.wait_for(go(), TIMEOUT))
    return result


def controller_id(bootstrap: str) -> int:
    async def go() -> int:
        conn = await connect(bootstrap, "replication-test")
        try:
            resp = await conn.request(Metadata, Metadata.Request(topics=[], allow_auto_topic_creation=False),
                                      version=12)
        finally:
            await conn.close()
        return int(resp.controller_id)

    result: int = asyncio.run(asyncio.wait_for(go(), TIMEOUT))
    return result


def log_file(data_dir: Path, broker_id: int, topic: str, partition: int = 0) -> Path:
    return data_dir / f"broker-{broker_id}" / f"{topic}-{partition}" / "00000000000000000000.log"


def stored_batches(path: Path) -> bytes:
    """The record batches of a segment file, without the zeroed space a running
    broker keeps ahead of its writes (each batch: base offset, length, rest)."""
    data = path.read_bytes()
    pos = 0
    while pos + 12 <= len(data):
        length = int.from_bytes(data[pos + 8:pos + 12], "big")
        if length <= 0 or pos + 12 + length > len(data):
            break
        pos += 12 + length
    return data[:pos]


class InProcessCluster:
    """``refka.broker.server.Cluster`` (``n`` brokers, embedded store) on its own event
    loop in a thread, so a test can stop and start a broker while clients run, and
    look at broker state on the loop that owns it. With ``inter_broker_listener``, each
    broker has a CLIENT listener (the one ``bootstrap`` names) and that one, as its
    ``inter.broker.listener.name``."""

    def __init__(self, data_dir: Path, n: int = 3, overrides: dict[str, str] | None = None, *,
                 inter_broker_listener: str | None = None) -> None:
        base = BrokerConfig.load(None, environ={}, overrides={**FAST, **(overrides or {}), "log.dirs": str(data_dir)})
        if inter_broker_listener is None:
            self.configs = broker_configs(base, n, "127.0.0.1", free_port_block(n), data_dir)
        else:
            port = free_port_block(2 * n)
            self.configs = [base.with_overrides(**{
                "broker.id": str(i),
                "listeners": f"CLIENT://127.0.0.1:{port + i},{inter_broker_listener}://127.0.0.1:{port + n + i}",
                "inter.broker.listener.name": inter_broker_listener,
                "log.dirs": str(data_dir / f"broker-{i}"),
            }) for i in range(n)]
        self.cluster = Cluster(self.configs, memory=False, data_dir=data_dir)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.call(self.cluster.start())

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def on_loop(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` run on the cluster's loop (broker state belongs to it)."""
        async def go() -> Any:
            return fn()
        return self.call(go())

    def partition(self, node_id: int, topic: str, index: int = 0) -> Any:
        """Broker ``node_id``'s Partition object (None if it is not running or has none)."""
        b = next((b for b in self.cluster.brokers if b.node_id == node_id), None)
        return b.replicas.get(topic, index) if b is not None else None

    def stop_broker(self, node_id: int) -> None:
        """A failure, not a controlled shutdown."""
        self.call(self.cluster.stop_broker(self.cluster.broker(node_id), controlled=False))

    def start_broker(self, node_id: int) -> None:
        self.call(self.cluster.start_broker(self.configs[node_id]))

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def close(self) -> None:
        try:
            self.call(self.cluster.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


def produce_acks1(port: int, topic: str, values: list[bytes]) -> None:
    """One acks=1 Produce of ``values`` to partition 0 of the broker at ``port``
    (our raw client: only that broker is asked, whatever the others do)."""
    P = Produce.Request
    req = P(transactional_id=None, acks=1, timeout_ms=int(TIMEOUT * 1000), topic_data=[
        P.TopicProduceData(name=topic, partition_data=[P.TopicProduceData.PartitionProduceData(
            index=0, records=bytes(build_batch([(None, v) for v in values])))])])
    raw = Raw(port)
    try:
        resp, _ = raw.call_raw(Produce, req, 9)
    finally:
        raw.close()
    (p,) = resp.responses[0].partition_responses
    assert p.error_code == 0, p.error_code


def leave_divergent_tail_and_kill(cluster: ZkCluster, leader: int, topic: str) -> None:
    """SIGKILL the leader after it appended records its followers never fetched.

    The followers are paused (SIGSTOP) long enough for their pending fetches to
    be answered, then the leader takes 20 acks=1 records (``acks1-<i>``) only it
    will ever have (whatever an acks=all producer sends meanwhile is not
    acknowledged, so retried on the next leader), and dies. The followers
    resume; one of them leads at a new epoch and the dead broker's tail has
    diverged from it. The pause stays far below replica.lag.time.max.ms, so the
    followers are still in the ISR and one of them can lead."""
    followers = [b for i, b in enumerate(cluster.procs) if i != leader]
    for b in followers:
        b.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
    try:
        time.sleep(0.5)  # > replica.fetch.wait.max.ms: no fetch of theirs is still open
        produce_acks1(cluster.port(leader), topic, [b"acks1-%d" % i for i in range(20)])
        cluster.procs[leader].kill(signal.SIGKILL)
    finally:
        for b in followers:
            b.proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]


def produce_through_kill(cluster: ZkCluster, leader: int, topic: str, send: Callable[[bytes], None],
                         acknowledged: Callable[[], int], poll: Callable[[], None]) -> None:
    """Sends r000000, r000001, ... to partition 0 steadily (``send`` each, ``poll`` after
    every 20); once 500 are acknowledged, ``leave_divergent_tail_and_kill`` the leader, and
    go on until 1,000 more are. A producer that stalls fails the test after 120 s."""
    sent = 0
    killed_at = None
    deadline = time.monotonic() + 120
    while True:
        assert time.monotonic() < deadline, f"producer stalled: {acknowledged()} of {sent} acknowledged"
        for _ in range(20):
            send(f"r{sent:06d}".encode())
            sent += 1
        poll()
        done = acknowledged()
        if killed_at is None and done >= 500:
            leave_divergent_tail_and_kill(cluster, leader, topic)
            killed_at = done
        if killed_at is not None and done >= killed_at + 1000:
            return


def wait_full_isr(bootstrap: str, topic: str) -> Any:
    """Partition 0's Metadata once all three replicas are in its ISR."""
    return wait_until(lambda: (m := partition_metadata(bootstrap, topic))
                      and len(m[0].isr_nodes) == 3 and m[0],
                      message="ISR of 3", ignoring=(Exception,))


def check_new_leader(bootstrap: str, topic: str, old_leader: int, before: Any) -> None:
    """Partition 0 has a live leader other than ``old_leader`` (waited for), at a higher
    epoch than ``before`` (its Metadata then), and ``old_leader`` left the ISR."""
    after = wait_until(lambda: (m := partition_metadata(bootstrap, topic))
                       and m[0].leader_id not in (old_leader, -1) and m[0],
                       message="a new leader", ignoring=(Exception,))
    assert after.leader_epoch > before.leader_epoch
    assert old_leader not in after.isr_nodes


def check_failover(cluster: ZkCluster, topic: str, leader: int, before: Any, acked: list[bytes],
                   got: Callable[[str], list[bytes]]) -> list[bytes]:
    """After ``leave_divergent_tail_and_kill``: a new leader from the ISR at a higher epoch,
    and partition 0 as read by ``got(bootstrap)`` from the survivors holds every
    acknowledged record exactly once, in the order produced, and none of the dead
    leader's own tail. Returns what was read."""
    survivors = cluster.bootstrap_without(leader)
    check_new_leader(survivors, topic, leader, before)
    records = got(survivors)
    assert len(records) == len(set(records)), "duplicates"
    assert set(acked) <= set(records), f"lost {len(set(acked) - set(records))} acknowledged records"
    assert records == sorted(records)  # produced in this order, so read in it
    assert not any(v.startswith(b"acks1-") for v in records)  # only the dead leader had them
    return records


def check_restarted_broker_rejoins(cluster: ZkCluster, root: Path, topic: str, node_id: int) -> None:
    """The killed broker, restarted, cuts its divergent tail after asking the new leader
    (OffsetsForLeaderEpoch), rejoins the ISR, and its log becomes the leader's."""
    cluster.restart(node_id)
    wait_until(lambda: node_id in partition_metadata(cluster.bootstrap, topic)[0].isr_nodes,
               message="the restarted broker back in the ISR", ignoring=(Exception,))
    assert any("follower_truncated" in line and "offsets_for_leader_epoch" in line
               for line in cluster.procs[node_id].log_path.read_text().splitlines())
    leader = partition_metadata(cluster.bootstrap, topic)[0].leader_id

    def same_logs() -> bool:
        a = log_file(root / f"data{leader}", leader, topic)
        b = log_file(root / f"data{node_id}", node_id, topic)
        return stored_batches(a) == stored_batches(b)

    wait_until(same_logs, message="the restarted broker's log equals the leader's", ignoring=(Exception,))
