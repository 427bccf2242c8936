"""The model of a group (metadata.py): its state graph, its members and what is owed to
them, protocol selection, generations and the stored form. Pure state: no coordinator,
no store, no timer (a waiting member's answer is a future)."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from refka.broker.group import storage
from refka.broker.group.metadata import TRANSITIONS, Group, GroupState, IllegalGroupTransition, Member
from refka.protocol import ErrorCode as E

from .harness import subscription

S = GroupState


def member(member_id: str, protocols=None, *, instance: str | None = None, ptype: str = "consumer") -> Member:
    return Member(member_id, instance, "client", "/127.0.0.1", 30_000, 10_000, ptype,
                  protocols if protocols is not None else [("range", subscription("t"))])


def stable(*members: Member) -> Group:
    """A group whose members went through one rebalance, Stable in generation 1."""
    g = Group("g", 0)
    g.transition(S.PREPARING_REBALANCE, 1)
    for m in members:
        g.add(m, None)
    g.init_next_generation(2)
    g.transition(S.STABLE, 3)
    return g


def waiter():
    return asyncio.get_running_loop().create_future()


# -- the transition table


def test_transitions_are_kafkas_graph():
    assert TRANSITIONS[S.EMPTY] == {S.PREPARING_REBALANCE, S.DEAD}
    assert TRANSITIONS[S.STABLE] == {S.PREPARING_REBALANCE, S.DEAD}
    assert S.STABLE in TRANSITIONS[S.COMPLETING_REBALANCE]
    assert S.STABLE not in TRANSITIONS[S.PREPARING_REBALANCE]


def test_an_illegal_transition_is_a_named_error():
    g = stable(member("a"))
    with pytest.raises(IllegalGroupTransition):
        g.transition(S.COMPLETING_REBALANCE, 0)


@pytest.mark.parametrize(("before", "after"), list(itertools.product(S, S)))
def test_a_move_in_the_table_is_made_and_any_other_refused(before, after):
    g = Group("g", 10, state=before)
    if after in TRANSITIONS[before]:
        g.transition(after, 20)
        assert (g.previous_state, g.state, g.state_timestamp) == (before, after, 20)
    else:
        with pytest.raises(IllegalGroupTransition):
            g.transition(after, 20)
        assert (g.previous_state, g.state, g.state_timestamp) == (None, before, 10)


def test_a_group_can_rebalance_from_the_states_that_may_prepare_one():
    assert {st for st in S if Group("g", 0, state=st).can_rebalance} == {
        S.EMPTY, S.COMPLETING_REBALANCE, S.STABLE}


# -- members and what they are owed


def test_the_first_member_sets_the_protocol_type_and_leads():
    g = Group("g", 0)
    g.add(member("a", ptype="connect"), None)
    g.add(member("b", ptype="consumer"), None)
    assert g.protocol_type == "connect" and g.leader_id == "a" and g.is_leader("a")
    assert list(g.members) == ["a", "b"]


async def test_removing_a_member_answers_it_unknown_member_id_and_the_next_member_leads():
    g = Group("g", 0)
    joining = waiter()
    g.add(member("a"), joining)
    g.add(member("b"), None)
    syncing = g.members["a"].sync_waiter = waiter()
    g.pending_sync.add("a")
    removed = g.remove("a")
    assert removed is not None and removed.join_waiter is None and removed.sync_waiter is None
    assert joining.result().error == E.UNKNOWN_MEMBER_ID and syncing.result().error == E.UNKNOWN_MEMBER_ID
    assert g.leader_id == "b" and "a" not in g.pending_sync
    assert g.remove("a") is None
    g.remove("b")
    assert g.leader_id is None


async def test_a_replaced_static_member_fences_its_old_id_and_keeps_its_place():
    g = stable(member("old", instance="i1"), member("b"))
    joining, syncing = waiter(), waiter()
    g.members["old"].join_waiter, g.members["old"].sync_waiter = joining, syncing
    g.members["old"].assignment = b"A"
    g.pending_sync.add("old")
    m = g.replace_static_member("i1", "old", "new")
    assert joining.result().error == E.FENCED_INSTANCE_ID and joining.result().member_id == "old"
    assert syncing.result().error == E.FENCED_INSTANCE_ID
    assert m.member_id == "new" and m.assignment == b"A" and list(g.members) == ["b", "new"]
    assert g.static_members == {"i1": "new"} and g.leader_id == "new" and g.pending_sync == {"new"}


async def test_a_second_join_answers_the_first_rebalance_in_progress():
    g = Group("g", 0)
    first, second = waiter(), waiter()
    g.add(member("a"), first)
    protocols = [("roundrobin", subscription("u"))]
    g.update_member(g.members["a"], protocols, 40_000, 20_000, second)
    assert first.result().error == E.REBALANCE_IN_PROGRESS and first.result().member_id == "a"
    m = g.members["a"]
    assert (m.protocols, m.rebalance_timeout_ms, m.session_timeout_ms) == (protocols, 40_000, 20_000)
    assert m.join_waiter is second and not second.done()


def test_member_validation_names_who_is_unknown_and_who_is_fenced():
    g = stable(member("a"), member("s1", instance="i1"))
    assert g.validate_member("a", None) == E.NONE
    assert g.validate_member("x", None) == E.UNKNOWN_MEMBER_ID
    assert g.validate_member("s1", "i1") == E.NONE
    assert g.validate_member("a", "i1") == E.FENCED_INSTANCE_ID
    assert g.validate_member("s1", "i9") == E.UNKNOWN_MEMBER_ID


async def test_all_members_joined_needs_every_member_waiting_and_no_pending_member():
    g = Group("g", 0)
    g.add(member("a"), waiter())
    g.add(member("b"), None)
    assert g.awaiting_join() == 1 and not g.has_all_members_joined()
    g.members["b"].join_waiter = waiter()
    assert g.has_all_members_joined()
    g.pending_members.add("c")
    assert not g.has_all_members_joined()


async def test_a_leader_that_did_not_rejoin_hands_over_to_a_member_that_did():
    g = Group("g", 0)
    g.add(member("a"), None)
    g.add(member("b"), None)
    assert not g.maybe_elect_new_joined_leader() and g.leader_id == "a"
    g.members["b"].join_waiter = waiter()
    assert g.maybe_elect_new_joined_leader() and g.leader_id == "b"
    g.members["a"].join_waiter = waiter()
    assert g.maybe_elect_new_joined_leader() and g.leader_id == "b"  # a rejoined leader stays


# -- protocols and generations


def test_a_joining_member_needs_the_groups_type_and_a_protocol_every_member_has():
    sub = subscription("t")
    assert Group("g", 0).supports_protocols("consumer", ["range"])
    assert not Group("g", 0).supports_protocols("", ["range"])
    assert not Group("g", 0).supports_protocols("consumer", [])
    g = stable(member("a", [("range", sub), ("roundrobin", sub)]), member("b", [("roundrobin", sub)]))
    assert g.supports_protocols("consumer", ["sticky", "roundrobin"])
    assert not g.supports_protocols("consumer", ["range"])
    assert not g.supports_protocols("connect", ["roundrobin"])


def test_the_protocol_most_members_list_first_wins_and_ties_go_to_the_first_members_order():
    sub = subscription("t")
    g = Group("g", 0)
    g.add(member("a", [("range", sub), ("roundrobin", sub)]), None)
    g.add(member("b", [("roundrobin", sub), ("range", sub)]), None)
    assert g.select_protocol() == "range"  # one vote each: the first member's first
    g.add(member("c", [("roundrobin", sub), ("range", sub)]), None)
    assert g.select_protocol() == "roundrobin"
    g.add(member("d", [("sticky", sub)]), None)
    with pytest.raises(IllegalGroupTransition):
        g.select_protocol()


def test_a_new_generation_picks_the_protocol_or_is_empty_without_members():
    g = Group("g", 0)
    g.transition(S.PREPARING_REBALANCE, 1)
    g.add(member("a", [("range", subscription("t", "u"))]), None)
    g.init_next_generation(5)
    assert (g.generation_id, g.state, g.protocol_name, g.state_timestamp) == (1, S.COMPLETING_REBALANCE, "range", 5)
    assert g.subscribed_topics == {"t", "u"}
    assert g.members_for_leader() == [("a", None, subscription("t", "u"))]
    g.transition(S.PREPARING_REBALANCE, 6)
    g.remove("a")
    g.init_next_generation(7)
    assert (g.generation_id, g.state, g.protocol_name, g.subscribed_topics) == (2, S.EMPTY, None, set())


def test_subscribed_topics_are_known_only_for_readable_consumer_subscriptions():
    g = stable(member("a", [("range", subscription("t"))]), member("b", [("range", subscription("u"))]))
    assert g.compute_subscribed_topics() == {"t", "u"}
    assert g.is_subscribed_to("t") and not g.is_subscribed_to("v")
    assert stable(member("a", [("range", b"\x00")])).compute_subscribed_topics() is None
    other = stable(member("a", ptype="connect"))
    assert other.subscribed_topics is None and other.is_subscribed_to("anything")


# -- the stored form and DescribeGroups' view


def test_a_stored_group_reads_back_stable_with_its_members_and_assignments():
    g = stable(member("a"), member("s1", instance="i1"))
    value = storage.decode_group_value(storage.group_value(g.stored({"a": b"A", "s1": b"S"})))
    back = Group.from_stored("g", value, 99)
    assert (back.state, back.generation_id, back.protocol_type, back.protocol_name) == (
        S.STABLE, 1, "consumer", "range")
    assert back.leader_id == "a" and back.static_members == {"i1": "s1"} and back.state_timestamp == 3
    assert {mid: m.assignment for mid, m in back.members.items()} == {"a": b"A", "s1": b"S"}
    assert back.subscribed_topics == {"t"}
    value.leader = "gone"
    assert Group.from_stored("g", value, 99).leader_id == "a"  # a leader not among the members: the first


def test_a_group_known_only_by_its_offsets_is_empty():
    g = Group.from_stored("g", None, 99)
    assert (g.state, g.generation_id, g.protocol_type, g.members, g.state_timestamp) == (S.EMPTY, 0, None, {}, 99)


def test_describe_shows_the_protocol_metadata_and_assignments_only_once_stable():
    g = stable(member("a"))
    g.members["a"].assignment = b"A"
    s = g.summary()
    assert (s.state, s.protocol_type, s.protocol) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.metadata, m.assignment) for m in s.members] == [("a", subscription("t"), b"A")]
    g.transition(S.PREPARING_REBALANCE, 4)
    s = g.summary()
    assert (s.state, s.protocol) == ("PreparingRebalance", "")
    assert [(m.member_id, m.metadata, m.assignment) for m in s.members] == [("a", b"", b"")]
