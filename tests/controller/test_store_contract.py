"""One contract, two metadata stores: every test here runs against the
EmbeddedStore and against a real ZooKeeper (a private server, tests/zk.py)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from refka.controller.store import (
    BadVersionError,
    EmbeddedStore,
    EventType,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionState,
    WatchedEvent,
)

WAIT = 15.0


class Events:
    """A watcher that queues what it sees, and remembers the thread it ran on."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[WatchedEvent] = asyncio.Queue()
        self.threads: set[int] = set()

    def __call__(self, event: WatchedEvent) -> None:
        self.threads.add(threading.get_ident())
        self.queue.put_nowait(event)

    async def next(self) -> WatchedEvent:
        return await asyncio.wait_for(self.queue.get(), WAIT)

    async def nothing(self, wait: float = 0.3) -> None:
        await asyncio.sleep(wait)
        assert self.queue.empty(), f"unexpected {self.queue.get_nowait()}"


async def test_versions_and_conditional_writes(stores) -> None:
    s = stores.first
    assert await s.create("/a", b"one") == "/a"
    data, stat = await s.get("/a")
    assert (data, stat.version, stat.ephemeral_owner, stat.data_length) == (b"one", 0, 0, 3)
    stat = await s.set("/a", b"two", version=0)
    assert stat.version == 1
    with pytest.raises(BadVersionError):
        await s.set("/a", b"three", version=0)
    assert (await s.get("/a"))[0] == b"two"
    assert (await s.set("/a", b"any")).version == 2  # -1: unconditional
    with pytest.raises(BadVersionError):
        await s.delete("/a", version=1)
    await s.delete("/a", version=2)
    assert await s.exists("/a") is None


async def test_missing_existing_and_non_empty_nodes(stores) -> None:
    s = stores.first
    with pytest.raises(NoNodeError):
        await s.create("/no/parent", b"")
    with pytest.raises(NoNodeError):
        await s.get("/nothing")
    with pytest.raises(NoNodeError):
        await s.set("/nothing", b"")
    with pytest.raises(NoNodeError):
        await s.delete("/nothing")
    with pytest.raises(NoNodeError):
        await s.get_children("/nothing")
    assert await s.create("/x/y/z", b"deep", makepath=True) == "/x/y/z"
    assert (await s.get("/x/y"))[0] == b""
    with pytest.raises(NodeExistsError):
        await s.create("/x/y/z", b"again")
    with pytest.raises(NotEmptyError):
        await s.delete("/x")
    assert (await s.exists("/x")).num_children == 1
    await s.ensure_path("/x/y/w")
    await s.ensure_path("/x/y/w")
    assert await s.get_children("/x/y") == ["w", "z"]
    await s.delete("/x", recursive=True)
    assert await s.exists("/x") is None


async def test_sequential_nodes_count_up_per_parent(stores) -> None:
    s = stores.first
    await s.create("/q", b"")
    names = [await s.create("/q/item-", b"%d" % i, sequential=True) for i in range(3)]
    assert names == ["/q/item-0000000000", "/q/item-0000000001", "/q/item-0000000002"]
    await s.delete(names[0])
    # The counter counts creations under the parent: names never repeat.
    assert await s.create("/q/item-", b"", sequential=True) == "/q/item-0000000003"
    await s.create("/q/e", b"", ephemeral=True)
    assert await s.create("/q/item-", b"", sequential=True) == "/q/item-0000000005"
    assert await s.get_children("/q") == [
        "e",
        "item-0000000001",
        "item-0000000002",
        "item-0000000003",
        "item-0000000005",
    ]


async def test_ephemerals_belong_to_their_session_and_go_with_it(stores) -> None:
    a = stores.first
    b = await stores.session()
    assert a.session_id and b.session_id and a.session_id != b.session_id
    await a.create("/brokers", b"")
    await b.create("/brokers/2", b"me", ephemeral=True)
    stat = await a.exists("/brokers/2")
    assert stat is not None and stat.ephemeral_owner == b.session_id
    with pytest.raises(NoChildrenForEphemeralsError):
        await b.create("/brokers/2/child", b"")
    gone = Events()
    assert await a.get_children("/brokers", watch=gone) == ["2"]
    await b.stop()
    assert await gone.next() == WatchedEvent(EventType.CHILD, "/brokers")
    assert await a.exists("/brokers/2") is None


async def test_session_expiry_removes_ephemerals_and_starts_a_new_session(stores) -> None:
    a = stores.first
    b = await stores.session()
    states: asyncio.Queue[SessionState] = asyncio.Queue()
    b.add_listener(states.put_nowait)
    old = b.session_id
    await b.create("/e", b"", ephemeral=True)
    deleted = Events()
    assert await a.exists("/e", watch=deleted) is not None
    await b.expire_session()
    assert await deleted.next() == WatchedEvent(EventType.DELETED, "/e")
    seen = []
    while SessionState.CONNECTED not in seen:
        seen.append(await asyncio.wait_for(states.get(), WAIT))
    assert SessionState.LOST in seen
    assert b.session_id not in (0, old)
    # The new session works, and owns what it creates.
    await b.create("/e", b"", ephemeral=True)
    assert (await a.exists("/e")).ephemeral_owner == b.session_id


