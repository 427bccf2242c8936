"""The metadata store: the only way the controller and brokers reach znodes.

``MetadataStore`` is ZooKeeper's data model behind an asyncio interface. One
instance is one client *session*: the ephemeral znodes it creates live as long
as that session, and ``open_session()`` gives another session on the same
backend (one per in-process broker). Two implementations:

- ``EmbeddedStore(journal_dir)``: the same semantics in-process, for
  ``refka serve`` without ZooKeeper. Persistent znodes are journaled under
  ``journal_dir`` (append-only JSON lines, written with ``os.write`` and no
  fsync, compacted into ``snapshot.json`` at start-up); ``None`` keeps them in
  memory only. All sessions opened from one store share its tree.
- ``ZooKeeperStore(connect)``: kazoo against a real ensemble. The connect
  string may end with a chroot, created when missing.

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
import asyncio
import base64
import enum
import itertools
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
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


class Transaction:
    """Operations applied together by ``commit()``, all or none."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self.ops: list[tuple[Any, ...]] = []

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
            _call_safely(fn, state)

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
    async def _commit(self, ops: list[tuple[Any, ...]]) -> list[Any]: ...

    async def ensure_path(self, path: str) -> None:
        """Creates ``path`` and its parents as empty persistent znodes where missing."""
        if await self.exists(path) is not None:
            return
        try:
            await self.create(path, b"", makepath=True)
        except NodeExistsError:
            pass


def _call_safely(fn: Callable[[Any], Any], arg: Any) -> None:
    try:
        fn(arg)
    except Exception:
        log.exception("store_callback_failed")


def _validate(path: str, sequential: bool = False) -> None:
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


def _parent(path: str) -> str:
    p = path.rsplit("/", 1)[0]
    return p or "/"


def _join(parent: str, name: str) -> str:
    return ("" if parent == "/" else parent) + "/" + name


# ---- embedded ------------------------------------------------------------------------------


