"""The broker's view of the cluster, fed only by the controller's UpdateMetadata.

Metadata, the leader checks of Produce/Fetch (for partitions this broker does
not host) and KIP-951's leader hints read from here. Lookups are dict reads;
nothing here is computed per request.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ZERO_UUID = b"\x00" * 16


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


@dataclass(slots=True)
class TopicMeta:
    name: str
    topic_id: bytes
    partitions: dict[int, PartitionMeta] = field(default_factory=dict)
    initial_partition_count: int = -1
    undeleted_partition_count: int = -1
    topic_epoch: int = -1
    is_internal: bool = False


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

    def topic(self, name: str) -> TopicMeta | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: bytes) -> TopicMeta | None:
        return self.topics_by_id.get(topic_id)

    def partition(self, topic: str, partition: int) -> PartitionMeta | None:
        t = self.topics.get(topic)
        return t.partitions.get(partition) if t is not None else None

    def put_topic(self, t: TopicMeta) -> None:
        old = self.topics.get(t.name)
        if old is not None and old.topic_id != t.topic_id:
            self.topics_by_id.pop(old.topic_id, None)
        self.topics[t.name] = t
        if t.topic_id != ZERO_UUID:
            self.topics_by_id[t.topic_id] = t

    def remove_topic(self, name: str) -> None:
        t = self.topics.pop(name, None)
        if t is not None:
            self.topics_by_id.pop(t.topic_id, None)

    def live_broker_ids(self) -> list[int]:
        return sorted(self.brokers)
