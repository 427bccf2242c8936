"""State machines and leader election, without sockets or stores."""

from __future__ import annotations

import pytest

from refka.controller import state_machine as sm
from refka.controller.state_machine import (
    PARTITION_TRANSITIONS,
    RECOVERING,
    IllegalStateTransition,
    PartitionStateMachine,
    ReplicaStateMachine,
    elect_controlled_shutdown,
    elect_offline,
    elect_preferred,
    elect_reassignment,
    initial_state,
    offline_partition_leader,
    remove_replica_from_isr,
)
from refka.controller.znodes import NO_LEADER, PartitionStateZnode

P = sm.PartitionStateName
R = sm.ReplicaStateName


def test_partition_lifecycle_follows_the_table() -> None:
    m = PartitionStateMachine()
    tp = ("t", 0)
    assert m.state(tp) is P.NON_EXISTENT
    for target in (P.NEW, P.ONLINE, P.ONLINE, P.OFFLINE, P.ONLINE, P.OFFLINE, P.NON_EXISTENT):
        m.transition(tp, target)
    assert tp not in m.states


@pytest.mark.parametrize(
    "path",
    [
        (P.ONLINE,),  # a partition must be New before it is Online
        (P.NEW, P.NON_EXISTENT),  # only an Offline partition can be deleted
        (P.NEW, P.ONLINE, P.NON_EXISTENT),
        (P.NEW, P.NEW),
    ],
)
def test_illegal_partition_transitions_raise(path) -> None:
    m = PartitionStateMachine()
    with pytest.raises(IllegalStateTransition):
        for target in path:
            m.transition(("t", 0), target)


def test_every_partition_state_has_a_row() -> None:
    assert set(PARTITION_TRANSITIONS) == set(P)


def test_replica_deletion_path() -> None:
    m = ReplicaStateMachine()
    k = ("t", 0, 1)
    for target in (R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_STARTED, R.DELETION_SUCCESSFUL, R.NON_EXISTENT):
        m.transition(k, target)
    assert m.state(k) is R.NON_EXISTENT
    with pytest.raises(IllegalStateTransition):
        m.transition(k, R.ONLINE)
    m.transition(k, R.NEW)
    m.transition(k, R.ONLINE)
    with pytest.raises(IllegalStateTransition):
        m.transition(k, R.DELETION_STARTED)  # must go offline first
    assert m.keys_in(R.ONLINE) == [k]


def test_offline_election_takes_the_first_live_isr_member_in_assignment_order() -> None:
    assert offline_partition_leader([3, 1, 2], isr=[1, 2], live={1, 2}, unclean=False) == (1, False)
    assert offline_partition_leader([3, 2, 1], isr=[1, 2], live={1, 2}, unclean=False) == (2, False)
    assert offline_partition_leader([1, 2, 3], isr=[1], live={2, 3}, unclean=False) == (None, False)
    assert offline_partition_leader([1, 2, 3], isr=[1], live={3, 2}, unclean=True) == (2, True)
    assert offline_partition_leader([1, 2], isr=[1], live=set(), unclean=True) == (None, False)


def test_elect_offline_bumps_the_leader_epoch_and_shrinks_the_isr() -> None:
    cur = PartitionStateZnode(leader=1, leader_epoch=4, isr=(1, 2, 3), controller_epoch=1)
    e = elect_offline(cur, [1, 2, 3], live={2, 3}, controller_epoch=2)
    assert e.state == PartitionStateZnode(leader=2, leader_epoch=5, isr=(2, 3), controller_epoch=2)
    assert not e.unclean


def test_unclean_election_only_when_enabled() -> None:
    cur = PartitionStateZnode(leader=1, leader_epoch=4, isr=(1,), controller_epoch=1)
    clean = elect_offline(cur, [1, 2], live={2}, controller_epoch=2)
    assert clean.state is None and "unclean disabled" in clean.reason
    dirty = elect_offline(cur, [1, 2], live={2}, controller_epoch=2, unclean=True)
    assert dirty.unclean
    assert dirty.state == PartitionStateZnode(2, 5, (2,), 2, leader_recovery_state=RECOVERING)


def test_preferred_replica_election() -> None:
    cur = PartitionStateZnode(leader=2, leader_epoch=1, isr=(1, 2), controller_epoch=1)
    assert elect_preferred(cur, [1, 2], live={1, 2}, controller_epoch=3).state == PartitionStateZnode(
        1, 2, (1, 2), 3
    )
    assert elect_preferred(cur, [1, 2], live={2}, controller_epoch=3).state is None
    led = PartitionStateZnode(leader=1, leader_epoch=1, isr=(1, 2), controller_epoch=1)
    assert elect_preferred(led, [1, 2], live={1, 2}, controller_epoch=3).state is None


def test_controlled_shutdown_election_moves_leadership_off_the_broker() -> None:
    cur = PartitionStateZnode(leader=1, leader_epoch=7, isr=(1, 2, 3), controller_epoch=1)
    e = elect_controlled_shutdown(cur, [1, 2, 3], live={1, 2, 3}, shutting_down={1}, controller_epoch=2)
    assert e.state == PartitionStateZnode(2, 8, (2, 3), 2)
    alone = PartitionStateZnode(leader=1, leader_epoch=7, isr=(1,), controller_epoch=1)
    assert (
        elect_controlled_shutdown(alone, [1, 2], live={1, 2}, shutting_down={1}, controller_epoch=2).state
        is None
    )


def test_reassignment_election_picks_from_the_target() -> None:
    cur = PartitionStateZnode(leader=1, leader_epoch=0, isr=(1, 4, 5), controller_epoch=1)
    assert elect_reassignment(cur, [5, 4], live={1, 4, 5}, controller_epoch=1).state.leader == 5
    assert elect_reassignment(cur, [6], live={1, 6}, controller_epoch=1).state is None


def test_initial_state_of_a_new_partition() -> None:
    assert initial_state([3, 1, 2], live={1, 2}, controller_epoch=5) == PartitionStateZnode(1, 0, (1, 2), 5)
    assert initial_state([3], live={1}, controller_epoch=5) is None


def test_remove_replica_from_isr_never_empties_it() -> None:
    cur = PartitionStateZnode(leader=1, leader_epoch=2, isr=(1, 2), controller_epoch=1)
    assert remove_replica_from_isr(cur, 2, 3) == PartitionStateZnode(1, 3, (1,), 3)
    assert remove_replica_from_isr(cur, 1, 3) == PartitionStateZnode(NO_LEADER, 3, (2,), 3)
    last = PartitionStateZnode(leader=1, leader_epoch=2, isr=(1,), controller_epoch=1)
    assert remove_replica_from_isr(last, 1, 3) == PartitionStateZnode(NO_LEADER, 3, (1,), 3)
    assert remove_replica_from_isr(last, 9, 3) is None
