"""The model of a group (metadata.py): its state graph, its members and what is owed to
them, protocol selection, generations and the stored form. Pure state: no coordinator,
no store, no timer (a waiting member's answer is a future)."""

from __future__ import annotations

import pytest

from refka.broker.group.metadata import TRANSITIONS, Group, GroupState, IllegalGroupTransition, Member

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
