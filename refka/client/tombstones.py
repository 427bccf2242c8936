"""KIP-253's compacted-topic tombstone, the producer's side (seed 004 section
9)): after an expansion, a keyed record whose key moved from partition P2 to
the new partition P1 also sends (key, null) to P2, so that compaction can drop
the key's last value there: no later record of the key will ever supersede it
in P2.

The producer (``producer.py``) calls ``on_record(topic, counts, P1, key,
timestamp)`` for every keyed record linear hashing gives a partition P1 >=
initial_partition_count N (an explicit partition is the caller's choice, not a
move). For each (topic, P1) this module decides once whether P1's records
send tombstones, and to which P2, asking:

1. DescribeConfigs: ``cleanup.policy`` contains ``compact`` and
   ``enable.ordered.delivery`` is true (the seed's first two conditions; its
   third, N < undeleted_partition_count, follows from P1 >= N);
2. PartitionLeaderEpochsForPartitions (10253): P1's leaderEpochAfterCreation;
   empty, P1 was not made by an ordered expansion: no tombstones;
3. P2 = ``ordering.creation_blocker`` (the partition P1 was split from: every
   key of P1 was in P2 before the expansion) and P2's oldLeaderEpoch from the
   map; OffsetForLeaderEpoch turns it into P2's lowerOffsetThreshold
   (``ordering.offset_threshold``: the last offset written under that epoch);
4. ListOffsets earliest of P2; ``tombstone_needed(earliest, threshold)``, the
   seed's "earliest offset > lowerOffsetThreshold".

Records of P1 sent while that is being asked wait in a per-partition list
(at most ``MAX_PENDING_KEYS``, the oldest dropped) and get their tombstones
once the answer says so. Tombstones to P2 go as acks=0 Produce requests, one
per leader, each P2's keys in one batch, without the idempotent producer's id
(no sequence to keep: nothing waits for them), carrying the topic's
undeleted_partition_count. Fire and forget: a lost connection or an unknown
leader drops them (logged; a leader unknown also asks the producer for a
metadata refresh), and ``close`` sends what is queued without waiting for
decisions still being asked.

How long a decision is kept, and why:

- "send to P2": as long as the topic's counts (initial, undeleted) stay what
  they were. The map and the threshold are fixed for P1's life, and P2's log
  start offset only grows (retention, DeleteRecords), so earliest > threshold
  stays true; P1 and P2 can only be removed or made again by a shrink or an
  expansion, which change the counts, and a change of counts drops every
  decision of the topic.
- "no tombstones" because P2's earliest offset is not past the threshold yet:
  ``recheck_after`` (the producer's metadata_max_age_ms), since retention or a
  DeleteRecords may move it past later.
- "no tombstones" because of the configs: also ``recheck_after``, configs change.
- "no tombstones" because P1's map is empty or unusable: as long as the counts.

Choices where the seed is not precise: the seed sends 10253 "to the
coordinator" (its consumer's wording); a producer has none, and every broker
answers 10253 and DescribeConfigs from its metadata cache, so both go to
P1's leader. A question not answered (connection, error, UNDEFINED epoch) is
asked again for the next record of P1 after ``retry_backoff``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import structlog

from refka.common.topic_config import ordered_delivery
from refka.protocol.messages.describe_configs import DescribeConfigs
from refka.protocol.messages.list_offsets import EARLIEST_TIMESTAMP
from refka.protocol.messages.partition_leader_epochs_for_partitions import PartitionLeaderEpochsForPartitions
from refka.protocol.messages.produce import Produce
from refka.protocol.records import Compression, NewRecord, build_batch

from . import partition_queries as queries
from .cluster import ClusterClient
from .connection import BrokerConnectionError
from .metadata import PartitionCounts
from .ordering import creation_blocker, offset_threshold
from .structs import TopicPartition

_log = structlog.get_logger("refka.client.producer")

MAX_PENDING_KEYS = 10_000  # per partition, while its decision is asked
_CLEANUP_POLICY = "cleanup.policy"
_ORDERED_DELIVERY = "enable.ordered.delivery"


def tombstone_needed(earliest_offset: int, lower_offset_threshold: int) -> bool:
    """Seed 9): a tombstone goes to P2 when P2's earliest offset is past its lowerOffsetThreshold."""
    return earliest_offset > lower_offset_threshold


