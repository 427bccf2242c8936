"""KIP-253's ordered delivery, the consumer's I/O half (seed 004, "Proposed
Changes" 7) and 8) steps 1-5 and 7): per assigned partition, how far the
consumer may deliver, and the positions it reports to its group. The decisions
are ``ordering.py``'s; this module asks the brokers for what they need, keeps
the answers per partition, and calls the key listener.

The consumer (consumer.py) drives it:

- ``on_assigned(member, assigned, metadata)`` after each SyncGroup: plans the
  holds of the assigned partitions, then does what ``poll`` does without
  positions (so the coordinator learns at once which partitions this member
  waits for, and tells it which of its own others wait for);
- ``on_revoked(revoked)``: forgets those partitions;
- ``limit(tp)`` before delivering: records of ``tp`` with offset < limit may
  go (None: no limit; 0: nothing);
- ``poll(positions, high_watermarks)`` every heartbeat interval: retries what
  is still unanswered, exchanges positions with the group coordinator
  (ConsumerGroupPosition) and releases what the answers allow.

It owns, per assigned partition P1 of a topic with KIP-253 counts in Metadata
and ``enable.ordered.delivery=true`` (DescribeConfigs; a topic without the
counts, e.g. on a stock Kafka broker, or with it false, is never held and never
reported):

- the *creation hold* (step 4): P1 >= initial_partition_count N whose
  leaderEpochAfterCreation (PartitionLeaderEpochsForPartitions, 10253) is not
  empty and whose committed offset (OffsetFetch) is absent or the earliest one
  (ListOffsets) waits, delivering nothing, until the group's position of its
  one blocker P3 = ``creation_blocker`` (ConsumerGroupPosition) passes P3's
  lowerOffsetThreshold (OffsetForLeaderEpoch of P3 at its recorded epoch,
  ``offset_threshold``), or P3 is gone from Metadata;
- the *deletion holds* (step 5): for each marked partition P3 (index >=
  undeleted_partition_count) with ``deletion_blockers`` naming it for P1, P1
  delivers only offsets <= P1's upperOffsetThreshold (OffsetForLeaderEpoch of
  P1 at the epoch P3's leaderEpochBeforeDeletion recorded for it) until the
  group drained P3 (its group position reached P3's log end offset, ListOffsets
  latest) or P3 is gone from Metadata.

Until an answer it needs has come (the topic's config, P1's or P3's maps, the
committed and earliest offsets, a threshold), the partition delivers nothing.

The key listener is called (each call in a try: an exception is logged and
the consumer goes on):

- ``on_partition_key_assigned([P1, ...])``: step 4.4, when P1's creation hold
  is released; step 5.3, when a deletion hold of P1 is lifted (per blocker P3,
  as the step says: two marked partitions drained at two polls are two calls).
  One call per ``on_assigned`` or ``poll``, each partition in it once. Nothing
  else releases a hold, so the keys a release lets in always come after a call.
- ``on_partition_key_maybe_revoked([P1, ...])``: step 7), just before the
  ConsumerGroupPosition request that carries this member's positions of those
  partitions, once per position: a request that fails is sent again with the
  same positions without a second call.

Requests: FindCoordinator (v3, to any broker of the metadata; the coordinator
is looked up here, not taken from the group module, so that the gate needs
nothing of the consumer but its calls), DescribeConfigs,
PartitionLeaderEpochsForPartitions, OffsetFetch (v7) and ConsumerGroupPosition
go to the group coordinator; ListOffsets and OffsetForLeaderEpoch to each
partition's leader (``partition_queries.py``, which the producer's tombstones
share, builds and reads them). Errors never release anything: NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE or a lost connection to the coordinator drop it (it
is looked up again at the next poll); REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID keep every hold (the group module rejoins, and
``on_assigned`` follows); a leader error (NOT_LEADER_OR_FOLLOWER and the like)
refreshes the topic's metadata at the next poll; everything unanswered is asked
again at the next poll.

Choices where the seed is not precise:

- PositionReporter's "since this consumer starts" is taken per generation: a
  new reporter per partition at every new generation. The coordinator forgets
  all positions with a new generation (broker/group/positions.py), so a member
  whose position of an idle partition stays at its high watermark would
  otherwise never report it again, and whoever waits on it would wait forever.
- ``on_assigned`` never drops a partition (only ``on_revoked`` does): called
  with the whole assignment, the partitions kept are planned again against
  the new metadata (a shrink adds deletion holds), keeping what they knew
  (a creation check done, holds lifted, thresholds); called with the new
  partitions only, the same. A partition whose creation hold was released
  stays released while it stays assigned.
- The creation check of step 4 (committed offset, earliest offset) is done
  only for partitions whose leaderEpochAfterCreation is not empty, after
  asking 10253: the others need neither answer.
- P3's "LogEndOffset" is what ListOffsets (latest, read_uncommitted) gives a
  consumer: the high watermark. A marked partition takes no records, so it
  reaches the last record once the followers have it; it is asked at every
  poll while the group's position of P3 is known and P3 not drained. A lifted
  deletion hold stays lifted.
- A creation hold ends when P3 is gone from the cache's Metadata (a topic
  that is there without P3): a partition is removed only once empty, so none
  of its records can still be delivered. Drained-but-present needs nothing
  more: its group position then passes any lowerOffsetThreshold.
- An OffsetForLeaderEpoch answer of UNDEFINED (the leader has no such epoch)
  is asked again at the next poll (``offset_threshold`` refuses it).
- A leaderEpochAfterCreation that linear hashing cannot have made
  (``creation_blocker`` refuses it) or a leaderEpochBeforeDeletion without an
  entry for P1 is logged and keeps P1 held: only a release can break the
  order, a hold only delays.
- ``enable.ordered.delivery`` is asked (DescribeConfigs, one request for the
  topics assigned) at every ``on_assigned``, so a change is seen at the next
  rebalance; until the first answer for a topic its partitions deliver
  nothing, later the last answer counts while the new one is awaited.
- A position known from the group for P3 is kept as the largest seen: positions
  only show what the group has delivered, which a later, smaller one (a member
  restarting from its commit) does not undo.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

import structlog

from refka.common.topic_config import ordered_delivery
from refka.protocol import Api, ErrorCode
from refka.protocol.messages.consumer_group_position import ConsumerGroupPosition
from refka.protocol.messages.describe_configs import DescribeConfigs
from refka.protocol.messages.find_coordinator import KEY_TYPE_GROUP, FindCoordinator
from refka.protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from refka.protocol.messages.offset_fetch import OffsetFetch
from refka.protocol.messages.partition_leader_epochs_for_partitions import PartitionLeaderEpochsForPartitions

from . import partition_queries as queries
from .cluster import ClusterClient, KafkaConnectionError
from .group import MemberIdentity
from .metadata import BrokerEndpoint, ClusterMetadata
from .ordering import (
    DeletionBlock,
    PositionReporter,
    creation_blocker,
    creation_hold_released,
    deletion_blockers,
    delivery_limit,
    needs_creation_hold,
    offset_threshold,
)
from .structs import TopicPartition

_log = structlog.get_logger("refka.client")

E = ErrorCode
_COORDINATOR_GONE = {E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE}
_ORDERED_DELIVERY = "enable.ordered.delivery"
_UNKNOWN_LOG_END = 2**63 - 1
_FIND_COORDINATOR_VERSION = 3  # one key per request (v4 batches keys)
_OFFSET_FETCH_VERSION = 7  # the last with topics at the top level (v8 nests them per group)


class KeyListener(Protocol):
    """The seed's PartitionKeyRebalanceListener, in Python's names."""

    def on_partition_key_maybe_revoked(self, partitions: Collection[TopicPartition]) -> None:
        """Flush state kept for keys of these partitions: another consumer may take them over."""

    def on_partition_key_assigned(self, partitions: Collection[TopicPartition]) -> None:
        """Load state for keys that may now arrive in these partitions."""


@dataclass(frozen=True)
class Hold:
    """One hold on a partition, as ``holds()`` shows it."""

    kind: Literal["creation", "deletion"]
    blocker: int  # P3's index
    threshold: int | None  # lower (creation) or upper (deletion) offset threshold; None: not known yet
    group_position: int  # the group's position of P3 from ConsumerGroupPosition; -1 unknown


@dataclass
class _CreationHold:
    blocker: int
    leader_epoch: int  # P3's entry in P1's leaderEpochAfterCreation
    lower_offset_threshold: int | None = None
    group_position: int = -1


@dataclass
class _DeletionHold:
    blocker: int
    leader_epoch: int | None = None  # P1's entry in P3's leaderEpochBeforeDeletion
    upper_offset_threshold: int | None = None
    group_position: int = -1
    log_end_offset: int | None = None

    def block(self) -> DeletionBlock:
        """ordering.py's view: a threshold not known yet lets nothing through (-1), a log end
        offset not asked yet is never reached."""
        return DeletionBlock(
            self.blocker,
            self.upper_offset_threshold if self.upper_offset_threshold is not None else -1,
            self.group_position,
            self.log_end_offset if self.log_end_offset is not None else _UNKNOWN_LOG_END,
        )


@dataclass
class _Gate:
    """What holds one partition P1 back; there is a gate only while something does."""

    tp: TopicPartition
    initial: int
    creation_checked: bool  # step 4 decided: P1 < N, or asked and answered
    after_creation: dict[int, int] | None = None  # P1's leaderEpochAfterCreation once asked
    unusable: bool = False  # a map linear hashing cannot have made: held (logged)
    creation: _CreationHold | None = None
    deletions: dict[int, _DeletionHold] = field(default_factory=dict)

    def limit(self) -> int | None:
        if self.unusable or not self.creation_checked or self.creation is not None:
            return 0
        # A deletion hold limits until it is lifted (_lift), which the listener's call follows
        # with no await between: a group position that reaches a log end offset known from an
        # earlier poll is not a lift yet (records above the threshold were delivered 190 ms
        # before on_partition_key_assigned while the next ListOffsets was on its way).
        last = delivery_limit(replace(d.block(), log_end_offset=_UNKNOWN_LOG_END) for d in self.deletions.values())
        return None if last is None else last + 1

    @property
    def idle(self) -> bool:
        return self.creation_checked and not self.unusable and self.creation is None and not self.deletions


class OrderedDelivery:
    def __init__(self, cluster: ClusterClient, group_id: str, listener: KeyListener | None) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.listener = listener
        self._member: MemberIdentity | None = None
        self._coordinator: int | None = None
        self._tracked: set[TopicPartition] = set()  # assigned partitions of KIP-253 topics
        self._ordered: dict[str, bool] = {}  # enable.ordered.delivery, per tracked topic, once answered
        self._config_due: set[str] = set()  # topics whose config is asked again (each on_assigned)
        self._gates: dict[TopicPartition, _Gate] = {}
        self._lifted: set[tuple[TopicPartition, int]] = set()  # (P1, P3) deletion holds lifted
        self._reporters: dict[TopicPartition, PositionReporter] = {}  # this generation's
        self._needed: set[TopicPartition] = set()  # flagged need_position in the last answer
        self._flushed: dict[TopicPartition, int] = {}  # position on_partition_key_maybe_revoked last ran for
        self._released: set[TopicPartition] = set()  # on_partition_key_assigned owed, this round
        self._stale_topics: set[str] = set()  # metadata to refresh (a leader error)
        self._lock = asyncio.Lock()

    # -- the consumer's calls ------------------------------------------------------------

    async def on_assigned(self, member: MemberIdentity, assigned: Collection[TopicPartition],
                          metadata: ClusterMetadata) -> None:
        """Plans the holds of ``assigned`` (seed 8) steps 1-5) and asks what it can at once."""
        async with self._lock:
            if self._member is None or (member.member_id, member.generation_id) != (
                    self._member.member_id, self._member.generation_id):
                self._reporters.clear()
                self._needed.clear()
            self._member = member
            topics: set[str] = set()
            for tp in map(_tp, assigned):
                tm = metadata.topics.get(tp.topic)
                if tm is None or tm.counts is None:
                    self._forget({tp})  # a stock topic (or one Metadata did not answer): no holds
                    continue
                topics.add(tp.topic)
                self._plan(tp, tm.counts.initial, tm.counts.undeleted,
                           [p for p in tm.partitions if p >= tm.counts.undeleted])
            self._config_due |= topics  # it may have changed; the last answer counts until then
            if self._tracked:
                await self._round({}, {})

    def on_revoked(self, revoked: Collection[TopicPartition]) -> None:
        self._forget(set(map(_tp, revoked)))

    def limit(self, tp: TopicPartition) -> int | None:
        """Deliver records of ``tp`` with offset < limit; None: no limit (0: none)."""
        if tp not in self._tracked:
            return None
        ordered = self._ordered.get(tp[0])
        if ordered is None:
            return 0  # not answered yet
        gate = self._gates.get(tp) if ordered else None
        return None if gate is None else gate.limit()

    def holds(self, tp: TopicPartition) -> tuple[Hold, ...]:
        """The holds on ``tp`` now (for logs and tests)."""
        gate = self._gates.get(_tp(tp))
        if gate is None:
            return ()
        out = []
        if gate.creation is not None:
            c = gate.creation
            out.append(Hold("creation", c.blocker, c.lower_offset_threshold, c.group_position))
        out.extend(Hold("deletion", d.blocker, d.upper_offset_threshold, d.group_position)
                   for d in sorted(gate.deletions.values(), key=lambda d: d.blocker))
        return tuple(out)

    async def poll(self, positions: Mapping[TopicPartition, tuple[int, int]],
                   high_watermarks: Mapping[TopicPartition, int]) -> None:
        """Every heartbeat interval (seed 7)): asks again what is unanswered, reports this
        member's positions and learns the group's positions of the partitions that block."""
        async with self._lock:
            if self._member is not None and self._tracked:
                await self._round(positions, high_watermarks)

    async def _round(self, positions: Mapping[TopicPartition, tuple[int, int]],
                     high_watermarks: Mapping[TopicPartition, int]) -> None:
        if self._stale_topics:
            stale, self._stale_topics = self._stale_topics, set()
            try:
                await self.cluster.refresh(stale)
            except KafkaConnectionError as e:
                _log.warning("ordered_delivery_metadata_failed", error=str(e))
                self._stale_topics |= stale
        await self._resolve()
        await self._exchange_positions(positions, high_watermarks)
        await self._check_drained()
        self._release_gone()
        self._notify_assigned()

    # -- planning ------------------------------------------------------------------------

    def _plan(self, tp: TopicPartition, initial: int, undeleted: int, marked: list[int]) -> None:
        new = tp not in self._tracked
        self._tracked.add(tp)
        gate = self._gates.get(tp)
        if gate is None:
            # A partition kept from before had its creation check then.
            gate = _Gate(tp, initial, creation_checked=not new or tp.partition < initial)
        if tp.partition < undeleted:
            for p3 in deletion_blockers(tp.partition, initial, undeleted, marked):
                if (tp, p3) not in self._lifted:
                    gate.deletions.setdefault(p3, _DeletionHold(p3))
        if gate.idle:
            self._gates.pop(tp, None)
        else:
            self._gates[tp] = gate

    def _forget(self, tps: set[TopicPartition]) -> None:
        for tp in tps:
            self._tracked.discard(tp)
            self._gates.pop(tp, None)
            self._reporters.pop(tp, None)
            self._flushed.pop(tp, None)
            self._needed.discard(tp)
            self._released.discard(tp)
        self._lifted = {k for k in self._lifted if k[0] not in tps}
        live = {tp.topic for tp in self._tracked}
        self._ordered = {t: v for t, v in self._ordered.items() if t in live}
        self._config_due &= live

    def _settle(self, gate: _Gate) -> None:
        if gate.idle and self._gates.get(gate.tp) is gate:
            del self._gates[gate.tp]

    # -- asking --------------------------------------------------------------------------

    async def _resolve(self) -> None:
        """Asks what the plans still lack, in order; whatever is not answered waits for the next poll."""
        await self._ask_configs()
        await self._ask_partition_maps()
        await self._ask_start_positions()
        await self._ask_thresholds()

    async def _ask_configs(self) -> None:
        live = {tp.topic for tp in self._tracked}
        topics = sorted((live - self._ordered.keys()) | (self._config_due & live))
        if not topics:
            return
        resp = await self._to_coordinator(DescribeConfigs, queries.topic_configs_request(topics, [_ORDERED_DELIVERY]))
        if resp is None:
            return
        for topic, values in queries.topic_configs(resp).items():
            if topic not in topics:
                continue
            self._config_due.discard(topic)
            self._ordered[topic] = enabled = ordered_delivery(values)
            if not enabled:  # the seed's "Topic config": none of 7) and 8) for this topic
                self._forget({tp for tp in self._tracked if tp.topic == topic})

    async def _ask_partition_maps(self) -> None:
        """10253 for P1 >= N not checked yet (leaderEpochAfterCreation, step 4.1) and for the
        marked P3 whose leaderEpochBeforeDeletion entry a deletion hold lacks (step 5.2)."""
        wanted: dict[str, set[int]] = {}
        for gate in self._gates.values():
            if not gate.creation_checked and gate.after_creation is None and not gate.unusable:
                wanted.setdefault(gate.tp.topic, set()).add(gate.tp.partition)
            for d in gate.deletions.values():
                if d.leader_epoch is None:
                    wanted.setdefault(gate.tp.topic, set()).add(d.blocker)
        if not wanted:
            return
        resp = await self._to_coordinator(PartitionLeaderEpochsForPartitions, queries.leader_epochs_request(wanted))
        if resp is None:
            return
        after, before = queries.leader_epoch_maps(resp)  # a partition left out is asked again
        for gate in list(self._gates.values()):
            if not gate.creation_checked and gate.after_creation is None and gate.tp in after:
                gate.after_creation = after[gate.tp]
                if not gate.after_creation:  # not created by an expansion that recorded epochs
                    gate.creation_checked = True
            for d in gate.deletions.values():
                marks = before.get(TopicPartition(gate.tp.topic, d.blocker))
                if d.leader_epoch is not None or not marks:
                    continue  # an empty map: the coordinator has not heard of the shrink yet
                if gate.tp.partition in marks:
                    d.leader_epoch = marks[gate.tp.partition]
                else:
                    _log.error("ordered_delivery_map_without_partition", topic=gate.tp.topic,
                               partition=gate.tp.partition, marked=d.blocker, map=marks)
            self._settle(gate)

    async def _ask_start_positions(self) -> None:
        """Steps 2-4 for P1 with a leaderEpochAfterCreation: the committed and the earliest offset."""
        gates = [g for g in self._gates.values() if not g.creation_checked and g.after_creation]
        if not gates:
            return
        committed = await self._committed([g.tp for g in gates])
        earliest = await self._list_offsets([g.tp for g in gates], EARLIEST_TIMESTAMP)
        for gate in gates:
            if gate.tp not in committed or gate.tp not in earliest or self._gates.get(gate.tp) is not gate:
                continue
            gate.creation_checked = True
            assert gate.after_creation is not None
            if not needs_creation_hold(gate.tp.partition, gate.initial, committed[gate.tp], earliest[gate.tp]):
                self._settle(gate)
                continue
            try:
                p3 = creation_blocker(gate.tp.partition, gate.initial, gate.after_creation.keys())
            except ValueError as e:
                _log.error("ordered_delivery_unusable_map", topic=gate.tp.topic, partition=gate.tp.partition,
                           error=str(e))
                gate.unusable = True
                continue
            gate.creation = _CreationHold(p3, gate.after_creation[p3])
            _log.info("ordered_delivery_creation_hold", topic=gate.tp.topic, partition=gate.tp.partition,
                      blocker=p3, leader_epoch=gate.creation.leader_epoch)

    async def _ask_thresholds(self) -> None:
        """Steps 4.3 and 5.2: OffsetForLeaderEpoch turns the recorded epochs into thresholds."""
        asks: dict[tuple[TopicPartition, int], list[tuple[_Gate, int | None]]] = {}
        for gate in self._gates.values():
            c = gate.creation
            if c is not None and c.lower_offset_threshold is None:
                key = (TopicPartition(gate.tp.topic, c.blocker), c.leader_epoch)
                asks.setdefault(key, []).append((gate, None))
            for d in gate.deletions.values():
                if d.leader_epoch is not None and d.upper_offset_threshold is None:
                    asks.setdefault((gate.tp, d.leader_epoch), []).append((gate, d.blocker))
        if not asks:
            return
        ends = await self._epoch_end_offsets(asks.keys())
        for key, end in ends.items():
            for gate, blocker in asks[key]:
                if blocker is None and gate.creation is not None:
                    gate.creation.lower_offset_threshold = offset_threshold(end)
                elif blocker is not None and blocker in gate.deletions:
                    gate.deletions[blocker].upper_offset_threshold = offset_threshold(end)

    # -- positions (seed 7)) -------------------------------------------------------------

    def _needs(self) -> set[TopicPartition]:
        out = set()
        for gate in self._gates.values():
            if gate.creation is not None:
                out.add(TopicPartition(gate.tp.topic, gate.creation.blocker))
            out.update(TopicPartition(gate.tp.topic, p3) for p3 in gate.deletions)
        return out

    async def _exchange_positions(self, positions: Mapping[TopicPartition, tuple[int, int]],
                                  high_watermarks: Mapping[TopicPartition, int]) -> None:
        member = self._member
        if member is None or not self._tracked:  # e.g. every topic turned out to have it off
            return
        needs = self._needs()
        reports: dict[TopicPartition, tuple[int, int]] = {}
        for tp in sorted(self._needed & self._tracked):
            if tp not in positions or tp.topic not in self._ordered:
                continue
            position, leader_epoch = positions[tp]
            reporter = self._reporters.setdefault(tp, PositionReporter())
            if reporter.should_report(position=position, high_watermark=high_watermarks.get(tp, -1),
                                      leader_epoch=leader_epoch, needed=True):
                reports[tp] = (position, leader_epoch)
        flush = [tp for tp, (position, _) in reports.items() if self._flushed.get(tp) != position]
        if flush:
            self._notify("on_partition_key_maybe_revoked", flush)
            for tp in flush:
                self._flushed[tp] = reports[tp][0]
        by_topic: dict[str, dict[int, tuple[bool, int]]] = {}
        for tp in needs | reports.keys():
            by_topic.setdefault(tp.topic, {})[tp.partition] = (tp in needs, reports.get(tp, (-1, -1))[0])
        R = ConsumerGroupPosition.Request
        RT = R.ConsumerGroupPositionRequestTopic
        RP = RT.ConsumerGroupPositionRequestPartition
        req = R(group_id=member.group_id, generation_id=member.generation_id, member_id=member.member_id,
                topics=[RT(topic=t, partitions=[RP(partition=p, need_position=n, position=pos)
                                                for p, (n, pos) in sorted(ps.items())])
                        for t, ps in sorted(by_topic.items())])
        resp = await self._to_coordinator(ConsumerGroupPosition, req)
        if resp is None:
            return
        if resp.error_code != E.NONE:
            # REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID: the holds stay; on_assigned follows
            _log.info("ordered_delivery_positions_refused", error=E(resp.error_code).name)
            return
        for tp, (position, leader_epoch) in reports.items():
            if tp in self._reporters:  # else revoked meanwhile
                self._reporters[tp].reported(position=position, leader_epoch=leader_epoch)
        needed: set[TopicPartition] = set()
        group: dict[TopicPartition, int] = {}
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition)
                if p.need_position and tp in self._tracked:
                    needed.add(tp)
                if tp in needs and p.position >= 0:
                    group[tp] = p.position
        self._needed = needed
        for gate in list(self._gates.values()):
            self._apply_group_positions(gate, group)

    def _apply_group_positions(self, gate: _Gate, group: Mapping[TopicPartition, int]) -> None:
        topic = gate.tp.topic
        c = gate.creation
        if c is not None:
            c.group_position = max(c.group_position, group.get(TopicPartition(topic, c.blocker), -1))
            if c.lower_offset_threshold is not None and creation_hold_released(
                    c.group_position, c.lower_offset_threshold):
                self._release_creation(gate)
        for d in gate.deletions.values():
            d.group_position = max(d.group_position, group.get(TopicPartition(topic, d.blocker), -1))

    async def _check_drained(self) -> None:
        """Step 5.2-5.3: the log end offsets of the marked partitions the group has a position of."""
        blockers = sorted({TopicPartition(g.tp.topic, d.blocker) for g in self._gates.values()
                           for d in g.deletions.values() if d.group_position >= 0})
        if not blockers:
            return
        ends = await self._list_offsets(blockers, LATEST_TIMESTAMP)
        for gate in list(self._gates.values()):
            for d in list(gate.deletions.values()):
                leo = ends.get(TopicPartition(gate.tp.topic, d.blocker))
                if leo is not None:
                    d.log_end_offset = max(d.log_end_offset or 0, leo)
                    if d.block().drained:
                        self._lift(gate, d.blocker)

    def _release_gone(self) -> None:
        """A blocker removed from the topic (present in Metadata without it) holds nothing."""
        for gate in list(self._gates.values()):
            tm = self.cluster.metadata.topics.get(gate.tp.topic)
            if tm is None:
                continue
            if gate.creation is not None and gate.creation.blocker not in tm.partitions:
                self._release_creation(gate)
            for p3 in [p3 for p3 in gate.deletions if p3 not in tm.partitions]:
                self._lift(gate, p3)

    def _release_creation(self, gate: _Gate) -> None:
        c = gate.creation
        assert c is not None
        _log.info("ordered_delivery_creation_released", topic=gate.tp.topic, partition=gate.tp.partition,
                  blocker=c.blocker, threshold=c.lower_offset_threshold, group_position=c.group_position)
        gate.creation = None
        self._released.add(gate.tp)
        self._settle(gate)

    def _lift(self, gate: _Gate, blocker: int) -> None:
        d = gate.deletions.pop(blocker)
        self._lifted.add((gate.tp, blocker))
        _log.info("ordered_delivery_deletion_lifted", topic=gate.tp.topic, partition=gate.tp.partition,
                  blocker=blocker, threshold=d.upper_offset_threshold, group_position=d.group_position,
                  log_end_offset=d.log_end_offset)
        self._released.add(gate.tp)
        self._settle(gate)

    # -- the listener --------------------------------------------------------------------

    def _notify_assigned(self) -> None:
        released, self._released = self._released, set()
        self._notify("on_partition_key_assigned", [tp for tp in released if tp in self._tracked])

    def _notify(self, callback: str, partitions: Iterable[TopicPartition]) -> None:
        tps = sorted(partitions)
        if not tps or self.listener is None:
            return
        try:
            getattr(self.listener, callback)(tps)
        except Exception:  # the user's code: logged, never the consumer's failure
            _log.exception("key_listener_failed", callback=callback, partitions=tps)

    # -- requests ------------------------------------------------------------------------

    async def _find_coordinator(self) -> int | None:
        if self._coordinator is not None:
            return self._coordinator
        req = FindCoordinator.Request(key=self.group_id, key_type=KEY_TYPE_GROUP)
        for node_id in list(self.cluster.metadata.brokers):
            resp = await queries.send(self.cluster, node_id, FindCoordinator, req, _FIND_COORDINATOR_VERSION)
            if resp is None:
                continue
            if resp.error_code != E.NONE:
                _log.info("ordered_delivery_no_coordinator", error=E(resp.error_code).name)
                return None
            self.cluster.metadata.brokers.setdefault(resp.node_id, BrokerEndpoint(resp.node_id, resp.host, resp.port))
            self._coordinator = resp.node_id
            return resp.node_id
        return None

    async def _to_coordinator(self, api: Api, body: Any, version: int | None = None) -> Any:
        """The coordinator's answer; None (and the coordinator forgotten) when it has moved or is gone."""
        node_id = await self._find_coordinator()
        if node_id is None:
            return None
        resp = await queries.send(self.cluster, node_id, api, body, version)
        error = getattr(resp, "error_code", E.NONE) if resp is not None else E.COORDINATOR_NOT_AVAILABLE
        if error in _COORDINATOR_GONE:
            self._coordinator = None
            return None
        return resp

    async def _committed(self, tps: list[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (step 2); None where nothing is committed."""
        R = OffsetFetch.Request
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        req = R(group_id=self.group_id, topics=[R.OffsetFetchRequestTopic(name=t, partition_indexes=sorted(ps))
                                                for t, ps in sorted(by_topic.items())])
        resp = await self._to_coordinator(OffsetFetch, req, _OFFSET_FETCH_VERSION)
        if resp is None or resp.error_code != E.NONE:
            return {}
        return {TopicPartition(t.name, p.partition_index): (p.committed_offset if p.committed_offset >= 0 else None)
                for t in resp.topics for p in t.partitions if p.error_code == E.NONE}

    async def _list_offsets(self, tps: Iterable[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        return await queries.list_offsets(self.cluster, tps, timestamp, self._stale_topics)

    async def _epoch_end_offsets(self, asks: Iterable[tuple[TopicPartition, int]]
                                 ) -> dict[tuple[TopicPartition, int], int]:
        return await queries.epoch_end_offsets(self.cluster, asks, self._stale_topics)


def _tp(tp: tuple[str, int]) -> TopicPartition:
    return tp if isinstance(tp, TopicPartition) else TopicPartition(*tp)
