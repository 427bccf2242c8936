"""The model of a classic group: the group, its members, its state and the moves between states.

Kafka's GroupMetadata and MemberMetadata: pure state, no I/O, no timers, no
clock (a time comes in as an argument). The coordinator (coordinator.py) finds
a group and writes it to __consumer_offsets; the group membership protocol
(membership.py) decides when a group moves; this module says what a move does
to the group, and refuses a move the state graph does not have.

Its rules:

- States: Empty (no members), PreparingRebalance (collecting JoinGroups),
  CompletingRebalance (waiting for the leader's SyncGroup), Stable, Dead
  (deleted, expired or unloaded). ``TRANSITIONS`` below is the whole graph;
  any other move is ``IllegalGroupTransition`` (a bug of ours). A group can
  rebalance from every state that may move to PreparingRebalance.
- A member is dynamic (known by its member id) or static (KIP-345: its
  group_instance_id maps to its current member id). Pending members got
  MEMBER_ID_REQUIRED and have not joined with that id yet (KIP-394); pending
  sync members are in this generation and have not sent SyncGroup.
- The first member added sets the group's protocol type and, while the group
  has no leader, leads; when the leader goes the next member leads. A join
  phase ending without the leader rejoined hands leadership to a member that
  did rejoin.
- A member may be owed an answer (a JoinGroup or SyncGroup waiting), even
  when its client went away: it still counts as having joined (as in Kafka).
  Removing it answers UNKNOWN_MEMBER_ID; a static member whose instance
  rejoins with an empty member id takes a new id, and whoever still waits as
  the old id is answered FENCED_INSTANCE_ID; a second JoinGroup while the
  first waits answers the first REBALANCE_IN_PROGRESS.
- A joining member must have the group's protocol type and a protocol every
  member supports. A new generation picks the protocol every member supports
  that most members list first (ties: the first such in the first member's
  order), then is CompletingRebalance, or Empty without members.
- A consumer group (protocol type "consumer") knows the topics its members
  subscribe to, from their metadata for the chosen protocol (None: unknown);
  offset expiry and OffsetDelete go by them (offsets.py).
- The stored form is the group metadata record (storage.py): the generation,
  protocol, leader and each member with its assignment. A group read back
  with members is Stable: that is what it was when it was written.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field

from refka.protocol import ErrorCode

from .offsets import CONSUMER_PROTOCOL_TYPE, CommittedOffset, TopicPartition, subscription_topics
from .storage import StoredGroup, StoredMember

E = ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = GroupState

# state -> the states it may move to (Kafka's GroupState.validPreviousStates, inverted).
TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE, S.DEAD}),
    S.PREPARING_REBALANCE: frozenset({S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
    S.COMPLETING_REBALANCE: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.DEAD}),
    S.STABLE: frozenset({S.PREPARING_REBALANCE, S.DEAD}),
    S.DEAD: frozenset({S.DEAD}),
}


class IllegalGroupTransition(RuntimeError):
    """A move the group's rules do not have: a state change outside ``TRANSITIONS``, a
    generation without a protocol common to its members (a bug of ours, never the peer's)."""


# -- the answers a member is owed, and DescribeGroups' view


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupSummary:
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberSummary]


# -- members and groups


class Member:
    """One member of a group (Kafka's MemberMetadata)."""

    __slots__ = (
        "member_id",
        "group_instance_id",
        "client_id",
        "client_host",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "protocol_type",
        "protocols",
        "assignment",
        "join_waiter",
        "sync_waiter",
        "is_new",
    )

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                 protocols: list[tuple[str, bytes]]) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = b""
        # A JoinGroup / SyncGroup answer owed to this member. Kept even if the
        # client went away: it still counts as having joined (as in Kafka).
        self.join_waiter: asyncio.Future[JoinResult] | None = None
        self.sync_waiter: asyncio.Future[SyncResult] | None = None
        self.is_new = False

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def complete_join(self, result: JoinResult) -> bool:
        w, self.join_waiter = self.join_waiter, None
        if w is None:
            return False
        if not w.done():
            w.set_result(result)
        return True

    def complete_sync(self, result: SyncResult) -> bool:
        w, self.sync_waiter = self.sync_waiter, None
        if w is None:
            return False
        if not w.done():
            w.set_result(result)
        return True


