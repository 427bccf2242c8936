"""The broker's view of the cluster, fed by the controller: UpdateMetadata, and
the KIP-253 undeleted_partition_count of LeaderAndIsr.

Metadata, the leader checks of Produce/Fetch (for partitions this broker does
not host), KIP-951's leader hints, the KIP-253 checks of Produce and Fetch and
PartitionLeaderEpochsForPartitions read from here. Lookups are dict reads;
nothing here is computed per request.

KIP-253 (seed 004): Produce and Fetch check a topic's undeleted_partition_count
against the one the controller sent last, with LeaderAndIsr or UpdateMetadata
(``undeleted_partition_count``; "Proposed Changes" 4): both come from the
controller over one ordered channel per broker, so the last one received is
its latest decision, and LeaderAndIsr carries it with the leader epochs it
bumps, so a leader refuses producers with the old count from the epoch on
that the seed's guarantee starts at. Metadata answers the counts of
UpdateMetadata (``TopicMeta``, the seed's protocol sections 6 and 7), which
come with the partitions they count: during an expansion the new count is
checked a moment before Metadata lists the new partitions (producers retry
meanwhile, as the seed intends). A partition is marked for deletion when its
index is at or above the checked count (``is_marked_for_deletion``). The
partition znode's maps (leaderEpochAfterCreation, leaderEpochBeforeDeletion)
come with UpdateMetadata only, as (partition, leader epoch) pairs ascending.

KIP-526 (seed 003): nothing here walks all topics. The counts KIP-578's limits
check (``partition_count``, ``replicas_per_broker``) are kept as topics come
and go, and Metadata's handler keeps each topic's encoded answer per (version,
extensions) in ``encoded_topics``, dropped when the topic changes and all of it
when the set of live brokers changes (a partition's leader is answered only if
live). A ``TopicMeta`` is never changed once put: UpdateMetadata puts a new one,
so a list of them is a snapshot an answer can be built from over several turns.

The timeline (issue 13's lab control plane): each change UpdateMetadata brings
(a topic created or deleted, a partition created or removed, a leader or ISR
change with the old and new leader and epoch, a new controller or controller
epoch) is kept as an event in a bounded deque, ``timeline``, numbered by
``timeline_seq``, found by comparing the topic put with the one it replaces
(what that costs is what building the new ``TopicMeta`` cost already).

Stale metadata for labs (KIP-232, issue 12): ``freeze()`` keeps a copy of what
Metadata answers from (``FrozenMetadata``: brokers, topics, controller epochs) and
Metadata answers from it (``answering()``) until ``thaw()``, while everything
else here follows the controller as before: Produce and Fetch are checked
against the cluster as it is, so a client that believes the frozen answer meets
NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, as with a broker whose
UpdateMetadata lags. The copy costs one dict copy of the topics (TopicMeta are
never changed once put, and ``brokers`` is replaced, never changed, by
``set_brokers``).
"""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

ZERO_UUID = b"\x00" * 16
TIMELINE_MAX = 10_000  # changes kept per broker (the admin API's /api/timeline)


@dataclass(slots=True)
class BrokerMeta:
    node_id: int
    endpoints: dict[str, tuple[str, int]]  # listener name -> (host, port)
    rack: str | None = None

    def endpoint(self, listener: str | None = None) -> tuple[str, int] | None:
        if listener and listener in self.endpoints:
            return self.endpoints[listener]
        return next(iter(self.endpoints.values()), None)


@dataclass(slots=True)
class PartitionMeta:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int] = field(default_factory=list)
    partition_epoch: int = -1
    # KIP-253: the partition znode's maps as (partition, leader epoch) pairs, ascending; ()
    # for most partitions (an immutable empty costs nothing per partition).
    leader_epoch_after_creation: tuple[tuple[int, int], ...] = ()
    leader_epoch_before_deletion: tuple[tuple[int, int], ...] = ()


@dataclass(slots=True)
class TopicMeta:
    name: str
    topic_id: bytes
    partitions: dict[int, PartitionMeta] = field(default_factory=dict)
    initial_partition_count: int = -1
    undeleted_partition_count: int = -1
    topic_epoch: int = -1
    is_internal: bool = False


