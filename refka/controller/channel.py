"""The controller's connections to brokers: LeaderAndIsr, UpdateMetadata and
StopReplica over the real Kafka protocol, and the ListOffsets of KIP-253's drain
task (partition_deletion.py; a normal API, answered to anyone).

One queue and one sender task per live broker (its endpoint from
``/brokers/ids/<id>``), so requests reach each broker in the order the
controller made them. A request is retried, on a new connection after a
short backoff, until the broker answers it or the broker leaves
(``update_brokers`` without it, or ``remove_broker``): then its pending
requests fail with ``BrokerGoneError``. An answer with an error code is an
answer: the controller decides what it means. Except CLUSTER_AUTHORIZATION_FAILED:
the broker did not take us for the controller (broker/inter_broker.py), which
for the real controller means the broker's store read did not show our election
yet (a lagging ZooKeeper server), so the request is retried after the backoff,
on the same connection, until the broker takes it or leaves.

Versions: on every new connection the channel asks ApiVersions and uses the
highest version both sides have (LeaderAndIsr v7, UpdateMetadata v8,
StopReplica v4 between refka brokers). The controller builds requests with
the grouped-by-topic fields, so brokers must serve at least LeaderAndIsr v2,
UpdateMetadata v5 and StopReplica v3; an older broker gets nothing and a
logged error.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from typing import Any, Protocol

import structlog

from refka.client.connection import BrokerConnection, BrokerConnectionError
from refka.common import TopicPartition
from refka.protocol import ErrorCode
from refka.protocol.api import Api
from refka.protocol.messages.controlled_shutdown import ControlledShutdown
from refka.protocol.messages.leader_and_isr import LeaderAndIsr
from refka.protocol.messages.stop_replica import StopReplica
from refka.protocol.messages.update_metadata import UpdateMetadata

from .znodes import BrokerInfo

log = structlog.get_logger("refka.controller.channel")

# api key -> (the lowest version the controller's requests fit, the highest we have)
VERSIONS: dict[int, tuple[int, int]] = {
    LeaderAndIsr.key: (2, LeaderAndIsr.max_version),
    UpdateMetadata.key: (5, UpdateMetadata.max_version),
    StopReplica.key: (3, StopReplica.max_version),
}


class BrokerGoneError(Exception):
    """The broker left the cluster before it answered."""


class UnsupportedByBrokerError(Exception):
    """The broker does not serve a version of the API the controller can send."""


class Channel(Protocol):
    """What the controller needs from a channel (a test double implements just this)."""

    def update_brokers(self, brokers: Mapping[int, BrokerInfo]) -> None: ...

    def send(self, broker_id: int, api: Api, request: Any) -> asyncio.Future[Any]: ...

    async def stop(self) -> None: ...


class _Item:
    __slots__ = ("api", "request", "future")

    def __init__(self, api: Api, request: Any, future: asyncio.Future[Any]) -> None:
        self.api = api
        self.request = request
        self.future = future


class _BrokerSender:
    def __init__(self, channel: ControllerChannel, info: BrokerInfo) -> None:
        self.channel = channel
        self.info = info
        self.queue: deque[_Item] = deque()
        self.wakeup = asyncio.Event()
        self.conn: BrokerConnection | None = None
        self.versions: dict[int, tuple[int, int]] = {}
        self.task = asyncio.get_running_loop().create_task(self._run())

    def put(self, item: _Item) -> None:
        self.queue.append(item)
        self.wakeup.set()

    async def _connection(self) -> BrokerConnection:
        if self.conn is not None and not self.conn.closed:
            return self.conn
        ep = self.info.endpoint(self.channel.listener)
        conn = BrokerConnection(
            ep.host,
            ep.port,
            client_id=f"refka-controller-{self.channel.controller_id}",
            request_timeout=self.channel.request_timeout,
        )
        await conn.connect()
        self.versions = conn.versions
        self.conn = conn
        log.debug("controller_channel_connected", broker=self.info.broker_id, host=ep.host, port=ep.port)
        return conn

    def _version(self, api: Api) -> int:
        low, high = VERSIONS.get(api.key, (api.min_version, api.max_version))
        theirs = self.versions.get(api.key)
        if theirs is None:
            return high  # the peer did not list it: try ours (it may be an older refka)
        v = min(high, theirs[1])
        if v < max(low, theirs[0]):
            raise UnsupportedByBrokerError(
                f"broker {self.info.broker_id} serves {api.name} v{theirs[0]}-{theirs[1]}, the controller needs v{low}+"
            )
        return v

    async def _run(self) -> None:
        backoff = self.channel.retry_backoff
        while True:
            while not self.queue:
                self.wakeup.clear()
                await self.wakeup.wait()
            item = self.queue[0]
            if item.future.done():  # cancelled by the controller
                self.queue.popleft()
                continue
            try:
                conn = await self._connection()
                version = self._version(item.api)
                response = await conn.request(item.api, item.request, version)
            except UnsupportedByBrokerError as e:
                log.error(
                    "controller_request_unsupported",
                    broker=self.info.broker_id,
                    api=item.api.name,
                    error=str(e),
                )
                self.queue.popleft()
                if not item.future.done():
                    item.future.set_exception(e)
                continue
            except Exception as e:
                if not isinstance(e, (BrokerConnectionError, OSError)):
                    # Our bug (an unencodable request, say): drop it rather than block the queue.
                    log.exception("controller_request_failed", broker=self.info.broker_id, api=item.api.name)
                    self.queue.popleft()
                    if not item.future.done():
                        item.future.set_exception(e)
                    continue
                log.info(
                    "controller_request_retry",
                    broker=self.info.broker_id,
                    api=item.api.name,
                    reason=str(e),
                    backoff=backoff,
                )
                if self.conn is not None:
                    await self.conn.close()
                    self.conn = None
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.channel.max_retry_backoff)
                continue
            # ListOffsets (the drain task's) has no top-level error code.
            if getattr(response, "error_code", ErrorCode.NONE) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
                log.warning(
                    "controller_request_refused",
                    broker=self.info.broker_id,
                    api=item.api.name,
                    backoff=backoff,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.channel.max_retry_backoff)
                continue
            backoff = self.channel.retry_backoff
            self.queue.popleft()
            if not item.future.done():
                item.future.set_result(response)

    async def stop(self) -> None:
        self.task.cancel()
        try:
            await self.task
        except (asyncio.CancelledError, Exception):
            pass
        if self.conn is not None:
            await self.conn.close()
            self.conn = None
        err = BrokerGoneError(f"broker {self.info.broker_id} left")
        while self.queue:
            item = self.queue.popleft()
            if not item.future.done():
                item.future.set_exception(err)


class ControllerChannel:
    """Per-broker ordered, retried delivery of the controller's requests."""

    def __init__(
        self,
        controller_id: int,
        *,
        listener: str | None = None,
        request_timeout: float = 30.0,
        retry_backoff: float = 0.05,
        max_retry_backoff: float = 1.0,
    ) -> None:
        self.controller_id = controller_id
        self.listener = listener  # the inter-broker listener name; None: each broker's first
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        self.max_retry_backoff = max_retry_backoff
        self._senders: dict[int, _BrokerSender] = {}
        self._stopping: set[asyncio.Task[None]] = set()

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self._senders)

    def update_brokers(self, brokers: Mapping[int, BrokerInfo]) -> None:
        """Makes the set of brokers exactly ``brokers``: a broker whose endpoints
        changed (it re-registered) gets a fresh connection."""
        for bid in list(self._senders):
            if bid not in brokers:
                self.remove_broker(bid)
        for info in brokers.values():
            self.add_broker(info)

    def add_broker(self, info: BrokerInfo) -> None:
        sender = self._senders.get(info.broker_id)
        if sender is not None:
            if sender.info.endpoints == info.endpoints:
                sender.info = info
                return
            self.remove_broker(info.broker_id)
        self._senders[info.broker_id] = _BrokerSender(self, info)

    def remove_broker(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            task = asyncio.get_running_loop().create_task(sender.stop())
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

    def send(self, broker_id: int, api: Api, request: Any) -> asyncio.Future[Any]:
        """Queues ``request`` for ``broker_id``; the future gets the response, or
        BrokerGoneError. The controller may ignore the future."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.add_done_callback(_consume)
        sender = self._senders.get(broker_id)
        if sender is None:
            fut.set_exception(BrokerGoneError(f"broker {broker_id} is not live"))
            return fut
        sender.put(_Item(api, request, fut))
        return fut

    async def stop(self) -> None:
        for bid in list(self._senders):
            self.remove_broker(bid)
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)


def _consume(fut: asyncio.Future[Any]) -> None:
    # A future nobody awaits must not log "exception was never retrieved".
    if not fut.cancelled():
        fut.exception()


async def request_controlled_shutdown(
    host: str, port: int, broker_id: int, broker_epoch: int, controller_token: int, *, timeout: float = 30.0
) -> tuple[int, list[TopicPartition]]:
    """A broker's ControlledShutdown call to the controller at host:port: (error code,
    partitions it still leads). ``controller_token``: the controller's, from /controller,
    by which the controller knows the caller is a broker (v3+)."""
    conn = BrokerConnection(host, port, client_id=f"refka-broker-{broker_id}", request_timeout=timeout)
    await conn.connect()
    try:
        theirs = conn.versions.get(ControlledShutdown.key, (0, ControlledShutdown.max_version))
        version = min(ControlledShutdown.max_version, theirs[1])
        req = ControlledShutdown.Request(broker_id=broker_id, broker_epoch=broker_epoch,
                                         controller_token=controller_token)
        resp = await conn.request(ControlledShutdown, req, version)
        return resp.error_code, [(p.topic_name, p.partition_index) for p in resp.remaining_partitions]
    finally:
        await conn.close()
