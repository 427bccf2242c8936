"""The group coordinator: where classic groups live, and their committed offsets.

Every group request comes here (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, OffsetDelete, DescribeGroups, ListGroups,
DeleteGroups, refka's KIP-253 ConsumerGroupPosition; the handlers only
translate). The coordinator finds the group,
answering INVALID_GROUP_ID, NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS
before any rule of the group applies; hands JoinGroup, SyncGroup, Heartbeat
and LeaveGroup to the group membership protocol (membership.py, the rebalance
rules at its top); answers the offset and admin requests itself; and writes
what must survive to __consumer_offsets. What a group is, its state graph and
what each move does are the model's (metadata.py, its rules at its top);
committed offsets and their expiry are offsets.py's, the records storage.py's;
which member needs which partition's position, and the positions reported,
are positions.py's (one ``GroupPositions`` per group, kept in memory only).

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

The offset and admin rules:

- Offset commits are accepted from the current generation's members (not
  while CompletingRebalance: REBALANCE_IN_PROGRESS), and with generation -1
  only while the group is Empty (simple consumers, admin tools), which
  creates the group. A commit is answered once its record is replicated, or
  after offsets.commit.timeout.ms.
- Offsets expire as offsets.py says, checked every
  offsets.retention.check.interval.ms; an Empty group left without offsets
  is deleted.
- ConsumerGroupPosition is answered for the current generation's members of
  a Stable group: the member is checked as for Heartbeat (UNKNOWN_MEMBER_ID,
  ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS while PreparingRebalance) and,
  as for OffsetCommit, REBALANCE_IN_PROGRESS while CompletingRebalance (the
  assignment the answer goes by is not there yet); while the partition loads,
  COORDINATOR_LOAD_IN_PROGRESS.
- Offsets of partitions the controller deletes (UpdateMetadata's leader -2: a
  deleted topic, a KIP-253 partition removed once drained) are removed from
  every group loaded here (Kafka's handleDeletedPartitions).
- OffsetDelete deletes any offset of an Empty group; of a consumer group only
  the topics no member subscribes to (else GROUP_SUBSCRIBED_TO_TOPIC); of
  another live group none (NON_EMPTY_GROUP). DeleteGroups deletes Empty
  groups only (else NON_EMPTY_GROUP).

Timers are keyed asyncio timer handles (timer.py), shared with membership.py
(a group's join phase and syncs, each member's session); the coordinator's
own is the offsets expiry. Nothing polls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from refka.common import TopicPartition
from refka.protocol import ErrorCode

from ..log import LogError
from ..logging import get_logger
from . import storage
from .membership import GroupMembership, JoinRequest
from .metadata import Group, GroupState, GroupSummary, JoinResult, SyncResult
from .offsets import CONSUMER_PROTOCOL_TYPE, CommittedOffset, expired_offsets, older_epochs
from .positions import GroupPositions, PositionAnswer, PositionReport
from .storage import OffsetKey, StoredGroup
from .timer import Timer

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from ..metadata_cache import MetadataCache
    from ..partition import Partition

log = get_logger("refka.group")

E = ErrorCode
S = GroupState


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


class Shard:
    """One __consumer_offsets partition this broker leads, and its groups."""

    __slots__ = ("index", "leader_epoch", "groups", "positions", "loading", "load_task")

    def __init__(self, index: int, leader_epoch: int) -> None:
        self.index = index
        self.leader_epoch = leader_epoch
        self.groups: dict[str, Group] = {}
        self.positions: dict[str, GroupPositions] = {}  # KIP-253, for the groups that asked
        self.loading = True
        self.load_task: asyncio.Task[None] | None = None


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
        self.membership = GroupMembership(
            self.timer, self.clock, self._append_group, self._after_write,
            max_size=settings.max_size, initial_rebalance_delay_ms=settings.initial_rebalance_delay_ms,
            new_member_join_timeout_ms=settings.new_member_join_timeout_ms)

    @classmethod
    def for_broker(cls, config: BrokerConfig, metadata: MetadataCache,
                   partition: Callable[[str, int], Partition | None],
                   spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]) -> GroupCoordinator:
        """The coordinator of a broker, from its parts: its config, its metadata cache (the
        offsets topic's partition count), its replica manager's partition lookup (the
        offsets partitions it leads) and its task spawner."""
        settings = GroupSettings.from_config(config)

        def partition_count() -> int:
            # The topic's partition count as the controller states it, never how many
            # partitions the cache has heard of yet: UpdateMetadata may arrive in parts,
            # and a short count would send groups to the wrong partition.
            t = metadata.topic(storage.OFFSETS_TOPIC)
            if t is not None and t.initial_partition_count > 0:
                return t.initial_partition_count
            return settings.num_partitions

        store = storage.LogStore(partition, config["offsets.load.buffer.size"])
        return cls(settings, store, partition_count=partition_count, spawn=spawn)

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
            self.membership.on_group_unloaded(g)
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
            g = Group.from_stored(gid, stored, now)
            g.offsets = group_offsets
            shard.groups[gid] = g
        shard.loading = False
        for g in shard.groups.values():
            self.membership.on_group_loaded(g)
        emit = log.info if shard.groups else log.debug  # fifty empty partitions say nothing
        emit("group_partition_loaded", partition=shard.index, leader_epoch=shard.leader_epoch,
             groups=len(shard.groups), records=records, unreadable=bad,
             ms=round((time.monotonic() - started) * 1000, 1))

    # -- lookups

    def _shard_for(self, group_id: str) -> tuple[Shard | None, ErrorCode]:
        shard = self.shards.get(self.partition_for(group_id))
        if shard is None:
            return None, E.NOT_COORDINATOR
        if shard.loading:
            return None, E.COORDINATOR_LOAD_IN_PROGRESS
        return shard, E.NONE

    # -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup: the group found, membership.py runs it

    async def join_group(self, req: JoinRequest) -> JoinResult:
        if not req.group_id:
            return JoinResult(E.INVALID_GROUP_ID, member_id=req.member_id)
        shard, err = self._shard_for(req.group_id)
        if shard is None:
            return JoinResult(err, member_id=req.member_id)
        s = self.settings
        if not s.min_session_timeout_ms <= req.session_timeout_ms <= s.max_session_timeout_ms:
            return JoinResult(E.INVALID_SESSION_TIMEOUT, member_id=req.member_id)
        g = shard.groups.get(req.group_id)
        if g is None:
            if req.member_id != "":
                return JoinResult(E.UNKNOWN_MEMBER_ID, member_id=req.member_id)
            g = shard.groups[req.group_id] = Group(req.group_id, self.clock())
        return await self.membership.join_group(g, req)

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
        return await self.membership.sync_group(g, generation_id, member_id, group_instance_id,
                                                protocol_type, protocol_name, assignments)

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
        return self.membership.heartbeat(g, generation_id, member_id, group_instance_id)

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
        return self.membership.leave_group(g, leaving)

    # -- ConsumerGroupPosition (KIP-253)

    def group_positions(self, group_id: str, generation_id: int, member_id: str,
                        reports: list[PositionReport]) -> tuple[ErrorCode, list[PositionAnswer]]:
        """A member's reported positions and the positions it needs (positions.py's rules)."""
        if not group_id:
            return E.INVALID_GROUP_ID, []
        shard, err = self._shard_for(group_id)
        if shard is None:
            return err, []
        g = shard.groups.get(group_id)
        if g is None:
            return E.UNKNOWN_MEMBER_ID, []
        if g.state is S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE, []
        err = g.validate_member(member_id, None)
        if err:
            return err, []
        if generation_id != g.generation_id:
            return E.ILLEGAL_GENERATION, []
        if g.state is not S.STABLE:
            return E.REBALANCE_IN_PROGRESS, []
        positions = shard.positions.get(group_id)
        if positions is None:
            positions = shard.positions[group_id] = GroupPositions()
        assignments = {mid: m.assignment for mid, m in g.members.items()}
        return E.NONE, positions.exchange(g.generation_id, assignments, member_id, reports)

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
            if older_epochs(o, g.offsets.get(tp)):
                result[tp] = E.INVALID_INTERNAL_METADATA
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
            shard.positions.pop(g.group_id, None)
            log.info("group_deleted", group=g.group_id, reason="empty without offsets")
        return E.NONE

    def on_partitions_deleted(self, partitions: set[TopicPartition]) -> None:
        """Kafka's handleDeletedPartitions: the committed offsets of partitions the
        controller deleted (a deleted topic, a KIP-253 partition removed once drained)
        go from every group of the shards loaded here, with their tombstones, so a
        partition created later under the same name and index starts from no commit
        instead of an offset of its predecessor's log."""
        for shard in list(self.shards.values()):
            if shard.loading:
                continue  # a load that ends later may bring them back: Kafka's gap too
            for g in list(shard.groups.values()):
                gone = [tp for tp in g.offsets if tp in partitions]
                if gone and g.state is not S.DEAD:
                    err = self._remove_offsets(shard, g, gone)
                    log.info("offsets_of_deleted_partitions_removed", group=g.group_id,
                             partitions=len(gone), error=err.name if err else None)

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
        return E.NONE, g.summary()

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
