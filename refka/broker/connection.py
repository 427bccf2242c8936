"""One client connection: frames in, handlers, responses out in request order.

Requests are decoded as their frames complete and dispatched at once
(pipelining); a handler that waits (acks=all, Fetch long-poll) does not hold
up decoding, but responses leave **in request order**: each request takes a
slot in a queue and the queue is flushed from its head.

A malformed or oversized frame, an unknown API key, or a version we do not
serve (other than ApiVersions, which answers v0 with UNSUPPORTED_VERSION, as
Kafka does) closes this connection with a warning; everyone else is served on.
A Kafka API refka does not serve, or a version of one it serves above or below
the served ones, is logged once per client and reason instead
(``request_not_served``, recording.py) and counted in the metrics.

Bytes are received straight into one buffer per connection
(``asyncio.BufferedProtocol``), reused from its start whenever every frame in
it has been handled, and frames are handed to the decoder as memoryviews into
it: no per-read allocation and no copy of a Produce's records before the log
writes them. The rule that makes this safe: a decoded request's memoryviews
(RECORDS fields) are valid only during the synchronous part of its handler; a
handler that keeps request bytes across an ``await`` copies them.

Resources (Kafka's names): an idle connection holds no receive buffer (one
is lent from a shared pool while bytes wait to be handled), and is closed
after ``connections.max.idle.ms`` without traffic; ``max.connections`` and
``max.connections.per.ip`` refuse connections beyond them; at most 64 frames
are handled per event-loop turn (a client pipelining thousands of requests
shares the loop with everyone else), and a connection is not read from while
its unsent answers pass the transport's high-water mark, while 512 answers are
pending, or while the broker's requests awaiting an answer hold more than
``queued.max.request.bytes`` (unbounded by default, as in Kafka).

Until the controller's first UpdateMetadata has named this broker (it is
"ready"), client requests other than ApiVersions wait for it, so no client
sees a cluster without brokers; the inter-broker APIs are served at once (the
controller's requests are what makes the broker ready). Whether their sender
is a broker is the handlers' question to inter_broker.py, which remembers the
answer on the connection (``broker_id``).
"""

from __future__ import annotations

import asyncio
import inspect
import struct
import time
from collections import deque
from dataclasses import dataclass, replace
from types import CoroutineType
from typing import Any, Protocol

from refka.protocol import (
    DecodeError,
    ErrorCode,
    decode_request_header,
    encode_response_header,
    peek_request_header,
)
from refka.protocol.codec import EncodeError
from refka.protocol.kafka_apis import kafka_api_name
from refka.protocol.messages.api_versions import ApiVersions

from .broker_metrics import LatencyHistograms
from .faults import INTERCEPT, Delay, FaultTable, Intercepted, merge_errors, split, whole_error
from .logging import get_logger
from .recording import BrokerRecordings, ConnectionRecording
from .registry import HANDLERS, Handler, api_versions_response
from .stats import Stats

log = get_logger("refka.connection")

# Why an API key refka does not serve is not served, where the README says it.
_WHY_NOT = {
    **dict.fromkeys((24, 25, 26, 27, 28, 61, 65, 66), ": transactions are not served (README, Not yet served)"),
    68: ": KIP-848's consumer group protocol is not served; use group.protocol=classic",
    69: ": KIP-848's consumer group protocol is not served; use group.protocol=classic",
    **dict.fromkeys((17, 36), ": SASL is not served (PLAINTEXT listeners only)"),
    **dict.fromkeys((76, 77, 78, 79), ": KIP-932's share groups are not served"),
}

_MAX_IN_FLIGHT = 512  # stop reading when this many responses are pending
_RECV_BUFFER = 256 * 1024  # receive buffer lent to a connection; grows for larger frames
_MIN_READ = 64 * 1024  # room offered to each socket read
_FRAMES_PER_TURN = 64  # frames handled before the loop goes to other connections
_POOLED_BUFFERS = 16  # receive buffers kept for reuse once returned (4 MiB)
_FRAME_LEN = struct.Struct(">i").unpack_from


