"""An asyncio connection to one Kafka broker speaking our codec.

Requests are pipelined; each waits for the response with its correlation id.
Used by the reference client, ``refka topics`` and tests. Imports only
``refka.protocol``.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from refka.protocol import (
    Api,
    FrameDecoder,
    RequestHeader,
    decode_response_header,
    encode_request_header,
    frame,
)
from refka.protocol.messages.api_versions import ApiVersions


class BrokerConnectionError(ConnectionError):
    pass


class _Protocol(asyncio.Protocol):
    def __init__(self, conn: BrokerConnection) -> None:
        self.conn = conn
        self.decoder = FrameDecoder()

    def data_received(self, data: bytes) -> None:
        for f in self.decoder.feed(data):
            self.conn._on_frame(f)

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn._on_lost(exc)


class BrokerConnection:
    def __init__(self, host: str, port: int, client_id: str = "refka") -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, tuple[asyncio.Future[Any], Api, int]] = {}
        self._ids = itertools.count(1)
        self.versions: dict[int, tuple[int, int]] = {}
        self.closed = False

    async def connect(self, timeout: float = 10.0, negotiate: bool = True) -> BrokerConnection:
        loop = asyncio.get_running_loop()
        try:
            self._transport, _ = await asyncio.wait_for(
                loop.create_connection(lambda: _Protocol(self), self.host, self.port), timeout
            )
        except (TimeoutError, OSError) as e:
            raise BrokerConnectionError(f"cannot connect to {self.host}:{self.port}: {e}") from e
        if negotiate:
            resp = await self.request(ApiVersions, ApiVersions.Request(
                client_software_name="refka", client_software_version="0.1.0"), version=3)
            self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        return self

    def version_for(self, api: Api) -> int:
        """The highest version both we and the broker have."""
        lo, hi = self.versions.get(api.key, (api.min_version, api.max_version))
        v = min(hi, api.max_version)
        if v < max(lo, api.min_version):
            raise BrokerConnectionError(f"no common version of {api.name}")
        return v

    async def request(self, api: Api, body: Any, version: int | None = None, *,
                      expect_response: bool = True, timeout: float = 30.0) -> Any:
        if self._transport is None or self.closed:
            raise BrokerConnectionError("not connected")
        v = self.version_for(api) if version is None else version
        cid = next(self._ids) & 0x7FFFFFFF
        header = encode_request_header(RequestHeader(api.key, v, cid, self.client_id), api.request_header_version(v))
        chunks = frame([header, *api.encode_request(body, v)])
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if expect_response:
            self._pending[cid] = (fut, api, v)
        self._transport.writelines(chunks)
        if not expect_response:
            return None
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            self._pending.pop(cid, None)

    def _on_frame(self, f: memoryview) -> None:
        cid = int.from_bytes(f[:4], "big", signed=True)
        entry = self._pending.pop(cid, None)
        if entry is None:
            return
        fut, api, v = entry
        try:
            _cid, pos = decode_response_header(f, api.response_header_version(v))
            resp, _end = api.decode_response(bytes(f), v, pos)
        except Exception as e:  # a broken response fails that request only
            if not fut.done():
                fut.set_exception(e)
            return
        if not fut.done():
            fut.set_result(resp)

    def _on_lost(self, exc: Exception | None) -> None:
        self.closed = True
        for fut, _api, _v in self._pending.values():
            if not fut.done():
                fut.set_exception(BrokerConnectionError(f"connection to {self.host}:{self.port} lost: {exc}"))
        self._pending.clear()

    async def close(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.close()
            self._transport = None


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