async def test_data_watches_are_one_shot_and_run_on_the_loop(stores) -> None:
    s = stores.first
    other = await stores.session()
    await s.create("/w", b"0")
    ev = Events()
    await s.get("/w", watch=ev)
    await s.get("/w", watch=ev)  # the same watcher twice on one path fires once
    await other.set("/w", b"1")
    assert await ev.next() == WatchedEvent(EventType.CHANGED, "/w")
    await other.set("/w", b"2")
    await ev.nothing()
    assert ev.threads == {threading.get_ident()}
    await s.exists("/w", watch=ev)
    await other.delete("/w")
    assert await ev.next() == WatchedEvent(EventType.DELETED, "/w")


async def test_exists_watches_a_node_that_is_not_there_yet(stores) -> None:
    s = stores.first
    ev = Events()
    assert await s.exists("/later", watch=ev) is None
    await (await stores.session()).create("/later", b"")
    assert await ev.next() == WatchedEvent(EventType.CREATED, "/later")


async def test_child_watches(stores) -> None:
    s = stores.first
    await s.create("/p", b"")
    ev = Events()
    assert await s.get_children("/p", watch=ev) == []
    await s.create("/p/c1", b"")
    assert await ev.next() == WatchedEvent(EventType.CHILD, "/p")
    await s.set("/p", b"data changes are not child changes")
    await s.create("/p/c2", b"")  # the watch was spent
    await ev.nothing()
    assert await s.get_children("/p", watch=ev) == ["c1", "c2"]
    await s.delete("/p", recursive=True)
    got = {await ev.next()}
    assert got <= {WatchedEvent(EventType.CHILD, "/p"), WatchedEvent(EventType.DELETED, "/p")}


async def test_a_failed_get_sets_no_watch(stores) -> None:
    s = stores.first
    ev = Events()
    with pytest.raises(NoNodeError):
        await s.get("/ghost", watch=ev)
    await s.create("/ghost", b"")
    await ev.nothing()


async def test_transaction_applies_all(stores) -> None:
    s = stores.first
    await s.create("/epoch", b"1")
    await s.create("/old", b"")
    results = await (
        s.transaction()
        .check("/epoch", 0)
        .create("/t", b"new")
        .create("/t/seq-", b"", sequential=True)
        .set_data("/epoch", b"2", version=0)
        .delete("/old")
        .commit()
    )
    assert results[0] is True and results[1] == "/t" and results[2] == "/t/seq-0000000000"
    assert results[3].version == 1 and results[4] is True
    assert (await s.get("/epoch"))[0] == b"2"
    assert await s.exists("/old") is None


async def test_transaction_is_all_or_nothing(stores) -> None:
    s = stores.first
    await s.create("/epoch", b"1")
    ev = Events()
    await s.get("/epoch", watch=ev)
    with pytest.raises(BadVersionError) as err:
        await (
            s.transaction()
            .create("/made", b"")
            .set_data("/epoch", b"2", version=0)
            .check("/epoch", 7)
            .commit()
        )
    assert err.value.index == 2
    assert await s.exists("/made") is None
    assert await s.get("/epoch") == (b"1", (await s.exists("/epoch")))
    await ev.nothing()
    with pytest.raises(NodeExistsError) as err:
        await s.transaction().create("/a", b"").create("/a", b"").commit()
    assert err.value.index == 1
    assert await s.exists("/a") is None


async def test_ephemeral_create_in_a_transaction(stores) -> None:
    a = stores.first
    b = await stores.session()
    await a.create("/controller_epoch", b"0")
    await (
        b.transaction()
        .create("/controller", b"2", ephemeral=True)
        .set_data("/controller_epoch", b"1", version=0)
        .commit()
    )
    assert (await a.exists("/controller")).ephemeral_owner == b.session_id
    await b.stop()
    assert await a.exists("/controller") is None
    assert (await a.get("/controller_epoch"))[0] == b"1"


# ---- embedded only ---------------------------------------------------------------------


async def test_embedded_persistent_nodes_survive_restart(tmp_path: Path) -> None:
    s = EmbeddedStore(tmp_path)
    await s.start()
    await s.create("/a/b", b"x", makepath=True)
    await s.set("/a/b", b"y")
    await s.create("/a/e", b"", ephemeral=True)
    await s.create("/a/q-", b"", sequential=True)
    await s.create("/gone", b"")
    await s.delete("/gone")
    await s.stop()

    again = EmbeddedStore(tmp_path)
    await again.start()
    data, stat = await again.get("/a/b")
    assert (data, stat.version) == (b"y", 1)
    assert await again.exists("/gone") is None
    assert await again.exists("/a/e") is None  # ephemerals die with their session
    assert await again.get_children("/a") == ["b", "q-0000000002"]
    # Sequence numbers never go back, and the journal was compacted into the snapshot.
    assert await again.create("/a/q-", b"", sequential=True) > "/a/q-0000000002"
    assert (tmp_path / "journal.jsonl").read_bytes().count(b"\n") == 1
    await again.stop()


async def test_embedded_drops_a_torn_journal_tail(tmp_path: Path) -> None:
    s = EmbeddedStore(tmp_path)
    await s.start()
    await s.create("/kept", b"1")
    await s.stop()
    with open(tmp_path / "journal.jsonl", "ab") as f:
        f.write(b'{"zxid": 99, "ops": [["c", "/torn"')
    again = EmbeddedStore(tmp_path)
    await again.start()
    assert (await again.get("/kept"))[0] == b"1"
    assert await again.exists("/torn") is None
    await again.stop()


async def test_embedded_memory_only() -> None:
    s = EmbeddedStore(None)
    await s.start()
    await s.create("/m", b"")
    other = s.open_session()
    await other.start()
    assert await other.exists("/m") is not None
    await other.stop()
    await s.stop()