class _BufferPool:
    """Receive buffers of one size, lent to connections while they have bytes to handle."""

    def __init__(self, size: int, keep: int) -> None:
        self.size = size
        self.keep = keep
        self.free: list[bytearray] = []

    def take(self) -> bytearray:
        return self.free.pop() if self.free else bytearray(self.size)

    def give(self, buf: bytearray) -> None:
        if len(buf) == self.size and len(self.free) < self.keep:
            self.free.append(buf)


_POOL = _BufferPool(_RECV_BUFFER, _POOLED_BUFFERS)
_UNLIMITED = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The connection properties of a broker (Kafka's names and defaults)."""

    max_frame_size: int = 104857600  # socket.request.max.bytes
    max_idle_ms: int = 600_000  # connections.max.idle.ms; -1: never closed for idleness
    max_connections: int = _UNLIMITED  # max.connections
    max_connections_per_ip: int = _UNLIMITED  # max.connections.per.ip
    queued_max_request_bytes: int = -1  # queued.max.request.bytes; -1: unbounded

    @classmethod
    def from_config(cls, cfg: Any) -> ConnectionLimits:
        return cls(cfg["socket.request.max.bytes"], cfg["connections.max.idle.ms"], cfg["max.connections"],
                   cfg["max.connections.per.ip"], cfg["queued.max.request.bytes"])


class ConnectionOwner(Protocol):
    """What a connection needs of its broker (broker.py's ``Broker`` is one). The same
    object reaches the handlers as ``ctx.broker``: the broker's parts they translate
    requests into (metadata cache, replica manager, group coordinator, controller side)."""

    connections: set[Connection]
    ready: asyncio.Event  # set once the controller's first UpdateMetadata named this broker
    stats: Stats
    recordings: BrokerRecordings  # this broker's per-connection request recordings (recording.py)
    latency: LatencyHistograms  # request latency per API (broker_metrics.py)
    faults: FaultTable  # the process's injected faults (faults.py)
    node_id: int
    request_log: bool
    queued_request_bytes: int  # of requests read and not yet answered, over all connections


class RequestContext:
    __slots__ = ("broker", "conn", "api_key", "api_version", "correlation_id", "client_id", "received",
                 "size", "topics")

    def __init__(self, broker: ConnectionOwner, conn: Connection, api_key: int, api_version: int,
                 correlation_id: int, client_id: str | None, size: int = 0,
                 received: float | None = None) -> None:
        self.broker = broker
        self.conn = conn
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.received = time.monotonic() if received is None else received  # the frame read
        self.size = size  # of the request frame, with its length prefix
        # Metadata: the topics the request named, or recording.ALL_TOPICS (recording.py)
        self.topics: Any = None

    def not_served(self, reason: str, answer: ErrorCode) -> None:
        """A handler refuses what refka does not serve (a transactional id): counted and logged
        once per client and reason (recording.py's note_unserved)."""
        rec = self.conn.recording
        self.broker.recordings.note_unserved(self.client_id, rec.software_name if rec is not None else None,
                                             reason, answer.name, peer=self.conn.peer)


class _Slot:
    __slots__ = ("done", "chunks", "size")

    def __init__(self, size: int = 0) -> None:
        self.done = False
        self.chunks: list[Any] | None = None
        self.size = size  # of the request, counted in the owner's queued_request_bytes until answered


class Connection(asyncio.BufferedProtocol):
    def __init__(self, broker: ConnectionOwner, listener: str, limits: ConnectionLimits) -> None:
        self.broker = broker
        self.listener = listener
        self.limits = limits
        self.transport: asyncio.Transport | None = None
        self.max_frame_size = limits.max_frame_size
        self._buf: bytearray | None = None  # lent by _POOL while bytes wait to be handled
        self._mv: memoryview | None = None
        self.last_active = time.monotonic()
        self._turn_scheduled = False
        self._start = 0  # first byte not yet handled
        self._end = 0  # end of the bytes received
        self._need = 0  # size (with its length prefix) of the frame being received
        self.pending: deque[_Slot] = deque()
        self.tasks: set[asyncio.Task[Any]] = set()
        self.peer = "?"
        # The broker this connection proved to be (inter_broker.py); None: a client's.
        self.broker_id: int | None = None
        self.closed = False
        self.recording: ConnectionRecording | None = None  # connection_made
        self._reading_paused = False
        self._writing_paused = False

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        refused = self._over_limit(peer[0] if peer else None)
        if refused:
            log.warning("connection_refused", peer=self.peer, reason=refused)
            self.closed = True
            transport.close()
            return
        self.broker.connections.add(self)
        self.recording = self.broker.recordings.opened(self.listener, self.peer)

    def _over_limit(self, host: str | None) -> str | None:
        lim = self.limits
        conns = self.broker.connections
        if len(conns) >= lim.max_connections:
            return f"max.connections ({lim.max_connections}) reached"
        if lim.max_connections_per_ip < _UNLIMITED and host is not None:
            same = sum(1 for c in conns if c.peer.rpartition(":")[0] == host)
            if same >= lim.max_connections_per_ip:
                return f"max.connections.per.ip ({lim.max_connections_per_ip}) reached for {host}"
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.broker.connections.discard(self)
        for t in list(self.tasks):
            t.cancel()
        for slot in self.pending:
            self._answered(slot)
        self.pending.clear()
        self._release_buffer()
        if self.recording is not None:
            self.broker.recordings.closed_connection(self.recording)

    def idle_for_ms(self, now: float) -> float:
        """How long nothing was read or written, when no answer is pending; else 0."""
        return 0.0 if self.pending else (now - self.last_active) * 1000

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        buf = self._buf
        if buf is None:
            buf = self._buf = _POOL.take()
            self._mv = memoryview(buf)
        if len(buf) - self._end < max(_MIN_READ, self._need - (self._end - self._start)):
            buf = self._make_room(buf)
        return memoryview(buf)[self._end :] if self._mv is None else self._mv[self._end :]

    def _release_buffer(self) -> None:
        """Nothing waits in the buffer: back to the pool (an idle connection holds none)."""
        if self._buf is not None:
            buf, self._buf, self._mv = self._buf, None, None
            self._start = self._end = 0
            _POOL.give(buf)

    def _make_room(self, buf: bytearray) -> bytearray:
        """Moves the partial frame to the front, or into a larger buffer (the pooled one
        goes back to the pool); returns the buffer."""
        partial = self._end - self._start
        size = max(_RECV_BUFFER, self._need + _MIN_READ, partial + _MIN_READ)
        if size > len(buf) or self._start == 0:
            fresh = bytearray(max(size, len(buf)))
            fresh[:partial] = memoryview(buf)[self._start : self._end]
            _POOL.give(buf)
            self._buf, self._mv = fresh, memoryview(fresh)
            buf = fresh
        else:
            # Same-length slice assignment (views of the buffer may exist); a copy
            # of the partial frame first, as the two ranges may overlap.
            buf[:partial] = bytes(memoryview(buf)[self._start : self._end])
        self._start, self._end = 0, partial
        return buf

    def buffer_updated(self, nbytes: int) -> None:
        self._end += nbytes
        self.last_active = time.monotonic()
        self._handle_frames()

    def _must_wait(self) -> bool:
        """Back-pressure: no more requests are taken while this holds."""
        limit = self.limits.queued_max_request_bytes
        return (self._writing_paused or len(self.pending) >= _MAX_IN_FLIGHT
                or (limit > 0 and self.broker.queued_request_bytes >= limit))

    def _handle_frames(self) -> None:
        """Handles the complete frames in the buffer: up to _FRAMES_PER_TURN of them, and
        none while back-pressure holds; the rest wait there (reading pauses meanwhile)."""
        self._turn_scheduled = False
        if self.closed or self._buf is None or self._mv is None:
            return
        buf, mv = self._buf, self._mv
        p, end = self._start, self._end
        handled = 0
        while end - p >= 4:
            if handled == _FRAMES_PER_TURN or self._must_wait():
                break
            (n,) = _FRAME_LEN(buf, p)
            if n < 0:
                self.abort("bad_frame", reason=f"negative frame length {n}")
                return
            if n > self.max_frame_size:
                self.abort("bad_frame", reason=f"frame of {n} bytes exceeds the maximum of {self.max_frame_size}")
                return
            if end - p - 4 < n:
                self._need = 4 + n
                break
            self._on_frame(mv[p + 4 : p + 4 + n])
            if self.closed:
                return
            p += 4 + n
            self._need = 0
            handled += 1
        if p == end:
            self._release_buffer()
        else:
            self._start = p
        self._update_reading()

    def _frames_waiting(self) -> bool:
        """A complete frame is in the buffer, not yet handled."""
        if self._buf is None or self._end - self._start < 4:
            return False
        (n,) = _FRAME_LEN(self._buf, self._start)
        return n < 0 or self._end - self._start - 4 >= n

    # -- requests

    def abort(self, event: str, *, quiet: bool = False, **fields: Any) -> None:
        """Closes this connection because the peer broke the protocol (logged at warning level;
        at debug when ``quiet``, for a refusal ``_not_served`` logged once per client)."""
        if not self.closed:
            (log.debug if quiet else log.warning)(event, peer=self.peer, **fields)
            self.closed = True
            if self.transport is not None:
                self.transport.close()

    def _not_served(self, frame: memoryview, reason: str, **fields: Any) -> None:
        """The request asks for an API or version refka does not serve: counted and logged once
        per client and reason (recording.py); the client id read from the header (v1's layout,
        which every later header version starts with), if it reads."""
        try:
            client_id = decode_request_header(frame, 1)[0].client_id
        except DecodeError:
            client_id = None
        software = self.recording.software_name if self.recording is not None else None
        self.broker.recordings.note_unserved(client_id, software, reason, "connection closed (as Kafka does)",
                                             peer=self.peer, **fields)

    def _on_frame(self, frame: memoryview) -> None:
        received = time.monotonic()
        try:
            api_key, version, correlation_id = peek_request_header(frame)
        except DecodeError as e:
            self.abort("bad_request_header", reason=str(e))
            return
        handler = HANDLERS.get(api_key)
        if handler is None:
            name = kafka_api_name(api_key)
            if name == "unknown":  # no Kafka API: garbage, a protocol break like any other
                self.abort("unknown_api_key", api_key=api_key, api_version=version)
                return
            self._not_served(frame, f"API {name} (key {api_key}) is not served" + _WHY_NOT.get(api_key, ""),
                             api_key=api_key, api_version=version)
            self.abort("unknown_api_key", quiet=True, api_key=api_key, api=name, api_version=version)
            return
        if not handler.min_version <= version <= handler.max_version:
            if api_key == ApiVersions.key:
                self._answer_api_versions_fallback(correlation_id)
                return
            served = f"{handler.min_version}-{handler.max_version}"
            self._not_served(frame, f"{handler.api.name} v{version} is not served (v{served} are)",
                             api_key=api_key, api_version=version)
            self.abort("unsupported_version", quiet=True, api=handler.api.name, api_version=version, served=served)
            return
        api = handler.api
        # Before the broker is ready, client requests wait: decode from a copy,
        # the receive buffer is reused meanwhile.
        deferred = not self.broker.ready.is_set() and not handler.inter_broker and api_key != ApiVersions.key
        if deferred:
            frame = memoryview(bytes(frame))
        try:
            header, pos = decode_request_header(frame, api.request_header_version(version))
            request, end = api.decode_request(frame, version, pos)
        except DecodeError as e:
            self.abort("malformed_request", api=api.name, api_version=version, reason=str(e))
            return
        ctx = RequestContext(self.broker, self, api_key, version, correlation_id, header.client_id,
                             len(frame) + 4, received)
        faults = self.broker.faults
        if faults.faults:  # a lab's fault injection (faults.py): one truth test when there is none
            fault = faults.match(self.broker.node_id, api_key, version, header.client_id, request,
                                 _follower(api_key, version, request))
            if fault is not None:
                if fault.kind == "drop-before":
                    faults.fired(fault, self.broker.node_id, f"{api.name} v{version}")
                    self.abort("fault_drop_before", quiet=True, api=api.name)
                    return
                if not deferred:  # the handler may run after an await: decoded again from a copy, as deferred
                    request, end = api.decode_request(memoryview(bytes(frame)), version, pos)
                self._dispatch(replace(handler, fn=_faulted, is_async=True), ctx,
                               (handler, request, fault, deferred), len(frame))
                return
        if deferred:
            self._dispatch(replace(handler, fn=_when_ready, is_async=True), ctx, (handler, request), len(frame))
        else:
            self._dispatch(handler, ctx, request, len(frame))

    def _dispatch(self, handler: Handler, ctx: RequestContext, request: Any, size: int) -> None:
        try:
            result = handler.fn(ctx, request)
        except Exception:
            log.exception("handler_failed", api=handler.api.name, api_version=ctx.api_version,
                          peer=self.peer)
            self.abort("closing_after_handler_failure")
            return
        if handler.is_async or type(result) is CoroutineType:
            slot = _Slot(size + 4)
            self.broker.queued_request_bytes += slot.size
            self.pending.append(slot)
            task = asyncio.ensure_future(result)
            self.tasks.add(task)
            task.add_done_callback(lambda t: self._async_done(t, slot, handler, ctx))
            self._update_reading()
        else:
            self._complete(handler, ctx, result, None)

    def _async_done(self, task: asyncio.Task[Any], slot: _Slot, handler: Handler, ctx: RequestContext) -> None:
        self.tasks.discard(task)
        if task.cancelled() or self.closed:
            return
        exc = task.exception()
        if exc is not None:
            log.error("handler_failed", api=handler.api.name, api_version=ctx.api_version,
                      peer=self.peer, exc_info=exc)
            self.abort("closing_after_handler_failure")
            return
        self._complete(handler, ctx, task.result(), slot)

    def _complete(self, handler: Handler, ctx: RequestContext, response: Any, slot: _Slot | None) -> None:
        chunks = None
        size = -4  # no answer (acks=0): 0 bytes recorded
        if response is not None:
            api = handler.api
            try:
                body = api.encode_response(response, ctx.api_version)
            except EncodeError:
                log.exception("response_encode_failed", api=api.name, api_version=ctx.api_version,
                              peer=self.peer)
                self.abort("closing_after_handler_failure")
                return
            header = encode_response_header(ctx.correlation_id, api.response_header_version(ctx.api_version))
            size = len(header) + sum(len(c) for c in body)
            chunks = [size.to_bytes(4, "big") + header, *body]
        rec = self.recording
        now = time.monotonic()
        self.broker.latency.observe(handler.api.key, (now - ctx.received) * 1000)
        if rec is not None and rec.active:
            rec.add(handler.api, ctx.api_version, ctx.correlation_id, ctx.client_id, ctx.topics, ctx.size,
                    response, size + 4, ctx.received, now)
        if self.broker.request_log:
            log.debug("request", api=handler.api.name, api_version=ctx.api_version,
                      correlation_id=ctx.correlation_id, client_id=ctx.client_id, peer=self.peer,
                      ms=round((time.monotonic() - ctx.received) * 1000, 3))
        if slot is None:
            if not self.pending:
                if chunks is not None and self.transport is not None:
                    self.transport.writelines(chunks)
                return
            slot = _Slot()
            self.pending.append(slot)
        slot.done = True
        slot.chunks = chunks
        self._answered(slot)
        self._flush()

    def _answered(self, slot: _Slot) -> None:
        """The request of ``slot`` no longer counts in queued.max.request.bytes; connections
        that waited for the total to drop are read from again."""
        if not slot.size:
            return
        limit = self.limits.queued_max_request_bytes
        owner = self.broker
        before = owner.queued_request_bytes
        owner.queued_request_bytes = before - slot.size
        slot.size = 0
        if limit > 0 and before >= limit > owner.queued_request_bytes:
            for c in list(owner.connections):
                if c is not self:
                    c._update_reading()

    def _flush(self) -> None:
        pending = self.pending
        out: list[Any] = []
        while pending and pending[0].done:
            s = pending.popleft()
            if s.chunks is not None:
                out.extend(s.chunks)
        if out and self.transport is not None and not self.closed:
            self.transport.writelines(out)
            self.last_active = time.monotonic()
        self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        waiting = self._frames_waiting()
        if waiting and not self._must_wait() and not self._turn_scheduled:
            # The rest of the buffered frames in a later turn: other connections first.
            self._turn_scheduled = True
            asyncio.get_running_loop().call_soon(self._handle_frames)
        should_pause = waiting or self._must_wait()
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()

    def _answer_api_versions_fallback(self, correlation_id: int) -> None:
        """KIP-511: an unknown ApiVersions version gets a v0 answer with the error."""
        resp = api_versions_response(ErrorCode.UNSUPPORTED_VERSION)
        body = ApiVersions.encode_response(resp, 0)
        header = encode_response_header(correlation_id, 0)
        size = len(header) + sum(len(c) for c in body)
        chunks = [size.to_bytes(4, "big") + header, *body]
        if self.pending:
            slot = _Slot()
            slot.done, slot.chunks = True, chunks
            self.pending.append(slot)
            self._flush()
        elif self.transport is not None:
            self.transport.writelines(chunks)


async def _when_ready(ctx: RequestContext, deferred: tuple[Handler, Any]) -> Any:
    """A client request that arrived before the broker was ready, served once it is."""
    handler, request = deferred
    await ctx.broker.ready.wait()
    result = handler.fn(ctx, request)
    if handler.is_async or type(result) is CoroutineType:
        result = await result
    return result


def _follower(api_key: int, version: int, request: Any) -> int:
    """The replica id of a follower's Fetch, else -1."""
    if api_key != 1:
        return -1
    if version >= 15:
        return request.replica_state.replica_id if request.replica_state is not None else -1
    return request.replica_id


async def _call(handler: Handler, ctx: RequestContext, request: Any) -> Any:
    result = handler.fn(ctx, request)
    if type(result) is CoroutineType:
        result = await result
    return result


async def _faulted(ctx: RequestContext, args: tuple[Handler, Any, Any, bool]) -> Any:
    """A request a fault matched (faults.py): what the fault's kind says instead of, or around,
    the handler (decoded from its own copy of the frame: it may run after an await). One that
    arrived before the broker was ready waits for it first, as ``_when_ready``."""
    handler, request, fault, deferred = args
    broker = ctx.broker
    if deferred:
        await broker.ready.wait()
    broker.faults.fired(fault, broker.node_id, f"{handler.api.name} v{ctx.api_version}")
    kind = fault.kind
    if kind == INTERCEPT:
        assert fault.handler is not None
        out = fault.handler(Intercepted(broker.node_id, handler.api.key, ctx.api_version, ctx.client_id, request,
                                        handler.api.Response))
        if inspect.isawaitable(out):
            out = await out
        if out is None:
            return await _call(handler, ctx, request)
        if isinstance(out, Delay):
            response = await _call(handler, ctx, request)
            await asyncio.sleep(out.seconds)
            return response
        return out
    if kind in ("latency", "replication-delay"):  # handled at once (appends keep the connection's order), answered late
        response = await _call(handler, ctx, request)
        await asyncio.sleep(fault.latency_ms / 1000)
        return response
    if kind == "blackhole":
        await asyncio.get_running_loop().create_future()  # never answered; cancelled when the connection goes
    if kind == "throttle":
        response = await _call(handler, ctx, request)
        if response is not None:
            size = sum(len(c) for c in handler.api.encode_response(response, ctx.api_version))
            await asyncio.sleep(size / fault.bytes_per_second)  # as long as a link of that rate takes
        return response
    if kind == "drop-after":
        await _call(handler, ctx, request)
        ctx.conn.abort("fault_drop_after", quiet=True, api=handler.api.name)
        return None
    api_key = handler.api.key  # kind "error"
    if api_key in (0, 1):  # Produce, Fetch: the partitions in scope answered with the error
        rest, hit = split(api_key, request, fault)
        response = await _call(handler, ctx, rest) if rest is not None else None
        if api_key == 0 and request.acks == 0:
            return None
        return merge_errors(api_key, response, hit, fault.error_code)
    return whole_error(handler.api, ctx.api_version, request, fault.error_code)
