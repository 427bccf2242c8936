"""The group coordinator's state machine and offsets, without sockets or a broker.

A manual timer stands in for the event loop's timer handles (time moves only
when a test says so) and an in-memory store for the __consumer_offsets
partition, so every rebalance step is deterministic.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
from collections import defaultdict
from dataclasses import dataclass

import pytest

from refka.broker.group import storage
from refka.broker.group.coordinator import (
    TRANSITIONS,
    GroupCoordinator,
    GroupSettings,
    GroupState,
    IllegalGroupTransition,
    JoinRequest,
    java_string_hash,
    partition_for,
)
from refka.broker.group.offsets import CommittedOffset, expired_offsets, subscription_topics
from refka.protocol import ErrorCode as E

S = GroupState
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


@pytest.fixture
async def env() -> Env:
    return await loaded(make_env())


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


# -- the transition table


def test_transitions_are_kafkas_graph():
    assert TRANSITIONS[S.EMPTY] == {S.PREPARING_REBALANCE, S.DEAD}
    assert TRANSITIONS[S.STABLE] == {S.PREPARING_REBALANCE, S.DEAD}
    assert S.STABLE in TRANSITIONS[S.COMPLETING_REBALANCE]
    assert S.STABLE not in TRANSITIONS[S.PREPARING_REBALANCE]


async def test_an_illegal_transition_is_a_named_error(env):
    await stable_group(env, 1)
    with pytest.raises(IllegalGroupTransition):
        group(env).transition(S.COMPLETING_REBALANCE, 0)


def test_partition_for_is_kafkas():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("hello", 50) == 22
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert partition_for("", 50) == 0


# -- joining


async def test_first_join_v4_gets_member_id_required_then_joins(env):
    r = await join(env, version=4)
    assert r.error == E.MEMBER_ID_REQUIRED and r.member_id.startswith("client-")
    assert group(env).pending_members == {r.member_id}
    t = join(env, r.member_id, version=4)
    await settle()
    env.timer.advance(0)
    res = await t
    assert res.error == E.NONE
    assert (res.generation_id, res.leader_id, res.protocol_name) == (1, r.member_id, "range")
    assert res.members == [(r.member_id, None, subscription("t"))]
    assert group(env).state is S.COMPLETING_REBALANCE


async def test_join_v3_is_added_without_member_id_required(env):
    t = join(env, version=3)
    await settle()
    env.timer.advance(0)
    res = await t
    assert res.error == E.NONE and res.generation_id == 1 and res.member_id


async def test_session_timeout_outside_the_bounds_is_refused(env):
    assert (await join(env, session=1000)).error == E.INVALID_SESSION_TIMEOUT


async def test_unknown_member_of_a_missing_group(env):
    assert (await join(env, "nobody")).error == E.UNKNOWN_MEMBER_ID


async def test_initial_rebalance_delay_waits_for_more_members():
    env = await loaded(make_env(initial_rebalance_delay_ms=3000))
    a = join(env, version=3, rebalance=60_000)
    await settle()
    env.timer.advance(2000)
    b = join(env, version=3, rebalance=60_000)
    await settle()
    env.timer.advance(1000)  # the first delay ends; a member came: wait another delay
    await settle()
    assert not a.done() and not b.done()
    env.timer.advance(3000)
    await settle()
    ra, rb = a.result(), b.result()
    assert ra.generation_id == rb.generation_id == 1
    assert ra.leader_id == rb.leader_id == ra.member_id
    assert len(ra.members) == 2 and rb.members == []


async def test_three_members_rebalance_and_sync(env):
    ids, results = await stable_group(env, 3)
    leader = results[0]
    assert [len(r.members) for r in results] == [3, 0, 0]
    assert all(r.leader_id == leader.member_id for r in results)
    g = group(env)
    assert g.state is S.STABLE and g.generation_id == 1
    # The assignment is in the log, as a group metadata value.
    key, value = env.store.decoded()[-1]
    assert key == storage.GroupKey("g")
    assert value.generation == 1 and value.protocol == "range" and value.leader == leader.member_id
    assert {m.member_id: m.assignment for m in value.members} == {m: f"assign-{m}".encode() for m in ids}


async def test_followers_sync_waits_for_the_leader(env):
    a = await new_member_id(env)
    b = await new_member_id(env)
    ta, _tb = join(env, a), join(env, b)
    await settle()
    env.timer.advance(0)
    await settle()
    gen = ta.result().generation_id
    follower = sync(env, b, gen)
    await settle()
    assert not follower.done()
    leader = sync(env, a, gen, {a: b"A", b: b"B"})
    await settle()
    assert follower.result().assignment == b"B" and leader.result().assignment == b"A"


async def test_member_missing_from_the_assignment_gets_an_empty_one(env):
    a = await new_member_id(env)
    b = await new_member_id(env)
    ta, _tb = join(env, a), join(env, b)
    await settle()
    env.timer.advance(0)
    await settle()
    gen = ta.result().generation_id
    sb = sync(env, b, gen)
    _sa = sync(env, a, gen, {a: b"A"})
    await settle()
    assert sb.result().error == E.NONE and sb.result().assignment == b""


async def test_protocol_selection_takes_the_common_one_most_prefer(env):
    sub = subscription("t")
    a = join(env, version=3, protocols=[("range", sub), ("roundrobin", sub)])
    b = join(env, version=3, protocols=[("roundrobin", sub), ("range", sub)])
    c = join(env, version=3, protocols=[("roundrobin", sub), ("cooperative-sticky", sub)])
    await settle()
    env.timer.advance(0)
    await settle()
    assert {t.result().protocol_name for t in (a, b, c)} == {"roundrobin"}


async def test_a_member_without_a_common_protocol_is_refused(env):
    await stable_group(env, 1)
    r = await join(env, protocols=[("sticky", subscription("t"))])
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
    r = await join(env, ptype="connect")
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL


async def test_group_max_size():
    env = await loaded(make_env(max_size=1))
    await stable_group(env, 1)
    r = await join(env, version=3)
    assert r.error == E.GROUP_MAX_SIZE_REACHED


# -- heartbeats, failures, leaving


async def test_heartbeat_answers(env):
    ids, results = await stable_group(env, 2)
    gen = results[0].generation_id
    hb = env.coord.heartbeat
    assert hb("g", gen, ids[0], None) == E.NONE
    assert hb("g", gen + 1, ids[0], None) == E.ILLEGAL_GENERATION
    assert hb("g", gen, "who", None) == E.UNKNOWN_MEMBER_ID
    assert hb("nope", gen, ids[0], None) == E.UNKNOWN_MEMBER_ID
    assert hb("", gen, ids[0], None) == E.INVALID_GROUP_ID
    newcomer = await new_member_id(env)
    t = join(env, newcomer)
    await settle()
    assert hb("g", gen, ids[0], None) == E.REBALANCE_IN_PROGRESS
    assert group(env).state is S.PREPARING_REBALANCE
    t.cancel()


async def test_session_timeout_removes_a_silent_member_and_survivors_take_over(env):
    ids, results = await stable_group(env, 3, session=6000)
    gen = results[0].generation_id
    # Members 0 and 1 heartbeat; member 2 is killed.
    for _ in range(2):
        env.timer.advance(2500)
        assert env.coord.heartbeat("g", gen, ids[0], None) == E.NONE
        assert env.coord.heartbeat("g", gen, ids[1], None) == E.NONE
    env.timer.advance(1000)  # member 2's session timeout (6000 ms) ends
    g = group(env)
    assert ids[2] not in g.members and g.state is S.PREPARING_REBALANCE
    assert env.coord.heartbeat("g", gen, ids[1], None) == E.REBALANCE_IN_PROGRESS
    j0, j1 = join(env, ids[0]), join(env, ids[1])
    await settle()
    r0, r1 = j0.result(), j1.result()
    assert r0.generation_id == r1.generation_id == gen + 1
    leader = r0 if r0.members else r1
    assert {m for m, _i, _meta in leader.members} == {ids[0], ids[1]}


async def test_rebalance_timeout_removes_dynamic_members_that_do_not_rejoin(env):
    ids, results = await stable_group(env, 2, session=60_000)
    # A new member forces a rebalance; member 1 never rejoins (but its session lasts).
    newcomer = await new_member_id(env)
    _tn, t0 = join(env, newcomer, rebalance=30_000), join(env, ids[0], rebalance=30_000)
    await settle()
    env.timer.advance(29_999)  # member 0 waits in JoinGroup: its session does not end it
    await settle()
    assert not t0.done()
    env.timer.advance(1)
    await settle()
    assert t0.result().generation_id == 2
    assert set(group(env).members) == {ids[0], newcomer}


async def test_pending_sync_expiry_removes_members_that_never_sync(env):
    a = await new_member_id(env)
    b = await new_member_id(env)
    ta, _tb = join(env, a, rebalance=20_000, session=30_000), join(env, b, rebalance=20_000, session=30_000)
    await settle()
    env.timer.advance(0)
    await settle()
    gen = ta.result().generation_id
    sa = sync(env, a, gen, {a: b"A", b: b"B"})
    await settle()
    assert sa.result().error == E.NONE
    env.timer.advance(20_000)  # b never sent SyncGroup
    g = group(env)
    assert b not in g.members and g.state is S.PREPARING_REBALANCE


async def test_leave_group_rebalances_and_the_last_leaver_empties_the_group(env):
    ids, results = await stable_group(env, 2)
    top, errors = env.coord.leave_group("g", [(ids[1], None), ("ghost", None)])
    assert top == E.NONE and errors == [E.NONE, E.UNKNOWN_MEMBER_ID]
    g = group(env)
    assert g.state is S.PREPARING_REBALANCE
    t = join(env, ids[0])
    await settle()
    assert t.result().generation_id == 2
    _s = sync(env, ids[0], 2, {ids[0]: b"all"})
    await settle()
    assert env.coord.leave_group("g", [(ids[0], None)]) == (E.NONE, [E.NONE])
    assert g.state is S.EMPTY and g.generation_id == 3
    key, value = env.store.decoded()[-1]
    assert key == storage.GroupKey("g") and value.members == [] and value.generation == 3


async def test_member_waiting_in_join_gets_unknown_member_id_when_removed(env):
    a = await new_member_id(env)
    t = join(env, a)
    await settle()
    env.timer.advance(0)
    await settle()
    gen = t.result().generation_id
    newcomer = await new_member_id(env)
    tn = join(env, newcomer)
    await settle()
    env.coord.leave_group("g", [(newcomer, None)])
    await settle()
    assert tn.result().error == E.UNKNOWN_MEMBER_ID
    assert gen == 1


# -- static membership (KIP-345)


async def test_static_member_rejoins_stable_group_without_rebalance(env):
    ids, results = await stable_group(env, 3, instances=["i0", "i1", "i2"])
    gen = results[0].generation_id
    g = group(env)
    old = ids[1]
    r = await join(env, instance="i1")  # restarted: empty member id
    assert r.error == E.NONE and r.member_id != old
    assert r.generation_id == gen and g.state is S.STABLE and g.generation_id == gen
    assert r.members == [] and r.leader_id == ids[0]
    s = await sync(env, r.member_id, gen, instance="i1")
    assert s.assignment == f"assign-{old}".encode()
    assert env.coord.heartbeat("g", gen, old, "i1") == E.FENCED_INSTANCE_ID
    assert env.coord.heartbeat("g", gen, r.member_id, "i1") == E.NONE
    # The new member id is in the log.
    key, value = env.store.decoded()[-1]
    assert r.member_id in {m.member_id for m in value.members}


async def test_static_leader_rejoining_v9_learns_members_but_skips_assignment(env):
    ids, results = await stable_group(env, 2, instances=["i0", "i1"])
    r = await join(env, instance="i0", version=9)
    assert r.error == E.NONE and r.skip_assignment and r.leader_id == r.member_id
    assert len(r.members) == 2 and group(env).state is S.STABLE


async def test_static_leader_rejoining_before_v9_is_told_the_old_leader_id(env):
    ids, results = await stable_group(env, 2, instances=["i0", "i1"])
    r = await join(env, instance="i0", version=5)
    assert r.error == E.NONE and not r.skip_assignment and r.leader_id == ids[0] != r.member_id


async def test_static_member_with_a_new_protocol_rebalances(env):
    sub = subscription("t")
    ids, results = await stable_group(env, 1, instances=["i0"], protocols=[("range", sub), ("roundrobin", sub)])
    r = await join(env, instance="i0", protocols=[("roundrobin", sub), ("range", sub)])
    assert r.generation_id == results[0].generation_id + 1 and r.protocol_name == "roundrobin"
    assert group(env).state is S.COMPLETING_REBALANCE


async def test_static_members_survive_a_rebalance_they_miss(env):
    ids, results = await stable_group(env, 2, instances=["i0", "i1"], session=60_000)
    newcomer = await new_member_id(env)
    _tn, t0 = join(env, newcomer), join(env, ids[0], instance="i0")
    await settle()
    env.timer.advance(30_000)  # i1 did not rejoin in the rebalance timeout: kept (static)
    await settle()
    assert ids[1] in group(env).members
    assert t0.result().generation_id == 2


async def test_leave_by_group_instance_id(env):
    ids, results = await stable_group(env, 2, instances=["i0", "i1"])
    assert env.coord.leave_group("g", [("", "i1")]) == (E.NONE, [E.NONE])
    assert ids[1] not in group(env).members
    assert env.coord.leave_group("g", [("", "i9")]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])


# -- offsets


def co(offset, **kw):
    return CommittedOffset(offset, commit_timestamp=kw.pop("ts", 0), **kw)


async def test_simple_consumer_commits_into_an_empty_group(env):
    res = await env.coord.commit_offsets("simple", "", None, -1, {("t", 0): co(5, leader_epoch=3, metadata="m",
                                                                             topic_epoch=7)})
    assert res == {("t", 0): E.NONE}
    err, found = env.coord.fetch_offsets("simple", [("t", 0), ("t", 1)])
    assert err == E.NONE
    (tp0, o0), (tp1, o1) = found
    assert (o0.offset, o0.leader_epoch, o0.metadata, o0.topic_epoch) == (5, 3, "m", 7)
    assert o1 is None
    assert group(env, "simple").state is S.EMPTY and group(env, "simple").protocol_type is None


async def test_member_commit_rules(env):
    ids, results = await stable_group(env, 2)
    gen = results[0].generation_id
    c = env.coord.commit_offsets
    tp = {("t", 0): co(1)}
    assert await c("g", ids[0], None, gen, tp) == {("t", 0): E.NONE}
    assert await c("g", ids[0], None, gen - 1, tp) == {("t", 0): E.ILLEGAL_GENERATION}
    assert await c("g", "who", None, gen, tp) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert await c("g", "", None, -1, tp) == {("t", 0): E.UNKNOWN_MEMBER_ID}  # not Empty
    assert await c("missing", "m", None, 3, tp) == {("t", 0): E.ILLEGAL_GENERATION}
    big = {("t", 0): co(1, metadata="x" * 5000)}
    assert await c("g", ids[0], None, gen, big) == {("t", 0): E.OFFSET_METADATA_TOO_LARGE}
    # In CompletingRebalance, commits wait for the assignment.
    newcomer = await new_member_id(env)
    _tn, _t0, _t1 = join(env, newcomer), join(env, ids[0]), join(env, ids[1])
    await settle()
    assert group(env).state is S.COMPLETING_REBALANCE
    assert await c("g", ids[0], None, gen + 1, tp) == {("t", 0): E.REBALANCE_IN_PROGRESS}


async def test_commits_are_allowed_while_preparing_a_rebalance(env):
    ids, results = await stable_group(env, 2)
    gen = results[0].generation_id
    newcomer = await new_member_id(env)
    tn = join(env, newcomer)
    await settle()
    assert group(env).state is S.PREPARING_REBALANCE
    assert await env.coord.commit_offsets("g", ids[1], None, gen, {("t", 0): co(9)}) == {("t", 0): E.NONE}
    tn.cancel()


async def test_fetch_all_offsets_and_a_failed_write(env):
    await env.coord.commit_offsets("s", "", None, -1, {("a", 1): co(1), ("a", 0): co(2)})
    assert env.coord.fetch_offsets("s", None)[1] == [(("a", 0), co(2)), (("a", 1), co(1))]
    env.store.fail = E.NOT_COORDINATOR
    assert await env.coord.commit_offsets("s", "", None, -1, {("a", 0): co(3)}) == {("a", 0): E.NOT_COORDINATOR}
    assert env.coord.fetch_offsets("s", [("a", 0)])[1][0][1].offset == 2


async def test_offsets_of_an_empty_group_expire_and_the_group_goes(env):
    ids, results = await stable_group(env, 1)
    await env.coord.commit_offsets("g", ids[0], None, 1, {("t", 0): co(4, ts=env.timer.now)})
    env.coord.leave_group("g", [(ids[0], None)])
    assert group(env).state is S.EMPTY
    env.timer.advance(7 * 24 * 60 * MINUTE)
    assert "g" not in env.coord.shards[0].groups
    assert env.coord.fetch_offsets("g", [("t", 0)])[1] == [(("t", 0), None)]
    tail = env.store.decoded()[-2:]
    assert tail == [(storage.OffsetKey("g", "t", 0), None), (storage.GroupKey("g"), None)]


def test_expiry_rules():
    offs = {("a", 0): co(1, ts=0), ("b", 0): co(1, ts=0), ("c", 0): co(1, ts=0, expire_timestamp=50)}
    day = 24 * 60 * MINUTE
    common = dict(is_empty=False, is_stable=True, protocol_type="consumer", state_timestamp=0)
    # Stable consumer group: only topics nobody subscribes to (and explicit expiry).
    assert sorted(expired_offsets(offs, day, day, subscribed_topics={"a"}, **common)) == [("b", 0), ("c", 0)]
    # Rebalancing or subscriptions unknown: nothing.
    assert expired_offsets(offs, day, day, subscribed_topics=None, **common) == []
    # Empty group: counted from when it became Empty.
    empty = dict(common, is_empty=True, is_stable=False, state_timestamp=day)
    assert sorted(expired_offsets(offs, day + 1, day, subscribed_topics=None, **empty)) == [("c", 0)]
    assert len(expired_offsets(offs, 2 * day, day, subscribed_topics=None, **empty)) == 3
    # No protocol type (simple consumer): from each commit.
    simple = dict(common, protocol_type=None, is_stable=False, is_empty=True)
    assert len(expired_offsets(offs, day, day, subscribed_topics=None, **simple)) == 3


async def test_offset_delete_respects_subscriptions(env):
    ids, results = await stable_group(env, 1)  # subscribed to "t"
    await env.coord.commit_offsets("g", ids[0], None, 1, {("t", 0): co(1), ("u", 0): co(2)})
    top, res = await env.coord.delete_offsets("g", [("t", 0), ("u", 0)])
    assert top == E.NONE and res == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): E.NONE}
    assert [tp for tp, o in env.coord.fetch_offsets("g", None)[1]] == [("t", 0)]
    assert (await env.coord.delete_offsets("nope", [("t", 0)]))[0] == E.GROUP_ID_NOT_FOUND


# -- admin views


async def test_describe_list_and_delete_groups(env):
    ids, results = await stable_group(env, 2)
    await env.coord.commit_offsets("simple", "", None, -1, {("t", 0): co(1)})
    err, d = env.coord.describe_group("g")
    assert err == E.NONE and d.state == "Stable" and d.protocol == "range" and d.protocol_type == "consumer"
    assert {m.member_id for m in d.members} == set(ids)
    assert all(m.metadata == subscription("t") and m.assignment for m in d.members)
    assert env.coord.describe_group("nobody")[1].state == "Dead"
    assert sorted(env.coord.list_groups()[1]) == [("g", "consumer", "Stable"), ("simple", "", "Empty")]
    assert env.coord.list_groups(["empty"])[1] == [("simple", "", "Empty")]
    assert env.coord.list_groups([], ["consumer"])[1] == []
    assert env.coord.delete_groups(["g", "simple", "nobody"]) == {
        "g": E.NON_EMPTY_GROUP, "simple": E.NONE, "nobody": E.GROUP_ID_NOT_FOUND}
    assert env.coord.fetch_offsets("simple", None)[1] == []


# -- ownership and loading


async def test_groups_elsewhere_are_not_coordinator():
    env = make_env(num_partitions=2)
    env.coord.on_become_leader(0, 0)
    await env.coord.shards[0].load_task
    gid = next(f"g{i}" for i in range(100) if partition_for(f"g{i}", 2) == 1)
    assert (await join(env, group=gid)).error == E.NOT_COORDINATOR
    assert env.coord.heartbeat(gid, 1, "m", None) == E.NOT_COORDINATOR
    assert env.coord.fetch_offsets(gid, None)[0] == E.NOT_COORDINATOR


async def test_loading_answers_load_in_progress_and_heartbeat_none():
    env = make_env()
    env.store.gate = asyncio.Event()
    env.coord.on_become_leader(0, 0)
    assert (await join(env)).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert env.coord.heartbeat("g", 1, "m", None) == E.NONE
    assert (await sync(env, "m", 1)).error == E.REBALANCE_IN_PROGRESS
    assert (await env.coord.commit_offsets("g", "", None, -1, {("t", 0): co(1)})) == {
        ("t", 0): E.COORDINATOR_LOAD_IN_PROGRESS}
    env.store.gate.set()
    await env.coord.shards[0].load_task
    assert (await join(env)).error == E.MEMBER_ID_REQUIRED


async def test_resign_answers_waiting_members_not_coordinator(env):
    a = await new_member_id(env)
    b = await new_member_id(env)
    ta = join(env, a)
    await settle()
    env.timer.advance(0)
    await settle()
    gen = ta.result().generation_id
    tb = join(env, b)  # a rebalance that now waits for a
    await settle()
    env.coord.on_resign(0)
    await settle()
    assert tb.result().error == E.NOT_COORDINATOR
    assert env.coord.heartbeat("g", gen, a, None) == E.NOT_COORDINATOR
    assert [k for k in env.timer.due if k[0] != "expire-offsets"] == []


async def test_a_new_leader_rebuilds_groups_and_offsets_from_the_log(env):
    ids, results = await stable_group(env, 2, instances=[None, "static-1"])
    gen = results[0].generation_id
    await env.coord.commit_offsets("g", ids[0], None, gen, {("t", 0): co(10, leader_epoch=2, metadata="x",
                                                                         topic_epoch=4)})
    await env.coord.commit_offsets("g", ids[0], None, gen, {("t", 0): co(12, leader_epoch=2, topic_epoch=4)})
    await env.coord.commit_offsets("gone", "", None, -1, {("t", 1): co(1)})
    assert env.coord.delete_groups(["gone"]) == {"gone": E.NONE}

    other = await loaded(make_env(store=env.store, timer=env.timer))
    g2 = other.coord.shards[0].groups["g"]
    assert "gone" not in other.coord.shards[0].groups
    assert g2.state is S.STABLE and g2.generation_id == gen and set(g2.members) == set(ids)
    assert g2.static_members == {"static-1": ids[1]} and g2.leader_id == results[0].leader_id
    o = other.coord.fetch_offsets("g", [("t", 0)])[1][0][1]
    assert (o.offset, o.leader_epoch, o.metadata, o.topic_epoch) == (12, 2, "", 4)
    # Live members carry on with their member id and generation...
    assert other.coord.heartbeat("g", gen, ids[0], None) == E.NONE
    s = await sync(other, ids[0], gen)
    assert s.error == E.NONE and s.assignment == f"assign-{ids[0]}".encode()
    # ...and one that stays silent is expired after its session timeout.
    for _ in range(3):
        other.timer.advance(4000)
        other.coord.heartbeat("g", gen, ids[0], None)
    assert ids[1] not in g2.members and g2.state is S.PREPARING_REBALANCE


# -- record formats


def test_offset_values_round_trip_in_kafkas_versions():
    o = CommittedOffset(42, 7, "meta", 1234)
    v = storage.offset_value(o)
    assert v[:2] == b"\x00\x03"
    assert storage.decode_offset_value(v) == o
    o4 = CommittedOffset(42, 7, "meta", 1234, topic_epoch=9)
    v4 = storage.offset_value(o4)
    assert v4[:2] == b"\x00\x04" and storage.decode_offset_value(v4) == o4
    o1 = CommittedOffset(42, -1, "", 1234, expire_timestamp=5678)
    v1 = storage.offset_value(o1)
    assert v1[:2] == b"\x00\x01" and storage.decode_offset_value(v1) == o1
    # v0 as old Kafka wrote it: offset, metadata, commit timestamp.
    v0 = struct.pack(">hqh", 0, 5, 2) + b"md" + struct.pack(">q", 99)
    assert storage.decode_offset_value(v0) == CommittedOffset(5, -1, "md", 99)


def test_keys_are_kafkas():
    k = storage.offset_key("grp", "top", 3)
    assert k == struct.pack(">hh", 1, 3) + b"grp" + struct.pack(">h", 3) + b"top" + struct.pack(">i", 3)
    assert storage.decode_key(k) == storage.OffsetKey("grp", "top", 3)
    assert storage.group_key("grp") == struct.pack(">hh", 2, 3) + b"grp"
    with pytest.raises(storage.StorageFormatError):
        storage.decode_key(struct.pack(">h", 9))


def test_group_values_round_trip_and_old_versions_decode():
    g = storage.StoredGroup("consumer", 3, "range", "m1", 777, [
        storage.StoredMember("m1", "inst", "cid", "/1.2.3.4", 30000, 10000, b"sub", b"asg"),
        storage.StoredMember("m2", None, "cid", "/1.2.3.4", 30000, 10000, b"", b""),
    ])
    assert storage.decode_group_value(storage.group_value(g)) == g

    def s(x):
        return struct.pack(">h", len(x)) + x.encode()

    # v0: no rebalance timeout, no state timestamp, no instance id.
    v0 = (struct.pack(">h", 0) + s("consumer") + struct.pack(">i", 2) + s("range") + s("m1") + struct.pack(">i", 1)
          + s("m1") + s("cid") + s("/h") + struct.pack(">i", 6000) + struct.pack(">i", 3) + b"sub"
          + struct.pack(">i", 1) + b"a")
    d = storage.decode_group_value(v0)
    assert d.generation == 2 and d.current_state_timestamp == -1
    assert d.members == [storage.StoredMember("m1", None, "cid", "/h", 6000, 6000, b"sub", b"a")]


def test_subscription_topics():
    assert subscription_topics(subscription("a", "b")) == {"a", "b"}
    assert subscription_topics(b"\x00") is None
