"""Partition and replica state machines, and leader election, without I/O.

Rules (Kafka's controller, ZooKeeper era):

Partition states
    NonExistent -> New            the topic (or an expansion) assigned it
    New         -> Online         a leader was elected from the live replicas
    New/Online/Offline -> Offline its leader died, or no replica is live
    Online/Offline -> Online      a (re-)election: failure, preferred,
                                  controlled shutdown, reassignment
    Offline     -> NonExistent    the topic (or partition) was deleted

Replica states
    NonExistent -> New -> Online <-> Offline
    Offline -> DeletionStarted -> DeletionSuccessful -> NonExistent
    Offline/DeletionStarted -> DeletionIneligible -> Online/Offline

Transitions are the tables below; anything else raises
``IllegalStateTransition``. Leader election is a set of pure functions over
(assignment, ISR, live brokers): the controller decides with them and then
writes the result.

Elections, as Kafka's PartitionLeaderElectionAlgorithms:

- offline: the first replica in assignment order that is live and in the
  ISR; failing that, only when ``unclean.leader.election.enable``, the first
  live replica (the ISR becomes just it, and it starts RECOVERING).
- preferred replica: the first assigned replica, if live and in the ISR.
- controlled shutdown: the first replica in assignment order that is live,
  in the ISR and not shutting down; shutting-down brokers leave the ISR.
- reassignment: the first target replica that is live and in the ISR.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from refka.common import TopicPartition

from .znodes import NO_LEADER, PartitionStateZnode

RECOVERING = 1  # leader_recovery_state after an unclean election (KIP-704)


class IllegalStateTransition(Exception):
    """A transition the tables below do not allow: a bug in the controller."""


class PartitionStateName(enum.StrEnum):
    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


class ReplicaStateName(enum.StrEnum):
    NON_EXISTENT = "NonExistentReplica"
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"


P = PartitionStateName
R = ReplicaStateName

PARTITION_TRANSITIONS: dict[PartitionStateName, frozenset[PartitionStateName]] = {
    P.NON_EXISTENT: frozenset({P.NEW}),
    P.NEW: frozenset({P.ONLINE, P.OFFLINE}),
    P.ONLINE: frozenset({P.ONLINE, P.OFFLINE}),
    P.OFFLINE: frozenset({P.ONLINE, P.OFFLINE, P.NON_EXISTENT}),
}

REPLICA_TRANSITIONS: dict[ReplicaStateName, frozenset[ReplicaStateName]] = {
    R.NON_EXISTENT: frozenset({R.NEW}),
    R.NEW: frozenset({R.ONLINE, R.OFFLINE}),
    R.ONLINE: frozenset({R.ONLINE, R.OFFLINE}),
    R.OFFLINE: frozenset({R.ONLINE, R.OFFLINE, R.DELETION_STARTED, R.DELETION_INELIGIBLE}),
    R.DELETION_STARTED: frozenset({R.DELETION_SUCCESSFUL, R.DELETION_INELIGIBLE}),
    R.DELETION_SUCCESSFUL: frozenset({R.NON_EXISTENT}),
    R.DELETION_INELIGIBLE: frozenset({R.ONLINE, R.OFFLINE}),
}

K = TypeVar("K", bound=Hashable)
S = TypeVar("S", PartitionStateName, ReplicaStateName)


class _StateMachine(Generic[K, S]):
    """States by key; an absent key is NON_EXISTENT, and going there forgets it."""

    def __init__(self, transitions: dict[S, frozenset[S]], initial: S) -> None:
        self._transitions: dict[S, frozenset[S]] = transitions
        self._initial: S = initial
        self.states: dict[K, S] = {}

    def state(self, key: K) -> S:
        return self.states.get(key, self._initial)

    def can(self, key: K, target: S) -> bool:
        return target in self._transitions[self.state(key)]

    def transition(self, key: K, target: S) -> None:
        current = self.state(key)
        if target not in self._transitions[current]:
            raise IllegalStateTransition(f"{key}: {current.value} -> {target.value} is not allowed")
        if target == self._initial:
            self.states.pop(key, None)
        else:
            self.states[key] = target

    def keys_in(self, *states: S) -> list[K]:
        return [k for k, s in self.states.items() if s in states]

    def forget(self, key: K) -> None:
        """Drops a key whatever its state (resignation clears everything)."""
        self.states.pop(key, None)

    def clear(self) -> None:
        self.states.clear()


PartitionReplica = tuple[str, int, int]


class PartitionStateMachine(_StateMachine[TopicPartition, PartitionStateName]):
    def __init__(self) -> None:
        super().__init__(PARTITION_TRANSITIONS, P.NON_EXISTENT)


class ReplicaStateMachine(_StateMachine[PartitionReplica, ReplicaStateName]):
    def __init__(self) -> None:
        super().__init__(REPLICA_TRANSITIONS, R.NON_EXISTENT)


# ---- leader election: pure functions ---------------------------------------------------------


def offline_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], unclean: bool
) -> tuple[int | None, bool]:
    """(leader, whether it was an unclean election); leader None when none can lead."""
    for r in assignment:
        if r in live and r in isr:
            return r, False
    if unclean:
        for r in assignment:
            if r in live:
                return r, True
    return None, False


def preferred_replica_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], shutting_down: Collection[int]
) -> int | None:
    for r in assignment:
        if r in live and r in isr and r not in shutting_down:
            return r
    return None


def reassignment_leader(target: Sequence[int], isr: Collection[int], live: Collection[int]) -> int | None:
    for r in target:
        if r in live and r in isr:
            return r
    return None


@dataclass(frozen=True)
class Election:
    """A decided election: the new state to write, or why there is none."""

    state: PartitionStateZnode | None
    unclean: bool = False
    reason: str = ""


def initial_state(
    assignment: Sequence[int], live: Collection[int], controller_epoch: int
) -> PartitionStateZnode | None:
    """New partition: the live replicas form the ISR, the first of them leads, epoch 0."""
    isr = tuple(r for r in assignment if r in live)
    if not isr:
        return None
    return PartitionStateZnode(leader=isr[0], leader_epoch=0, isr=isr, controller_epoch=controller_epoch)


def elect_offline(
    current: PartitionStateZnode,
    assignment: Sequence[int],
    live: Collection[int],
    controller_epoch: int,
    unclean: bool = False,
) -> Election:
    leader, was_unclean = offline_partition_leader(assignment, current.isr, live, unclean)
    if leader is None:
        return Election(
            None, reason="no live replica in the ISR" + ("" if unclean else " (unclean disabled)")
        )
    isr = tuple(r for r in current.isr if r in live) if leader in current.isr else (leader,)
    return Election(
        PartitionStateZnode(
            leader=leader,
            leader_epoch=current.leader_epoch + 1,
            isr=isr,
            controller_epoch=controller_epoch,
            leader_recovery_state=RECOVERING if was_unclean else 0,
        ),
        unclean=was_unclean,
    )


def elect_preferred(
    current: PartitionStateZnode, assignment: Sequence[int], live: Collection[int], controller_epoch: int
) -> Election:
    leader = preferred_replica_leader(assignment, current.isr, live)
    if leader is None:
        return Election(None, reason="the preferred replica is not live or not in the ISR")
    if leader == current.leader:
        return Election(None, reason="the preferred replica already leads")
    return Election(
        replace(
            current, leader=leader, leader_epoch=current.leader_epoch + 1, controller_epoch=controller_epoch
        )
    )


def elect_controlled_shutdown(
    current: PartitionStateZnode,
    assignment: Sequence[int],
    live: Collection[int],
    shutting_down: Collection[int],
    controller_epoch: int,
) -> Election:
    leader = controlled_shutdown_leader(assignment, current.isr, live, shutting_down)
    if leader is None:
        return Election(None, reason="no other live replica in the ISR")
    isr = tuple(r for r in current.isr if r not in shutting_down)
    return Election(PartitionStateZnode(leader, current.leader_epoch + 1, isr, controller_epoch))


def elect_reassignment(
    current: PartitionStateZnode, target: Sequence[int], live: Collection[int], controller_epoch: int
) -> Election:
    leader = reassignment_leader(target, current.isr, live)
    if leader is None:
        return Election(None, reason="no target replica is live and in the ISR")
    return Election(
        replace(
            current, leader=leader, leader_epoch=current.leader_epoch + 1, controller_epoch=controller_epoch
        )
    )


def remove_replica_from_isr(
    current: PartitionStateZnode, replica: int, controller_epoch: int
) -> PartitionStateZnode | None:
    """Kafka's removeReplicasFromIsr: the replica leaves the ISR (never emptying it;
    the last member stays so it can be elected cleanly when it returns) and, if it
    led, the partition is left without a leader. None when nothing changes."""
    if replica not in current.isr and replica != current.leader:
        return None
    leader = NO_LEADER if replica == current.leader else current.leader
    isr = tuple(r for r in current.isr if r != replica) if len(current.isr) > 1 else current.isr
    return PartitionStateZnode(
        leader, current.leader_epoch + 1, isr, controller_epoch, current.leader_recovery_state
    )
