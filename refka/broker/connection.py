"""One client connection: frames in, handlers, responses out in request order.

Requests are decoded as their frames complete and dispatched at once
(pipelining); a handler that waits (acks=all, Fetch long-poll) does not hold
up decoding, but responses leave **in request order**: each request takes a
slot in a queue and the queue is flushed from its head.

A malformed or oversized frame, an unknown API key, or a version we do not
serve (other than ApiVersions, which answers v0 with UNSUPPORTED_VERSION, as
Kafka does) closes this connection with a warning; everyone else is served on.

Bytes are received straight into one buffer per connection
(``asyncio.BufferedProtocol``), reused from its start whenever every frame in
it has been handled, and frames are handed to the decoder as memoryviews into
it: no per-read allocation and no copy of a Produce's records before the log
writes them. The rule that makes this safe: a decoded request's memoryviews
(RECORDS fields) are valid only during the synchronous part of its handler; a
handler that keeps request bytes across an ``await`` copies them.

Until the controller's first UpdateMetadata has named this broker (it is
"ready"), client requests other than ApiVersions wait for it, so no client
sees a cluster without brokers; the controller's own requests are served at
once (they are what makes the broker ready).
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections import deque
from dataclasses import replace
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
from refka.protocol.messages.api_versions import ApiVersions

from .logging import get_logger
from .registry import HANDLERS, Handler, api_versions_response
from .stats import Stats

log = get_logger("refka.connection")

_MAX_IN_FLIGHT = 512  # stop reading when this many responses are pending
_RECV_BUFFER = 256 * 1024  # initial receive buffer; grows for larger frames
_MIN_READ = 64 * 1024  # room offered to each socket read
_FRAME_LEN = struct.Struct(">i").unpack_from


class ConnectionOwner(Protocol):
    """What a connection needs of its broker (broker.py's ``Broker`` is one). The same
    object reaches the handlers as ``ctx.broker``: the broker's parts they translate
    requests into (metadata cache, replica manager, group coordinator, controller side)."""

    connections: set[Connection]
    ready: asyncio.Event  # set once the controller's first UpdateMetadata named this broker
    stats: Stats
    request_log: bool


class RequestContext:
    __slots__ = ("broker", "conn", "api_key", "api_version", "correlation_id", "client_id", "received")

    def __init__(self, broker: ConnectionOwner, conn: Connection, api_key: int, api_version: int,
                 correlation_id: int, client_id: str | None) -> None:
        self.broker = broker
        self.conn = conn
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.received = time.monotonic()


class _Slot:
    __slots__ = ("done", "chunks")

    def __init__(self) -> None:
        self.done = False
        self.chunks: list[Any] | None = None


class Connection(asyncio.BufferedProtocol):
    def __init__(self, broker: ConnectionOwner, listener: str, max_frame_size: int) -> None:
        self.broker = broker
        self.listener = listener
        self.transport: asyncio.Transport | None = None
        self.max_frame_size = max_frame_size  # socket.request.max.bytes
        self._buf = bytearray(_RECV_BUFFER)
        self._mv = memoryview(self._buf)
        self._start = 0  # first byte not yet handled
        self._end = 0  # end of the bytes received
        self._need = 0  # size (with its length prefix) of the frame being received
        self.pending: deque[_Slot] = deque()
        self.tasks: set[asyncio.Task[Any]] = set()
        self.peer = "?"
        self.closed = False
        self._reading_paused = False
        self._writing_paused = False

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.broker.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.broker.connections.discard(self)
        for t in list(self.tasks):
            t.cancel()
        self.pending.clear()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        if len(self._buf) - self._end < max(_MIN_READ, self._need - (self._end - self._start)):
            self._make_room()
        return self._mv[self._end :]

    def _make_room(self) -> None:
        """Moves the partial frame to the front, or into a larger buffer."""
        partial = self._end - self._start
        size = max(_RECV_BUFFER, self._need + _MIN_READ, partial + _MIN_READ)
        if size > len(self._buf) or self._start == 0:
            fresh = bytearray(max(size, len(self._buf)))
            fresh[:partial] = self._mv[self._start : self._end]
            self._buf, self._mv = fresh, memoryview(fresh)
        else:
            # Same-length slice assignment (views of the buffer may exist); a copy
            # of the partial frame first, as the two ranges may overlap.
            self._buf[:partial] = bytes(self._mv[self._start : self._end])
        self._start, self._end = 0, partial

    def buffer_updated(self, nbytes: int) -> None:
        self._end += nbytes
        buf, mv = self._buf, self._mv
        p, end = self._start, self._end
        while end - p >= 4:
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
        if p == end:
            # Everything handled: read into the buffer from its start again.
            self._start = self._end = 0
            if len(buf) > 4 * _RECV_BUFFER:
                self._buf = bytearray(_RECV_BUFFER)
                self._mv = memoryview(self._buf)
        else:
            self._start = p

    # -- requests

    def abort(self, event: str, **fields: Any) -> None:
        """Closes this connection because the peer broke the protocol."""
        if not self.closed:
            log.warning(event, peer=self.peer, **fields)
            self.closed = True
            if self.transport is not None:
                self.transport.close()

    def _on_frame(self, frame: memoryview) -> None:
        try:
            api_key, version, correlation_id = peek_request_header(frame)
        except DecodeError as e:
            self.abort("bad_request_header", reason=str(e))
            return
        handler = HANDLERS.get(api_key)
        if handler is None:
            self.abort("unknown_api_key", api_key=api_key, api_version=version)
            return
        if not handler.min_version <= version <= handler.max_version:
            if api_key == ApiVersions.key:
                self._answer_api_versions_fallback(correlation_id)
                return
            self.abort("unsupported_version", api=handler.api.name, api_version=version,
                       served=f"{handler.min_version}-{handler.max_version}")
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
        ctx = RequestContext(self.broker, self, api_key, version, correlation_id, header.client_id)
        self.broker.stats.request(api_key, len(frame) + 4)
        if deferred:
            self._dispatch(replace(handler, fn=_when_ready, is_async=True), ctx, (handler, request))
        else:
            self._dispatch(handler, ctx, request)

    def _dispatch(self, handler: Handler, ctx: RequestContext, request: Any) -> None:
        try:
            result = handler.fn(ctx, request)
        except Exception:
            log.exception("handler_failed", api=handler.api.name, api_version=ctx.api_version,
                          peer=self.peer)
            self.abort("closing_after_handler_failure")
            return
        if handler.is_async or type(result) is CoroutineType:
            slot = _Slot()
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
        self._flush()

    def _flush(self) -> None:
        pending = self.pending
        out: list[Any] = []
        while pending and pending[0].done:
            s = pending.popleft()
            if s.chunks is not None:
                out.extend(s.chunks)
        if out and self.transport is not None and not self.closed:
            self.transport.writelines(out)
        self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        should_pause = self._writing_paused or len(self.pending) >= _MAX_IN_FLIGHT
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