class Group:
    """One classic group (Kafka's GroupMetadata): its members, state, generation and committed offsets."""

    def __init__(self, group_id: str, now_ms: int, state: GroupState = S.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state: GroupState | None = None
        self.state_timestamp = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group_instance_id -> member_id
        self.pending_members: set[str] = set()  # got MEMBER_ID_REQUIRED, not joined yet
        self.pending_sync: set[str] = set()  # in this generation, no SyncGroup yet
        self.new_member_added = False  # during the initial delayed join
        self.subscribed_topics: set[str] | None = None
        self.offsets: dict[TopicPartition, CommittedOffset] = {}

    def __repr__(self) -> str:
        return f"Group({self.group_id!r}, {self.state.value}, generation={self.generation_id})"

    def transition(self, to: GroupState, now_ms: int) -> None:
        if to not in TRANSITIONS[self.state]:
            raise IllegalGroupTransition(f"group {self.group_id}: {self.state.value} -> {to.value}")
        self.previous_state = self.state
        self.state = to
        self.state_timestamp = now_ms

    @property
    def can_rebalance(self) -> bool:
        return S.PREPARING_REBALANCE in TRANSITIONS[self.state]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member, waiter: asyncio.Future[JoinResult] | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        member.join_waiter = waiter

    def remove(self, member_id: str) -> Member | None:
        """Takes a member out; any answer still owed to it says UNKNOWN_MEMBER_ID."""
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        m = self.members.pop(member_id, None)
        if m is None:
            return None
        if m.group_instance_id is not None and self.static_members.get(m.group_instance_id) == member_id:
            del self.static_members[m.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        m.complete_join(JoinResult(E.UNKNOWN_MEMBER_ID))
        m.complete_sync(SyncResult(E.UNKNOWN_MEMBER_ID))
        return m

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """A static member rejoined with an empty member id: it takes the old one's place;
        whoever still waits as the old id is fenced."""
        m = self.members.pop(old_id)
        m.complete_join(JoinResult(E.FENCED_INSTANCE_ID, member_id=old_id))
        m.complete_sync(SyncResult(E.FENCED_INSTANCE_ID))
        m.member_id = new_id
        self.members[new_id] = m
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return m

    def update_member(self, m: Member, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                      session_timeout_ms: int, waiter: asyncio.Future[JoinResult] | None) -> None:
        m.protocols = protocols
        m.rebalance_timeout_ms = rebalance_timeout_ms
        m.session_timeout_ms = session_timeout_ms
        if waiter is not None and m.join_waiter is not None and m.join_waiter is not waiter:
            # A second JoinGroup while the first still waits: the first is answered
            # now rather than never (Kafka drops it; here it would block its connection).
            m.complete_join(JoinResult(E.REBALANCE_IN_PROGRESS, member_id=m.member_id))
        m.join_waiter = waiter

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        if group_instance_id is not None:
            current = self.static_members.get(group_instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            if current != member_id:
                return E.FENCED_INSTANCE_ID
            return E.NONE
        return E.NONE if member_id in self.members else E.UNKNOWN_MEMBER_ID

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.state is S.EMPTY:
            return bool(protocol_type) and bool(names)
        if self.protocol_type != protocol_type:
            return False
        return any(all(n in m.protocol_names() for m in self.members.values()) for n in names)

    def awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.join_waiter is not None)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join() and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def select_protocol(self) -> str:
        """The protocol every member supports that most members list first
        (ties: the first such in the first member's order)."""
        members = list(self.members.values())
        candidates = [n for n in members[0].protocol_names() if all(n in m.protocol_names() for m in members)]
        if not candidates:
            raise IllegalGroupTransition(f"group {self.group_id}: no protocol common to all members")
        votes = dict.fromkeys(candidates, 0)
        for m in members:
            votes[next(n for n in m.protocol_names() if n in votes)] += 1
        return max(candidates, key=lambda n: votes[n])  # max keeps the first of equals

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.join_waiter is not None:
            return True
        for mid, m in self.members.items():
            if m.join_waiter is not None:
                self.leader_id = mid
                return True
        return False

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        out: set[str] = set()
        for m in self.members.values():
            topics = subscription_topics(m.metadata(self.protocol_name))
            if topics is None:
                return None
            out |= topics
        return out

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(S.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition(S.EMPTY, now_ms)
        self.subscribed_topics = self.compute_subscribed_topics()

    def members_for_leader(self) -> list[tuple[str, str | None, bytes]]:
        p = self.protocol_name or ""
        return [(m.member_id, m.group_instance_id, m.metadata(p)) for m in self.members.values()]

    def stored(self, assignment: dict[str, bytes]) -> StoredGroup:
        p = self.protocol_name
        return StoredGroup(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=p,
            leader=self.leader_id,
            current_state_timestamp=self.state_timestamp,
            members=[
                StoredMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                             m.rebalance_timeout_ms, m.session_timeout_ms,
                             m.metadata(p) if p is not None else b"", assignment.get(m.member_id, b""))
                for m in self.members.values()
            ],
        )

    def summary(self) -> GroupSummary:
        """DescribeGroups' view: the protocol, members' metadata and assignments only once Stable."""
        stable = self.state is S.STABLE and self.protocol_name is not None
        members = [
            MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                          m.metadata(self.protocol_name) if stable else b"",  # type: ignore[arg-type]
                          m.assignment if stable else b"")
            for m in self.members.values()
        ]
        protocol = (self.protocol_name or "") if stable else ""
        return GroupSummary(self.state.value, self.protocol_type or "", protocol, members)

    @classmethod
    def from_stored(cls, group_id: str, stored: StoredGroup | None, now_ms: int) -> Group:
        """The group a metadata record describes (None: offsets only, a simple consumer's group)."""
        g = cls(group_id, now_ms)
        if stored is None:
            return g
        g.generation_id = stored.generation
        g.protocol_type = stored.protocol_type or None
        g.protocol_name = stored.protocol
        if stored.current_state_timestamp >= 0:
            g.state_timestamp = stored.current_state_timestamp
        for sm in stored.members:
            m = Member(sm.member_id, sm.group_instance_id, sm.client_id, sm.client_host,
                       sm.rebalance_timeout_ms, sm.session_timeout_ms, stored.protocol_type,
                       [(stored.protocol or "", sm.subscription)])
            m.assignment = sm.assignment
            g.members[m.member_id] = m
            if m.group_instance_id is not None:
                g.static_members[m.group_instance_id] = m.member_id
        if g.members:
            g.state = S.STABLE  # as written, not a move
            g.leader_id = stored.leader if stored.leader in g.members else next(iter(g.members))
        g.subscribed_topics = g.compute_subscribed_topics()
        return g
