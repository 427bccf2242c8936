"""EmbeddedStore: the metadata store in-process, for ``refka serve`` without ZooKeeper.

The same semantics as ZooKeeper (base.py; the contract suite in
``tests/controller/test_store_contract.py`` runs against both). Persistent
znodes are journaled under ``journal_dir`` (append-only JSON lines, written
with ``os.write`` and no fsync, compacted into ``snapshot.json`` at start-up);
``None`` keeps them in memory only. All sessions opened from one store share
its tree (``_Tree``): operations happen at once on the event loop, watches and
listeners are called soon after, on the loop.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from .base import (
    BadArgumentsError,
    BadVersionError,
    ConnectionClosedError,
    EventType,
    MetadataStore,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    SessionState,
    StoreError,
    WatchedEvent,
    Watcher,
    ZnodeStat,
    call_safely,
    validate_path,
)

log = structlog.get_logger("refka.controller.store")


def _parent(path: str) -> str:
    p = path.rsplit("/", 1)[0]
    return p or "/"


def _join(parent: str, name: str) -> str:
    return ("" if parent == "/" else parent) + "/" + name


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

    def apply(self, sid: int, ops: list[Op]) -> list[Any]:
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
        op: Op,
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
        validate_path(path)
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
        validate_path(path, sequential)
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
                loop.call_soon(call_safely, w, WatchedEvent(etype, path))


class EmbeddedStore(MetadataStore):
    """ZooKeeper's semantics in-process; see the module docstring and base.py.

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
        validate_path(path, sequential)
        ops: list[Op] = []
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
        validate_path(path)
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
        validate_path(path)
        if not recursive:
            await self._single(("delete", path, version))
            return
        if path not in self._tree.nodes:
            raise NoNodeError(path)
        ops: list[Op] = []

        def walk(p: str) -> None:
            for name in sorted(self._tree.nodes[p].children):
                walk(_join(p, name))
            ops.append(("delete", p, version if p == path else -1))

        walk(path)
        await self._single(*ops)

    async def _single(self, *ops: Op) -> Any:
        try:
            return self._tree.apply(self._sid, list(ops))[-1]
        except StoreError as e:
            e.index = None
            raise

    async def exists(self, path: str, watch: Watcher | None = None) -> ZnodeStat | None:
        self._check()
        validate_path(path)
        node = self._tree.nodes.get(path)
        if watch is not None:
            self._tree.watch_data(self._sid, path, watch)
        return node.stat() if node is not None else None

    async def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        self._check()
        validate_path(path)
        node = self._tree.nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if watch is not None:
            self._tree.watch_children(self._sid, path, watch)
        return sorted(node.children)

    async def _commit(self, ops: list[Op]) -> list[Any]:
        self._check()
        return self._tree.apply(self._sid, ops)


# ---- ZooKeeper -------------------------------------------------------------------------------
