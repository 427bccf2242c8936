"""An asyncio connection to one Kafka broker speaking our codec: refka's one
Kafka client connection. The reference client, ``refka topics``, the
controller's channel to brokers, the brokers' replica fetchers and their
ControlledShutdown call all use it. Imports only ``refka.protocol``.

    conn = await BrokerConnection("127.0.0.1", 9092, client_id="x").connect()
    resp = await conn.request(Metadata, Metadata.Request(...))   # highest common version
    resp = await conn.request(LeaderAndIsr, req, 7)               # or a given one
    await conn.close()

Requests are pipelined; the broker answers in order and each answer finds its
request by correlation id. A request that times out closes the connection, as
Kafka clients do: the answers after it could no longer be trusted to line up,
and every pending request fails with ``BrokerConnectionError``. So does every
pending request when the connection is lost, or when the broker sends a frame
that cannot be valid (a bad length, an unknown correlation id). An answer that
does not decode fails its own request only, with ValueError (the frame
boundary is intact, and resending would get the same answer).

Timeouts use ``asyncio.timeout``, not ``wait_for``: on Python 3.11 ``wait_for``
swallows a cancellation that lands as the awaited result arrives, so a
cancelled caller (the controller channel's sender, a replica fetcher) would
run on and block a clean shutdown.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from refka.protocol import (
    Api,
    RequestHeader,
    decode_response_header,
    encode_request_header,
    frame,
)
from refka.protocol.framing import DEFAULT_MAX_FRAME, BadFrame
from refka.protocol.messages.api_versions import ApiVersions


class BrokerConnectionError(ConnectionError):
    """The connection failed, closed, or timed out; pending requests fail with it."""


_RECV = 64 * 1024  # the shared receive buffer; a frame larger than this gets its own


class _Protocol(asyncio.BufferedProtocol):
    """Reads frames with at most one copy. Small frames are read into a shared buffer
    and copied out whole; a frame larger than it gets a bytearray of its own that the
    socket fills directly, and the decoded response keeps views of it (a Fetch
    response's records are not copied again on their way to a follower's log)."""

    def __init__(self, conn: BrokerConnection) -> None:
        self.conn = conn
        self.max_frame_size = conn.max_frame_size
        self._buf = bytearray(_RECV)
        self._mv = memoryview(self._buf)
        self._start = self._end = 0
        self._big: bytearray | None = None  # the frame being read into its own buffer
        self._big_mv: memoryview | None = None
        self._big_got = 0

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big_mv is not None:
            return self._big_mv[self._big_got:]
        if self._end == len(self._buf):
            self._compact()
        return self._mv[self._end:]

    def _compact(self) -> None:
        partial = self._end - self._start
        self._buf[:partial] = bytes(self._mv[self._start:self._end])
        self._start, self._end = 0, partial

    def buffer_updated(self, nbytes: int) -> None:
        try:
            if self._big is not None:
                self._big_got += nbytes
                if self._big_got == len(self._big):
                    frame = memoryview(self._big)
                    self._big = self._big_mv = None
                    self.conn._on_frame(frame)
                return
            self._end += nbytes
            self._frames()
        except (BadFrame, BrokerConnectionError) as e:
            self.conn._fail(BrokerConnectionError(f"{self.conn.host}:{self.conn.port}: {e}"))

    def _frames(self) -> None:
        buf, mv = self._buf, self._mv
        p, end = self._start, self._end
        while end - p >= 4:
            n = int.from_bytes(buf[p:p + 4], "big", signed=True)
            if n < 4 or n > self.max_frame_size:
                raise BadFrame(f"bad response frame length {n}")
            have = end - p - 4
            if have >= n:
                self.conn._on_frame(memoryview(bytes(mv[p + 4:p + 4 + n])))
                p += 4 + n
                continue
            if n > len(buf) - 4:
                # Too big for the shared buffer: its own, filled from here on by the socket.
                self._big = bytearray(n)
                self._big_mv = memoryview(self._big)
                self._big_mv[:have] = mv[p + 4:end]
                self._big_got = have
                p = end
            break
        if p == end:
            self._start = self._end = 0
        else:
            self._start = p

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn._fail(BrokerConnectionError(f"connection to {self.conn.host}:{self.conn.port} lost: {exc!r}"))

    def pause_writing(self) -> None:
        self.conn._writable.clear()

    def resume_writing(self) -> None:
        self.conn._writable.set()


class BrokerConnection:
    def __init__(
        self,
        host: str,
        port: int,
        client_id: str | None = "refka",
        *,
        connect_timeout: float = 10.0,
        request_timeout: float = 30.0,
        max_frame_size: int = DEFAULT_MAX_FRAME,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.max_frame_size = max_frame_size
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, tuple[asyncio.Future[Any], Api, int]] = {}
        self._ids = itertools.count(1)
        self._writable = asyncio.Event()
        self._writable.set()
        self.versions: dict[int, tuple[int, int]] = {}
        self.closed = True

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port}{', closed' if self.closed else ''})"

    async def connect(self, timeout: float | None = None, negotiate: bool = True) -> BrokerConnection:
        """Opens the connection; with ``negotiate``, asks ApiVersions (v3, else v0)
        and keeps the answer in ``versions`` for ``version_for``."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout or self.connect_timeout):
                self._transport, _ = await loop.create_connection(lambda: _Protocol(self), self.host, self.port)
        except (TimeoutError, OSError) as e:
            raise BrokerConnectionError(f"cannot connect to {self.host}:{self.port}: {e!r}") from e
        self.closed = False
        if negotiate:
            try:
                self.versions = await self.api_versions()
            except BaseException:
                await self.close()
                raise
        return self

    async def api_versions(self) -> dict[int, tuple[int, int]]:
        """The peer's ApiVersions: api key -> (min, max). Tries v3, then v0 (a
        broker that does not know v3 answers UNSUPPORTED_VERSION in v0's form)."""
        for version in (3, 0):
            req = ApiVersions.Request(client_software_name="refka", client_software_version="0.1.0")
            resp = await self.request(ApiVersions, req, version)
            if resp.error_code == 0:
                return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        return {}

    def version_for(self, api: Api) -> int:
        """The highest version both we and the broker have."""
        lo, hi = self.versions.get(api.key, (api.min_version, api.max_version))
        v = min(hi, api.max_version)
        if v < max(lo, api.min_version):
            raise BrokerConnectionError(f"no common version of {api.name} with {self.host}:{self.port}")
        return v

    async def request(self, api: Api, body: Any, version: int | None = None, *,
                      expect_response: bool = True, timeout: float | None = None) -> Any:
        """Sends ``body`` as ``api`` (``version``, else the highest common one);
        returns the decoded response, or None when none is expected (acks=0)."""
        if self._transport is None or self.closed:
            raise BrokerConnectionError(f"not connected to {self.host}:{self.port}")
        v = self.version_for(api) if version is None else version
        cid = next(self._ids) & 0x7FFFFFFF
        header = encode_request_header(RequestHeader(api.key, v, cid, self.client_id), api.request_header_version(v))
        chunks = frame([header, *api.encode_request(body, v)])
        try:
            async with asyncio.timeout(timeout or self.request_timeout):
                if not self._writable.is_set():
                    await self._writable.wait()
                    if self._transport is None or self.closed:
                        raise BrokerConnectionError(f"connection to {self.host}:{self.port} closed")
                fut: asyncio.Future[Any] | None = None
                if expect_response:
                    fut = asyncio.get_running_loop().create_future()
                    fut.add_done_callback(_retrieved)  # a cancelled caller leaves no "never retrieved"
                    self._pending[cid] = (fut, api, v)
                self._transport.writelines(chunks)
                if fut is None:
                    return None
                # shield: the future is the connection's; a cancelled caller leaves it to be answered
                return await asyncio.shield(fut)
        except TimeoutError:
            err = BrokerConnectionError(f"{api.name} v{v} to {self.host}:{self.port} timed out")
            self._fail(err)
            raise err from None

    def _on_frame(self, f: memoryview) -> None:
        cid = int.from_bytes(f[:4], "big", signed=True)
        entry = self._pending.pop(cid, None)
        if entry is None:
            raise BrokerConnectionError(f"response with unknown correlation id {cid}")
        fut, api, v = entry
        try:
            _cid, pos = decode_response_header(f, api.response_header_version(v))
            resp, _end = api.decode_response(f, v, pos)  # f is the frame's own: views of it may stay
        except Exception as e:  # not a connection error: resending the request would not help
            if not fut.done():
                fut.set_exception(ValueError(f"undecodable {api.name} v{v} response from {self.host}:{self.port}: {e!r}"))
            return
        if not fut.done():
            fut.set_result(resp)

    def _fail(self, error: BrokerConnectionError) -> None:
        self.closed = True
        self._writable.set()  # wakes writers waiting for room: they find the connection closed
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()
        pending, self._pending = self._pending, {}
        for fut, _api, _v in pending.values():
            if not fut.done():
                fut.set_exception(error)

    async def close(self) -> None:
        self._fail(BrokerConnectionError(f"connection to {self.host}:{self.port} closed"))


def _retrieved(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


async def connect(bootstrap: str, client_id: str = "refka") -> BrokerConnection:
    """Connects to the first reachable broker of a bootstrap list."""
    last: Exception | None = None
    for hp in bootstrap.split(","):
        host, _, port = hp.strip().rpartition(":")
        try:
            return await BrokerConnection(host or "127.0.0.1", int(port), client_id).connect()
        except BrokerConnectionError as e:
            last = e
    raise BrokerConnectionError(f"no broker of {bootstrap} answered: {last}")