@dataclass(frozen=True, slots=True)
class FrozenMetadata:
    """What Metadata answered from when the cache was frozen; the same names as the
    cache's, so Metadata's handler reads either (``MetadataCache.answering``)."""

    cluster_id: str | None
    brokers: dict[int, BrokerMeta]
    topics: dict[str, TopicMeta]
    topics_by_id: dict[bytes, TopicMeta]
    controller_id: int
    controller_epoch: int
    controller_metadata_epoch: int
    max_partition_epoch: int
    frozen_at_ms: float

    def topic(self, name: str) -> TopicMeta | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: bytes) -> TopicMeta | None:
        return self.topics_by_id.get(topic_id)


class MetadataCache:
    def __init__(self, cluster_id: str | None = None) -> None:
        self.cluster_id = cluster_id
        self.brokers: dict[int, BrokerMeta] = {}
        self.topics: dict[str, TopicMeta] = {}
        self.topics_by_id: dict[bytes, TopicMeta] = {}
        self.controller_id = -1
        self.controller_epoch = -1
        self.controller_metadata_epoch = -1
        self.max_partition_epoch = -1
        self.version = 0  # bumped on every update: lets waiters see a change
        # KIP-253: topic -> the undeleted_partition_count Produce and Fetch check (module docstring).
        self.undeleted_partition_counts: dict[str, int] = {}
        # KIP-578's counts, kept as topics are put and removed (module docstring).
        self.partition_count = 0
        self.replicas_per_broker: Counter[int] = Counter()
        # (Metadata version, extensions) -> topic name -> (the TopicMeta, its encoded answer).
        self.encoded_topics: dict[tuple[int, bool], dict[str, tuple[TopicMeta, Any]]] = {}
        self.frozen: FrozenMetadata | None = None  # freeze() (module docstring)
        self.timeline: deque[dict[str, Any]] = deque(maxlen=TIMELINE_MAX)
        self.timeline_seq = 0

    def event(self, kind: str, **fields: Any) -> None:
        """A timeline event (also a fault fired on this broker: faults.py)."""
        self.timeline_seq += 1
        self.timeline.append({"seq": self.timeline_seq, "time_ms": round(time.time() * 1000, 3), "type": kind,
                              **fields})

    def set_controller(self, controller_id: int, epoch: int, metadata_epoch: int) -> None:
        """UpdateMetadata's controller; a new controller or controller epoch is a timeline event."""
        if (controller_id, epoch) != (self.controller_id, self.controller_epoch) and controller_id >= 0:
            self.event("controller_changed", old_controller=self.controller_id, new_controller=controller_id,
                        old_epoch=self.controller_epoch, new_epoch=epoch)
        self.controller_id = controller_id
        self.controller_epoch = epoch
        if metadata_epoch >= 0:
            self.controller_metadata_epoch = metadata_epoch

    def _changes(self, old: TopicMeta | None, t: TopicMeta) -> None:
        if old is None or old.topic_id != t.topic_id:
            self.event("topic_created", topic=t.name, partitions=len(t.partitions), topic_epoch=t.topic_epoch)
            return
        for index, p in t.partitions.items():
            o = old.partitions.get(index)
            if o is None:
                self.event("partition_created", topic=t.name, partition=index, leader=p.leader,
                            leader_epoch=p.leader_epoch, replicas=list(p.replicas))
                continue
            if o.leader != p.leader or o.leader_epoch != p.leader_epoch:
                self.event("leader_changed", topic=t.name, partition=index, old_leader=o.leader,
                            new_leader=p.leader, old_epoch=o.leader_epoch, new_epoch=p.leader_epoch)
            if o.isr != p.isr:
                self.event("isr_changed", topic=t.name, partition=index, old_isr=list(o.isr), new_isr=list(p.isr),
                            leader=p.leader)
            if o.replicas != p.replicas:
                self.event("replicas_changed", topic=t.name, partition=index, old_replicas=list(o.replicas),
                            new_replicas=list(p.replicas))
        for index in old.partitions.keys() - t.partitions.keys():
            self.event("partition_removed", topic=t.name, partition=index)

    def freeze(self, now_ms: float) -> FrozenMetadata:
        """Metadata answers from the cache as it is now until ``thaw``; already frozen: the
        copy taken then stays."""
        if self.frozen is None:
            self.frozen = FrozenMetadata(
                cluster_id=self.cluster_id, brokers=self.brokers, topics=dict(self.topics),
                topics_by_id=dict(self.topics_by_id), controller_id=self.controller_id,
                controller_epoch=self.controller_epoch,
                controller_metadata_epoch=self.controller_metadata_epoch,
                max_partition_epoch=self.max_partition_epoch, frozen_at_ms=now_ms)
        return self.frozen

    def thaw(self) -> None:
        self.frozen = None

    def answering(self) -> MetadataCache | FrozenMetadata:
        """What Metadata answers from: the frozen copy while there is one, else the cache."""
        return self.frozen if self.frozen is not None else self

    def set_brokers(self, brokers: dict[int, BrokerMeta]) -> None:
        """UpdateMetadata's live brokers; encoded answers name leaders only if live."""
        if brokers.keys() != self.brokers.keys():
            self.encoded_topics.clear()
        self.brokers = brokers

    def _count(self, t: TopicMeta, sign: int) -> None:
        self.partition_count += sign * len(t.partitions)
        per_broker = self.replicas_per_broker
        for p in t.partitions.values():
            for r in p.replicas:
                per_broker[r] += sign
                if not per_broker[r]:
                    del per_broker[r]

    def _forget_encoded(self, name: str) -> None:
        for by_name in self.encoded_topics.values():
            by_name.pop(name, None)

    def topic(self, name: str) -> TopicMeta | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: bytes) -> TopicMeta | None:
        return self.topics_by_id.get(topic_id)

    def partition(self, topic: str, partition: int) -> PartitionMeta | None:
        t = self.topics.get(topic)
        return t.partitions.get(partition) if t is not None else None

    def put_topic(self, t: TopicMeta) -> None:
        old = self.topics.get(t.name)
        self._changes(old, t)
        if old is not None:
            self._count(old, -1)
            if old.topic_id != t.topic_id:
                self.topics_by_id.pop(old.topic_id, None)
        self._count(t, 1)
        self._forget_encoded(t.name)
        self.topics[t.name] = t
        if t.topic_id != ZERO_UUID:
            self.topics_by_id[t.topic_id] = t

    def undeleted_partition_count(self, topic: str) -> int:
        """The count Produce and Fetch check a client's against; -1: not known, not checked."""
        return self.undeleted_partition_counts.get(topic, -1)

    def set_undeleted_partition_count(self, topic: str, topic_id: bytes, count: int) -> None:
        """LeaderAndIsr's or UpdateMetadata's count; not for another incarnation of a topic
        this cache knows (by topic id, when the request has one)."""
        t = self.topics.get(topic)
        if t is not None and topic_id != ZERO_UUID and t.topic_id != ZERO_UUID and topic_id != t.topic_id:
            return
        self.undeleted_partition_counts[topic] = count

    def is_marked_for_deletion(self, topic: str, partition: int) -> bool:
        """KIP-253: a partition of the topic at or above the checked undeleted_partition_count.
        After a shrink to N exactly partitions N.. are marked, the ones whose
        leaderEpochBeforeDeletion is not empty; the count reaches a leader first (module
        docstring), the maps with the UpdateMetadata after it."""
        count = self.undeleted_partition_counts.get(topic, -1)
        if count < 0 or partition < count:
            return False
        t = self.topics.get(topic)
        return t is not None and partition in t.partitions

    def remove_topic(self, name: str) -> None:
        self.undeleted_partition_counts.pop(name, None)
        t = self.topics.pop(name, None)
        if t is not None:
            self.event("topic_deleted", topic=name)
            self._count(t, -1)
            self._forget_encoded(name)
            self.topics_by_id.pop(t.topic_id, None)

    def live_broker_ids(self) -> list[int]:
        return sorted(self.brokers)
