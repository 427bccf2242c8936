"""A follower's fetchers (Kafka's ReplicaFetcherManager): one ReplicaFetcher per
leader broker (fetcher.py), each fetching every partition this broker follows
there.

``become_follower`` / ``stop_fetching`` are called by the replica manager when
LeaderAndIsr or StopReplica changes a partition: a follower is (re)pointed at
the fetcher of its leader broker; a fetcher left with no partitions stops.
Where a leader broker is comes from LeaderAndIsr's live leaders, else from the
metadata cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from refka.common import TopicPartition

from ..config import BrokerConfig
from ..metadata_cache import MetadataCache
from .fetcher import FetcherSettings, ReplicaFetcher

if TYPE_CHECKING:
    from ..partition import Partition


class ReplicaFetcherManager:
    def __init__(self, node_id: int, config: BrokerConfig, metadata: MetadataCache,
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]],
                 broker_epoch: Callable[[], int]) -> None:
        self.node_id = node_id
        self.metadata = metadata
        self.spawn = spawn
        self.broker_epoch = broker_epoch  # this broker's registration epoch (KIP-903's replica_state)
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.following: dict[TopicPartition, int] = {}  # partition -> leader broker fetched from
        self.leader_endpoints: dict[int, tuple[str, int]] = {}  # from LeaderAndIsr live_leaders
        self.fetcher_settings = FetcherSettings.from_config(config)

    # -- where leaders are

    def endpoint(self, broker_id: int) -> tuple[str, int] | None:
        ep = self.leader_endpoints.get(broker_id)
        if ep is not None:
            return ep
        meta = self.metadata.brokers.get(broker_id)
        return meta.endpoint("PLAINTEXT") if meta is not None else None

    # -- roles

    def become_follower(self, p: Partition) -> None:
        key = (p.topic, p.index)
        leader = p.state.leader
        old = self.following.get(key)
        if old is not None and old != leader:
            self._remove_from(old, key)
        if leader < 0 or leader == self.node_id:
            self.following.pop(key, None)
            return
        self.following[key] = leader
        f = self.fetchers.get(leader)
        if f is None or f.task.done():
            f = self.fetchers[leader] = ReplicaFetcher(self.node_id, leader, self.fetcher_settings, self.spawn,
                                                       self.endpoint, self.broker_epoch)
        f.add(p)

    def stop_fetching(self, topic: str, index: int) -> None:
        """The partition is no longer followed here (this broker leads it, or stopped it)."""
        key = (topic, index)
        leader = self.following.pop(key, None)
        if leader is not None:
            self._remove_from(leader, key)

    def _remove_from(self, leader: int, key: TopicPartition) -> None:
        f = self.fetchers.get(leader)
        if f is None:
            return
        f.remove(key)
        if not f.partitions:
            f.stop()
            del self.fetchers[leader]

    def close(self) -> None:
        for f in self.fetchers.values():
            f.stop()
        self.fetchers.clear()
        self.following.clear()
