"""The reference client's view of a cluster: one ``BrokerConnection`` per broker,
opened when first needed, and Metadata asked for the topics in use.

- ``connection(node_id)`` returns the broker's open connection, opening it (with
  ApiVersions) when there is none or the last one failed. Concurrent callers share
  one connect.
- ``refresh(topics)`` asks Metadata (the highest common version, without
  auto-creation unless the client allows it) for exactly ``topics`` from any broker
  it knows, the bootstrap servers last, and feeds the answer to the cache
  (``ClusterMetadata``). Each refresh starts one broker further along the known
  ones (Java's leastLoadedNode spreads them too): a broker whose answer is no
  older than the cache but still wrong, one whose metadata froze before the
  client's last answer, cannot be the only one asked, refresh after refresh. An answer the cache finds older than itself (KIP-232) is
  discarded and the next broker asked; when every broker that answered was behind,
  ``refresh`` returns False and the caller asks again after its back-off. Which
  topics to name is the caller's (KIP-526: ``working_set.py``).
- A connection that fails is dropped; the next call opens a new one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from refka.client.connection import BrokerConnection, BrokerConnectionError
from refka.client.metadata import ClusterMetadata
from refka.protocol.messages.metadata import Metadata


class KafkaConnectionError(ConnectionError):
    """No broker of the cluster could be reached."""


def parse_bootstrap(bootstrap_servers: str | Iterable[str]) -> list[tuple[str, int]]:
    items = bootstrap_servers.split(",") if isinstance(bootstrap_servers, str) else list(bootstrap_servers)
    out = []
    for item in items:
        host, _, port = item.strip().rpartition(":")
        out.append((host or "127.0.0.1", int(port)))
    return out


class ClusterClient:
    def __init__(self, bootstrap_servers: str | Iterable[str], client_id: str, *,
                 request_timeout: float, allow_auto_topic_creation: bool = True) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.metadata = ClusterMetadata()
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[BrokerConnection]] = {}
        self.metadata_requests = 0  # asked (tests read it)
        self._refresh_turn = 0  # which known broker a refresh asks first

    async def _open(self, host: str, port: int) -> BrokerConnection:
        conn = BrokerConnection(host, port, self.client_id, request_timeout=self.request_timeout)
        return await conn.connect()

    async def connection(self, node_id: int) -> BrokerConnection:
        conn = self._conns.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        task = self._connecting.get(node_id)
        if task is None:
            broker = self.metadata.brokers.get(node_id)
            if broker is None:
                raise BrokerConnectionError(f"broker {node_id} is not in the metadata")
            task = asyncio.ensure_future(self._open(broker.host, broker.port))
            self._connecting[node_id] = task
            task.add_done_callback(self._connected(node_id))
        conn = await asyncio.shield(task)
        self._conns[node_id] = conn
        return conn

    def _connected(self, node_id: int) -> Callable[[asyncio.Task[BrokerConnection]], None]:
        def forget(_task: asyncio.Task[BrokerConnection]) -> None:
            self._connecting.pop(node_id, None)
        return forget

    async def refresh(self, topics: Iterable[str]) -> bool:
        """Metadata for ``topics`` into the cache: True when an answer was taken, False when
        every answer was older than the cache (KIP-232); raises KafkaConnectionError when no
        broker answers."""
        names = sorted(set(topics))
        R = Metadata.Request
        req = R(topics=[R.MetadataRequestTopic(name=t) for t in names],
                allow_auto_topic_creation=self.allow_auto_topic_creation, refka_extensions=True)
        last: Exception | None = None
        answered = False
        ids = list(self.metadata.brokers)
        if ids:
            first = self._refresh_turn % len(ids)
            self._refresh_turn += 1
            ids = ids[first:] + ids[:first]
        for node_id in ids:
            try:
                conn = await self.connection(node_id)
                resp = await conn.request(Metadata, req)
            except (BrokerConnectionError, ValueError) as e:
                last = e
                continue
            self.metadata_requests += 1
            if self.metadata.apply(resp):
                return True
            answered = True  # behind the cache: another broker may know better
        if answered:
            return False
        for host, port in self.bootstrap:
            try:
                conn = await self._open(host, port)
            except BrokerConnectionError as e:
                last = e
                continue
            try:
                resp = await conn.request(Metadata, req)
            except (BrokerConnectionError, ValueError) as e:
                last = e
                continue
            finally:
                await conn.close()
            self.metadata_requests += 1
            if self.metadata.apply(resp):
                return True
            answered = True
        if answered:
            return False
        raise KafkaConnectionError(f"no broker answered Metadata: {last}")

    async def close(self) -> None:
        for task in list(self._connecting.values()):
            task.cancel()
        conns, self._conns = self._conns, {}
        for conn in conns.values():
            await conn.close()
