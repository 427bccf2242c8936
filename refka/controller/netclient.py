"""A small asyncio Kafka client connection: requests out, responses matched by
correlation id. Used by the controller channel; the broker's replica fetchers
and the ControlledShutdown call can use it as well.

    conn = KafkaConnection("127.0.0.1", 9092, client_id="refka-controller-1")
    await conn.connect()
    versions = await conn.api_versions()          # {api_key: (min, max)}
    resp = await conn.request(LeaderAndIsr, req, 7)
    await conn.close()

Several requests may be in flight (pipelined); the broker answers in order.
A request that times out closes the connection (as Kafka clients do: the
answers after it could no longer be trusted to line up), failing every
pending request with ``KafkaConnectionError``.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
from typing import Any

from refka.protocol.api import Api
from refka.protocol.framing import DEFAULT_MAX_FRAME, frame
from refka.protocol.headers import RequestHeader, decode_response_header, encode_request_header
from refka.protocol.messages.api_versions import ApiVersions

_LEN = struct.Struct(">i")
_CID = struct.Struct(">i")


class KafkaConnectionError(ConnectionError):
    """The connection failed, closed, or timed out; pending requests fail with it."""


class KafkaConnection:
    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = "refka",
        connect_timeout: float = 5.0,
        request_timeout: float = 30.0,
        max_frame_size: int = DEFAULT_MAX_FRAME,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.max_frame_size = max_frame_size
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task[None] | None = None
        self._pending: dict[int, tuple[Api, int, asyncio.Future[Any]]] = {}
        self._ids = itertools.count(1)
        self._closed = True
        self._error: BaseException | None = None

    def __repr__(self) -> str:
        return f"KafkaConnection({self.host}:{self.port}{', closed' if self._closed else ''})"

    @property
    def closed(self) -> bool:
        return self._closed

    async def connect(self) -> None:
        # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancellation
        # that lands as the awaited result arrives, and a cancelled channel
        # sender then runs on and blocks the controller's stop (shutdown hang).
        try:
            async with asyncio.timeout(self.connect_timeout):
                self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        except (TimeoutError, OSError) as e:
            raise KafkaConnectionError(f"cannot connect to {self.host}:{self.port}: {e!r}") from e
        self._closed = False
        self._error = None
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    async def close(self) -> None:
        self._fail(KafkaConnectionError(f"connection to {self.host}:{self.port} closed"))
        task, self._read_task = self._read_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self._closed = True
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        pending, self._pending = self._pending, {}
        for _, _, fut in pending.values():
            if not fut.done():
                fut.set_exception(error)

    async def request(
        self,
        api: Api,
        body: Any,
        version: int,
        *,
        timeout: float | None = None,
        expect_response: bool = True,
    ) -> Any:
        """Sends ``body`` as ``api`` version ``version``; returns the decoded response."""
        if self._closed or self._writer is None:
            raise KafkaConnectionError(f"not connected to {self.host}:{self.port}")
        cid = next(self._ids) & 0x7FFFFFFF
        header = encode_request_header(
            RequestHeader(api.key, version, cid, self.client_id), api.request_header_version(version)
        )
        chunks = frame([header, *api.encode_request(body, version)])
        fut: asyncio.Future[Any] | None = None
        if expect_response:
            fut = asyncio.get_running_loop().create_future()
            self._pending[cid] = (api, version, fut)
        self._writer.writelines(chunks)
        try:
            await self._writer.drain()
        except (OSError, RuntimeError) as e:
            err = KafkaConnectionError(f"write to {self.host}:{self.port} failed: {e!r}")
            self._fail(err)
            raise err from e
        if fut is None:
            return None
        try:
            async with asyncio.timeout(timeout or self.request_timeout):  # not wait_for: see connect()
                return await asyncio.shield(fut)
        except TimeoutError:
            err = KafkaConnectionError(f"{api.name} v{version} to {self.host}:{self.port} timed out")
            self._fail(err)
            raise err from None

    async def _read_loop(self) -> None:
        reader = self._reader
        assert reader is not None
        try:
            while True:
                (n,) = _LEN.unpack(await reader.readexactly(4))
                if n < 4 or n > self.max_frame_size:
                    raise KafkaConnectionError(f"bad response frame length {n}")
                data = await reader.readexactly(n)
                (cid,) = _CID.unpack_from(data, 0)
                entry = self._pending.pop(cid, None)
                if entry is None:
                    raise KafkaConnectionError(f"response with unknown correlation id {cid}")
                api, version, fut = entry
                try:
                    _, pos = decode_response_header(data, api.response_header_version(version))
                    body, _ = api.decode_response(data, version, pos)
                except Exception as e:
                    if not fut.done():
                        fut.set_exception(KafkaConnectionError(f"undecodable {api.name} response: {e!r}"))
                    raise KafkaConnectionError(f"undecodable {api.name} response: {e!r}") from e
                if not fut.done():
                    fut.set_result(body)
        except asyncio.CancelledError:
            raise
        except (asyncio.IncompleteReadError, OSError) as e:
            self._fail(KafkaConnectionError(f"connection to {self.host}:{self.port} lost: {e!r}"))
        except KafkaConnectionError as e:
            self._fail(e)

    async def api_versions(self) -> dict[int, tuple[int, int]]:
        """The peer's ApiVersions: api key -> (min, max). Tries v3, then v0."""
        for version in (3, 0):
            req = ApiVersions.Request(client_software_name="refka", client_software_version="0.1.0")
            resp = await self.request(ApiVersions, req, version)
            if resp.error_code == 0:
                return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        return {}