def compacted(configs: dict[str, str]) -> bool:
    return "compact" in (p.strip() for p in configs.get(_CLEANUP_POLICY, "delete").split(","))


@dataclass
class _Decision:
    split_from: int | None  # P2, where P1's keys get tombstones; None: no tombstones
    until: float  # monotonic time it is asked again (math.inf: while the counts stand)


@dataclass
class _TopicState:
    counts: PartitionCounts
    eligible: bool | None = None  # compacted and ordered, once answered
    eligible_until: float = 0.0
    decisions: dict[int, _Decision] = field(default_factory=dict)
    pending: dict[int, deque[tuple[bytes, int]]] = field(default_factory=dict)  # P1 -> (key, timestamp)
    deciding: bool = False
    retry_at: float = 0.0


class SplitTombstones:
    def __init__(self, cluster: ClusterClient, *, compression: Compression, request_timeout_ms: int,
                 retry_backoff: float, recheck_after: float, on_metadata_wanted: Callable[[], None]) -> None:
        self.cluster = cluster
        self.compression = compression
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff = retry_backoff
        self.recheck_after = recheck_after
        self._on_metadata_wanted = on_metadata_wanted
        self._topics: dict[str, _TopicState] = {}
        self._outgoing: dict[tuple[str, int], list[tuple[bytes, int]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._flushing = False
        self.sent = 0  # tombstones handed to a connection (tests read it)

    def on_record(self, topic: str, counts: PartitionCounts, partition: int, key: bytes, timestamp: int) -> None:
        """A keyed record of ``topic`` hashed to ``partition`` >= counts.initial."""
        state = self._topics.get(topic)
        if state is None or state.counts != counts:
            state = self._topics[topic] = _TopicState(counts)
        now = time.monotonic()
        decision = state.decisions.get(partition)
        if decision is not None and now < decision.until:
            if decision.split_from is not None:
                self._queue(topic, decision.split_from, [(key, timestamp)])
            return
        pending = state.pending.get(partition)
        if pending is None:
            pending = state.pending[partition] = deque(maxlen=MAX_PENDING_KEYS)
        pending.append((key, timestamp))
        if not state.deciding and now >= state.retry_at:
            state.deciding = True
            self._spawn(self._decide(topic, state))

    async def close(self) -> None:
        """Sends what is queued; the decisions still being asked are dropped."""
        for task in list(self._tasks):
            task.cancel()
        if self._outgoing:
            await self._send_queued()

    # -- deciding -----------------------------------------------------------------------

    async def _decide(self, topic: str, state: _TopicState) -> None:
        try:
            await self._decide_pending(topic, state)
        except Exception:  # a bug here must not stop the producer: no tombstones for these
            _log.exception("split_tombstones_failed", topic=topic)
            state.pending.clear()
        finally:
            state.deciding = False
            if state.pending:
                state.retry_at = time.monotonic() + self.retry_backoff

    async def _decide_pending(self, topic: str, state: _TopicState) -> None:
        node = self.cluster.metadata.leader_for(topic, min(state.pending))
        if node < 0:
            self._on_metadata_wanted()
            return
        now = time.monotonic()
        if state.eligible is None or now >= state.eligible_until:
            resp = await queries.send(self.cluster, node, DescribeConfigs, queries.topic_configs_request(
                [topic], [_CLEANUP_POLICY, _ORDERED_DELIVERY]))
            configs = queries.topic_configs(resp).get(topic) if resp is not None else None
            if configs is None:
                if resp is None:  # the broker did not answer: it may be gone, the metadata may say who leads now
                    self._on_metadata_wanted()
                return
            state.eligible = compacted(configs) and ordered_delivery(configs)
            state.eligible_until = now + self.recheck_after
        if not state.eligible:
            for p1 in list(state.pending):
                self._decide_one(topic, state, p1, None, state.eligible_until)
            return
        wanted = sorted(state.pending)
        resp = await queries.send(self.cluster, node, PartitionLeaderEpochsForPartitions,
                                  queries.leader_epochs_request({topic: wanted}))
        if resp is None:
            self._on_metadata_wanted()
        after = queries.leader_epoch_maps(resp)[0] if resp is not None else {}
        blockers: dict[int, tuple[TopicPartition, int]] = {}  # P1 -> (P2, P2's epoch before the expansion)
        for p1 in wanted:
            before = after.get(TopicPartition(topic, p1))
            if before is None:
                continue  # not answered: asked again
            try:
                p2 = creation_blocker(p1, state.counts.initial, before.keys()) if before else None
            except ValueError as e:
                _log.error("split_tombstones_unusable_map", topic=topic, partition=p1, error=str(e))
                p2 = None
            if p2 is None:
                self._decide_one(topic, state, p1, None, math.inf)
            else:
                blockers[p1] = (TopicPartition(topic, p2), before[p2])
        if not blockers:
            return
        stale: set[str] = set()
        ends = await queries.epoch_end_offsets(self.cluster, blockers.values(), stale)
        earliest = await queries.list_offsets(self.cluster, {tp for tp, _ in blockers.values()},
                                              EARLIEST_TIMESTAMP, stale)
        if stale:
            self._on_metadata_wanted()
        now = time.monotonic()
        for p1, (split, epoch) in blockers.items():
            end, first = ends.get((split, epoch)), earliest.get(split)
            if end is None or first is None:
                continue
            if tombstone_needed(first, offset_threshold(end)):
                self._decide_one(topic, state, p1, split.partition, math.inf)
            else:
                self._decide_one(topic, state, p1, None, now + self.recheck_after)

    def _decide_one(self, topic: str, state: _TopicState, p1: int, p2: int | None, until: float) -> None:
        state.decisions[p1] = _Decision(p2, until)
        keys = state.pending.pop(p1, ())
        _log.info("split_tombstones_decided", topic=topic, partition=p1, split_from=p2)
        if p2 is not None and keys:
            self._queue(topic, p2, keys)

    # -- sending ------------------------------------------------------------------------

    def _queue(self, topic: str, p2: int, keys: Iterable[tuple[bytes, int]]) -> None:
        self._outgoing.setdefault((topic, p2), []).extend(keys)
        if not self._flushing:
            self._flushing = True
            self._spawn(self._flush())

    async def _flush(self) -> None:
        try:
            await asyncio.sleep(0)  # what this turn of the loop queues goes in one request
            while self._outgoing:
                await self._send_queued()
        finally:
            self._flushing = False

    async def _send_queued(self) -> None:
        queued, self._outgoing = self._outgoing, {}
        md = self.cluster.metadata
        by_leader: dict[int, dict[str, dict[int, list[tuple[bytes, int]]]]] = {}
        for (topic, p2), keys in queued.items():
            leader = md.leader_for(topic, p2)
            if leader < 0:
                _log.info("split_tombstones_dropped", topic=topic, partition=p2, count=len(keys))
                self._on_metadata_wanted()
                continue
            by_leader.setdefault(leader, {}).setdefault(topic, {})[p2] = keys
        P = Produce.Request
        for leader, topics in by_leader.items():
            data = []
            for topic, partitions in topics.items():
                tm = md.topics.get(topic)
                undeleted = tm.counts.undeleted if tm is not None and tm.counts is not None else -1
                data.append(P.TopicProduceData(name=topic, undeleted_partition_count=undeleted, partition_data=[
                    P.TopicProduceData.PartitionProduceData(index=p2, records=build_batch(
                        [NewRecord(key, None, (), ts) for key, ts in keys], compression=self.compression))
                    for p2, keys in partitions.items()]))
            count = sum(len(keys) for partitions in topics.values() for keys in partitions.values())
            try:
                conn = await self.cluster.connection(leader)
                await conn.request(Produce, P(transactional_id=None, acks=0, timeout_ms=self.request_timeout_ms,
                                                   topic_data=data),
                                   expect_response=False)
            except (BrokerConnectionError, ValueError) as e:
                _log.info("split_tombstones_dropped", leader=leader, count=count, error=str(e))
                continue
            self.sent += count

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
