"""The group membership protocol (membership.py): JoinGroup, SyncGroup, Heartbeat and
LeaveGroup through the coordinator, every rebalance step driven by a manual timer."""

from __future__ import annotations

from refka.broker.group import storage
from refka.broker.group.metadata import GroupState
from refka.protocol import ErrorCode as E

from .harness import group, join, loaded, make_env, new_member_id, settle, stable_group, subscription, sync

S = GroupState


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
