"""One broker: the wiring of its parts, its listeners and its lifecycle.

This module and server.py are the only ones that hold a ``Broker``; every
collaborator is built here from the few things it uses (node id, config,
metadata cache, the ``spawn`` of tracked tasks, the replica manager's lookup,
the controller side as ISR writer and as the store view of the inter-broker
gate). The request handlers see the broker's parts through their request
context (``ctx.broker``): its metadata cache, replica manager, group
coordinator, controller side, inter-broker gate and the waits below.

Start-up order: listeners accept first (the controller reaches every broker,
itself included, over the Kafka protocol), then the broker registers
``/brokers/ids/<id>`` in the metadata store and runs for controller
(``attach_controller_side``, server.py); it is ready once the controller's
first UpdateMetadata names it.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from refka.common import Endpoint

from . import handlers as _handlers  # noqa: F401  (registers every handler)
from . import logging as _rlog
from .broker_metrics import LatencyHistograms, MetricsSnapshot, TopicTraffic, snapshot
from .config import BrokerConfig
from .connection import Connection, ConnectionLimits
from .controller_side import ControllerSide, ProducerIdManager
from .faults import FaultTable
from .fetch_session import FetchSessionCache
from .group import GroupCoordinator
from .inter_broker import InterBrokerGate
from .log import LogManager
from .logging import get_logger
from .metadata_cache import MetadataCache
from .recording import BrokerRecordings, RecordFile
from .replica_manager import ReplicaManager
from .stats import Stats

log = get_logger("refka.broker")


class Broker:
    def __init__(self, config: BrokerConfig, *, memory: bool = False, data_dir: Path | None = None,
                 record_file: RecordFile | None = None) -> None:
        self.config = config
        self.node_id = config.broker_id
        self.memory = memory
        self.metadata = MetadataCache()
        self.stats = Stats()
        self.recordings = BrokerRecordings.from_config(self.node_id, config, record_file)
        self.traffic = TopicTraffic()  # Kafka's BrokerTopicMetrics per topic (broker_metrics.py)
        self.latency = LatencyHistograms()
        self.faults = FaultTable()  # a Cluster gives its brokers one shared table (faults.py)
        self.connections: set[Connection] = set()
        self.queued_request_bytes = 0  # queued.max.request.bytes counts these (connection.py)
        self.tasks: set[asyncio.Task[Any]] = set()
        self.servers: list[asyncio.base_events.Server] = []
        log_dirs = None if memory else (config.log_dirs if data_dir is None else [data_dir])
        self.logs = LogManager(log_dirs, memory=memory, max_open_files=config["log.open.files.max"])
        self.replicas = ReplicaManager(self.node_id, config, self.logs, self.metadata, self.spawn)
        self.request_log = _rlog.DEBUG
        self.ready = asyncio.Event()
        self.controller_side: ControllerSide | None = None  # attach_controller_side
        # Who may send LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, and
        # the newest controller epoch obeyed.
        self.inter_broker = InterBrokerGate(config.inter_broker_listener)
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"])
        self._metadata_waiters: list[asyncio.Future[None]] = []
        # Consumer groups of the __consumer_offsets partitions this broker leads.
        self.groups = GroupCoordinator.for_broker(config, self.metadata, self.replicas.get, self.spawn)
        # InitProducerId: ids from blocks claimed through controller_side's store session.
        self.producer_ids = ProducerIdManager(self.node_id)

    # -- lifecycle

    def attach_controller_side(self, side: ControllerSide) -> None:
        """The broker's session with the metadata store (made by the cluster wiring,
        server.py, which starts it): its admin writes, ISR writes and controller."""
        self.controller_side = side
        self.replicas.isr.writer = side
        self.inter_broker.registrations = side

    async def start_listeners(self) -> None:
        loop = asyncio.get_running_loop()
        limits = ConnectionLimits.from_config(self.config)
        for ep in self.config.listeners:
            server = await loop.create_server(
                functools.partial(Connection, self, ep.listener, limits), ep.host, ep.port, reuse_address=True
            )
            self.servers.append(server)
            log.info("listening", broker=self.node_id, listener=str(ep))
        if limits.max_idle_ms >= 0:
            self.spawn(self._close_idle_connections(limits.max_idle_ms))

    async def _close_idle_connections(self, max_idle_ms: int) -> None:
        """connections.max.idle.ms: a connection with nothing read, written or pending for
        that long is closed (Kafka's Selector does the same)."""
        interval = min(max(max_idle_ms / 10_000, 0.05), 30.0)
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for c in list(self.connections):
                if c.idle_for_ms(now) > max_idle_ms and c.transport is not None:
                    log.info("connection_idle_closed", broker=self.node_id, peer=c.peer)
                    c.transport.close()

    def metrics_snapshot(self) -> MetricsSnapshot:
        """This broker's metrics for a /metrics scrape (broker_metrics.py)."""
        side = self.controller_side
        return snapshot(self.traffic, self.latency, self.replicas.partitions.values(), self.replicas.isr,
                        lambda: side.active_controller if side is not None else None)

    @property
    def advertised(self) -> list[Endpoint]:
        return self.config.advertised_listeners

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background_task_failed", broker=self.node_id, exc_info=task.exception())

    async def close_listeners(self) -> None:
        for s in self.servers:
            s.close()
        for c in list(self.connections):
            if c.transport is not None:
                c.transport.close()
        for s in self.servers:
            try:
                await asyncio.wait_for(s.wait_closed(), 1.0)
            except TimeoutError:
                pass
        self.servers.clear()

    async def stop(self) -> None:
        await self.close_listeners()
        for t in list(self.tasks):
            t.cancel()
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=2.0)
        self.groups.close()
        self.replicas.close()
        log.info("broker_stopped", broker=self.node_id)

    # -- metadata changes

    def notify_metadata_changed(self) -> None:
        """Called after every UpdateMetadata: wakes admin requests waiting on it."""
        self.metadata.version += 1
        if self.node_id in self.metadata.brokers:
            self.ready.set()
        waiters, self._metadata_waiters = self._metadata_waiters, []
        for f in waiters:
            if not f.done():
                f.set_result(None)

    def metadata_changed(self) -> asyncio.Future[None]:
        fut = asyncio.get_running_loop().create_future()
        self._metadata_waiters.append(fut)
        return fut

    def topic_ready(self, name: str, partitions: int | None = None) -> bool:
        """The topic is in the metadata with a live leader for each partition."""
        t = self.metadata.topic(name)
        if t is None or not t.partitions:
            return False
        if partitions is not None and len(t.partitions) < partitions:
            return False
        return all(p.leader in self.metadata.brokers for p in t.partitions.values())

    async def wait_for_topics(self, names: list[str]) -> None:
        # Each update looks at the topics not ready yet only (a CreateTopics of 1,000 topics).
        while names := [n for n in names if not self.topic_ready(n)]:
            await self.metadata_changed()

    async def wait_for_topics_gone(self, metas: list[Any]) -> None:
        while not all(self.topic_gone(m) for m in metas):
            await self.metadata_changed()

    def topic_gone(self, meta: Any) -> bool:
        """The metadata no longer has this incarnation of the topic."""
        now = self.metadata.topics.get(meta.name)
        return (now is None or now.topic_id != meta.topic_id) and self.metadata.topic_by_id(meta.topic_id) is None

    async def auto_create_topic(self, name: str) -> None:
        side = self.controller_side
        if side is None:
            return
        try:
            await side.create_topic(
                name,
                self.config["num.partitions"],
                self.config["default.replication.factor"],
                None,
                {},
            )
            log.info("topic_auto_created", topic=name)
        except Exception as e:  # already exists (a race with another client) or refused
            log.debug("topic_auto_create_skipped", topic=name, reason=str(e))
