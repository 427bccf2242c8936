"""The reference client's metadata cache: brokers, and for each topic it uses the
partitions' leaders and refka's KIP-253 counts.

What it keeps per topic (``TopicMetadata``): each partition's leader, leader
epoch and partition epoch, the topic's id and topic epoch, and, when the
Metadata answer carried refka's tagged partition_counts,
initial_partition_count and undeleted_partition_count. A topic without the tag
is a plain Kafka topic: ``counts`` is None and the producer hashes over all its
partitions as Java's producer does.

Rules (KIP-951, and KIP-232's client half, seeds 000 and 002):

- A leader learned from a KIP-951 hint (``update_leader``) is taken only when its
  epoch is above the one known; a later Metadata answer naming an older epoch for
  that partition does not overwrite it (brokers' metadata may lag the hint), and
  is not called stale for it either: the hint is not Metadata.
- A Metadata answer older than the cache is discarded whole (``apply`` returns
  False, nothing of it is kept; ``cluster.py`` asks another broker, and the
  caller asks again after its back-off). Older means, for any topic the answer
  names without error and the cache has (seed 000: "those partitions that the
  client is interested in", which are the ones it asks for):
    1. its controller epochs (refka's tagged controller_epoch,
       controller_metadata_epoch, seed 000's rule) are below the newest the
       cache has seen, compared as a pair;
    2. its topic_epoch is below the cached one (seed 002: a topic re-created
       under the same name has a larger one);
    3. with the same topic (equal topic epochs, or either unknown, and the same
       topic id when both are known) a partition's partition_epoch is below the
       cached one, or with equal (or unknown) partition epochs its leader_epoch
       is below the cached one.
  -1 (a stock broker's answer, or a field it does not send) is never compared.
- Choices where the seeds are not precise: seed 000's other rule (a partition
  cached but missing from the answer while the topic has others) is not a
  staleness test here, because KIP-253 removes partitions: the answer of a
  shrink that has drained would always look stale. The controller epochs, which
  every UpdateMetadata broadcast raises, catch a broker that has not heard of the
  removal. Partition epochs (refka tags them, seed 000's "partition_epoch") make
  a partition removed and created again by a later expansion a new partition,
  whose leader epochs start again at 0. A topic id that changed (Metadata v10+,
  KIP-516) makes it another topic, whose epochs are not compared, so a stock
  broker's re-created topic is taken. There is no way out of a cache that the
  whole cluster is behind of (a cluster wiped and started again under the same
  bootstrap address): every answer is discarded until the client is restarted,
  as the seeds' rule implies; a lab that freezes one broker's metadata relies
  on exactly that refusal.
- ``behind(topic, partition, offset_epoch)`` is seed 002's test after a
  ``seek(partition, offset, offsetEpoch)`` or an OffsetFetch answer: the
  consumer must refresh until the cache has caught up with those epochs.
- ``forget(topics)`` drops topics from the cache (KIP-526: a producer's idle
  topics), so the next use asks for them again.

No I/O: ``refka.client.cluster`` asks, this module only keeps the answers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from refka.protocol import ErrorCode

NO_TOPIC_ID = b"\x00" * 16


@dataclass(frozen=True)
class BrokerEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionCounts:
    """refka KIP-253: what keys are hashed over."""

    initial: int
    undeleted: int


@dataclass
class PartitionMetadata:
    leader: int
    leader_epoch: int
    partition_epoch: int = -1  # refka KIP-232 tag: larger for a partition created again
    hinted: bool = False  # leader and epoch from a KIP-951 hint, newer than any Metadata answer so far


@dataclass
class TopicMetadata:
    name: str
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)
    counts: PartitionCounts | None = None
    topic_epoch: int = -1
    topic_id: bytes = NO_TOPIC_ID  # KIP-516 (Metadata v10+); Fetch v13+ names topics by it

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    @property
    def writable_count(self) -> int:
        """Partitions records may go to: the undeleted ones (KIP-253), else all."""
        return self.counts.undeleted if self.counts is not None else len(self.partitions)


def _older(new: int, old: int) -> bool:
    """``new`` is below ``old``, both known (-1: unknown, never compared)."""
    return new >= 0 and old >= 0 and new < old


def _differ(new: int, old: int) -> bool:
    return new >= 0 and old >= 0 and new != old


def same_topic(t: Any, old: TopicMetadata) -> bool:
    """Whether the Metadata answer's topic ``t`` is the cached ``old`` (not one re-created since)."""
    new_id = bytes(t.topic_id)
    return not _differ(t.topic_epoch, old.topic_epoch) and (
        new_id == NO_TOPIC_ID or old.topic_id == NO_TOPIC_ID or new_id == old.topic_id)


