"""The metadata store's interface: the only way the controller and brokers reach znodes.

``MetadataStore`` is ZooKeeper's data model behind an asyncio interface. One
instance is one client *session*: the ephemeral znodes it creates live as long
as that session, and ``open_session()`` gives another session on the same
backend (one per in-process broker). This module holds what both
implementations share: the interface, its errors (named like kazoo's), the
watch and session types, and the transaction. The implementations are
``embedded.py`` (EmbeddedStore, in-process, journaled) and ``zookeeper.py``
(ZooKeeperStore, kazoo against a real ensemble).

Semantics, the same for both (the contract suite in
``tests/controller/test_store_contract.py`` runs against each):

- ``get``/``set``/``delete`` take the expected ``version`` (-1: any), and fail
  with ``BadVersionError`` when it does not match; ``create`` may be
  ``sequential`` (a ten-digit suffix counting the parent's child creations) and
  ``ephemeral`` (owned by this session; ephemerals have no children).
- Watches are one-shot and are called on the event loop with a
  ``WatchedEvent(type, path)``: ``get``/``exists`` watch the node's data
  (CREATED, CHANGED, DELETED), ``get_children`` its child list (CHILD, or
  DELETED when the node goes). A watch is set by ``exists`` even when the node
  does not exist, never by a ``get``/``get_children`` that raises NoNodeError.
  The same callable set twice on one path fires once. Callbacks must not
  block; the controller's only enqueue an event.
- ``transaction()`` groups check/create/set/delete; ``commit()`` applies all
  or none. On failure it raises the failing operation's error with
  ``.index`` set to that operation's position.

Session contract (what happens on SUSPENDED / LOST): listeners added with
``add_listener`` are called on the loop with each *change* of
``SessionState`` (``start()`` reports CONNECTED before it returns, ``stop()``
LOST). SUSPENDED
means the connection dropped but the session may survive: keep state, expect
operations to fail with ConnectionLossError (such an operation may or may not
have been applied: every caller here retries in a way that finds its own
earlier write). LOST means the session expired or the store stopped: its
ephemerals are gone and its watches are dropped; unless stopped, a new session
follows (CONNECTED), on which the owner must re-create its ephemerals and
re-set its watches. ``expire_session()`` forces that, for tests and the lab.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

log = structlog.get_logger("refka.controller.store")


# ---- errors (named like kazoo's) -------------------------------------------------------


class StoreError(Exception):
    """Base of every metadata-store error. ``index``: the failing op of a transaction."""

    index: int | None = None

    def __init__(self, path: str | None = None, message: str | None = None) -> None:
        super().__init__(message or (f"{type(self).__name__}: {path}" if path else type(self).__name__))
        self.path = path


class NoNodeError(StoreError):
    pass


class NodeExistsError(StoreError):
    pass


class BadVersionError(StoreError):
    pass


class NotEmptyError(StoreError):
    pass


class NoChildrenForEphemeralsError(StoreError):
    pass


class BadArgumentsError(StoreError, ValueError):
    pass


class SessionExpiredError(StoreError):
    pass


class ConnectionLossError(StoreError):
    """The connection dropped during the call: the operation may or may not have happened."""


class ConnectionClosedError(StoreError):
    """The store was stopped (or never started)."""


# ---- events and stats ----------------------------------------------------------------------


class EventType(enum.StrEnum):
    CREATED = "CREATED"
    DELETED = "DELETED"
    CHANGED = "CHANGED"
    CHILD = "CHILD"


@dataclass(frozen=True, slots=True)
class WatchedEvent:
    type: EventType
    path: str


class SessionState(enum.StrEnum):
    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    LOST = "LOST"


Watcher = Callable[[WatchedEvent], Any]
SessionListener = Callable[[SessionState], Any]


@dataclass(frozen=True, slots=True)
class ZnodeStat:
    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int
    pzxid: int


# ---- the interface -------------------------------------------------------------------------

# One operation of a transaction (ZooKeeper's multi), as ``Transaction`` builds it:
# ("check", path, version), ("create", path, data, ephemeral, sequential),
# ("set", path, data, version), ("delete", path, version).
Op = tuple[Any, ...]


class Transaction:
    """Operations applied together by ``commit()``, all or none."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self.ops: list[Op] = []

    def check(self, path: str, version: int) -> Transaction:
        self.ops.append(("check", path, version))
        return self

    def create(
        self, path: str, data: bytes = b"", ephemeral: bool = False, sequential: bool = False
    ) -> Transaction:
        self.ops.append(("create", path, bytes(data), ephemeral, sequential))
        return self

    def set_data(self, path: str, data: bytes, version: int = -1) -> Transaction:
        self.ops.append(("set", path, bytes(data), version))
        return self

    def delete(self, path: str, version: int = -1) -> Transaction:
        self.ops.append(("delete", path, version))
        return self

    async def commit(self) -> list[Any]:
        """Results in op order: True (check, delete), the created path, the new stat (set)."""
        if not self.ops:
            return []
        return await self._store._commit(self.ops)


