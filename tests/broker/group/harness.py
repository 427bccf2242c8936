"""A group coordinator without sockets or a broker, for the tests of this package.

A manual timer stands in for the event loop's timer handles (time moves only
when a test says so) and an in-memory store for the __consumer_offsets
partition, so every rebalance step is deterministic. ``make_env`` builds a
coordinator on them; the helpers drive it as clients would.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
from collections import defaultdict
from dataclasses import dataclass

from refka.broker.group import storage
from refka.broker.group.coordinator import GroupCoordinator, GroupSettings
from refka.broker.group.membership import JoinRequest
from refka.broker.group.offsets import CommittedOffset
from refka.protocol import ErrorCode as E

MINUTE = 60_000


class ManualTimer:
    """Keyed one-shot timers that fire only in advance()."""

    def __init__(self) -> None:
        self.now = 1_000_000
        self.due: dict = {}
        self._seq = itertools.count()

    def schedule(self, key, delay_ms, fn, *args) -> None:
        self.due[key] = (self.now + max(delay_ms, 0), next(self._seq), fn, args)

    def cancel(self, key) -> None:
        self.due.pop(key, None)

    def close(self) -> None:
        self.due.clear()

    def advance(self, ms: int) -> None:
        target = self.now + ms
        while True:
            ready = [(at, seq, key) for key, (at, seq, _f, _a) in self.due.items() if at <= target]
            if not ready:
                break
            at, _seq, key = min(ready)
            _at, _s, fn, args = self.due.pop(key)
            self.now = at
            fn(*args)
        self.now = target


class FakeStore:
    """The offsets partitions as lists of (key, value) records."""

    def __init__(self) -> None:
        self.logs: dict[int, list] = defaultdict(list)
        self.fail: E | None = None
        self.gate: asyncio.Event | None = None  # loading waits for it when set

    def append(self, index, records):
        if self.fail is not None:
            return storage.AppendResult(self.fail)
        self.logs[index].extend(records)
        return storage.AppendResult(E.NONE, len(self.logs[index]) - 1)

    def replicated(self, index, last_offset):
        return True

    async def wait_replicated(self, index, last_offset, timeout_ms):
        return E.NONE

    async def read(self, index):
        if self.gate is not None:
            await self.gate.wait()
        for k, v in list(self.logs[index]):
            yield k, v

    def decoded(self, index=0):
        return [storage.decode_record(k, v) for k, v in self.logs[index]]


@dataclass
class Env:
    coord: GroupCoordinator
    timer: ManualTimer
    store: FakeStore


def make_env(store: FakeStore | None = None, timer: ManualTimer | None = None, **settings) -> Env:
    timer = timer or ManualTimer()
    store = store or FakeStore()
    defaults = dict(num_partitions=1, initial_rebalance_delay_ms=0)
    defaults.update(settings)
    coord = GroupCoordinator(GroupSettings(**defaults), store, timer=timer, clock=lambda: timer.now)
    return Env(coord, timer, store)


async def loaded(env: Env) -> Env:
    env.coord.on_become_leader(0, 0)
    await env.coord.shards[0].load_task
    return env



def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def join(env: Env, member_id: str = "", *, group: str = "g", instance: str | None = None,
         protocols=None, version: int = 5, session: int = 10_000, rebalance: int = 30_000,
         ptype: str = "consumer", client_id: str = "client"):
    req = JoinRequest(
        group_id=group, member_id=member_id, group_instance_id=instance, client_id=client_id,
        client_host="/127.0.0.1", session_timeout_ms=session, rebalance_timeout_ms=rebalance,
        protocol_type=ptype, protocols=protocols if protocols is not None else [("range", subscription("t"))],
        api_version=version,
    )
    return asyncio.ensure_future(env.coord.join_group(req))


def sync(env: Env, member_id: str, generation: int, assignments=None, *, group: str = "g",
         instance: str | None = None):
    return asyncio.ensure_future(env.coord.sync_group(group, generation, member_id, instance, None, None,
                                                      assignments or {}))


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def new_member_id(env: Env, **kw) -> str:
    t = join(env, **kw)
    r = await t
    assert r.error == E.MEMBER_ID_REQUIRED
    return r.member_id


async def stable_group(env: Env, n: int, *, group: str = "g", instances=None, session: int = 10_000,
                       protocols=None):
    """n members through one rebalance and the leader's SyncGroup; returns (member ids, join results)."""
    tasks = []
    kw = dict(group=group, session=session, protocols=protocols)
    for i in range(n):
        inst = instances[i] if instances else None
        if inst is None:
            mid = await new_member_id(env, **kw)
            tasks.append(join(env, mid, **kw))
        else:
            tasks.append(join(env, instance=inst, **kw))
    await settle()
    env.timer.advance(0)  # the initial delay (0 here)
    await settle()
    results = [t.result() for t in tasks]
    assert all(r.error == E.NONE for r in results), results
    ids = [r.member_id for r in results]
    leader = results[0].leader_id
    gen = results[0].generation_id
    syncs = [sync(env, mid, gen, {m: f"assign-{m}".encode() for m in ids} if mid == leader else None, group=group,
                  instance=instances[i] if instances else None)
             for i, mid in enumerate(ids)]
    await settle()
    for s, mid in zip(syncs, ids, strict=True):
        assert s.result().error == E.NONE
        assert s.result().assignment == f"assign-{mid}".encode()
    return ids, results


def group(env: Env, gid: str = "g"):
    return env.coord.shards[0].groups[gid]


def co(offset, **kw):
    return CommittedOffset(offset, commit_timestamp=kw.pop("ts", 0), **kw)
