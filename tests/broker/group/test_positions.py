"""KIP-253's group positions (positions.py) on their own, and ConsumerGroupPosition through
the coordinator (coordinator.py ``group_positions``) on the harness's fake store and timer."""

from __future__ import annotations

import asyncio
import struct

import pytest

from refka.broker.group.metadata import GroupState
from refka.broker.group.positions import GroupPositions, PositionAnswer, PositionReport, assigned_partitions
from refka.protocol import ErrorCode as E

from .harness import join, loaded, make_env, new_member_id, settle, sync

S = GroupState


def assignment(topics: dict[str, list[int]], version: int = 0) -> bytes:
    """A ConsumerProtocolAssignment: version, (topic, partitions) array, null user data."""
    out = struct.pack(">hi", version, len(topics))
    for t, ps in topics.items():
        out += struct.pack(">h", len(t)) + t.encode() + struct.pack(f">i{len(ps)}i", len(ps), *ps)
    return out + struct.pack(">i", -1)


def need(topic: str, partition: int) -> PositionReport:
    return PositionReport((topic, partition), True, -1)


def report(topic: str, partition: int, position: int) -> PositionReport:
    return PositionReport((topic, partition), False, position)


def answer(topic: str, partition: int, need_position: bool, position: int) -> PositionAnswer:
    return PositionAnswer((topic, partition), need_position, position)


# -- assignments


def test_assigned_partitions_of_every_consumer_protocol_version():
    for version in (0, 1, 2, 3):
        assert assigned_partitions(assignment({"t": [0, 2], "u": [1]}, version)) == {("t", 0), ("t", 2), ("u", 1)}


@pytest.mark.parametrize("garbage", [b"", b"\x00\x00", b"\x00\x00\x00\x00\x00\x01\x00\x05t", b"\xff" * 12,
                                     assignment({"t": [0, 1]})[:-8]])
def test_an_assignment_that_does_not_parse_assigns_nothing(garbage):
    assert assigned_partitions(garbage) == frozenset()


# -- the bookkeeping

A = {"a": assignment({"t": [0, 1]}), "b": assignment({"t": [2, 3]})}


def test_a_needed_position_is_unknown_until_its_owner_is_flagged_and_reports_it():
    gp = GroupPositions()
    assert gp.exchange(1, A, "b", [need("t", 0)]) == [answer("t", 0, False, -1)]
    # a owns t-0: flagged to report it; t-1 nobody needs.
    assert gp.exchange(1, A, "a", []) == [answer("t", 0, True, -1)]
    assert gp.exchange(1, A, "a", [report("t", 0, 42)]) == [answer("t", 0, True, 42)]
    assert gp.exchange(1, A, "b", [need("t", 0)]) == [answer("t", 0, False, 42)]


def test_the_latest_report_wins():
    gp = GroupPositions()
    gp.exchange(1, A, "b", [need("t", 1)])
    gp.exchange(1, A, "a", [report("t", 1, 5)])
    gp.exchange(1, A, "a", [report("t", 1, 9)])
    assert gp.exchange(1, A, "b", [need("t", 1)]) == [answer("t", 1, False, 9)]


def test_a_position_of_a_partition_the_member_is_not_assigned_is_ignored():
    gp = GroupPositions()
    gp.exchange(1, A, "b", [need("t", 0), report("t", 0, 77)])  # b does not consume t-0
    assert gp.exchange(1, A, "b", [need("t", 0)]) == [answer("t", 0, False, -1)]


def test_a_member_may_need_its_own_partition_and_reports_it_like_any_owner():
    gp = GroupPositions()
    assert gp.exchange(1, A, "a", [need("t", 0), report("t", 0, 3)]) == [answer("t", 0, True, 3)]


def test_what_a_member_no_longer_names_it_no_longer_needs():
    gp = GroupPositions()
    gp.exchange(1, A, "b", [need("t", 0), need("t", 1)])
    gp.exchange(1, A, "b", [need("t", 1)])
    assert gp.exchange(1, A, "a", []) == [answer("t", 1, True, -1)]
    gp.exchange(1, A, "b", [])
    assert gp.exchange(1, A, "a", []) == []


def test_a_partition_two_members_need_stays_needed_until_both_stop():
    three = {**A, "c": assignment({})}
    gp = GroupPositions()
    gp.exchange(1, three, "b", [need("t", 0)])
    gp.exchange(1, three, "c", [need("t", 0)])
    gp.exchange(1, three, "b", [])
    assert gp.exchange(1, three, "a", []) == [answer("t", 0, True, -1)]


def test_answers_are_sorted_by_topic_and_partition():
    owner = {"a": assignment({"u": [0], "t": [5]}), "b": b""}
    gp = GroupPositions()
    gp.exchange(1, owner, "b", [need("u", 0), need("t", 5)])
    assert gp.exchange(1, owner, "a", [need("t", 9)]) == [
        answer("t", 5, True, -1), answer("t", 9, False, -1), answer("u", 0, True, -1)]


def test_a_new_generation_starts_over():
    gp = GroupPositions()
    gp.exchange(1, A, "b", [need("t", 0)])
    gp.exchange(1, A, "a", [report("t", 0, 42)])
    moved = {"a": assignment({"t": [2, 3]}), "b": assignment({"t": [0, 1]})}
    assert gp.exchange(2, moved, "a", []) == []
    assert gp.exchange(2, moved, "a", [need("t", 0)]) == [answer("t", 0, False, -1)]


