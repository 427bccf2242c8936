"""The group coordinator: classic consumer groups and their committed offsets.

Where state lives: a group belongs to the __consumer_offsets partition
``abs(java_hash(group_id)) % partitions`` (Kafka's ``partitionFor``); the
broker leading that partition is the group's coordinator. Each partition this
broker leads is a ``Shard`` holding its groups (members, generation,
assignment, committed offsets) in memory. Every change that must survive a
restart (an assignment, a member set, an offset, a deletion) is written first
to that partition (storage.py) and applied to memory once appended.

Loading: when LeaderAndIsr makes this broker leader of an offsets partition,
``on_become_leader`` replays the partition's log from its start (offsets,
group metadata, tombstones); until that ends the partition's groups answer
COORDINATOR_LOAD_IN_PROGRESS. Loaded groups with members are Stable and their
members get a fresh session timeout, so live clients carry on (same member
ids, same generation) and dead ones are expired. ``on_resign`` drops the
groups; waiting members are told NOT_COORDINATOR and find the new coordinator.

The classic rebalance protocol (Kafka's GroupCoordinator), its rules:

- States: Empty (no members), PreparingRebalance (collecting JoinGroups),
  CompletingRebalance (waiting for the leader's SyncGroup), Stable, Dead
  (deleted, expired or unloaded). ``TRANSITIONS`` below is the whole graph;
  any other move is ``IllegalGroupTransition`` (a bug of ours).
- A first JoinGroup has an empty member id. v4+ answers it at once with
  MEMBER_ID_REQUIRED and a new id (the member is "pending" until it joins
  with it, or for one session timeout); v0-v3 and static members
  (group_instance_id, KIP-345) are added at once.
- A join into Empty starts the rebalance after group.initial.rebalance.delay.ms,
  extended by the same delay (bounded by the rebalance timeout) while new
  members keep arriving. Otherwise the join phase ends when every member and
  no pending member has rejoined, or after the group's rebalance timeout (the
  largest of its members' rebalance_timeout_ms, which is the consumer's
  max.poll.interval.ms): dynamic members that did not rejoin are removed.
  Ending it bumps the generation, picks the protocol every member supports
  that most members list first, and answers every JoinGroup; the leader's
  answer carries every member's subscription.
- SyncGroup from the leader stores the assignment (group metadata record) and
  answers every member waiting in SyncGroup; members that do not sync within
  the rebalance timeout are removed and the group rebalances again.
- Heartbeats keep a member: a member that sends none for session_timeout_ms is
  removed (members waiting in JoinGroup/SyncGroup are covered by the
  rebalance timeout instead). Heartbeat says REBALANCE_IN_PROGRESS while the
  group prepares a rebalance; a wrong generation is ILLEGAL_GENERATION, an
  unknown member UNKNOWN_MEMBER_ID, a static member id that is not the
  current one for its instance FENCED_INSTANCE_ID.
- A new member, a member changing its protocols, the leader rejoining,
  LeaveGroup, and a removed member all rebalance a Stable or
  CompletingRebalance group. A static member rejoining with an empty member
  id takes over its old member id's place: in a Stable group whose protocol
  would not change there is no rebalance (the group keeps its generation and
  assignment).
- Offset commits are accepted from the current generation's members (not
  while CompletingRebalance: REBALANCE_IN_PROGRESS), and with generation -1
  only while the group is Empty (simple consumers, admin tools), which
  creates the group.

Timers are asyncio timer handles (``Timer``: ``loop.call_later``), keyed per
group and member, replaced on each heartbeat; nothing polls.
"""

from __future__ import annotations

import asyncio
import enum
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from refka.protocol import ErrorCode

from ..log import LogError
from ..logging import get_logger
from . import storage
from .offsets import (
    CONSUMER_PROTOCOL_TYPE,
    CommittedOffset,
    TopicPartition,
    expired_offsets,
    subscription_topics,
)
from .storage import OffsetKey, StoredGroup, StoredMember

if TYPE_CHECKING:
    from ..broker import Broker

log = get_logger("refka.group")

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
    """The coordinator tried a state change the protocol does not have (our bug)."""


# A new member that never completes its first join is dropped after this long
# (Kafka's GroupCoordinator.NewMemberJoinTimeoutMs; not a broker config).
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000
GROUP_TYPE_CLASSIC = "classic"


@dataclass(frozen=True)
class GroupSettings:
    num_partitions: int = 50
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    retention_check_interval_ms: int = 600_000
    commit_timeout_ms: int = 5000
    metadata_max_bytes: int = 4096
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS

    @classmethod
    def from_config(cls, config: Any) -> GroupSettings:
        return cls(
            num_partitions=config["offsets.topic.num.partitions"],
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            max_size=config["group.max.size"],
            offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
            retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
            commit_timeout_ms=config["offsets.commit.timeout.ms"],
            metadata_max_bytes=config["offset.metadata.max.bytes"],
        )


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, int32 overflow)."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's GroupMetadataManager.partitionFor: Utils.abs(hashCode) % partitions."""
    h = java_string_hash(group_id)
    return (0 if h == -(2**31) else abs(h)) % partitions


# -- results handed to the handlers


