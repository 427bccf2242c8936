"""A TCP proxy between Kafka clients and one broker that drops connections on demand.

The broker runs as a subprocess (tests/brokers.py), so a fault a test wants at
a precise point of the Kafka conversation is injected here, on loopback, with
nothing mocked: real client, real broker, real sockets. Start the proxy first
(it listens on a free port), then the broker with
``advertised.listeners=PLAINTEXT://127.0.0.1:<proxy.port>`` (``advertised()``),
so every connection a client opens after reading Metadata comes back through
the proxy. The broker's controller reaches its own broker through the
advertised address too: its connections are proxied and dropped like the
others, and it reconnects and retries as it does after any disconnect.

Faults:

- ``drop_all()``: abort every proxied connection now, both sides (a reset,
  as when a network path dies).
- ``drop_produce_responses(every=n)``: the n-th, 2n-th, ... Produce request
  is forwarded, the broker's response to it is swallowed and then every
  connection is aborted. The broker has appended the records; the client never
  hears so and must send them again: the case the idempotent producer exists
  for. ``disarm()`` stops it. (A Produce with acks=0 has no response and is
  never the one dropped.)

Counters (read any time): ``connections`` accepted, ``produce_requests``
forwarded, ``responses_swallowed``, ``drops`` (drop_all calls and armed
drops). The proxy reads whole frames (4-byte size, then the request header's
api key and correlation id) and forwards them unchanged.

The proxy runs its own asyncio loop in a daemon thread; its methods may be
called from any thread. Use it as a context manager or call ``start()`` and
``stop()``.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from typing import Any

_SIZE = struct.Struct(">i")
_REQUEST_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id
PRODUCE = 0


class _Link:
    """One client connection and its connection to the broker."""

    def __init__(self, client: asyncio.StreamWriter, broker: asyncio.StreamWriter) -> None:
        self.client = client
        self.broker = broker
        self.doomed: set[int] = set()  # correlation ids whose response is swallowed
        self.tasks: list[asyncio.Task[Any]] = []

    def abort(self) -> None:
        for w in (self.client, self.broker):
            w.transport.abort()
        for t in self.tasks:
            t.cancel()


class KafkaProxy:
    def __init__(self, target_host: str, target_port: int | None = None, *, host: str = "127.0.0.1") -> None:
        self.host = host
        self.target_host = target_host
        self.target_port = target_port
        self.port = 0
        self.connections = 0
        self.produce_requests = 0
        self.responses_swallowed = 0
        self.drops = 0
        self._every = 0
        self._links: set[_Link] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle (any thread) --------------------------------------------------------

    def start(self) -> KafkaProxy:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._accept, self.host, self.port)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="kafka-proxy", daemon=True)
        self._thread.start()
        ready.wait()
        return self

    def stop(self) -> None:
        if self._loop is None:
            return

        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            self._abort_all()

        self._call(shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop.close()
        self._loop = None

    def __enter__(self) -> KafkaProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def advertised(self) -> dict[str, str]:
        """The broker override that sends clients back through this proxy."""
        return {"advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}"}

    # -- faults (any thread) -----------------------------------------------------------

    def drop_all(self) -> int:
        """Abort every proxied connection; returns how many there were."""

        async def drop() -> int:
            self.drops += 1
            return self._abort_all()

        n: int = self._call(drop())
        return n

    def drop_produce_responses(self, every: int) -> None:
        if every < 1:
            raise ValueError("every must be >= 1")
        self._every = every

    def disarm(self) -> None:
        self._every = 0

    # -- the loop's side ---------------------------------------------------------------

    def _call(self, coro: Any) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    def _abort_all(self) -> int:
        links = list(self._links)
        self._links.clear()
        for link in links:
            link.abort()
        return len(links)

    async def _accept(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            b_reader, b_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            c_writer.transport.abort()
            return
        link = _Link(c_writer, b_writer)
        self._links.add(link)
        link.tasks = [
            asyncio.ensure_future(self._requests(link, c_reader)),
            asyncio.ensure_future(self._responses(link, b_reader)),
        ]
        await asyncio.gather(*link.tasks, return_exceptions=True)
        self._links.discard(link)
        link.abort()

    @staticmethod
    async def _frame(reader: asyncio.StreamReader) -> bytes | None:
        try:
            head = await reader.readexactly(4)
            (n,) = _SIZE.unpack(head)
            return head + await reader.readexactly(n)
        except (asyncio.IncompleteReadError, ConnectionError):
            return None

    async def _requests(self, link: _Link, reader: asyncio.StreamReader) -> None:
        """Client -> broker, frame by frame."""
        while True:
            frame = await self._frame(reader)
            if frame is None:
                link.abort()
                return
            if len(frame) >= 4 + _REQUEST_HEAD.size:
                api_key, _version, cid = _REQUEST_HEAD.unpack_from(frame, 4)
                if api_key == PRODUCE:
                    self.produce_requests += 1
                    if self._every and self.produce_requests % self._every == 0:
                        link.doomed.add(cid)
            link.broker.write(frame)
            await link.broker.drain()

    async def _responses(self, link: _Link, reader: asyncio.StreamReader) -> None:
        """Broker -> client; a doomed response is swallowed and every link aborted."""
        while True:
            frame = await self._frame(reader)
            if frame is None:
                link.abort()
                return
            (cid,) = _SIZE.unpack_from(frame, 4)
            if cid in link.doomed:
                self.responses_swallowed += 1
                self.drops += 1
                self._abort_all()
                link.abort()
                return
            link.client.write(frame)
            await link.client.drain()
