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
``asyncio.to_thread``), or the cluster on its own loop in a thread: that is ``Cluster``.

``Broker()`` and ``Cluster(n)``, a broker for a test in any framework, are context managers
in both of Python's forms over a ``RefkaCluster``:

    with Cluster(3) as c:           # the brokers' loop in a thread: every call blocks
        c.create_topic("events", 3, replication_factor=3)
        Producer({"bootstrap.servers": c.bootstrap_servers})  # confluent-kafka, kafka-python...
        c.move_leader("events", 0, broker=2)

    async with Broker() as b:       # the RefkaCluster itself, on the caller's loop
        await b.create_topic("events")

refka's pytest plugin (refka/pytest_plugin.py) gives them as the ``refka_broker`` and
``refka_cluster`` fixtures.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import socket
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from refka.broker import admin_ops, admin_views, recording, server
from refka.broker.admin_views import ServedBroker, ViewError
from refka.broker.config import BrokerConfig
from refka.broker.faults import Delay, Fault, FaultError, Intercepted, Interceptor
from refka.broker.registry import HANDLERS
from refka.common.topic_config import InvalidConfigError
from refka.controller.admin import AdminError
from refka.protocol import ErrorCode

__all__ = ["Broker", "Cluster", "Delay", "Fault", "FaultError", "Intercepted", "OperationError", "RefkaCluster",
           "ViewError"]

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
        self.configs = server.broker_configs(base, brokers, host, first, self.data_dir)
        self.cluster = server.Cluster(self.configs, memory=self.memory, data_dir=self.data_dir)
        self.admin_port = admin_port
        self._admin: Any = None

    # -- lifecycle

    async def start(self, timeout: float = 60.0) -> RefkaCluster:
        """Starts the brokers; returns once each one's metadata names them all. When they do
        not start (a port taken, ``timeout``, cancelled), what did start is stopped and the
        error raised."""
        try:
            await self.cluster.start(ready_timeout=timeout)
            ids = {c.broker_id for c in self.configs}
            await self.wait_for(lambda: all(set(b.metadata.brokers) == ids for b in self.cluster.brokers),
                                "every broker to know every other", timeout)
            if self.admin_port is not None:
                from refka.broker import admin_http  # aiohttp only when asked for

                self._admin = await admin_http.start(self.cluster.served, "127.0.0.1", self.admin_port,
                                                     control=self.cluster, faults=self.cluster.faults)
        except BaseException:
            with contextlib.suppress(Exception):  # the start's own error is the one to raise
                await self.stop()
            raise
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

    @property
    def bootstrap_servers(self) -> str:
        """host:port of every broker of the cluster, running or stopped, comma-separated: a
        client's bootstrap.servers that stays the same while brokers stop and start."""
        return ",".join(self.address(c.broker_id) for c in self.configs)

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


# ---- Broker() and Cluster(n): a broker for a test, `with` or `async with` ------------------------

T = TypeVar("T")

# An operation that takes a ``timeout`` of its own is given this much longer by the blocking
# form, so that its own error (OperationError 504, saying what it waited for) is the one raised.
_OWN_TIMEOUT_MARGIN = 10.0


def _run_loop(loop: asyncio.AbstractEventLoop, leftover: list[str]) -> None:
    """The brokers' thread: ``loop`` until it is stopped; then, as ``asyncio.run`` ends, the
    tasks still pending are cancelled and awaited (named in ``leftover``: the brokers' stop
    should have left none), async generators and the default executor shut down, the loop closed."""
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
        pending = asyncio.all_tasks(loop)
        leftover.extend(sorted(repr(t.get_coro()) for t in pending))
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        asyncio.set_event_loop(None)
        loop.close()