def test_a_member_gone_within_a_generation_takes_its_interest_and_its_reports_along():
    gp = GroupPositions()
    gp.exchange(1, A, "a", [need("t", 2), report("t", 0, 42)])
    gp.exchange(1, A, "b", [need("t", 0)])
    # a's instance rejoined as a2 (static membership): same generation, same assignment.
    renamed = {"a2": A["a"], "b": A["b"]}
    assert gp.exchange(1, renamed, "b", [need("t", 0)]) == [answer("t", 0, False, -1)]
    assert gp.needed_by == {("t", 0): {"b"}}


# -- through the coordinator


async def consumer_group(env, assignments: list[dict[str, list[int]]]) -> tuple[list[str], int]:
    """One member per assignment, through a rebalance and the leader's SyncGroup."""
    ids = [await new_member_id(env) for _ in assignments]
    joins = [join(env, mid) for mid in ids]
    await settle()
    env.timer.advance(0)
    await settle()
    results = [j.result() for j in joins]
    gen, leader = results[0].generation_id, results[0].leader_id
    by_id = {mid: assignment(a) for mid, a in zip(ids, assignments, strict=True)}
    syncs = [sync(env, mid, gen, by_id if mid == leader else None) for mid in ids]
    await settle()
    assert [s.result().error for s in syncs] == [E.NONE] * len(ids)
    return ids, gen


async def test_members_exchange_positions_through_the_coordinator(env):
    (a, b), gen = await consumer_group(env, [{"t": [0]}, {"t": [1]}])
    positions = env.coord.group_positions
    assert positions("g", gen, b, [need("t", 0)]) == (E.NONE, [answer("t", 0, False, -1)])
    assert positions("g", gen, a, []) == (E.NONE, [answer("t", 0, True, -1)])
    assert positions("g", gen, a, [report("t", 0, 10)]) == (E.NONE, [answer("t", 0, True, 10)])
    assert positions("g", gen, b, [need("t", 0)]) == (E.NONE, [answer("t", 0, False, 10)])


async def test_errors_are_heartbeats(env):
    (a, _b), gen = await consumer_group(env, [{"t": [0]}, {"t": [1]}])
    positions = env.coord.group_positions
    assert positions("g", gen + 1, a, []) == (E.ILLEGAL_GENERATION, [])
    assert positions("g", gen, "who", []) == (E.UNKNOWN_MEMBER_ID, [])
    assert positions("nope", gen, a, []) == (E.UNKNOWN_MEMBER_ID, [])
    assert positions("", gen, a, []) == (E.INVALID_GROUP_ID, [])
    newcomer = await new_member_id(env)
    t = join(env, newcomer)
    await settle()
    assert env.coord.shards[0].groups["g"].state is S.PREPARING_REBALANCE
    assert positions("g", gen, a, []) == (E.REBALANCE_IN_PROGRESS, [])
    t.cancel()


async def test_while_completing_a_rebalance_there_is_no_assignment_to_go_by(env):
    mid = await new_member_id(env)
    j = join(env, mid)
    await settle()
    env.timer.advance(0)
    await settle()
    gen = j.result().generation_id
    assert env.coord.shards[0].groups["g"].state is S.COMPLETING_REBALANCE
    assert env.coord.group_positions("g", gen, mid, []) == (E.REBALANCE_IN_PROGRESS, [])


async def test_not_coordinator_unless_leading_and_load_in_progress_while_loading():
    env = make_env()
    assert env.coord.group_positions("g", 1, "m", []) == (E.NOT_COORDINATOR, [])
    env.store.gate = gate = asyncio.Event()
    env.coord.on_become_leader(0, 0)
    assert env.coord.group_positions("g", 1, "m", []) == (E.COORDINATOR_LOAD_IN_PROGRESS, [])
    gate.set()
    await loaded(env)


async def test_a_rebalance_resets_the_groups_positions(env):
    (a, b), gen = await consumer_group(env, [{"t": [0]}, {"t": [1]}])
    env.coord.group_positions("g", gen, b, [need("t", 0)])
    env.coord.group_positions("g", gen, a, [report("t", 0, 10)])
    assert env.coord.leave_group("g", [(b, None)]) == (E.NONE, [E.NONE])  # a rejoins alone
    j = join(env, a)
    await settle()
    r = j.result()
    s = sync(env, a, r.generation_id, {a: assignment({"t": [0, 1]})})
    await settle()
    assert s.result().error == E.NONE
    assert env.coord.group_positions("g", r.generation_id, a, [need("t", 0)]) == (
        E.NONE, [answer("t", 0, True, -1)])


async def test_a_deleted_group_takes_its_positions_along(env):
    (a,), gen = await consumer_group(env, [{"t": [0]}])
    env.coord.group_positions("g", gen, a, [need("t", 0)])
    assert "g" in env.coord.shards[0].positions
    env.coord.leave_group("g", [(a, None)])
    assert env.coord.delete_groups(["g"]) == {"g": E.NONE}
    assert "g" not in env.coord.shards[0].positions
