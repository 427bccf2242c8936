"""ZooKeeperStore: the metadata store as a kazoo session against a real ensemble.

The connect string may end with a chroot, created when missing. kazoo is
thread-based: every call uses kazoo's ``*_async`` form and its completion (on
a kazoo thread) resolves an asyncio future through ``loop.call_soon_threadsafe``;
watches and session listeners are handed to the loop the same way. Only
``start``/``stop`` and the recursive delete (kazoo has no async form of it)
run in ``asyncio.to_thread``. The loop never blocks on kazoo. kazoo's errors
become base.py's (same names).

kazoo is imported where it is first used, not at the top: importing it takes
about 0.2 s, which a broker on the embedded store should not pay.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from .base import (
    BadArgumentsError,
    BadVersionError,
    ConnectionClosedError,
    ConnectionLossError,
    EventType,
    MetadataStore,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    SessionExpiredError,
    SessionState,
    StoreError,
    WatchedEvent,
    Watcher,
    ZnodeStat,
    call_safely,
    validate_path,
)


def _kazoo_errors() -> dict[type, type[StoreError]]:
    from kazoo import exceptions as kz

    return {
        kz.NoNodeError: NoNodeError,
        kz.NodeExistsError: NodeExistsError,
        kz.BadVersionError: BadVersionError,
        kz.NotEmptyError: NotEmptyError,
        kz.NoChildrenForEphemeralsError: NoChildrenForEphemeralsError,
        kz.BadArgumentsError: BadArgumentsError,
        kz.SessionExpiredError: SessionExpiredError,
        kz.ConnectionLoss: ConnectionLossError,
        kz.ConnectionClosedError: ConnectionClosedError,
    }


def split_chroot(connect: str) -> tuple[str, str | None]:
    """``"h1:2181,h2:2181/refka"`` -> (``"h1:2181,h2:2181"``, ``"/refka"``)."""
    i = connect.find("/")
    if i < 0:
        return connect, None
    chroot = connect[i:].rstrip("/")
    return connect[:i], (chroot or None)


class ZooKeeperStore(MetadataStore):
    """A kazoo session against a real ZooKeeper ensemble (see the module docstring)."""

    def __init__(self, connect: str, *, session_timeout: float = 10.0) -> None:
        super().__init__()
        self.connect = connect
        self.session_timeout = session_timeout
        self._hosts, self._chroot = split_chroot(connect)
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._errors = _kazoo_errors()
        self._wrappers: dict[Watcher, Callable[[Any], None]] = {}

    # -- session lifecycle

    def _new_client(self, hosts: str, client_id: Any = None) -> Any:
        from kazoo.client import KazooClient
        from kazoo.retry import KazooRetry

        return KazooClient(
            hosts=hosts,
            timeout=self.session_timeout,
            client_id=client_id,
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0),
        )

    async def start(self) -> None:
        if self._client is not None:
            return
        self._loop = asyncio.get_running_loop()
        if self._chroot:
            await asyncio.to_thread(self._ensure_chroot)
        client = self._new_client(self.connect)
        client.add_listener(self._on_state)
        try:
            await asyncio.to_thread(client.start, self.session_timeout)
        except Exception as e:
            await asyncio.to_thread(client.close)
            raise ConnectionLossError(None, f"cannot connect to ZooKeeper at {self.connect}: {e}") from e
        self._client = client
        self._notify(SessionState.CONNECTED)

    def _ensure_chroot(self) -> None:
        c = self._new_client(self._hosts)
        c.start(self.session_timeout)
        try:
            c.ensure_path(self._chroot)
        finally:
            c.stop()
            c.close()

    async def stop(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        await asyncio.to_thread(client.stop)
        await asyncio.to_thread(client.close)
        self._notify(SessionState.LOST)

    @property
    def session_id(self) -> int:
        if self._client is None or self._client.client_id is None:
            return 0
        return int(self._client.client_id[0])

    def open_session(self) -> ZooKeeperStore:
        return ZooKeeperStore(self.connect, session_timeout=self.session_timeout)

    async def expire_session(self) -> None:
        """The classic trick: a second client joins the session with its id and
        password, then closes it; the server expires it for the first client."""
        client = self._require()

        def expire() -> None:
            other = self._new_client(self.connect, client_id=client.client_id)
            other.start(self.session_timeout)
            other.stop()
            other.close()

        await asyncio.to_thread(expire)

    def _on_state(self, state: Any) -> None:
        # kazoo thread. kazoo's states have the same names as ours.
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._notify, SessionState(str(state)))

    def _require(self) -> Any:
        if self._client is None:
            raise ConnectionClosedError(None, "the store is not started")
        return self._client

    # -- bridging

    def _map(self, e: BaseException) -> BaseException:
        for kz_type, ours in self._errors.items():
            if isinstance(e, kz_type):
                return ours(getattr(e, "path", None), f"{ours.__name__}: {e}")
        return e

    async def _await(self, async_result: Any) -> Any:
        loop = self._loop
        assert loop is not None
        fut: asyncio.Future[Any] = loop.create_future()

        def resolve(r: Any) -> None:
            if fut.done():
                return
            if r.successful():
                fut.set_result(r.value)
            else:
                fut.set_exception(self._map(r.exception))

        async_result.rawlink(lambda r: loop.call_soon_threadsafe(resolve, r))
        return await fut

    def _watch(self, watch: Watcher | None) -> Callable[[Any], None] | None:
        if watch is None:
            return None
        wrapper = self._wrappers.get(watch)
        if wrapper is None:
            loop = self._loop
            assert loop is not None

            def wrapper(event: Any, watch: Watcher = watch) -> None:
                # kazoo thread; a NONE event (session change) is not a znode event.
                if event.type == "NONE" or loop.is_closed():
                    return
                loop.call_soon_threadsafe(
                    call_safely, watch, WatchedEvent(EventType(event.type), event.path)
                )

            self._wrappers[watch] = wrapper
        return wrapper

    @staticmethod
    def _stat(s: Any) -> ZnodeStat:
        return ZnodeStat(
            czxid=s.czxid,
            mzxid=s.mzxid,
            ctime=s.ctime,
            mtime=s.mtime,
            version=s.version,
            cversion=s.cversion,
            ephemeral_owner=s.ephemeralOwner,
            data_length=s.dataLength,
            num_children=s.numChildren,
            pzxid=s.pzxid,
        )

    # -- znodes

    async def create(
        self,
        path: str,
        data: bytes = b"",
        ephemeral: bool = False,
        sequential: bool = False,
        makepath: bool = False,
    ) -> str:
        validate_path(path, sequential)
        c = self._require()
        return await self._await(  # type: ignore[no-any-return]
            c.create_async(path, bytes(data), ephemeral=ephemeral, sequence=sequential, makepath=makepath)
        )

    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, ZnodeStat]:
        validate_path(path)
        data, stat = await self._await(self._require().get_async(path, watch=self._watch(watch)))
        return (data or b""), self._stat(stat)

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        validate_path(path)
        return self._stat(await self._await(self._require().set_async(path, bytes(data), version)))

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        validate_path(path)
        c = self._require()
        if not recursive:
            await self._await(c.delete_async(path, version))
            return
        try:
            await asyncio.to_thread(c.delete, path, version, True)
        except Exception as e:
            raise self._map(e) from None

    async def exists(self, path: str, watch: Watcher | None = None) -> ZnodeStat | None:
        validate_path(path)
        stat = await self._await(self._require().exists_async(path, watch=self._watch(watch)))
        return None if stat is None else self._stat(stat)

    async def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        validate_path(path)
        return sorted(await self._await(self._require().get_children_async(path, watch=self._watch(watch))))

    async def _commit(self, ops: list[Op]) -> list[Any]:
        from kazoo.exceptions import RolledBackError

        t = self._require().transaction()
        for op in ops:
            kind = op[0]
            if kind == "check":
                t.check(op[1], op[2])
            elif kind == "create":
                _, path, data, ephemeral, sequential = op
                t.create(path, data, ephemeral=ephemeral, sequence=sequential)
            elif kind == "set":
                t.set_data(op[1], op[2], op[3])
            elif kind == "delete":
                t.delete(op[1], op[2])
            else:
                raise BadArgumentsError(None, f"unknown operation {kind!r}")
        results = await self._await(t.commit_async())
        for i, r in enumerate(results):
            if isinstance(r, Exception) and not isinstance(r, RolledBackError):
                err = self._map(r)
                if isinstance(err, StoreError):
                    err.path = err.path or ops[i][1]
                    err.index = i
                raise err
        return [self._stat(r) if type(r).__name__ == "ZnodeStat" else r for r in results]