def topic_older(t: Any, old: TopicMetadata) -> bool:
    """Whether the Metadata answer's topic ``t`` is older than the cached ``old`` (header, rules 2-3)."""
    if _differ(t.topic_epoch, old.topic_epoch):
        return t.topic_epoch < old.topic_epoch
    if not same_topic(t, old):
        return False  # another topic of that name (its id changed): nothing to order it by
    for p in t.partitions:
        known = old.partitions.get(p.partition_index)
        if known is None or known.hinted:
            continue
        if _differ(p.partition_epoch, known.partition_epoch):
            if p.partition_epoch < known.partition_epoch:
                return True
            continue
        if _older(p.leader_epoch, known.leader_epoch):
            return True
    return False


class ClusterMetadata:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerEndpoint] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.errors: dict[str, ErrorCode] = {}  # the last topic-level error per topic asked for
        self.controller_epochs: tuple[int, int] = (-1, -1)
        self.stale_answers = 0  # Metadata answers discarded as older than the cache (tests read it)

    def leader_for(self, topic: str, partition: int) -> int:
        t = self.topics.get(topic)
        p = t.partitions.get(partition) if t is not None else None
        return p.leader if p is not None else -1

    def older_than_cache(self, resp: Any) -> bool:
        """KIP-232: whether the Metadata answer ``resp`` is older than what the cache holds."""
        epochs = getattr(resp, "controller_epochs", None)
        if epochs is not None and (epochs.controller_epoch, epochs.controller_metadata_epoch) < self.controller_epochs:
            return True
        for t in resp.topics:
            old = self.topics.get(t.name)
            if old is not None and t.error_code == ErrorCode.NONE and topic_older(t, old):
                return True
        return False

    def apply(self, resp: Any) -> bool:
        """Takes a Metadata answer; False when it was older than the cache (KIP-232) and ignored."""
        if self.older_than_cache(resp):
            self.stale_answers += 1
            return False
        epochs = getattr(resp, "controller_epochs", None)
        if epochs is not None:
            self.controller_epochs = (epochs.controller_epoch, epochs.controller_metadata_epoch)
        for b in resp.brokers:
            self.brokers[b.node_id] = BrokerEndpoint(b.node_id, b.host, b.port, b.rack)
        for t in resp.topics:
            if t.error_code != ErrorCode.NONE:
                self.errors[t.name] = ErrorCode(t.error_code)
                self.topics.pop(t.name, None)
                continue
            self.errors.pop(t.name, None)
            old = self.topics.get(t.name)
            new = TopicMetadata(t.name, topic_epoch=t.topic_epoch, topic_id=bytes(t.topic_id))
            pc = t.partition_counts
            if pc is not None:
                new.counts = PartitionCounts(pc.initial_partition_count, pc.undeleted_partition_count)
            same = old is not None and same_topic(t, old)
            for p in t.partitions:
                known = old.partitions.get(p.partition_index) if old is not None and same else None
                if known is not None and known.hinted and p.leader_epoch < known.leader_epoch \
                        and not _differ(p.partition_epoch, known.partition_epoch):
                    new.partitions[p.partition_index] = known  # a hint newer than this broker knew
                else:
                    new.partitions[p.partition_index] = PartitionMetadata(
                        p.leader_id, p.leader_epoch, p.partition_epoch)
            self.topics[t.name] = new
        return True

    def forget(self, topics: Iterable[str]) -> None:
        """Drops ``topics`` from the cache: the next use of one asks for it again."""
        for t in topics:
            self.topics.pop(t, None)
            self.errors.pop(t, None)

    def behind(self, topic: str, partition: int, topic_epoch: int, leader_epoch: int) -> bool:
        """KIP-232 (seed 002): whether the cache is older than the epochs an offset was
        committed or sought with (refresh until it is not). Unknown (-1) epochs never hold."""
        t = self.topics.get(topic)
        if t is None:
            return True
        if _differ(topic_epoch, t.topic_epoch):
            return t.topic_epoch < topic_epoch  # a newer topic in the cache: the offset's is gone
        p = t.partitions.get(partition)
        return p is None or _older(p.leader_epoch, leader_epoch)

    def update_leader(self, topic: str, partition: int, leader: int, leader_epoch: int,
                      endpoint: BrokerEndpoint | None) -> bool:
        """KIP-951: a Produce answer's CurrentLeader (and the leader's NodeEndpoint). True when it
        advanced what the cache knew, so the retry may go at once."""
        t = self.topics.get(topic)
        p = t.partitions.get(partition) if t is not None else None
        if p is None or leader < 0 or leader_epoch <= p.leader_epoch:
            return False
        if endpoint is not None:
            self.brokers[endpoint.node_id] = endpoint
        elif leader not in self.brokers:
            return False  # nowhere to send it: leave it to a metadata refresh
        p.leader, p.leader_epoch, p.hinted = leader, leader_epoch, True
        return True