class _Node:
    __slots__ = (
        "data",
        "czxid",
        "mzxid",
        "ctime",
        "mtime",
        "version",
        "cversion",
        "ephemeral_owner",
        "pzxid",
        "children",
        "seq",
    )

    def __init__(self, data: bytes, zxid: int, now: int, owner: int) -> None:
        self.data = data
        self.czxid = self.mzxid = self.pzxid = zxid
        self.ctime = self.mtime = now
        self.version = 0
        self.cversion = 0
        self.ephemeral_owner = owner
        self.children: set[str] = set()
        # Sequential children are numbered by this count of creations, as
        # ZooKeeper does (its cversion also counts deletions).
        self.seq = 0

    def stat(self) -> ZnodeStat:
        return ZnodeStat(
            czxid=self.czxid,
            mzxid=self.mzxid,
            ctime=self.ctime,
            mtime=self.mtime,
            version=self.version,
            cversion=self.cversion,
            ephemeral_owner=self.ephemeral_owner,
            data_length=len(self.data),
            num_children=len(self.children),
            pzxid=self.pzxid,
        )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class _Tree:
    """The znodes every session of one EmbeddedStore shares, and their journal."""

    SNAPSHOT = "snapshot.json"
    JOURNAL = "journal.jsonl"

    def __init__(self, journal_dir: Path | None) -> None:
        self.dir = Path(journal_dir) if journal_dir is not None else None
        self.nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0, 0)}
        self.zxid = 0
        self._session_ids = itertools.count(0x5EF0000000000001)
        self.ephemerals: dict[int, set[str]] = {}
        # path -> session id -> watchers; data watches (get/exists) and child watches.
        self.data_watches: dict[str, dict[int, dict[Watcher, None]]] = {}
        self.child_watches: dict[str, dict[int, dict[Watcher, None]]] = {}
        self._fd: int | None = None
        self._users = 0
        self._loaded = False
        self._load_lock = asyncio.Lock()

    # -- lifecycle

    async def open(self) -> None:
        """Loads the journal once (off the loop), then counts one more session."""
        async with self._load_lock:
            if not self._loaded and self.dir is not None:
                await asyncio.to_thread(self._load)
            self._loaded = True
        self.acquire()

    def acquire(self) -> None:
        if self.dir is not None and self._fd is None:
            self._fd = os.open(self.dir / self.JOURNAL, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._users += 1

    def release(self) -> None:
        self._users -= 1
        if self._users <= 0 and self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _load(self) -> None:
        assert self.dir is not None
        self.dir.mkdir(parents=True, exist_ok=True)
        snap = self.dir / self.SNAPSHOT
        if snap.exists():
            doc = json.loads(snap.read_text())
            self.zxid = doc["zxid"]
            for path, data, czxid, mzxid, ctime, mtime, version, cversion, pzxid, seq in doc["nodes"]:
                n = _Node(base64.b64decode(data), czxid, ctime, 0)
                n.mzxid, n.mtime, n.version, n.cversion, n.pzxid = mzxid, mtime, version, cversion, pzxid
                n.seq = seq
                self.nodes[path] = n
                if path != "/":
                    self.nodes[_parent(path)].children.add(path.rsplit("/", 1)[1])
        journal = self.dir / self.JOURNAL
        replayed = 0
        if journal.exists():
            with open(journal, "rb") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        log.warning("journal_torn_tail_dropped", path=str(journal))
                        break  # a torn last line: the write never completed
                    self._replay(rec)
                    replayed += 1
        self._write_snapshot()
        log.info("embedded_store_loaded", path=str(self.dir), nodes=len(self.nodes), replayed=replayed)

    def _replay(self, rec: dict[str, Any]) -> None:
        self.zxid = max(self.zxid, rec["zxid"])
        for op in rec["ops"]:
            kind, path = op[0], op[1]
            if kind == "c":
                _, _, data, zxid, now, pcv, pzxid, pseq = op
                self.nodes[path] = _Node(base64.b64decode(data), zxid, now, 0)
                parent = self.nodes[_parent(path)]
                parent.children.add(path.rsplit("/", 1)[1])
                parent.cversion, parent.pzxid = max(parent.cversion, pcv), pzxid
                parent.seq = max(parent.seq, pseq)
            elif kind == "s":
                _, _, data, zxid, now, version = op
                n = self.nodes[path]
                n.data, n.mzxid, n.mtime, n.version = base64.b64decode(data), zxid, now, version
            elif kind == "d":
                _, _, pcv, pzxid = op
                self.nodes.pop(path, None)
                parent = self.nodes[_parent(path)]
                parent.children.discard(path.rsplit("/", 1)[1])
                parent.cversion, parent.pzxid = max(parent.cversion, pcv), pzxid

    def _write_snapshot(self) -> None:
        assert self.dir is not None
        rows = [
            [p, _b64(n.data), n.czxid, n.mzxid, n.ctime, n.mtime, n.version, n.cversion, n.pzxid, n.seq]
            for p, n in sorted(self.nodes.items())
            if n.ephemeral_owner == 0
        ]
        tmp = self.dir / (self.SNAPSHOT + ".tmp")
        with open(tmp, "w") as f:
            json.dump({"zxid": self.zxid, "nodes": rows}, f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.dir / self.SNAPSHOT)
        with open(self.dir / self.JOURNAL, "wb"):
            pass  # compacted: the snapshot holds it all
        dfd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    # -- sessions

    def new_session(self) -> int:
        sid = next(self._session_ids)
        self.ephemerals[sid] = set()
        return sid

    def close_session(self, sid: int) -> None:
        """Deletes the session's ephemerals (firing others' watches) and drops its watches."""
        owned = self.ephemerals.pop(sid, set())
        for table in (self.data_watches, self.child_watches):
            for path in list(table):
                table[path].pop(sid, None)
                if not table[path]:
                    del table[path]
        if owned:
            # Deepest first cannot matter (ephemerals have no children), sorted for determinism.
            ops = [("delete", p, -1) for p in sorted(owned)]
            self.apply(0, ops)

    # -- watches

    def watch_data(self, sid: int, path: str, w: Watcher) -> None:
        self.data_watches.setdefault(path, {}).setdefault(sid, {})[w] = None

    def watch_children(self, sid: int, path: str, w: Watcher) -> None:
        self.child_watches.setdefault(path, {}).setdefault(sid, {})[w] = None

    def _take(self, table: dict[str, dict[int, dict[Watcher, None]]], path: str) -> list[Watcher]:
        by_session = table.pop(path, None)
        if not by_session:
            return []
        return [w for ws in by_session.values() for w in ws]

    # -- mutations

    def apply(self, sid: int, ops: list[tuple[Any, ...]]) -> list[Any]:
        """Applies ``ops`` atomically for session ``sid``; fires watches and journals on success."""
        zxid = self.zxid + 1
        now = int(time.time() * 1000)
        undo: list[Callable[[], None]] = []
        events: list[tuple[str, str, EventType]] = []  # (table, path, type)
        journal: list[list[Any]] = []
        results: list[Any] = []
        try:
            for i, op in enumerate(ops):
                try:
                    results.append(self._apply_one(sid, op, zxid, now, undo, events, journal))
                except StoreError as e:
                    e.index = i
                    raise
        except StoreError:
            for fn in reversed(undo):
                fn()
            raise
        self.zxid = zxid
        if journal and self._fd is not None:
            line = json.dumps({"zxid": zxid, "ops": journal}, separators=(",", ":")) + "\n"
            os.write(self._fd, line.encode())
        self._fire(events)
        return results

    def _apply_one(
        self,
        sid: int,
        op: tuple[Any, ...],
        zxid: int,
        now: int,
        undo: list[Callable[[], None]],
        events: list[tuple[str, str, EventType]],
        journal: list[list[Any]],
    ) -> Any:
        kind = op[0]
        if kind == "check":
            return self._check(op[1], op[2])
        if kind == "create":
            return self._create(sid, op[1], op[2], op[3], op[4], zxid, now, undo, events, journal)
        if kind == "set":
            return self._set(op[1], op[2], op[3], zxid, now, undo, events, journal)
        if kind == "delete":
            return self._delete(op[1], op[2], zxid, undo, events, journal)
        raise BadArgumentsError(None, f"unknown operation {kind!r}")

    def _existing(self, path: str, version: int) -> _Node:
        _validate(path)
        node = self.nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if version != -1 and node.version != version:
            raise BadVersionError(path)
        return node

    def _check(self, path: str, version: int) -> bool:
        self._existing(path, version)
        return True

    def _create(
        self,
        sid: int,
        path: str,
        data: bytes,
        ephemeral: bool,
        sequential: bool,
        zxid: int,
        now: int,
        undo: list[Callable[[], None]],
        events: list[tuple[str, str, EventType]],
        journal: list[list[Any]],
    ) -> str:
        _validate(path, sequential)
        parent_path = _parent(path)
        parent = self.nodes.get(parent_path)
        if parent is None:
            raise NoNodeError(path)
        if parent.ephemeral_owner:
            raise NoChildrenForEphemeralsError(path)
        if sequential:
            path = f"{path}{parent.seq:010d}"
        if path in self.nodes:
            raise NodeExistsError(path)
        name = path.rsplit("/", 1)[1]
        node = _Node(bytes(data), zxid, now, sid if ephemeral else 0)
        saved = (parent.cversion, parent.pzxid, parent.seq)
        self.nodes[path] = node
        parent.children.add(name)
        parent.cversion += 1
        parent.seq += 1
        parent.pzxid = zxid
        if ephemeral:
            self.ephemerals.setdefault(sid, set()).add(path)

        def undo_create() -> None:
            del self.nodes[path]
            parent.children.discard(name)
            parent.cversion, parent.pzxid, parent.seq = saved
            if ephemeral:
                self.ephemerals.get(sid, set()).discard(path)

        undo.append(undo_create)
        events.append(("data", path, EventType.CREATED))
        events.append(("child", parent_path, EventType.CHILD))
        if not ephemeral:
            journal.append(["c", path, _b64(node.data), zxid, now, parent.cversion, zxid, parent.seq])
        return path

    def _set(
        self,
        path: str,
        data: bytes,
        version: int,
        zxid: int,
        now: int,
        undo: list[Callable[[], None]],
        events: list[tuple[str, str, EventType]],
        journal: list[list[Any]],
    ) -> ZnodeStat:
        node = self._existing(path, version)
        saved = (node.data, node.mzxid, node.mtime, node.version)
        node.data, node.mzxid, node.mtime = bytes(data), zxid, now
        node.version += 1

        def undo_set() -> None:
            node.data, node.mzxid, node.mtime, node.version = saved

        undo.append(undo_set)
        events.append(("data", path, EventType.CHANGED))
        if not node.ephemeral_owner:
            journal.append(["s", path, _b64(node.data), zxid, now, node.version])
        return node.stat()

    def _delete(
        self,
        path: str,
        version: int,
        zxid: int,
        undo: list[Callable[[], None]],
        events: list[tuple[str, str, EventType]],
        journal: list[list[Any]],
    ) -> bool:
        if path == "/":
            raise BadArgumentsError(path, "cannot delete the root")
        node = self._existing(path, version)
        if node.children:
            raise NotEmptyError(path)
        parent_path = _parent(path)
        parent = self.nodes[parent_path]
        name = path.rsplit("/", 1)[1]
        saved = (parent.cversion, parent.pzxid)
        del self.nodes[path]
        parent.children.discard(name)
        parent.cversion += 1
        parent.pzxid = zxid
        owner = node.ephemeral_owner
        if owner:
            self.ephemerals.get(owner, set()).discard(path)

        def undo_delete() -> None:
            self.nodes[path] = node
            parent.children.add(name)
            parent.cversion, parent.pzxid = saved
            if owner and owner in self.ephemerals:
                self.ephemerals[owner].add(path)

        undo.append(undo_delete)
        events.append(("data", path, EventType.DELETED))
        events.append(("child", path, EventType.DELETED))
        events.append(("child", parent_path, EventType.CHILD))
        if not owner:
            journal.append(["d", path, parent.cversion, zxid])
        return True

    def _fire(self, events: list[tuple[str, str, EventType]]) -> None:
        if not events:
            return
        loop = asyncio.get_running_loop()
        for table_name, path, etype in events:
            table = self.data_watches if table_name == "data" else self.child_watches
            for w in self._take(table, path):
                loop.call_soon(_call_safely, w, WatchedEvent(etype, path))


class EmbeddedStore(MetadataStore):
    """ZooKeeper's semantics in-process; see the module docstring.

    ``EmbeddedStore(journal_dir)`` creates the tree and its first session;
    ``open_session()`` adds sessions on the same tree (one per in-process
    broker). Operations happen at once on the event loop; watches and
    listeners are called soon after, on the loop.
    """

    def __init__(self, journal_dir: Path | str | None = None, *, _tree: _Tree | None = None) -> None:
        super().__init__()
        self._tree = _tree if _tree is not None else _Tree(Path(journal_dir) if journal_dir else None)
        self._sid = 0
        self._started = False

    @property
    def journal_dir(self) -> Path | None:
        return self._tree.dir

    # -- session lifecycle

    async def start(self) -> None:
        if self._started:
            return
        await self._tree.open()
        self._started = True
        self._sid = self._tree.new_session()
        self._notify(SessionState.CONNECTED)

    async def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        sid, self._sid = self._sid, 0
        self._tree.close_session(sid)
        self._tree.release()
        self._notify(SessionState.LOST)

    @property
    def session_id(self) -> int:
        return self._sid

    def open_session(self) -> EmbeddedStore:
        return EmbeddedStore(_tree=self._tree)

    async def expire_session(self) -> None:
        self._check()
        self._tree.close_session(self._sid)
        self._sid = self._tree.new_session()
        self._notify_soon(SessionState.LOST)
        self._notify_soon(SessionState.CONNECTED)

    def _notify_soon(self, state: SessionState) -> None:
        asyncio.get_running_loop().call_soon(self._notify, state)

    def _check(self) -> None:
        if not self._started:
            raise ConnectionClosedError(None, "the store is not started")

    # -- znodes

    async def create(
        self,
        path: str,
        data: bytes = b"",
        ephemeral: bool = False,
        sequential: bool = False,
        makepath: bool = False,
    ) -> str:
        self._check()
        _validate(path, sequential)
        ops: list[tuple[Any, ...]] = []
        if makepath:
            missing = []
            p = _parent(path)
            while p != "/" and p not in self._tree.nodes:
                missing.append(p)
                p = _parent(p)
            ops += [("create", m, b"", False, False) for m in reversed(missing)]
        ops.append(("create", path, bytes(data), ephemeral, sequential))
        try:
            return self._tree.apply(self._sid, ops)[-1]  # type: ignore[no-any-return]
        except StoreError as e:
            e.index = None
            raise

    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, ZnodeStat]:
        self._check()
        _validate(path)
        node = self._tree.nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if watch is not None:
            self._tree.watch_data(self._sid, path, watch)
        return node.data, node.stat()

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        self._check()
        return await self._single(("set", path, bytes(data), version))  # type: ignore[no-any-return]

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        self._check()
        _validate(path)
        if not recursive:
            await self._single(("delete", path, version))
            return
        if path not in self._tree.nodes:
            raise NoNodeError(path)
        ops: list[tuple[Any, ...]] = []

        def walk(p: str) -> None:
            for name in sorted(self._tree.nodes[p].children):
                walk(_join(p, name))
            ops.append(("delete", p, version if p == path else -1))

        walk(path)
        await self._single(*ops)

    async def _single(self, *ops: tuple[Any, ...]) -> Any:
        try:
            return self._tree.apply(self._sid, list(ops))[-1]
        except StoreError as e:
            e.index = None
            raise

    async def exists(self, path: str, watch: Watcher | None = None) -> ZnodeStat | None:
        self._check()
        _validate(path)
        node = self._tree.nodes.get(path)
        if watch is not None:
            self._tree.watch_data(self._sid, path, watch)
        return node.stat() if node is not None else None

    async def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        self._check()
        _validate(path)
        node = self._tree.nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if watch is not None:
            self._tree.watch_children(self._sid, path, watch)
        return sorted(node.children)

    async def _commit(self, ops: list[tuple[Any, ...]]) -> list[Any]:
        self._check()
        return self._tree.apply(self._sid, ops)


