"""refka in-process, for tests and labs: ``RefkaCluster``, N brokers in the caller's
event loop with the admin API's reads, operations and faults as typed Python methods,
plus kfake-style interception of requests.

    async with RefkaCluster(brokers=3) as cluster:
        await cluster.create_topic("events", partitions=3, replication_factor=3)
        producer = Producer(bootstrap_servers=cluster.bootstrap)  # any client, any language
        ...
        await cluster.move_leader("events", 0, broker=2)
        cluster.add_fault("error", api="Produce", error_code="NOT_LEADER_OR_FOLLOWER", count=3)

        def rebalance(seen: Intercepted) -> Any:  # answer a Heartbeat itself (fields of seen.api_version)
            return seen.answer(error_code=ErrorCode.REBALANCE_IN_PROGRESS)
        cluster.intercept("Heartbeat", rebalance)  # once; once=False: until removed

It is the HTTP API's twin, not a second implementation: reads are admin_views.py's views
(the same JSON-ready dicts ``GET /api/...`` answers), operations admin_ops.py's (sent to
the controller over the Kafka protocol), faults go into the brokers' shared
``FaultTable`` (faults.py: the same validation, the same 400/404 as ``FaultError``), and
broker stop/kill/start/expire are server.Cluster's. With ``admin_port`` the HTTP API (and
its dashboard) serve the same cluster, so a test can be watched or bent from outside
while it runs.

The brokers are those of ``refka serve --brokers N``: the embedded metadata store, logs in
memory unless a ``data_dir`` is given. They run on the event loop that calls ``start``; a
client that blocks (confluent-kafka, kafka-python) must run in another thread (e.g.
``asyncio.to_thread``), or the cluster on its own loop in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from refka.broker import admin_ops, admin_views, recording
from refka.broker.admin_views import ServedBroker, ViewError
from refka.broker.config import BrokerConfig
from refka.broker.faults import Delay, Fault, FaultError, Intercepted, Interceptor
from refka.broker.registry import HANDLERS
from refka.broker.server import Cluster, broker_configs
from refka.common.topic_config import InvalidConfigError
from refka.controller.admin import AdminError
from refka.protocol import ErrorCode

__all__ = ["Delay", "Fault", "FaultError", "Intercepted", "OperationError", "RefkaCluster", "ViewError"]

OperationError = admin_ops.OperationError


def _free_port_block(n: int, host: str) -> int:
    """A base port p with p..p+n-1 free on ``host`` now (best effort: bound, then released)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind((host, 0))
            base = s.getsockname()[1]
        if base + n >= 65535:
            continue
        try:
            with contextlib.ExitStack() as stack:
                for i in range(1, n):
                    t = stack.enter_context(socket.socket())
                    t.bind((host, base + i))
        except OSError:
            continue
        return base
    raise OSError(f"no block of {n} free ports on {host}")


def _api_key(api: int | str) -> int:
    if isinstance(api, int):
        return api
    by_name = {h.api.name.lower(): k for k, h in HANDLERS.items()}
    key = by_name.get(api.lower())
    if key is None:
        raise FaultError(400, f"unknown API {api!r} (refka serves {', '.join(sorted(by_name))})")
    return key


