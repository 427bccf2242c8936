"""The reference client's metadata cache: brokers, and for each topic it uses the
partitions' leaders and refka's KIP-253 counts.

What it keeps per topic (``TopicMetadata``): each partition's leader and leader
epoch, and, when the Metadata answer carried refka's tagged partition_counts,
initial_partition_count and undeleted_partition_count. A topic without the tag
is a plain Kafka topic: ``counts`` is None and the producer hashes over all its
partitions as Java's producer does.

Rules (KIP-951 and KIP-232's client half, the parts a producer needs):

- A leader learned from a KIP-951 hint (``update_leader``) is taken only when its
  epoch is above the one known; a later Metadata answer naming an older epoch for
  that partition does not overwrite it (brokers' metadata may lag the hint).
- A Metadata answer whose KIP-232 controller epochs are older than the newest the
  cache has seen is discarded whole (``apply`` returns False): it comes from a
  broker that has not heard of the latest controller broadcast yet.

No I/O: ``refka.client.cluster`` asks, this module only keeps the answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from refka.protocol import ErrorCode


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


@dataclass
class TopicMetadata:
    name: str
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)
    counts: PartitionCounts | None = None
    topic_epoch: int = -1
    topic_id: bytes = b"\x00" * 16  # KIP-516 (Metadata v10+); Fetch v13+ names topics by it

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    @property
    def writable_count(self) -> int:
        """Partitions records may go to: the undeleted ones (KIP-253), else all."""
        return self.counts.undeleted if self.counts is not None else len(self.partitions)


class ClusterMetadata:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerEndpoint] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.errors: dict[str, ErrorCode] = {}  # the last topic-level error per topic asked for
        self.controller_epochs: tuple[int, int] = (-1, -1)

    def leader_for(self, topic: str, partition: int) -> int:
        t = self.topics.get(topic)
        p = t.partitions.get(partition) if t is not None else None
        return p.leader if p is not None else -1

    def apply(self, resp: Any) -> bool:
        """Takes a Metadata answer; False when it was older than the cache (KIP-232) and ignored."""
        epochs = getattr(resp, "controller_epochs", None)
        if epochs is not None:
            seen = (epochs.controller_epoch, epochs.controller_metadata_epoch)
            if seen < self.controller_epochs:
                return False
            self.controller_epochs = seen
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
            for p in t.partitions:
                known = old.partitions.get(p.partition_index) if old is not None else None
                if known is not None and old is not None and old.topic_epoch == new.topic_epoch \
                        and p.leader_epoch >= 0 and known.leader_epoch > p.leader_epoch:
                    new.partitions[p.partition_index] = known  # a hint newer than this broker knew
                else:
                    new.partitions[p.partition_index] = PartitionMetadata(p.leader_id, p.leader_epoch)
            self.topics[t.name] = new
        return True

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
        p.leader, p.leader_epoch = leader, leader_epoch
        return True