class Cluster:
    """``brokers`` refka brokers for a test (ids 0..N-1, default 3), in this process, logs and
    metadata in memory, on free ports of ``host``: a context manager in both forms.

    ``with Cluster(3) as c:``, for any test and blocking clients (confluent-kafka,
    kafka-python): a ``RefkaCluster`` runs on an event loop of its own (uvloop, as ``refka
    serve``) in a background thread, so it serves while the test's code blocks. ``c`` is this
    object, and every method below blocks until the brokers' loop has done it, at most
    ``call_timeout`` seconds (then TimeoutError and the call is cancelled); an error is raised
    in the caller as ``RefkaCluster`` raises it (OperationError, ViewError, FaultError...).
    Leaving the block stops the brokers, then the loop, and joins the thread: no thread, port
    or task is left (a task the brokers' stop left behind is cancelled and named in a
    ResourceWarning). An error while starting is raised by ``with`` itself, after the same
    clean-up.

    ``async with Cluster(3) as c:``, for an asyncio test: ``c`` is the ``RefkaCluster``
    itself on the caller's loop (no thread).

    The one API in its two forms (``with``: this class; ``async with``: the RefkaCluster):

    - ``bootstrap_servers`` (every broker, running or not), ``address(broker)``: plain in both;
    - reads (``describe_cluster``, ``topics``, ``topic``, ``partition``, ``groups``,
      ``group``, ``connections``, ``recordings``, ``timeline``, ``broker_state``, ``faults``),
      metadata freezes (``freeze_metadata``, ``thaw_metadata``) and faults (``add_fault``,
      ``intercept``, ``remove_fault``, ``clear_faults``): blocking calls with ``with``, plain
      calls with ``async with``;
    - operations (``create_topic``, ``move_leader``, ``elect_preferred``, ``reassign``,
      ``set_partition_count``, ``stop_broker``, ``kill_broker``, ``start_broker``,
      ``expire_session``, ``wait_for``): blocking calls with ``with``, coroutines to await
      with ``async with``;
    - ``call(fn)``, ``with`` only: ``fn(the RefkaCluster)`` on the brokers' loop, awaited there
      if it returns a coroutine, for what the methods do not offer.

    In the ``with`` form the brokers' state is touched on their loop only: an interceptor's
    handler and a ``wait_for`` condition run on the brokers' thread; from there the reads
    above run at once, and an operation, which would wait on that very loop, raises
    RuntimeError.
    """

    def __init__(self, brokers: int = 3, *, overrides: Mapping[str, str] | None = None,
                 host: str = "127.0.0.1", port: int | None = None, data_dir: Path | str | None = None,
                 admin_port: int | None = None, start_timeout: float = 60.0, call_timeout: float = 60.0) -> None:
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        self.brokers = brokers
        self._options: dict[str, Any] = {"overrides": overrides, "host": host, "port": port, "data_dir": data_dir,
                                         "admin_port": admin_port}
        self.start_timeout = start_timeout
        self.call_timeout = call_timeout
        self._refka: RefkaCluster | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._leftover: list[str] = []  # tasks the brokers' stop left on their loop (_run_loop)

    def _check_idle(self) -> None:
        if self._refka is not None or self._thread is not None:
            raise RuntimeError(f"{type(self).__name__} is running already: enter it once at a time")

    # -- async with: the RefkaCluster on the caller's loop

    async def __aenter__(self) -> RefkaCluster:
        self._check_idle()
        self._refka = await RefkaCluster(self.brokers, **self._options).start(self.start_timeout)
        return self._refka

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        refka, self._refka = self._refka, None
        if refka is not None:
            await refka.stop()

    # -- with: the RefkaCluster on a loop in a thread

    def __enter__(self) -> Cluster:
        self._check_idle()
        import uvloop  # refka serve's loop; here, not at the top: the async form has no loop of its own

        loop = uvloop.new_event_loop()
        self._leftover = []
        thread = threading.Thread(target=_run_loop, args=(loop, self._leftover), daemon=True,
                                  name=f"refka-testing-{self.brokers}-broker{'s' if self.brokers > 1 else ''}")
        self._loop, self._thread = loop, thread
        thread.start()
        try:
            # start() bounds itself by start_timeout and cleans up; the margin only catches a hang
            self._refka = self._wait(asyncio.run_coroutine_threadsafe(self._start_on_loop(), loop),
                                     self.start_timeout + _OWN_TIMEOUT_MARGIN, "starting the brokers")
        except BaseException:
            self._end_thread()
            raise
        return self

    async def _start_on_loop(self) -> RefkaCluster:
        """Builds and starts the RefkaCluster on the brokers' thread, where all of it is touched."""
        return await RefkaCluster(self.brokers, **self._options).start(self.start_timeout)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        refka, self._refka = self._refka, None
        try:
            if refka is not None and self._loop is not None:
                self._wait(asyncio.run_coroutine_threadsafe(refka.stop(), self._loop), self.call_timeout,
                           "stopping the brokers")
        finally:
            self._end_thread()

    def _end_thread(self) -> None:
        loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(self.call_timeout)
        if thread.is_alive():
            raise RuntimeError(f"the brokers' thread {thread.name} did not end within {self.call_timeout:g} s")
        if self._leftover:
            warnings.warn(f"tasks still pending after the brokers stopped, cancelled: {', '.join(self._leftover)}",
                          ResourceWarning, stacklevel=3)

    def _running(self) -> tuple[RefkaCluster, asyncio.AbstractEventLoop]:
        if self._refka is None or self._loop is None:
            raise RuntimeError(f"{type(self).__name__} is not running: call it inside `with {type(self).__name__}(...)` "
                               "(inside `async with`, use the RefkaCluster it gave)")
        return self._refka, self._loop

    def _on_loop(self) -> bool:
        return self._thread is not None and threading.get_ident() == self._thread.ident

    def _wait(self, future: concurrent.futures.Future[T], timeout: float, what: str) -> T:
        try:
            return future.result(timeout)
        except TimeoutError:
            if future.done():  # the call's own TimeoutError
                raise
            future.cancel()
            raise TimeoutError(f"{what} did not finish within {timeout:g} s on the brokers' loop") from None

    def _call(self, fn: Callable[[RefkaCluster], T], what: str) -> T:
        """``fn(cluster)``, a plain call, on the brokers' loop (at once from their thread)."""
        refka, loop = self._running()
        if self._on_loop():
            return fn(refka)

        async def on_loop() -> T:
            return fn(refka)

        return self._wait(asyncio.run_coroutine_threadsafe(on_loop(), loop), self.call_timeout, what)

    def _await(self, fn: Callable[[RefkaCluster], Coroutine[Any, Any, T]], what: str,
               own_timeout: float | None = None) -> T:
        """``fn(cluster)``, a coroutine, run on the brokers' loop and waited for."""
        refka, loop = self._running()
        if self._on_loop():
            raise RuntimeError(f"{what} waits on the brokers' loop, and this is the brokers' thread (an "
                               "interceptor or a wait_for condition): only reads and faults can be called from it")
        timeout = self.call_timeout if own_timeout is None else max(self.call_timeout,
                                                                     own_timeout + _OWN_TIMEOUT_MARGIN)
        return self._wait(asyncio.run_coroutine_threadsafe(fn(refka), loop), timeout, what)

    def call(self, fn: Callable[[RefkaCluster], Any], timeout: float | None = None) -> Any:
        """``fn(the RefkaCluster)`` on the brokers' loop, awaited there if it returns a coroutine:
        for what the methods below do not offer (``b.call(lambda c: c.cluster.faults.fired_by_kind)``)."""
        refka, loop = self._running()
        if self._on_loop():
            raise RuntimeError("call() from the brokers' own thread: use the RefkaCluster directly")

        async def on_loop() -> Any:
            result = fn(refka)
            return await result if asyncio.iscoroutine(result) else result

        return self._wait(asyncio.run_coroutine_threadsafe(on_loop(), loop),
                          self.call_timeout if timeout is None else timeout, "call()")

    # -- addresses (fixed when the brokers start: no need to ask their loop)

    @property
    def bootstrap_servers(self) -> str:
        """host:port of every broker, comma-separated: a client's bootstrap.servers."""
        return self._running()[0].bootstrap_servers

    def address(self, broker: int) -> str:
        return self._running()[0].address(broker)

    # -- reads (RefkaCluster's, admin_views.py's)

    def describe_cluster(self, broker: int | None = None) -> dict[str, Any]:
        return self._call(lambda c: c.describe_cluster(broker), "describe_cluster")

    def topics(self, broker: int | None = None) -> list[dict[str, Any]]:
        return self._call(lambda c: c.topics(broker), "topics")

    def topic(self, name: str, broker: int | None = None) -> dict[str, Any] | None:
        return self._call(lambda c: c.topic(name, broker), "topic")

    def partition(self, topic: str, partition: int, broker: int | None = None) -> dict[str, Any] | None:
        return self._call(lambda c: c.partition(topic, partition, broker), "partition")

    def groups(self) -> list[dict[str, Any]]:
        return self._call(lambda c: c.groups(), "groups")

    def group(self, group_id: str) -> dict[str, Any]:
        return self._call(lambda c: c.group(group_id), "group")

    def connections(self) -> list[dict[str, Any]]:
        return self._call(lambda c: c.connections(), "connections")

    def recordings(self, client_id: str | None = None) -> list[dict[str, Any]]:
        return self._call(lambda c: c.recordings(client_id), "recordings")

    def timeline(self, since: int = 0, broker: int | None = None) -> list[dict[str, Any]]:
        return self._call(lambda c: c.timeline(since, broker), "timeline")

    def broker_state(self, broker: int) -> str:
        return self._call(lambda c: c.broker_state(broker), "broker_state")

    # -- operations (RefkaCluster's coroutines, waited for)

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     configs: Mapping[str, str] | None = None, timeout: float = 30.0) -> None:
        self._await(lambda c: c.create_topic(name, partitions, replication_factor, configs, timeout),
                    f"create_topic({name!r})", own_timeout=timeout)

    def move_leader(self, topic: str, partition: int, broker: int) -> dict[str, Any]:
        return self._await(lambda c: c.move_leader(topic, partition, broker), "move_leader")

    def elect_preferred(self, topic: str, partitions: list[int] | None = None) -> dict[int, str]:
        return self._await(lambda c: c.elect_preferred(topic, partitions), "elect_preferred")

    def reassign(self, topic: str, assignment: Mapping[int, list[int]]) -> None:
        self._await(lambda c: c.reassign(topic, assignment), "reassign")

    def set_partition_count(self, topic: str, count: int) -> None:
        self._await(lambda c: c.set_partition_count(topic, count), "set_partition_count")

    def stop_broker(self, broker: int) -> None:
        self._await(lambda c: c.stop_broker(broker), f"stop_broker({broker})")

    def kill_broker(self, broker: int) -> None:
        self._await(lambda c: c.kill_broker(broker), f"kill_broker({broker})")

    def start_broker(self, broker: int) -> None:
        self._await(lambda c: c.start_broker(broker), f"start_broker({broker})")

    def expire_session(self, broker: int) -> None:
        self._await(lambda c: c.expire_session(broker), f"expire_session({broker})")

    def wait_for(self, condition: Callable[[], bool], what: str = "the condition", timeout: float = 30.0) -> None:
        """RefkaCluster.wait_for: ``condition`` is called on the brokers' thread (the reads work there)."""
        self._await(lambda c: c.wait_for(condition, what, timeout), f"waiting for {what}", own_timeout=timeout)

    # -- metadata freezes and faults (RefkaCluster's, on the brokers' loop)

    def freeze_metadata(self, broker: int) -> None:
        self._call(lambda c: c.freeze_metadata(broker), "freeze_metadata")

    def thaw_metadata(self, broker: int) -> None:
        self._call(lambda c: c.thaw_metadata(broker), "thaw_metadata")

    def add_fault(self, kind: str, **spec: Any) -> Fault:
        return self._call(lambda c: c.add_fault(kind, **spec), "add_fault")

    def intercept(self, api: int | str, handler: Interceptor, *, broker: int | None = None,
                  client_id: str | None = None, once: bool = True) -> Fault:
        """RefkaCluster.intercept: ``handler`` is called on the brokers' thread."""
        return self._call(lambda c: c.intercept(api, handler, broker=broker, client_id=client_id, once=once),
                          "intercept")

    def remove_fault(self, fault: Fault | int) -> bool:
        return self._call(lambda c: c.remove_fault(fault), "remove_fault")

    def faults(self) -> list[Fault]:
        return self._call(lambda c: c.faults(), "faults")

    def clear_faults(self) -> int:
        return self._call(lambda c: c.clear_faults(), "clear_faults")


class Broker(Cluster):
    """One broker (id 0) for a test: ``Cluster(1)``, in both forms (Cluster's docstring)."""

    def __init__(self, *, overrides: Mapping[str, str] | None = None, host: str = "127.0.0.1",
                 port: int | None = None, data_dir: Path | str | None = None, admin_port: int | None = None,
                 start_timeout: float = 60.0, call_timeout: float = 60.0) -> None:
        super().__init__(1, overrides=overrides, host=host, port=port, data_dir=data_dir, admin_port=admin_port,
                         start_timeout=start_timeout, call_timeout=call_timeout)