class RefkaCluster:
    """``brokers`` refka brokers (ids 0..N-1) in this process (the module docstring)."""

    def __init__(self, brokers: int = 1, *, overrides: Mapping[str, str] | None = None,
                 data_dir: Path | str | None = None, host: str = "127.0.0.1", port: int | None = None,
                 admin_port: int | None = None) -> None:
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="refka-testing-")
        self.data_dir = Path(data_dir) if data_dir is not None else Path(self._tmp.name)  # type: ignore[union-attr]
        self.memory = data_dir is None
        base = BrokerConfig.load(None, environ={}, overrides={**(overrides or {}), "log.dirs": str(self.data_dir)})
        first = port if port is not None else _free_port_block(brokers, host)
        self.configs = broker_configs(base, brokers, host, first, self.data_dir)
        self.cluster = Cluster(self.configs, memory=self.memory, data_dir=self.data_dir)
        self.admin_port = admin_port
        self._admin: Any = None

    # -- lifecycle

    async def start(self, timeout: float = 60.0) -> RefkaCluster:
        """Starts the brokers; returns once each one's metadata names them all."""
        await self.cluster.start(ready_timeout=timeout)
        ids = {c.broker_id for c in self.configs}
        await self.wait_for(lambda: all(set(b.metadata.brokers) == ids for b in self.cluster.brokers),
                            "every broker to know every other", timeout)
        if self.admin_port is not None:
            from refka.broker import admin_http  # aiohttp only when asked for

            self._admin = await admin_http.start(self.cluster.served, "127.0.0.1", self.admin_port,
                                                 control=self.cluster, faults=self.cluster.faults)
        return self

    async def stop(self) -> None:
        try:
            if self._admin is not None:
                await self._admin.cleanup()
                self._admin = None
            await self.cluster.stop()
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None

    async def __aenter__(self) -> RefkaCluster:
        return await self.start()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    @property
    def bootstrap(self) -> str:
        """host:port of every running broker, comma-separated (a client's bootstrap.servers)."""
        return self.cluster.bootstrap

    def address(self, broker: int) -> str:
        cfg = self._config(broker)
        ep = cfg.advertised_listeners[0]
        return f"{ep.host}:{ep.port}"

    # -- reads (admin_views.py: what GET /api/... answers)

    def _served(self) -> list[ServedBroker]:
        served = self.cluster.served()
        if not served:
            raise ViewError(404, "no broker of this cluster is running")
        return served

    def _view(self, broker: int | None) -> ServedBroker:
        served = self._served()
        if broker is None:
            return min(served, key=lambda b: b.node_id)
        for b in served:
            if b.node_id == broker:
                return b
        raise ViewError(404, f"broker {broker} is not running")

    def describe_cluster(self, broker: int | None = None) -> dict[str, Any]:
        """Brokers, racks, endpoints, the controller and its epochs (GET /api/cluster)."""
        b = self._view(broker)
        return admin_views.cluster_view(b.node_id, b.metadata, (x.node_id for x in self._served()))

    def topics(self, broker: int | None = None) -> list[dict[str, Any]]:
        return admin_views.topics_view(self._view(broker).metadata)

    def topic(self, name: str, broker: int | None = None) -> dict[str, Any] | None:
        """One topic and its partitions (leader, epochs, replicas, ISR, KIP-253 maps, offsets);
        None when the broker does not know it."""
        served = self._served()
        return admin_views.topic_view(self._view(broker).metadata, name, admin_views.lookups(served))

    def partition(self, topic: str, partition: int, broker: int | None = None) -> dict[str, Any] | None:
        t = self.topic(topic, broker)
        if t is None:
            return None
        return next((p for p in t["partitions"] if p["partition"] == partition), None)

    def groups(self) -> list[dict[str, Any]]:
        return admin_views.groups_view(self._served())["groups"]

    def group(self, group_id: str) -> dict[str, Any]:
        """State, members, assignments, committed offsets and lag; ViewError(404) if none."""
        return admin_views.find_group(group_id, self._served())

    def connections(self) -> list[dict[str, Any]]:
        return [r.describe() for b in self._served() for r in sorted(b.recordings.open, key=lambda r: r.opened_ms)]

    def recordings(self, client_id: str | None = None) -> list[dict[str, Any]]:
        """Every recorded request (GET /api/recordings), oldest first."""
        return list(recording.entries([b.recordings for b in self._served()], client_id))

    def timeline(self, since: int = 0, broker: int | None = None) -> list[dict[str, Any]]:
        """The cluster's changes as one broker saw them (GET /api/timeline)."""
        b = self._view(broker)
        return [{**e, "broker": b.node_id} for e in b.metadata.timeline if e["seq"] > since]

    # -- operations (admin_ops.py; OperationError carries the HTTP status and Kafka's code)

    def _cache(self) -> Any:
        return self._view(None).metadata

    async def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                           configs: Mapping[str, str] | None = None, timeout: float = 30.0) -> None:
        """Creates the topic (as CreateTopics would) and waits until every running broker
        has a leader for each partition in its metadata."""
        side = next((b.controller_side for b in self.cluster.brokers if b.controller_side is not None), None)
        if side is None:
            raise ViewError(404, "no broker of this cluster is running")
        try:
            await side.create_topic(name, partitions, replication_factor, None, dict(configs or {}))
        except (AdminError, InvalidConfigError) as e:
            raise OperationError(409 if e.error_code == ErrorCode.TOPIC_ALREADY_EXISTS else 400,
                                 f"creating {name}: {e.error_code.name} ({e})", e.error_code) from None
        await self.wait_for(lambda: all(x.topic_ready(name, partitions) for x in self.cluster.brokers),
                            f"topic {name} to be ready", timeout)

    async def move_leader(self, topic: str, partition: int, broker: int) -> dict[str, Any]:
        return await admin_ops.move_leader(self._cache(), topic, partition, broker)

    async def elect_preferred(self, topic: str, partitions: list[int] | None = None) -> dict[int, str]:
        return await admin_ops.elect_preferred(self._cache(), topic, partitions)

    async def reassign(self, topic: str, assignment: Mapping[int, list[int]]) -> None:
        await admin_ops.reassign(self._cache(), topic, dict(assignment))

    async def set_partition_count(self, topic: str, count: int) -> None:
        """Expand, or with KIP-253 (enable.ordered.delivery) shrink, a topic."""
        await admin_ops.set_partition_count(self._cache(), topic, count)

    def _config(self, broker: int) -> BrokerConfig:
        cfg = next((c for c in self.configs if c.broker_id == broker), None)
        if cfg is None:
            raise ViewError(404, f"broker {broker} is not one of this cluster's ({sorted(c.broker_id for c in self.configs)})")
        return cfg

    def broker_state(self, broker: int) -> str:
        """"running" or "stopped"."""
        self._config(broker)
        return self.cluster.control_state(broker) or "stopped"

    async def stop_broker(self, broker: int) -> None:
        """Controlled shutdown (leadership moved away first)."""
        self._config(broker)
        await self.cluster.control_stop(broker, kill=False)

    async def kill_broker(self, broker: int) -> None:
        """Connections cut, no goodbye: the controller learns of it when its session goes."""
        self._config(broker)
        await self.cluster.control_stop(broker, kill=True)

    async def start_broker(self, broker: int) -> None:
        self._config(broker)
        await self.cluster.control_start(broker)

    async def expire_session(self, broker: int) -> None:
        self._config(broker)
        await self.cluster.control_expire_session(broker)

    def freeze_metadata(self, broker: int) -> None:
        """Stale-metadata mode: the broker answers Metadata as its cache is now until thawed."""
        self._view(broker).metadata.freeze(time.time() * 1000)

    def thaw_metadata(self, broker: int) -> None:
        self._view(broker).metadata.thaw()

    async def wait_for(self, condition: Callable[[], bool], what: str = "the condition",
                       timeout: float = 30.0) -> None:
        """Polls ``condition`` every 20 ms; OperationError(504) after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise OperationError(504, f"timed out after {timeout:g} s waiting for {what}")
            await asyncio.sleep(0.02)

    # -- faults (faults.py)

    def add_fault(self, kind: str, **spec: Any) -> Fault:
        """A fault as POST /api/faults takes it (``api="Produce"``, ``error_code=...``, ``count=3``,
        ``duration_ms``, ``broker``, ``topic``...); FaultError when refused, nothing installed."""
        return self.cluster.faults.add({"kind": kind, **spec}, {c.broker_id for c in self.configs})

    def intercept(self, api: int | str, handler: Interceptor, *, broker: int | None = None,
                  client_id: str | None = None, once: bool = True) -> Fault:
        """``handler`` sees each request of ``api`` (a key or a name) reaching ``broker`` (any if
        None) from ``client_id`` (any if None) as an ``Intercepted``, and returns None (handled
        as usual), a response (``seen.answer(...)``: the answer, not handled) or ``Delay(s)``
        (answered s later). ``once``: removed after the first request it sees."""
        if broker is not None:
            self._config(broker)
        return self.cluster.faults.intercept(handler, _api_key(api), broker=broker, client_id=client_id, once=once)

    def remove_fault(self, fault: Fault | int) -> bool:
        """False if it was gone already (expired, or its count fired)."""
        return self.cluster.faults.remove(fault if isinstance(fault, int) else fault.id) is not None

    def faults(self) -> list[Fault]:
        return self.cluster.faults.live()

    def clear_faults(self) -> int:
        return self.cluster.faults.clear()

