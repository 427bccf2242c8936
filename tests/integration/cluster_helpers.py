"""Helpers for multi-process clusters: a raw Kafka connection and three
``refka serve`` processes over a private ZooKeeper (one per broker id, each
with its own rack), so a test can stop, restart or SIGTERM one broker."""

from __future__ import annotations

import socket
import struct
import time
import uuid
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from refka.protocol import RequestHeader, decode_response_header, encode_request_header, join
from refka.protocol.api import Api
from refka.protocol.messages.metadata import Metadata
from tests.brokers import BrokerProcess
from tests.zk import ZooKeeperServer

TIMEOUT = 30.0
_I32 = struct.Struct(">i")


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
    """Metadata v12 for ``topics`` from the broker at ``port``."""
    raw = Raw(port)
    try:
        md, _ = raw.call_raw(Metadata, Metadata.Request(
            topics=[Metadata.Request.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False), 12)
    finally:
        raw.close()
    return md


class ZkCluster:
    """Three ``refka serve`` processes, broker ids 0-2, racks zone-0..zone-2."""

    def __init__(self, zookeeper: ZooKeeperServer, root, overrides: dict[str, str] | None = None) -> None:
        self.connect = f"{zookeeper.connect}/c{uuid.uuid4().hex[:8]}"
        self.procs = [
            BrokerProcess(root / f"data{i}", overrides={"broker.rack": f"zone-{i}", **(overrides or {})},
                          extra_args=["--zookeeper", self.connect, "--broker-id", str(i)])
            for i in range(3)
        ]

    def start(self) -> ZkCluster:
        for p in self.procs:
            p.start()
        return self

    def stop(self) -> None:
        for p in self.procs:
            p.stop()

    def running(self) -> list[int]:
        return [i for i, p in enumerate(self.procs) if p.proc is not None and p.proc.poll() is None]

    def port(self, node_id: int) -> int:
        return self.procs[node_id].port  # type: ignore[return-value]

    @property
    def bootstrap(self) -> str:
        return ",".join(self.procs[i].bootstrap for i in self.running())

    def create_topic(self, topic: str, assignment: list[int] | list[list[int]]) -> None:
        """One partition per entry: a broker id (one replica) or a replica list."""
        replicas = [[a] if isinstance(a, int) else list(a) for a in assignment]
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        fut = admin.create_topics([NewTopic(topic, num_partitions=len(replicas), replica_assignment=replicas)],
                                  operation_timeout=TIMEOUT)[topic]
        fut.result(TIMEOUT)

    def wait_leader(self, topic: str, partition: int, leader: int, min_epoch: int = 0) -> tuple[bytes, int]:
        """Poll every broker until each names ``leader`` (epoch >= min_epoch); (topic id, epoch)."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            seen: list[tuple[Any, Any, Any]] = []
            for node_id in self.running():
                (t,) = metadata(self.port(node_id), topic).topics
                parts = {p.partition_index: p for p in t.partitions}
                p = parts.get(partition)
                seen.append((t.topic_id, p.leader_id if p else None, p.leader_epoch if p else None))
            if all(s[1] == leader and s[2] is not None and s[2] >= min_epoch for s in seen) \
                    and len({s[2] for s in seen}) == 1:
                return seen[0][0], seen[0][2]  # type: ignore[return-value]
            assert time.monotonic() < deadline, f"{topic}-{partition}: brokers see {seen}"
            time.sleep(0.05)