@dataclass(slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    api_version: int
    reason: str | None = None


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


class Shard:
    """One __consumer_offsets partition this broker leads, and its groups."""

    __slots__ = ("index", "leader_epoch", "groups", "loading", "load_task")

    def __init__(self, index: int, leader_epoch: int) -> None:
        self.index = index
        self.leader_epoch = leader_epoch
        self.groups: dict[str, Group] = {}
        self.loading = True
        self.load_task: asyncio.Task[None] | None = None


class Timer:
    """Keyed one-shot timers: asyncio timer handles, a new schedule replacing the old."""

    def __init__(self) -> None:
        self._handles: dict[tuple[Any, ...], asyncio.TimerHandle] = {}

    def schedule(self, key: tuple[Any, ...], delay_ms: int, fn: Callable[..., None], *args: Any) -> None:
        self.cancel(key)
        loop = asyncio.get_running_loop()
        self._handles[key] = loop.call_later(max(delay_ms, 0) / 1000, self._fire, key, fn, args)

    def _fire(self, key: tuple[Any, ...], fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        self._handles.pop(key, None)
        try:
            fn(*args)
        except Exception:
            log.exception("group_timer_failed", timer=str(key[0]))

    def cancel(self, key: tuple[Any, ...]) -> None:
        h = self._handles.pop(key, None)
        if h is not None:
            h.cancel()

    def close(self) -> None:
        for h in self._handles.values():
            h.cancel()
        self._handles.clear()


def _join_key(g: Group) -> tuple[Any, ...]:
    return ("join", g.group_id)


def _sync_key(g: Group) -> tuple[Any, ...]:
    return ("sync", g.group_id)


def _heartbeat_key(g: Group, member_id: str) -> tuple[Any, ...]:
    return ("heartbeat", g.group_id, member_id)


class GroupCoordinator:
    """See the module docstring. ``store`` is a storage.LogStore (or a test double
    with the same append / replicated / wait_replicated / read)."""

    def __init__(self, settings: GroupSettings, store: Any, *, partition_count: Callable[[], int] | None = None,
                 timer: Any = None, clock: Callable[[], int] | None = None,
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]] | None = None) -> None:
        self.settings = settings
        self.store = store
        self.timer = timer if timer is not None else Timer()
        self.clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._partition_count = partition_count or (lambda: settings.num_partitions)
        self._spawn = spawn or asyncio.ensure_future
        self.shards: dict[int, Shard] = {}
        self.offsets_topic_creation: asyncio.Task[Any] | None = None  # FindCoordinator's, at most one
        self._expiry_scheduled = False

    @classmethod
    def for_broker(cls, broker: Broker) -> GroupCoordinator:
        settings = GroupSettings.from_config(broker.config)

        def partition_count() -> int:
            # The topic's partition count as the controller states it, never how many
            # partitions the cache has heard of yet: UpdateMetadata may arrive in parts,
            # and a short count would send groups to the wrong partition.
            t = broker.metadata.topic(storage.OFFSETS_TOPIC)
            if t is not None and t.initial_partition_count > 0:
                return t.initial_partition_count
            return settings.num_partitions

        store = storage.LogStore(broker.replicas.get, broker.config["offsets.load.buffer.size"])
        return cls(settings, store, partition_count=partition_count, spawn=broker.spawn)

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self._partition_count())

    def close(self) -> None:
        for shard in self.shards.values():
            if shard.load_task is not None:
                shard.load_task.cancel()
        self.timer.close()
        self._expiry_scheduled = False

    # -- ownership of offsets partitions

    def on_become_leader(self, index: int, leader_epoch: int) -> None:
        shard = self.shards.get(index)
        if shard is not None:
            shard.leader_epoch = max(shard.leader_epoch, leader_epoch)  # still leader: nothing to reload
            return
        shard = Shard(index, leader_epoch)
        self.shards[index] = shard
        shard.load_task = self._spawn(self._load(shard))
        if not self._expiry_scheduled:
            self._expiry_scheduled = True
            self.timer.schedule(("expire-offsets",), self.settings.retention_check_interval_ms, self._expire_offsets)

    def on_resign(self, index: int) -> None:
        shard = self.shards.pop(index, None)
        if shard is None:
            return
        if shard.load_task is not None and not shard.load_task.done():
            shard.load_task.cancel()
        for g in shard.groups.values():
            self._unload(g)
        log.info("group_partition_unloaded", partition=index, groups=len(shard.groups))

    async def _load(self, shard: Shard) -> None:
        started = time.monotonic()
        offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        metadata: dict[str, StoredGroup | None] = {}
        records = bad = 0
        try:
            async for key, value in self.store.read(shard.index):
                records += 1
                try:
                    k, v = storage.decode_record(key, value)
                except storage.StorageFormatError as e:
                    bad += 1
                    log.warning("group_record_unreadable", partition=shard.index, reason=str(e))
                    continue
                if isinstance(k, OffsetKey):
                    group_offsets = offsets.setdefault(k.group, {})
                    if v is None:
                        group_offsets.pop((k.topic, k.partition), None)
                    else:
                        group_offsets[(k.topic, k.partition)] = v
                else:
                    metadata[k.group] = v
        except LogError as e:  # the log moved under us (retention, truncation): keep what was read
            log.warning("group_load_cut_short", partition=shard.index, reason=str(e))
        except Exception:  # a bug of ours must not leave the partition loading forever
            log.exception("group_load_failed", partition=shard.index)
        if self.shards.get(shard.index) is not shard:
            return  # resigned while loading
        now = self.clock()
        for gid in set(offsets) | set(metadata):
            stored = metadata.get(gid)
            group_offsets = offsets.get(gid, {})
            if stored is None and not group_offsets:
                continue
            g = self._group_from_stored(gid, stored, now)
            g.offsets = group_offsets
            shard.groups[gid] = g
        shard.loading = False
        for g in shard.groups.values():
            for m in g.members.values():
                self._reschedule_heartbeat(g, m)
            if len(g.members) > self.settings.max_size:
                self._prepare_rebalance(g, "loaded group is over group.max.size")
        emit = log.info if shard.groups else log.debug  # fifty empty partitions say nothing
        emit("group_partition_loaded", partition=shard.index, leader_epoch=shard.leader_epoch,
             groups=len(shard.groups), records=records, unreadable=bad,
             ms=round((time.monotonic() - started) * 1000, 1))

    def _group_from_stored(self, gid: str, stored: StoredGroup | None, now: int) -> Group:
        g = Group(gid, now)
        if stored is None:
            return g  # offsets only: a simple consumer's group
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
            g.state = S.STABLE
            g.leader_id = stored.leader if stored.leader in g.members else next(iter(g.members))
        g.subscribed_topics = g.compute_subscribed_topics()
        return g

    def _unload(self, g: Group) -> None:
        for m in g.members.values():
            m.complete_join(JoinResult(E.NOT_COORDINATOR, member_id=m.member_id))
            m.complete_sync(SyncResult(E.NOT_COORDINATOR))
            self.timer.cancel(_heartbeat_key(g, m.member_id))
        for mid in g.pending_members:
            self.timer.cancel(_heartbeat_key(g, mid))
        self.timer.cancel(_join_key(g))
        self.timer.cancel(_sync_key(g))
        g.transition(S.DEAD, self.clock())

    # -- lookups

    def _shard_for(self, group_id: str) -> tuple[Shard | None, ErrorCode]:
        shard = self.shards.get(self.partition_for(group_id))
        if shard is None:
            return None, E.NOT_COORDINATOR
        if shard.loading:
            return None, E.COORDINATOR_LOAD_IN_PROGRESS
        return shard, E.NONE

    # -- JoinGroup

    async def join_group(self, req: JoinRequest) -> JoinResult:
        if not req.group_id:
            return JoinResult(E.INVALID_GROUP_ID, member_id=req.member_id)
        shard, err = self._shard_for(req.group_id)
        if shard is None:
            return JoinResult(err, member_id=req.member_id)
        s = self.settings
        if not s.min_session_timeout_ms <= req.session_timeout_ms <= s.max_session_timeout_ms:
            return JoinResult(E.INVALID_SESSION_TIMEOUT, member_id=req.member_id)
        unknown = req.member_id == ""
        g = shard.groups.get(req.group_id)
        if g is None:
            if not unknown:
                return JoinResult(E.UNKNOWN_MEMBER_ID, member_id=req.member_id)
            g = shard.groups[req.group_id] = Group(req.group_id, self.clock())
        if not self._accept_joining_member(g, req.member_id):
            if req.member_id in g.members:
                self._remove_member_and_update_group(g, g.members[req.member_id], "group is over group.max.size")
            return JoinResult(E.GROUP_MAX_SIZE_REACHED)
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        if unknown:
            self._join_new_member(g, req, waiter)
        else:
            self._join_existing_member(g, req, waiter)
        return await asyncio.shield(waiter)

    def _accept_joining_member(self, g: Group, member_id: str) -> bool:
        if g.state in (S.EMPTY, S.DEAD):
            return True
        if g.state is S.PREPARING_REBALANCE:
            m = g.members.get(member_id)
            return (m is not None and m.join_waiter is not None) or g.awaiting_join() < self.settings.max_size
        return member_id in g.members or len(g.members) < self.settings.max_size

    def _join_new_member(self, g: Group, req: JoinRequest, waiter: asyncio.Future[JoinResult]) -> None:
        if g.state is S.DEAD:
            waiter.set_result(JoinResult(E.COORDINATOR_NOT_AVAILABLE))
            return
        if not g.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            waiter.set_result(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_id = f"{req.group_instance_id or req.client_id}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            existing = g.static_members.get(req.group_instance_id)
            if existing is not None:
                self._update_static_member(g, req, existing, new_id, waiter)
            else:
                self._add_member_and_rebalance(g, req, new_id, waiter)
        elif req.api_version >= 4:
            # KIP-394: the member must come back with this id before it counts.
            g.pending_members.add(new_id)
            self.timer.schedule(_heartbeat_key(g, new_id), req.session_timeout_ms, self._heartbeat_expired, g, new_id)
            waiter.set_result(JoinResult(E.MEMBER_ID_REQUIRED, member_id=new_id))
        else:
            self._add_member_and_rebalance(g, req, new_id, waiter)

    def _join_existing_member(self, g: Group, req: JoinRequest, waiter: asyncio.Future[JoinResult]) -> None:
        mid = req.member_id
        if g.state is S.DEAD:
            waiter.set_result(JoinResult(E.COORDINATOR_NOT_AVAILABLE, member_id=mid))
            return
        if not g.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            waiter.set_result(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=mid))
            return
        if mid in g.pending_members:
            if req.group_instance_id is not None:
                waiter.set_result(JoinResult(E.UNKNOWN_MEMBER_ID, member_id=mid))
                return
            g.pending_members.discard(mid)
            self._add_member_and_rebalance(g, req, mid, waiter)
            return
        err = g.validate_member(mid, req.group_instance_id)
        if err:
            waiter.set_result(JoinResult(err, member_id=mid))
            return
        m = g.members[mid]
        if g.state is S.PREPARING_REBALANCE:
            self._update_member_and_rebalance(g, m, req, waiter, "member joins during the rebalance")
        elif g.state is S.COMPLETING_REBALANCE:
            if m.matches(req.protocols):
                # Lost the first answer: the same one again.
                waiter.set_result(self._join_answer(g, m, with_members=g.is_leader(mid)))
            else:
                self._update_member_and_rebalance(g, m, req, waiter, "member changed its protocols")
        elif g.state is S.STABLE:
            if g.is_leader(mid) or not m.matches(req.protocols):
                # The leader's JoinGroup asks for a rebalance (e.g. its topics' partitions changed).
                reason = "leader rejoins" if g.is_leader(mid) else "member changed its protocols"
                self._update_member_and_rebalance(g, m, req, waiter, reason)
            else:
                waiter.set_result(self._join_answer(g, m, with_members=False))
        else:  # Empty: the member is from a generation that is gone
            waiter.set_result(JoinResult(E.UNKNOWN_MEMBER_ID, member_id=mid))

    def _join_answer(self, g: Group, m: Member, *, with_members: bool, leader: str | None = None,
                     skip_assignment: bool = False) -> JoinResult:
        return JoinResult(
            E.NONE,
            member_id=m.member_id,
            generation_id=g.generation_id,
            protocol_type=g.protocol_type,
            protocol_name=g.protocol_name,
            leader_id=(leader if leader is not None else g.leader_id) or "",
            members=g.members_for_leader() if with_members else [],
            skip_assignment=skip_assignment,
        )

    def _add_member_and_rebalance(self, g: Group, req: JoinRequest, member_id: str,
                                  waiter: asyncio.Future[JoinResult]) -> None:
        m = Member(member_id, req.group_instance_id, req.client_id, req.client_host, req.rebalance_timeout_ms,
                   req.session_timeout_ms, req.protocol_type, req.protocols)
        m.is_new = True
        if g.state is S.PREPARING_REBALANCE and g.previous_state is S.EMPTY:
            g.new_member_added = True
        g.add(m, waiter)
        # A new member cannot heartbeat until its first join completes: bound that wait.
        self._reschedule_heartbeat(g, m, self.settings.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(g, f"member {member_id} joins")

    def _update_member_and_rebalance(self, g: Group, m: Member, req: JoinRequest,
                                     waiter: asyncio.Future[JoinResult], reason: str) -> None:
        g.update_member(m, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, waiter)
        self._maybe_prepare_rebalance_or_complete_join(g, reason)

    def _update_static_member(self, g: Group, req: JoinRequest, old_id: str, new_id: str,
                              waiter: asyncio.Future[JoinResult]) -> None:
        instance_id = req.group_instance_id
        assert instance_id is not None
        current_leader = g.leader_id
        m = g.replace_static_member(instance_id, old_id, new_id)
        self.timer.cancel(_heartbeat_key(g, old_id))
        self._reschedule_heartbeat(g, m)
        old = (m.protocols, m.rebalance_timeout_ms, m.session_timeout_ms)
        g.update_member(m, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, waiter)
        if g.state is S.STABLE:
            if g.protocol_name == g.select_protocol():
                # KIP-345: same protocol, no rebalance; remember the new member id.
                assignment = {mid: mm.assignment for mid, mm in g.members.items()}
                res = self._append_group(g, assignment)
                if res.error:
                    # Not stored: the old member id stays the instance's.
                    m.join_waiter = None
                    m.protocols, m.rebalance_timeout_ms, m.session_timeout_ms = old
                    g.replace_static_member(instance_id, new_id, old_id)
                    self.timer.cancel(_heartbeat_key(g, new_id))
                    self._reschedule_heartbeat(g, m)
                    waiter.set_result(JoinResult(res.error, generation_id=g.generation_id,
                                                 leader_id=current_leader or ""))
                    return
                if req.api_version >= 9:
                    # KIP-814: the leader learns the members but must not assign.
                    leader = g.is_leader(new_id)
                    m.complete_join(self._join_answer(g, m, with_members=leader, skip_assignment=leader))
                else:
                    # The old leader id: a returning leader thinks it is a follower and
                    # does not compute an assignment a Stable group would not send out.
                    m.complete_join(self._join_answer(g, m, with_members=False, leader=current_leader))
                log.info("static_member_rejoined", group=g.group_id, group_instance_id=instance_id,
                         member=new_id, generation=g.generation_id)
            else:
                self._maybe_prepare_rebalance_or_complete_join(g, f"static member {instance_id} changes the protocol")
        elif g.state is S.COMPLETING_REBALANCE:
            # The leader may have assigned to the old id: assign again.
            self._prepare_rebalance(g, f"static member {instance_id} rejoins during the sync phase")
        else:  # PreparingRebalance (Empty/Dead cannot have a static member)
            self._maybe_complete_join_phase(g)

    # -- the join phase

    def _maybe_prepare_rebalance_or_complete_join(self, g: Group, reason: str) -> None:
        if g.can_rebalance:
            self._prepare_rebalance(g, reason)
        else:
            self._maybe_complete_join_phase(g)

    def _maybe_complete_join_phase(self, g: Group) -> None:
        if g.state is S.PREPARING_REBALANCE and g.has_all_members_joined() and g.previous_state is not S.EMPTY:
            self._complete_join(g)

    def _prepare_rebalance(self, g: Group, reason: str) -> None:
        if g.state is S.COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment_error(g, E.REBALANCE_IN_PROGRESS)
        g.pending_sync.clear()
        self.timer.cancel(_sync_key(g))
        initial = g.state is S.EMPTY
        g.transition(S.PREPARING_REBALANCE, self.clock())
        log.info("group_rebalance_prepared", group=g.group_id, generation=g.generation_id, reason=reason,
                 members=len(g.members))
        if initial:
            delay = self.settings.initial_rebalance_delay_ms
            remaining = max(g.rebalance_timeout_ms() - delay, 0)
            self.timer.schedule(_join_key(g), delay, self._initial_join_timer, g, delay, remaining)
        elif g.has_all_members_joined():
            self._complete_join(g)
        else:
            self.timer.schedule(_join_key(g), g.rebalance_timeout_ms(), self._complete_join, g)

    def _initial_join_timer(self, g: Group, delay: int, remaining: int) -> None:
        if g.state is not S.PREPARING_REBALANCE:
            return
        if g.new_member_added and remaining != 0:
            g.new_member_added = False
            new_delay = min(self.settings.initial_rebalance_delay_ms, remaining)
            self.timer.schedule(_join_key(g), new_delay, self._initial_join_timer, g, new_delay,
                                max(remaining - delay, 0))
        else:
            self._complete_join(g)

    def _complete_join(self, g: Group) -> None:
        self.timer.cancel(_join_key(g))
        if g.state is not S.PREPARING_REBALANCE:
            return
        gone = [m for m in g.members.values() if m.join_waiter is None and m.group_instance_id is None]
        for m in gone:
            g.remove(m.member_id)
            self.timer.cancel(_heartbeat_key(g, m.member_id))
        if gone:
            log.info("group_members_removed", group=g.group_id, reason="did not rejoin",
                     members=[m.member_id for m in gone])
        if not g.maybe_elect_new_joined_leader() and g.members:
            # Only static members that have not rejoined: wait for them (or their session timeout).
            self.timer.schedule(_join_key(g), g.rebalance_timeout_ms(), self._complete_join, g)
            return
        now = self.clock()
        g.new_member_added = False
        g.init_next_generation(now)
        if g.state is S.EMPTY:
            log.info("group_empty", group=g.group_id, generation=g.generation_id)
            res = self._append_group(g, {})
            if res.error:
                log.warning("group_metadata_write_failed", group=g.group_id, error=res.error.name)
            return
        log.info("group_join_completed", group=g.group_id, generation=g.generation_id,
                 protocol=g.protocol_name, leader=g.leader_id, members=len(g.members))
        for m in g.members.values():
            m.complete_join(self._join_answer(g, m, with_members=g.is_leader(m.member_id)))
            self._reschedule_heartbeat(g, m)
            m.is_new = False
            g.pending_sync.add(m.member_id)
        self.timer.schedule(_sync_key(g), g.rebalance_timeout_ms(), self._pending_sync_expired, g, g.generation_id)

    def _pending_sync_expired(self, g: Group, generation: int) -> None:
        if generation != g.generation_id or g.state not in (S.COMPLETING_REBALANCE, S.STABLE):
            return
        if not g.pending_sync:
            return
        late = sorted(g.pending_sync)
        for mid in late:
            g.remove(mid)
            self.timer.cancel(_heartbeat_key(g, mid))
        log.info("group_members_removed", group=g.group_id, reason="no SyncGroup in the rebalance timeout",
                 members=late)
        self._prepare_rebalance(g, "members did not sync")

    # -- SyncGroup

    async def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        if not group_id:
            return SyncResult(E.INVALID_GROUP_ID)
        shard, err = self._shard_for(group_id)
        if shard is None:
            # Loading lost the rebalance in progress: start over at JoinGroup (Kafka does the same).
            return SyncResult(E.REBALANCE_IN_PROGRESS if err == E.COORDINATOR_LOAD_IN_PROGRESS else err)
        g = shard.groups.get(group_id)
        if g is None:
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if g.state is S.DEAD:
            return SyncResult(E.COORDINATOR_NOT_AVAILABLE)
        err = g.validate_member(member_id, group_instance_id)
        if err:
            return SyncResult(err)
        if generation_id != g.generation_id:
            return SyncResult(E.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != g.protocol_type) or (
            protocol_name is not None and protocol_name != g.protocol_name
        ):
            return SyncResult(E.INCONSISTENT_GROUP_PROTOCOL)
        if g.state is S.EMPTY:
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if g.state is S.PREPARING_REBALANCE:
            return SyncResult(E.REBALANCE_IN_PROGRESS)
        m = g.members[member_id]
        self._synced(g, member_id)
        if g.state is S.STABLE:
            return SyncResult(E.NONE, m.assignment, g.protocol_type, g.protocol_name)
        # CompletingRebalance: wait for the leader's assignment.
        waiter: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        if m.sync_waiter is not None:
            m.complete_sync(SyncResult(E.REBALANCE_IN_PROGRESS))
        m.sync_waiter = waiter
        if g.is_leader(member_id):
            self._store_assignment(g, dict(assignments))
        return await asyncio.shield(waiter)

    def _synced(self, g: Group, member_id: str) -> None:
        g.pending_sync.discard(member_id)
        if not g.pending_sync:
            self.timer.cancel(_sync_key(g))

    def _store_assignment(self, g: Group, assignment: dict[str, bytes]) -> None:
        missing = [mid for mid in g.members if mid not in assignment]
        if missing:
            log.warning("group_assignment_missing_members", group=g.group_id, members=missing)
        assignment = {mid: assignment.get(mid, b"") for mid in g.members}
        generation = g.generation_id
        res = self._append_group(g, assignment)

        def stored(error: ErrorCode) -> None:
            # Another member may have joined meanwhile: only this generation's sync completes.
            if g.state is not S.COMPLETING_REBALANCE or g.generation_id != generation:
                return
            if error:
                self._reset_and_propagate_assignment_error(g, error)
                self._maybe_prepare_rebalance_or_complete_join(g, f"storing the assignment failed: {error.name}")
                return
            for mid, m in g.members.items():
                m.assignment = assignment.get(mid, b"")
            self._propagate_assignment(g, E.NONE)
            g.transition(S.STABLE, self.clock())
            log.info("group_stable", group=g.group_id, generation=g.generation_id, members=len(g.members))

        self._after_write(g, res, stored)

    def _reset_and_propagate_assignment_error(self, g: Group, error: ErrorCode) -> None:
        if g.state is not S.COMPLETING_REBALANCE:
            raise IllegalGroupTransition(f"group {g.group_id}: assignment reset in {g.state.value}")
        for m in g.members.values():
            m.assignment = b""
        self._propagate_assignment(g, error)

    def _propagate_assignment(self, g: Group, error: ErrorCode) -> None:
        ok = error == E.NONE
        for m in g.members.values():
            answer = SyncResult(error, m.assignment if ok else b"",
                                g.protocol_type if ok else None, g.protocol_name if ok else None)
            if m.complete_sync(answer):
                # Heartbeats may have lapsed while it waited: a fresh session timeout.
                self._reschedule_heartbeat(g, m)

    # -- Heartbeat and LeaveGroup

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        if not group_id:
            return E.INVALID_GROUP_ID
        shard, err = self._shard_for(group_id)
        if shard is None:
            # While loading, members cannot be checked: let them carry on (as Kafka does).
            return E.NONE if err == E.COORDINATOR_LOAD_IN_PROGRESS else err
        g = shard.groups.get(group_id)
        if g is None:
            return E.UNKNOWN_MEMBER_ID
        if g.state is S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        err = g.validate_member(member_id, group_instance_id)
        if err:
            return err
        if generation_id != g.generation_id:
            return E.ILLEGAL_GENERATION
        if g.state is S.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        self._reschedule_heartbeat(g, g.members[member_id])
        return E.REBALANCE_IN_PROGRESS if g.state is S.PREPARING_REBALANCE else E.NONE

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """LeaveGroup: (top-level error, an error per (member_id, group_instance_id))."""
        if not group_id:
            return E.INVALID_GROUP_ID, []
        shard, err = self._shard_for(group_id)
        if shard is None:
            return err, []
        g = shard.groups.get(group_id)
        if g is None:
            return E.NONE, [E.UNKNOWN_MEMBER_ID] * len(leaving)
        if g.state is S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE, []
        errors = []
        left = []
        for member_id, instance_id in leaving:
            if member_id == "":
                # Admin removal of a static member by its instance id.
                current = g.static_members.get(instance_id) if instance_id is not None else None
                if current is None:
                    errors.append(E.UNKNOWN_MEMBER_ID)
                    continue
                member_id = current
            elif member_id in g.pending_members:
                g.pending_members.discard(member_id)
                self.timer.cancel(_heartbeat_key(g, member_id))
                errors.append(E.NONE)
                left.append(member_id)
                continue
            else:
                e = g.validate_member(member_id, instance_id)
                if e:
                    errors.append(e)
                    continue
            self.timer.cancel(_heartbeat_key(g, member_id))
            g.remove(member_id)
            errors.append(E.NONE)
            left.append(member_id)
        if left:
            log.info("group_members_left", group=g.group_id, members=left)
            if g.state in (S.STABLE, S.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(g, "members left")
            elif g.state is S.PREPARING_REBALANCE:
                self._maybe_complete_join_phase(g)
        return E.NONE, errors

    def _reschedule_heartbeat(self, g: Group, m: Member, timeout_ms: int | None = None) -> None:
        delay = m.session_timeout_ms if timeout_ms is None else timeout_ms
        self.timer.schedule(_heartbeat_key(g, m.member_id), delay, self._heartbeat_expired, g, m.member_id)

    def _heartbeat_expired(self, g: Group, member_id: str) -> None:
        if g.state is S.DEAD:
            return
        if member_id in g.pending_members:
            g.pending_members.discard(member_id)
            log.info("group_pending_member_expired", group=g.group_id, member=member_id)
            if g.state is S.PREPARING_REBALANCE and g.has_all_members_joined():
                self._complete_join(g)
            return
        m = g.members.get(member_id)
        if m is None:
            return
        if not m.is_new and (m.join_waiter is not None or m.sync_waiter is not None):
            return  # waiting in a rebalance: the rebalance timeout covers it
        log.info("group_member_session_expired", group=g.group_id, member=member_id,
                 session_timeout_ms=m.session_timeout_ms)
        self._remove_member_and_update_group(g, m, "session timeout")

    def _remove_member_and_update_group(self, g: Group, m: Member, reason: str) -> None:
        self.timer.cancel(_heartbeat_key(g, m.member_id))
        g.remove(m.member_id)
        if g.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(g, f"member {m.member_id} removed: {reason}")
        elif g.state is S.PREPARING_REBALANCE and g.has_all_members_joined():
            self._complete_join(g)

    # -- offsets

    async def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                             generation_id: int,
                             offsets: dict[TopicPartition, CommittedOffset]) -> dict[TopicPartition, ErrorCode]:
        def all_(err: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return dict.fromkeys(offsets, err)

        shard, err = self._shard_for(group_id)
        if shard is None:
            return all_(err)
        g = shard.groups.get(group_id)
        if g is None:
            if generation_id >= 0:
                return all_(E.ILLEGAL_GENERATION)
            # A simple consumer or an admin tool: the group exists from now on.
            g = shard.groups[group_id] = Group(group_id, self.clock())
        err = self._validate_commit(g, member_id, group_instance_id, generation_id)
        if err:
            return all_(err)
        result: dict[TopicPartition, ErrorCode] = {}
        records: list[tuple[bytes, bytes | None]] = []
        accepted = {}
        for tp, o in offsets.items():
            if len(o.metadata.encode()) > self.settings.metadata_max_bytes:
                result[tp] = E.OFFSET_METADATA_TOO_LARGE
                continue
            records.append((storage.offset_key(group_id, tp[0], tp[1]), storage.offset_value(o)))
            accepted[tp] = o
        if not records:
            return result
        res = self._append(g, records)
        if res.error:
            err = E.INVALID_COMMIT_OFFSET_SIZE if res.error == E.MESSAGE_TOO_LARGE else res.error
            result.update(dict.fromkeys(accepted, err))
            return result
        g.offsets.update(accepted)
        err = E.NONE
        if not self.store.replicated(shard.index, res.last_offset):
            err = await self.store.wait_replicated(shard.index, res.last_offset, self.settings.commit_timeout_ms)
        result.update(dict.fromkeys(accepted, err))
        return result

    @staticmethod
    def _validate_commit(g: Group, member_id: str, group_instance_id: str | None, generation_id: int) -> ErrorCode:
        if g.state is S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and g.state is S.EMPTY:
            return E.NONE
        if generation_id >= 0 or member_id or group_instance_id is not None:
            err = g.validate_member(member_id, group_instance_id)
            if err:
                return err
            if generation_id != g.generation_id:
                return E.ILLEGAL_GENERATION
        elif g.state is not S.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        if g.state is S.COMPLETING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None
                      ) -> tuple[ErrorCode, list[tuple[TopicPartition, CommittedOffset | None]]]:
        """Committed offsets of the partitions asked for (None: all of them); None for none committed."""
        shard, err = self._shard_for(group_id)
        if shard is None:
            return err, []
        g = shard.groups.get(group_id)
        offsets = g.offsets if g is not None and g.state is not S.DEAD else {}
        if partitions is None:
            return E.NONE, sorted(offsets.items())
        return E.NONE, [(tp, offsets.get(tp)) for tp in partitions]

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                             ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        shard, err = self._shard_for(group_id)
        if shard is None:
            return err, {}
        g = shard.groups.get(group_id)
        if g is None or g.state is S.DEAD:
            return E.GROUP_ID_NOT_FOUND, {}
        result: dict[TopicPartition, ErrorCode] = {}
        if g.state is S.EMPTY:
            deletable = list(partitions)
        elif g.protocol_type == CONSUMER_PROTOCOL_TYPE:
            deletable = []
            for tp in partitions:
                if g.is_subscribed_to(tp[0]):
                    result[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    deletable.append(tp)
        else:
            return E.NON_EMPTY_GROUP, {}
        err = self._remove_offsets(shard, g, [tp for tp in deletable if tp in g.offsets])
        result.update(dict.fromkeys(deletable, err))
        return E.NONE, result

    def _remove_offsets(self, shard: Shard, g: Group, partitions: list[TopicPartition]) -> ErrorCode:
        """Tombstones for these offsets; an Empty group left with none is deleted too."""
        records: list[tuple[bytes, bytes | None]] = [
            (storage.offset_key(g.group_id, t, p), None) for t, p in partitions
        ]
        delete_group = g.state is S.EMPTY and not (set(g.offsets) - set(partitions))
        if delete_group:
            records.append((storage.group_key(g.group_id), None))
        if not records:
            return E.NONE
        res = self._append(g, records)
        if res.error:
            return res.error
        for tp in partitions:
            g.offsets.pop(tp, None)
        if delete_group:
            g.transition(S.DEAD, self.clock())
            shard.groups.pop(g.group_id, None)
            log.info("group_deleted", group=g.group_id, reason="empty without offsets")
        return E.NONE

    def _expire_offsets(self) -> None:
        now = self.clock()
        s = self.settings
        expired_total = 0
        for shard in list(self.shards.values()):
            if shard.loading:
                continue
            for g in list(shard.groups.values()):
                if g.state is S.DEAD:
                    continue
                expired = expired_offsets(
                    g.offsets, now, s.offsets_retention_ms,
                    is_empty=g.state is S.EMPTY, is_stable=g.state is S.STABLE,
                    protocol_type=g.protocol_type, state_timestamp=g.state_timestamp,
                    subscribed_topics=g.subscribed_topics,
                )
                if expired or (g.state is S.EMPTY and not g.offsets):
                    if self._remove_offsets(shard, g, expired) == E.NONE:
                        expired_total += len(expired)
        if expired_total:
            log.info("offsets_expired", offsets=expired_total)
        self.timer.schedule(("expire-offsets",), s.retention_check_interval_ms, self._expire_offsets)

    # -- ListGroups, DescribeGroups, DeleteGroups

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()
                    ) -> tuple[ErrorCode, list[tuple[str, str, str]]]:
        """(error, [(group_id, protocol_type, state)]) of the groups this broker coordinates."""
        want_states = {st.lower() for st in states}
        want_types = {t.lower() for t in types}
        err = E.NONE
        out: list[tuple[str, str, str]] = []
        if want_types and GROUP_TYPE_CLASSIC not in want_types:
            return err, out
        for shard in self.shards.values():
            if shard.loading:
                err = E.COORDINATOR_LOAD_IN_PROGRESS
                continue
            for g in shard.groups.values():
                if g.state is S.DEAD or (want_states and g.state.value.lower() not in want_states):
                    continue
                out.append((g.group_id, g.protocol_type or "", g.state.value))
        return err, out

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        dead = GroupSummary(S.DEAD.value, "", "", [])
        shard, err = self._shard_for(group_id)
        if shard is None:
            return err, dead
        g = shard.groups.get(group_id)
        if g is None:
            return E.NONE, dead
        stable = g.state is S.STABLE and g.protocol_name is not None
        members = [
            MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                          m.metadata(g.protocol_name) if stable else b"",  # type: ignore[arg-type]
                          m.assignment if stable else b"")
            for m in g.members.values()
        ]
        protocol = (g.protocol_name or "") if stable else ""
        return E.NONE, GroupSummary(g.state.value, g.protocol_type or "", protocol, members)

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        out = {}
        for gid in group_ids:
            shard, err = self._shard_for(gid)
            if shard is None:
                out[gid] = err
                continue
            g = shard.groups.get(gid)
            if g is None or g.state is S.DEAD:
                out[gid] = E.GROUP_ID_NOT_FOUND
            elif g.state is not S.EMPTY:
                out[gid] = E.NON_EMPTY_GROUP
            else:
                out[gid] = self._remove_offsets(shard, g, list(g.offsets))
        return out

    # -- writes

    def _append_group(self, g: Group, assignment: dict[str, bytes]) -> storage.AppendResult:
        """The group metadata record; too large is UNKNOWN_SERVER_ERROR (as Kafka)."""
        res = self._append(g, [self._group_record(g, assignment)])
        if res.error == E.MESSAGE_TOO_LARGE:
            return storage.AppendResult(E.UNKNOWN_SERVER_ERROR)
        return res

    def _group_record(self, g: Group, assignment: dict[str, bytes]) -> tuple[bytes, bytes | None]:
        return storage.group_key(g.group_id), storage.group_value(g.stored(assignment))

    def _append(self, g: Group, records: list[tuple[bytes, bytes | None]]) -> storage.AppendResult:
        """Appends to the group's partition (MESSAGE_TOO_LARGE is left to the caller to map)."""
        res: storage.AppendResult = self.store.append(self.partition_for(g.group_id), records)
        if res.error:
            log.warning("group_write_failed", group=g.group_id, error=res.error.name)
        return res

    def _after_write(self, g: Group, res: storage.AppendResult, then: Callable[[ErrorCode], None]) -> None:
        """``then(error)`` once the write is replicated: at once when it already is (one replica)."""
        index = self.partition_for(g.group_id)
        if res.error or self.store.replicated(index, res.last_offset):
            then(res.error)
            return

        async def wait() -> None:
            then(await self.store.wait_replicated(index, res.last_offset, self.settings.commit_timeout_ms))

        self._spawn(wait())