class MetadataStore(abc.ABC):
    """One session on a ZooKeeper-shaped store. See the module docstring."""

    def __init__(self) -> None:
        self._listeners: list[SessionListener] = []
        self._state = SessionState.LOST

    # -- session lifecycle

    @abc.abstractmethod
    async def start(self) -> None:
        """Connects and opens the session; listeners see CONNECTED."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """Closes the session (its ephemerals go); listeners see LOST. Idempotent."""

    @property
    @abc.abstractmethod
    def session_id(self) -> int:
        """The current session's id (0 when there is none)."""

    @abc.abstractmethod
    def open_session(self) -> MetadataStore:
        """Another, not yet started, session on the same backend."""

    @abc.abstractmethod
    async def expire_session(self) -> None:
        """Fault injection: expire this session as the server would (LOST, then a new session)."""

    def add_listener(self, listener: SessionListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: SessionListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    @property
    def state(self) -> SessionState:
        return self._state

    def _notify(self, state: SessionState) -> None:
        # Listeners hear changes only: kazoo may repeat a state we already reported.
        if state == self._state:
            return
        self._state = state
        for fn in list(self._listeners):
            call_safely(fn, state)

    # -- znodes

    @abc.abstractmethod
    async def create(
        self,
        path: str,
        data: bytes = b"",
        ephemeral: bool = False,
        sequential: bool = False,
        makepath: bool = False,
    ) -> str:
        """Creates a znode; returns its path (with the suffix when sequential)."""

    @abc.abstractmethod
    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, ZnodeStat]: ...

    @abc.abstractmethod
    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat: ...

    @abc.abstractmethod
    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None: ...

    @abc.abstractmethod
    async def exists(self, path: str, watch: Watcher | None = None) -> ZnodeStat | None: ...

    @abc.abstractmethod
    async def get_children(self, path: str, watch: Watcher | None = None) -> list[str]: ...

    def transaction(self) -> Transaction:
        return Transaction(self)

    @abc.abstractmethod
    async def _commit(self, ops: list[Op]) -> list[Any]: ...

    async def ensure_path(self, path: str) -> None:
        """Creates ``path`` and its parents as empty persistent znodes where missing."""
        if await self.exists(path) is not None:
            return
        try:
            await self.create(path, b"", makepath=True)
        except NodeExistsError:
            pass


def call_safely(fn: Callable[[Any], Any], arg: Any) -> None:
    """Runs a watch or session callback; one that raises is logged, not propagated."""
    try:
        fn(arg)
    except Exception:
        log.exception("store_callback_failed")


def validate_path(path: str, sequential: bool = False) -> None:
    """Raises BadArgumentsError for a path ZooKeeper would refuse."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise BadArgumentsError(str(path), f"path must be absolute: {path!r}")
    if path == "/":
        return
    parts = path[1:].split("/")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "" and not (last and sequential):
            raise BadArgumentsError(path, f"empty path component: {path!r}")
        if part in (".", ".."):
            raise BadArgumentsError(path, f"relative path component: {path!r}")
