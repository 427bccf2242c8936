"""The group coordinator (coordinator.py): which groups it owns, loading them, offsets
and the admin views, through its public calls on a fake store and a manual timer."""

from __future__ import annotations

import asyncio

from refka.broker.group import storage
from refka.broker.group.coordinator import java_string_hash, partition_for
from refka.broker.group.metadata import GroupState
from refka.protocol import ErrorCode as E

from .harness import (
    MINUTE,
    co,
    group,
    join,
    loaded,
    make_env,
    new_member_id,
    settle,
    stable_group,
    subscription,
    sync,
)

S = GroupState


def test_partition_for_is_kafkas():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("hello", 50) == 22
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert partition_for("", 50) == 0


# -- offsets


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


async def test_offset_delete_respects_subscriptions(env):
    ids, results = await stable_group(env, 1)  # subscribed to "t"
    await env.coord.commit_offsets("g", ids[0], None, 1, {("t", 0): co(1), ("u", 0): co(2)})
    top, res = await env.coord.delete_offsets("g", [("t", 0), ("u", 0)])
    assert top == E.NONE and res == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): E.NONE}
    assert [tp for tp, o in env.coord.fetch_offsets("g", None)[1]] == [("t", 0)]
    assert (await env.coord.delete_offsets("nope", [("t", 0)]))[0] == E.GROUP_ID_NOT_FOUND


async def test_offsets_of_deleted_partitions_go_from_every_group(env):
    ids, results = await stable_group(env, 1)
    await env.coord.commit_offsets("g", ids[0], None, 1, {("t", 0): co(5), ("t", 7): co(9)})
    await env.coord.commit_offsets("simple", "", None, -1, {("t", 7): co(3)})
    env.coord.on_partitions_deleted({("t", 7), ("gone", 0)})
    assert [tp for tp, _ in env.coord.fetch_offsets("g", None)[1]] == [("t", 0)]
    # An Empty group left without offsets goes too, as when its offsets expire.
    assert "simple" not in env.coord.shards[0].groups
    tail = env.store.decoded()[-3:]
    assert storage.OffsetKey("g", "t", 7) in [k for k, _ in tail]
    assert (storage.OffsetKey("simple", "t", 7), None) in tail and (storage.GroupKey("simple"), None) in tail


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