# ---- ZooKeeper -------------------------------------------------------------------------------


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
    """A kazoo session against a real ZooKeeper ensemble.

    kazoo is thread-based: every call uses kazoo's ``*_async`` form and its
    completion (on a kazoo thread) resolves an asyncio future through
    ``loop.call_soon_threadsafe``; watches and session listeners are handed
    to the loop the same way. Only ``start``/``stop`` and the recursive delete
    (kazoo has no async form of it) run in ``asyncio.to_thread``. The loop
    never blocks on kazoo.
    """

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
                    _call_safely, watch, WatchedEvent(EventType(event.type), event.path)
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
        _validate(path, sequential)
        c = self._require()
        return await self._await(  # type: ignore[no-any-return]
            c.create_async(path, bytes(data), ephemeral=ephemeral, sequence=sequential, makepath=makepath)
        )

    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, ZnodeStat]:
        _validate(path)
        data, stat = await self._await(self._require().get_async(path, watch=self._watch(watch)))
        return (data or b""), self._stat(stat)

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        _validate(path)
        return self._stat(await self._await(self._require().set_async(path, bytes(data), version)))

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        _validate(path)
        c = self._require()
        if not recursive:
            await self._await(c.delete_async(path, version))
            return
        try:
            await asyncio.to_thread(c.delete, path, version, True)
        except Exception as e:
            raise self._map(e) from None

    async def exists(self, path: str, watch: Watcher | None = None) -> ZnodeStat | None:
        _validate(path)
        stat = await self._await(self._require().exists_async(path, watch=self._watch(watch)))
        return None if stat is None else self._stat(stat)

    async def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        _validate(path)
        return sorted(await self._await(self._require().get_children_async(path, watch=self._watch(watch))))

    async def _commit(self, ops: list[tuple[Any, ...]]) -> list[Any]:
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
