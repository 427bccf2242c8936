"""A broker's own metrics (issue 13), Kafka's where Kafka has them: what the admin API's
``/metrics`` exports under the JMX exporter's names.

Counted on the hot path (a dict increment or two per partition of a Produce or Fetch,
nothing when the broker answers an error):

- ``BrokerTopicMetrics`` per topic: MessagesIn and BytesIn (appended by Produce, batches
  as sent), BytesOut (read by consumers' Fetch), and ReplicationBytesOut (read by
  followers' Fetch), as Kafka's ``BrokerTopicMetrics`` meters count them;
- IsrShrinks and IsrExpands (replication/isr_manager.py counts them);
- request latency per API, from the frame read to the answer written or queued, in
  fixed buckets (``LATENCY_BUCKETS_MS``; Kafka's RequestMetrics TotalTimeMs).

Read at each scrape (``snapshot``): LeaderCount, PartitionCount, UnderReplicatedPartitions
(led here with an ISR smaller than the replicas; each such partition also by name),
OfflinePartitionsCount and ActiveControllerCount (from the controller, on the broker that
is it): gauges computed from what the broker holds, one pass over its hosted partitions.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

# Upper bounds (ms) of the request-latency buckets; the last bucket is +Inf.
LATENCY_BUCKETS_MS = (0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0,
                      10000.0)


class TopicTraffic:
    """Kafka's BrokerTopicMetrics per topic: [messages in, bytes in, bytes out, replication bytes out]."""

    __slots__ = ("topics",)

    def __init__(self) -> None:
        self.topics: dict[str, list[int]] = {}

    def _row(self, topic: str) -> list[int]:
        row = self.topics.get(topic)
        if row is None:
            row = self.topics[topic] = [0, 0, 0, 0]
        return row

    def produced(self, topic: str, records: int, nbytes: int) -> None:
        row = self._row(topic)
        row[0] += records
        row[1] += nbytes

    def fetched(self, topic: str, nbytes: int, replica: bool) -> None:
        self._row(topic)[3 if replica else 2] += nbytes

    def forget(self, topics: Iterable[str]) -> None:
        for t in topics:
            self.topics.pop(t, None)


class LatencyHistograms:
    """Per API key: counts per bucket of LATENCY_BUCKETS_MS (+Inf last), the sum (ms), the count."""

    __slots__ = ("by_api",)

    def __init__(self) -> None:
        self.by_api: dict[int, list[float]] = {}

    def observe(self, api_key: int, ms: float) -> None:
        h = self.by_api.get(api_key)
        if h is None:
            h = self.by_api[api_key] = [0.0] * (len(LATENCY_BUCKETS_MS) + 3)
        h[bisect_left(LATENCY_BUCKETS_MS, ms)] += 1
        h[-2] += ms
        h[-1] += 1


@dataclass
class MetricsSnapshot:
    """What the ``/metrics`` collector reads of one broker at a scrape."""

    topics: dict[str, list[int]]
    latency: dict[int, list[float]]
    isr_shrinks: int
    isr_expands: int
    leader_count: int
    partition_count: int
    under_replicated: list[tuple[str, int]] = field(default_factory=list)
    active_controller: int = 0
    offline_partitions: int = 0


def snapshot(traffic: TopicTraffic, latency: LatencyHistograms, partitions: Iterable[Any], isr: Any,
             controller: Callable[[], Any]) -> MetricsSnapshot:
    """``partitions``: the broker's hosted ``Partition``s; ``isr``: its IsrManager (counts);
    ``controller()``: the active ``Controller`` when this broker is it, else None."""
    leaders = 0
    count = 0
    under: list[tuple[str, int]] = []
    for p in partitions:
        count += 1
        if p.is_leader:
            leaders += 1
            if len(p.state.isr) < len(p.state.replicas):
                under.append((p.topic, p.index))
    ctl = controller()
    offline = ctl.offline_partition_count() if ctl is not None else 0
    return MetricsSnapshot(topics={t: list(v) for t, v in traffic.topics.items()},
                           latency={k: list(v) for k, v in latency.by_api.items()},
                           isr_shrinks=isr.shrinks, isr_expands=isr.expands, leader_count=leaders,
                           partition_count=count, under_replicated=sorted(under),
                           active_controller=1 if ctl is not None else 0, offline_partitions=offline)
