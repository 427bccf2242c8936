"""The reference client's producer: aiokafka's ``AIOKafkaProducer`` interface over
refka's codec, with KIP-253 (partitions removed as well as added, keys kept in
order), KIP-951 (leader hints) and the idempotent producer.

    producer = Producer(bootstrap_servers="127.0.0.1:9092", enable_idempotence=True)
    await producer.start()
    meta = await producer.send_and_wait("t", b"value", key=b"k")   # RecordMetadata
    fut = await producer.send("t", b"v2", key=b"k"); await producer.flush()
    await producer.stop()

How a record travels. ``send`` stamps it (a send number, its timestamp), puts it
at the end of its topic's queue of records without a partition, and, when the
topic's metadata is known and the topic is not being re-hashed, gives it one:
the one asked for, else linear hashing of murmur2(key) over the topic's
KIP-253 counts (``partitioning.py``; a topic whose Metadata had no counts is a
plain Kafka topic and is hashed over all its partitions, Java's default), an
unkeyed record the sticky partition (one of the undeleted partitions, drawn at
random again each time its batch closes, Java's sticky partitioner). It joins
the open batch of that partition, or a new one once the open one reaches
``max_batch_size`` bytes. The sender task sends a partition's first batch when
it is full, has a successor, is ``linger_ms`` old, or a flush waits for it;
one Produce per leader carries every ready partition of that leader.

Ordering. A partition has at most one Produce in flight (Kafka's
max.in.flight.requests.per.connection = 1, per partition rather than per
connection): a retried batch is always its partition's first, so records of one
partition are never reordered. Retries keep the batch's bytes, hence its
sequence numbers.

Errors of a partition's answer:

- retriable: the batch is retried after ``retry_backoff_ms``; the invalid-metadata
  ones (``INVALID_METADATA``) also refresh the metadata first;
- NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH with a KIP-951 CurrentLeader (Produce
  v10+) that is newer than the cache: the leader is taken from it (with its
  NodeEndpoint) and the batch is retried at once, without the back-off, as Java's
  producer does since KAFKA-15415; a refresh is still asked for;
- INVALID_PARTITION_METADATA (KIP-253: the topic's undeleted_partition_count
  changed, or the partition is marked for deletion): the topic is *re-hashed*, below;
- anything else fails the batch's records with ``KafkaError``; a lost connection
  retries the batch (the broker may or may not have it: only the idempotent
  producer makes that retry safe, as in every Kafka client).

Re-hashing a topic (seed 004 section 5). The topic stops sending and stops giving
partitions to new records, which queue behind; once none of its Produce requests
is in flight, after the back-off, its metadata is refreshed, and every record of
the topic not yet acknowledged goes back, in send order, to the head of the
topic's queue and is given a partition again under the new counts. So a later
record of a key can never be appended before an earlier one: the earlier one is
either acknowledged already or sent again ahead of it. A record sent with an
explicit partition keeps it, and fails when that partition is now marked.
Every Produce topic carries the undeleted_partition_count its records were
hashed over whenever the topic's Metadata had KIP-253 counts: the producer cannot
see ``enable.ordered.delivery`` without a DescribeConfigs per topic, and a
broker answers the count the same way for every topic. A batch whose count no
longer matches the cache (a periodic refresh saw the change first) is re-hashed
before it is ever sent.

Idempotence (``enable_idempotence``): one InitProducerId at start; each batch
gets the partition's next sequence number when first sent and keeps it through
every retry, so a batch the broker has already appended is answered as a
duplicate with its first offset, never appended twice. A re-hashed record
starts under its new partition's sequence: the batch it was in was refused
(INVALID_PARTITION_METADATA is answered before anything is appended), so the
old partition's broker never saw those sequences and the partition's next
sequence goes back to that batch's first. A batch whose answer was lost
(connection closed) when its topic is re-hashed may have been appended: before
the re-hash it is sent once more as it was, and refka's leader answers it as the
duplicate it is (acknowledged where it is) or refuses it with
INVALID_PARTITION_METADATA, which it answers only for a batch it does not have
(``_resolve_unknown``). One whose fate is still unknown then (no answer again,
its partition gone) must not give its sequences to other records, or the
broker would take their batch for a duplicate of it and answer its offset (an
acknowledged record never written: the scenario caught one under controller
kills). So the producer then takes a new producer id (InitProducerId, once nothing is in flight; sending
pauses meanwhile) and every sequence starts over; the re-hashed records may
then be in the log twice, never out of order. OUT_OF_ORDER_SEQUENCE_NUMBER and
UNKNOWN_PRODUCER_ID (the broker lost this producer's sequence) do the same and
retry the batch, as Java's producer bumps its epoch since KIP-360. A batch
failed for good (a non-retriable error) gives its sequences back, which is
right since it was not appended.

Metadata (KIP-526, ``working_set.py``): a topic joins the working set when a
record is sent to it and leaves it (and the metadata cache) after
``metadata_max_idle_ms`` without one, unless records of it are still unanswered.
The sender asks the working set what to refresh at each wake: a new topic at
once, the urgent ones with a share of the aging ones sized by the target fetch
size, the whole working set after an invalid-metadata error (and for a re-hash).

The compacted-topic tombstone (seed 004 section 9), ``tombstones.py``): each
keyed record hashed to a partition at or above initial_partition_count is shown
to ``SplitTombstones``, which decides (once per partition, cached) whether the
partition it was split from gets a (key, null) record, and sends those with
acks=0 beside the producer's own batches.

Back-pressure: ``send`` waits while the records not yet answered take
``buffer_memory`` bytes (Java's buffer.memory, 32 MiB; aiokafka's send waits
too), sending what lingers at once, and raises KafkaTimeoutError after
``max_block_ms`` (Java's max.block.ms, 60 s).

Not here yet: transactions.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import random
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from refka.client.cluster import ClusterClient, KafkaConnectionError
from refka.client.connection import BrokerConnectionError
from refka.client.errors import KafkaError, KafkaTimeoutError, ProducerClosed
from refka.client.metadata import BrokerEndpoint, TopicMetadata
from refka.client.partitioning import default_partition, murmur2
from refka.client.tombstones import SplitTombstones
from refka.client.working_set import MetadataWorkingSet
from refka.protocol import ErrorCode
from refka.protocol.messages.init_producer_id import InitProducerId
from refka.protocol.messages.produce import Produce
from refka.protocol.records import Compression, NewRecord, build_batch

E = ErrorCode
log = structlog.get_logger("refka.client.producer")
# Errors after which the metadata is asked again before the retry (Java's InvalidMetadataException).
INVALID_METADATA = frozenset({
    E.NOT_LEADER_OR_FOLLOWER, E.UNKNOWN_TOPIC_OR_PARTITION, E.LEADER_NOT_AVAILABLE,
    E.FENCED_LEADER_EPOCH, E.UNKNOWN_LEADER_EPOCH, E.KAFKA_STORAGE_ERROR,
    E.INVALID_PARTITION_METADATA, E.UNKNOWN_TOPIC_ID, E.INCONSISTENT_TOPIC_ID,
})
# Answers after which the idempotent producer takes a new producer id (its sequence for the
# partition is lost to the broker), as Java's does since KIP-360.
SEQUENCE_LOST = frozenset({E.OUT_OF_ORDER_SEQUENCE_NUMBER, E.UNKNOWN_PRODUCER_ID})
# KIP-951: these answers may name the current leader.
LEADER_HINTED = frozenset({E.NOT_LEADER_OR_FOLLOWER, E.FENCED_LEADER_EPOCH})

COMPRESSION = {None: Compression.NONE, "none": Compression.NONE, "gzip": Compression.GZIP,
               "snappy": Compression.SNAPPY, "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
ACKS = {0: 0, 1: 1, -1: -1, "all": -1}
_RECORD_OVERHEAD = 24  # a record's length, attributes, deltas, sizes: enough to size batches by


@dataclass(frozen=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int
    timestamp: int


class _Record:
    __slots__ = ("future", "headers", "key", "number", "partition", "size", "timestamp", "value")

    def __init__(self, number: int, key: bytes | None, value: bytes | None,
                 headers: Sequence[tuple[str, bytes | None]], timestamp: int, partition: int | None,
                 future: asyncio.Future[RecordMetadata]) -> None:
        self.number = number  # the send order, across topics
        self.key, self.value, self.headers = key, value, headers
        self.timestamp = timestamp
        self.partition = partition  # asked for by the caller, else None
        self.future = future
        self.size = (_RECORD_OVERHEAD + len(key or b"") + len(value or b"")
                     + sum(len(k) + len(v or b"") for k, v in headers))


class _Batch:
    __slots__ = ("attempts", "base_sequence", "created", "partition", "payload", "records", "retry_at",
                 "size", "undeleted", "unknown")

    def __init__(self, partition: int, undeleted: int, now: float) -> None:
        self.partition = partition
        self.undeleted = undeleted  # the KIP-253 count its records were hashed over, -1 without one
        self.records: list[_Record] = []
        self.size = 0
        self.created = now
        self.base_sequence = -1
        self.payload: bytearray | None = None  # built when first sent, resent as it is
        self.attempts = 0
        self.retry_at = 0.0
        self.unknown = False  # sent, and no answer came: it may have been appended


class _PartitionState:
    __slots__ = ("batches", "in_flight", "next_sequence")

    def __init__(self) -> None:
        self.batches: deque[_Batch] = deque()
        self.in_flight = False
        self.next_sequence = 0


class _TopicState:
    def __init__(self) -> None:
        self.waiting: deque[_Record] = deque()  # records without a partition yet, in send order
        self.partitions: dict[int, _PartitionState] = {}
        self.sticky: int | None = None
        self.rehashing = False
        self.hashed_with = -1  # the KIP-253 count its batches were hashed over (-1: none)
        self.in_flight = 0
        self.idle = asyncio.Event()
        self.idle.set()

    def partition(self, index: int) -> _PartitionState:
        p = self.partitions.get(index)
        if p is None:
            p = self.partitions[index] = _PartitionState()
        return p


class Producer:
    def __init__(
        self,
        *,
        bootstrap_servers: str | Iterable[str] = "127.0.0.1:9092",
        client_id: str | None = None,
        acks: int | str | None = None,
        enable_idempotence: bool = False,
        linger_ms: float = 5,
        max_batch_size: int = 16384,
        compression_type: str | None = None,
        request_timeout_ms: int = 40000,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 300000,
        metadata_max_idle_ms: int = 300000,
        delivery_timeout_ms: int = 120000,
        buffer_memory: int = 33554432,
        max_block_ms: int = 60000,
    ) -> None:
        if acks is None:
            acks = "all" if enable_idempotence else 1
        if acks not in ACKS:
            raise ValueError(f"acks must be 0, 1, -1 or 'all', not {acks!r}")
        if enable_idempotence and ACKS[acks] != -1:
            raise ValueError("enable_idempotence needs acks='all' (as every Kafka producer)")
        if compression_type not in COMPRESSION:
            raise ValueError(f"unknown compression_type {compression_type!r}")
        self.client_id = client_id or f"refka-producer-{id(self):x}"
        self.acks = ACKS[acks]
        self.enable_idempotence = enable_idempotence
        self.linger = linger_ms / 1000
        self.max_batch_size = max_batch_size
        self.compression = COMPRESSION[compression_type]
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff = retry_backoff_ms / 1000
        self.metadata_max_age = metadata_max_age_ms / 1000
        self.delivery_timeout = delivery_timeout_ms / 1000
        if buffer_memory < 1:
            raise ValueError("buffer_memory must be a positive number of bytes")
        self.buffer_memory = buffer_memory
        self.max_block = max_block_ms / 1000
        self._buffered = 0  # bytes of records sent to us and not yet answered (Java's buffer.memory)
        self._room = asyncio.Event()  # set each time records leave the buffer
        self._cluster = ClusterClient(bootstrap_servers, self.client_id, request_timeout=request_timeout_ms / 1000)
        self._topics: dict[str, _TopicState] = {}
        self._numbers = itertools.count()
        self._outstanding: set[asyncio.Future[RecordMetadata]] = set()
        self._wake = asyncio.Event()
        self._working_set = MetadataWorkingSet(max_age=self.metadata_max_age, max_idle=metadata_max_idle_ms / 1000,
                                               retry_backoff=self.retry_backoff)
        self._metadata_answered: asyncio.Future[None] | None = None  # resolved by the next refresh
        self._flushing = 0
        self._new_id: asyncio.Task[None] | None = None  # a new producer id being taken (sending paused)
        self._tombstones = SplitTombstones(
            self._cluster, compression=self.compression, request_timeout_ms=request_timeout_ms,
            retry_backoff=self.retry_backoff, recheck_after=self.metadata_max_age,
            on_metadata_wanted=self._working_set.request_update)
        self._sender: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False
        self.producer_id = -1
        self.producer_epoch = -1
        # What happened (tests and operators read them).
        self.retries = 0
        self.hinted_retries = 0  # KIP-951: retried at once on a newer leader
        self.rehashes = 0
        self.resolved_unknown = 0  # batches of unknown fate whose fate a re-hash learned (tests read it)

    # -- the public interface -----------------------------------------------------------

    async def start(self) -> None:
        await self._cluster.refresh(())
        if self.enable_idempotence:
            await self._init_producer_id()
        self._sender = asyncio.create_task(self._send_loop(), name=f"{self.client_id}-sender")

    async def stop(self) -> None:
        """Sends what is buffered (a flush), then closes the connections."""
        if self._closed:
            return
        try:
            if self._sender is not None and not self._sender.done():
                await self.flush()
        finally:
            self._closed = True
            for t in [self._sender, *self._tasks]:
                if t is not None:
                    t.cancel()
            for fut in self._outstanding:
                if not fut.done():
                    fut.set_exception(ProducerClosed("producer stopped"))
            await self._tombstones.close()
            await self._cluster.close()

    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                   partition: int | None = None, headers: Sequence[tuple[str, bytes | None]] | None = None,
                   timestamp_ms: int | None = None) -> asyncio.Future[RecordMetadata]:
        """Buffers a record; the returned future resolves to its RecordMetadata once acknowledged
        (with acks=0: once sent, offset -1)."""
        if self._closed or self._sender is None:
            raise ProducerClosed("producer not started or stopped")
        ts = self._topics.get(topic)
        if ts is None:
            ts = self._topics[topic] = _TopicState()
        self._working_set.use((topic,), time.monotonic())
        if topic not in self._cluster.metadata.topics:
            await self._wait_for_topic(topic)
        fut: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        stamp = timestamp_ms if timestamp_ms is not None else time.time_ns() // 1_000_000
        record = _Record(next(self._numbers), key, value, list(headers or ()), stamp, partition, fut)
        await self._wait_for_room(record.size)
        if self._closed:
            raise ProducerClosed("producer stopped")
        ts.waiting.append(record)
        self._outstanding.add(fut)
        self._buffered += record.size
        fut.add_done_callback(functools.partial(self._released, size=record.size))
        self._assign(topic, ts)
        self._wake.set()
        return fut

    async def _wait_for_room(self, size: int) -> None:
        """Back-pressure (Java's buffer.memory and max.block.ms): ``send`` waits while the
        records not yet answered take ``buffer_memory`` bytes (one record larger than that
        alone goes through), and raises KafkaTimeoutError after ``max_block_ms``."""
        if self._buffered == 0 or self._buffered + size <= self.buffer_memory:
            return
        self._flushing += 1  # what lingers is sent now: it is what will make room
        self._wake.set()
        try:
            async with asyncio.timeout(self.max_block):
                while self._buffered > 0 and self._buffered + size > self.buffer_memory and not self._closed:
                    self._room.clear()
                    await self._room.wait()
        except TimeoutError:
            raise KafkaTimeoutError(f"no room in buffer_memory ({self.buffer_memory} bytes) for "
                                    f"{self.max_block * 1000:.0f} ms") from None
        finally:
            self._flushing -= 1

    def _released(self, fut: asyncio.Future[RecordMetadata], *, size: int) -> None:
        self._outstanding.discard(fut)
        self._buffered -= size
        self._room.set()

    async def send_and_wait(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                            partition: int | None = None, headers: Sequence[tuple[str, bytes | None]] | None = None,
                            timestamp_ms: int | None = None) -> RecordMetadata:
        fut = await self.send(topic, value, key, partition, headers, timestamp_ms)
        return await fut

    async def flush(self) -> None:
        """Sends every buffered record at once (no linger) and waits until each is answered."""
        pending = list(self._outstanding)
        if not pending:
            return
        self._flushing += 1
        self._wake.set()
        try:
            await asyncio.wait(pending)
        finally:
            self._flushing -= 1

    async def partitions_for(self, topic: str) -> set[int]:
        if topic not in self._cluster.metadata.topics:
            await self._wait_for_topic(topic)
        return set(self._cluster.metadata.topics[topic].partitions)

    # -- metadata -----------------------------------------------------------------------

    async def _wait_for_topic(self, topic: str) -> None:
        deadline = time.monotonic() + self.request_timeout_ms / 1000
        while topic not in self._cluster.metadata.topics:
            err = self._cluster.metadata.errors.get(topic)
            if err is not None and not err.retriable:
                raise KafkaError(err, f"topic {topic}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise KafkaTimeoutError(f"no metadata for topic {topic} ({err.name if err else 'no answer'})")
            self._working_set.want(topic, time.monotonic())
            self._wake.set()
            if self._metadata_answered is None:
                self._metadata_answered = asyncio.get_running_loop().create_future()
            try:
                async with asyncio.timeout(left):
                    await asyncio.shield(self._metadata_answered)
            except TimeoutError:
                continue
            if topic not in self._cluster.metadata.topics:
                await asyncio.sleep(self.retry_backoff)

    async def _refresh(self, topics: list[str]) -> None:
        """Metadata for ``topics`` (the working set's choice); on failure the working set
        asks again after the back-off."""
        self._working_set.attempted(time.monotonic())
        try:
            if await self._cluster.refresh(topics):
                self._working_set.answered(topics, time.monotonic())
        except KafkaConnectionError:
            return
        answered, self._metadata_answered = self._metadata_answered, None
        if answered is not None:
            answered.set_result(None)
        for name, ts in self._topics.items():
            self._assign(name, ts)

    async def _init_producer_id(self) -> None:
        deadline = time.monotonic() + self.request_timeout_ms / 1000
        while True:
            err: Exception
            try:
                conn = await self._cluster.connection(next(iter(self._cluster.metadata.brokers)))
                resp = await conn.request(InitProducerId, InitProducerId.Request(
                    transactional_id=None, transaction_timeout_ms=-1))
                if resp.error_code == E.NONE:
                    self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
                    return
                err = KafkaError(resp.error_code, "InitProducerId")
                if not ErrorCode(resp.error_code).retriable:
                    raise err
            except (BrokerConnectionError, StopIteration) as e:
                err = e
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(f"no producer id: {err}")
            await asyncio.sleep(self.retry_backoff)
            await self._cluster.refresh(())

    # -- giving records a partition -----------------------------------------------------

    def _assign(self, topic: str, ts: _TopicState) -> None:
        """Gives the topic's waiting records a partition and a batch, in send order."""
        tm = self._cluster.metadata.topics.get(topic)
        if ts.rehashing or tm is None or not tm.partitions:
            return
        undeleted = tm.counts.undeleted if tm.counts is not None else -1
        if undeleted != ts.hashed_with:
            if any(ps.batches for ps in ts.partitions.values()):
                # batches hashed over other counts wait: they are re-hashed first, then these
                self._start_rehash(topic, ts)
                return
            ts.hashed_with = undeleted
        now = time.monotonic()
        while ts.waiting:
            r = ts.waiting.popleft()
            index = self._partition_for(r, tm, ts)
            if index is None:
                continue
            if r.key is not None and r.partition is None and tm.counts is not None and index >= tm.counts.initial:
                self._tombstones.on_record(topic, tm.counts, index, r.key, r.timestamp)
            batch = self._open_batch(ts.partition(index), r)
            if batch is None and r.partition is None and r.key is None:
                ts.sticky = None  # the sticky partition's batch closed: unkeyed records move on
                index = self._partition_for(r, tm, ts)
                assert index is not None
                batch = self._open_batch(ts.partition(index), r)
            if batch is None:
                batch = _Batch(index, undeleted, now)
                ts.partition(index).batches.append(batch)
            batch.records.append(r)
            batch.size += r.size

    def _open_batch(self, ps: _PartitionState, r: _Record) -> _Batch | None:
        """The partition's last batch if it can still take ``r``."""
        if not ps.batches:
            return None
        batch = ps.batches[-1]
        if batch.payload is not None or (batch.records and batch.size + r.size > self.max_batch_size):
            return None
        return batch

    def _partition_for(self, r: _Record, tm: TopicMetadata, ts: _TopicState) -> int | None:
        """The record's partition, or None when it was failed (a partition that is not writable)."""
        writable = tm.writable_count
        if r.partition is not None:
            if 0 <= r.partition < writable:
                return r.partition
            code = E.INVALID_PARTITION_METADATA if r.partition < tm.partition_count else E.UNKNOWN_TOPIC_OR_PARTITION
            _fail(r, KafkaError(code, f"partition {r.partition} of {tm.name} takes no records "
                                      f"({writable} writable)"))
            return None
        if r.key is not None:
            if tm.counts is not None:
                return default_partition(r.key, tm.counts.initial, tm.counts.undeleted)
            return (murmur2(r.key) & 0x7FFFFFFF) % writable
        if ts.sticky is None or ts.sticky >= writable:
            ts.sticky = random.randrange(writable)
        return ts.sticky

    # -- the sender ---------------------------------------------------------------------

    async def _send_loop(self) -> None:
        while not self._closed:
            self._wake.clear()
            now = time.monotonic()
            for topic in self._working_set.evict(now, self._busy):
                self._cluster.metadata.forget((topic,))
                self._topics.pop(topic, None)
            due = self._working_set.due(now)
            if due:
                await self._refresh(due)
                continue
            next_at = min(now + self.metadata_max_age, self._working_set.next_eviction())
            by_leader: dict[int, list[tuple[str, _Batch]]] = {}
            if self._new_id is not None:  # nothing is sent under the old producer id meanwhile
                await asyncio.wait([self._new_id])
                continue
            for name, ts in self._topics.items():
                if ts.rehashing:
                    continue
                tm = self._cluster.metadata.topics.get(name)
                undeleted = tm.counts.undeleted if tm is not None and tm.counts is not None else -1
                if undeleted != ts.hashed_with and any(ps.batches for ps in ts.partitions.values()):
                    self._start_rehash(name, ts)  # hashed over counts the cache no longer has
                    continue
                for index, ps in ts.partitions.items():
                    if ps.in_flight or not ps.batches:
                        continue
                    batch = ps.batches[0]
                    ready_at = max(batch.retry_at, now if self._is_full(ps) else batch.created + self.linger)
                    if ready_at > now:
                        next_at = min(next_at, ready_at)
                        continue
                    leader = self._cluster.metadata.leader_for(name, index)
                    if leader < 0:
                        self._working_set.request_update()
                        continue
                    by_leader.setdefault(leader, []).append((name, batch))
            for leader, batches in by_leader.items():
                for name, batch in batches:
                    ts = self._topics[name]
                    ts.partition(batch.partition).in_flight = True
                    ts.in_flight += 1
                    ts.idle.clear()
                self._spawn(self._produce(leader, batches))
            next_at = min(next_at, self._working_set.next_due(now))
            try:
                async with asyncio.timeout(max(0.0, next_at - time.monotonic())):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def _busy(self, topic: str) -> bool:
        """Records of ``topic`` are not all answered yet: it stays in the working set."""
        ts = self._topics.get(topic)
        return ts is not None and bool(ts.waiting or ts.rehashing or ts.in_flight
                                       or any(ps.batches for ps in ts.partitions.values()))

    def _is_full(self, ps: _PartitionState) -> bool:
        return bool(self._flushing) or len(ps.batches) > 1 or ps.batches[0].size >= self.max_batch_size

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _payload(self, name: str, batch: _Batch) -> bytearray:
        if batch.payload is None:
            ps = self._topics[name].partition(batch.partition)
            if self.enable_idempotence:
                batch.base_sequence = ps.next_sequence
                ps.next_sequence = (ps.next_sequence + len(batch.records)) & 0x7FFFFFFF
            batch.payload = build_batch(
                [NewRecord(r.key, r.value, r.headers, r.timestamp) for r in batch.records],
                compression=self.compression, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                base_sequence=batch.base_sequence)
        return batch.payload

    async def _produce(self, leader: int, batches: list[tuple[str, _Batch]]) -> None:
        P = Produce.Request
        topics: dict[str, Any] = {}
        for name, batch in batches:
            td = topics.get(name)
            if td is None:
                td = topics[name] = P.TopicProduceData(name=name, partition_data=[],
                                                       undeleted_partition_count=batch.undeleted)
            td.partition_data.append(P.TopicProduceData.PartitionProduceData(
                index=batch.partition, records=self._payload(name, batch)))
            batch.attempts += 1
        req = P(transactional_id=None, acks=self.acks, timeout_ms=self.request_timeout_ms,
                topic_data=list(topics.values()))
        try:
            conn = await self._cluster.connection(leader)
            resp = await conn.request(Produce, req, expect_response=self.acks != 0)
        except (BrokerConnectionError, ValueError) as e:
            self._working_set.request_update()
            for name, batch in batches:
                batch.unknown = True
                self._retry(name, batch, None, f"{e}")
            self._wake.set()
            return
        finally:
            for name, batch in batches:
                ts = self._topics[name]
                ts.partition(batch.partition).in_flight = False
                ts.in_flight -= 1
                if not ts.in_flight:
                    ts.idle.set()
        if resp is None:  # acks=0: no answer comes
            for name, batch in batches:
                self._complete(name, batch, -1, -1)
        else:
            self._answered(resp, batches)
        self._wake.set()

    def _answered(self, resp: Any, batches: list[tuple[str, _Batch]]) -> None:
        endpoints = {n.node_id: BrokerEndpoint(n.node_id, n.host, n.port, n.rack)
                     for n in (resp.node_endpoints or ())}
        answers = {(t.name, p.index): p for t in resp.responses for p in t.partition_responses}
        for name, batch in batches:
            p = answers.get((name, batch.partition))
            if p is None:
                self._retry(name, batch, None, "no answer for the partition")
                continue
            code = ErrorCode(p.error_code) if p.error_code in ErrorCode._value2member_map_ else E.UNKNOWN_SERVER_ERROR
            if code == E.NONE:
                self._complete(name, batch, p.base_offset, p.log_append_time_ms)
            elif code == E.INVALID_PARTITION_METADATA:
                batch.unknown = False  # refka answers a batch it has as a duplicate first: not appended
                self._start_rehash(name, self._topics[name])
            elif code in SEQUENCE_LOST and self.enable_idempotence:
                # The broker's sequence for this partition is not the one this batch continues:
                # sent again under a new producer id, whose sequences start over.
                self._retry(name, batch, code, p.error_message or "")
                self._start_new_producer_id(f"{name}-{batch.partition}: {code.name}")
            elif code.retriable:
                hinted = False
                if code in LEADER_HINTED and p.current_leader is not None:
                    cl = p.current_leader
                    hinted = self._cluster.metadata.update_leader(
                        name, batch.partition, cl.leader_id, cl.leader_epoch, endpoints.get(cl.leader_id))
                if code in INVALID_METADATA:
                    self._working_set.request_update()
                self._retry(name, batch, code, p.error_message or "", at_once=hinted)
            else:
                self._drop(name, batch, KafkaError(code, p.error_message or ""))

    def _complete(self, name: str, batch: _Batch, base_offset: int, log_append_time: int) -> None:
        ps = self._topics[name].partition(batch.partition)
        if ps.batches and ps.batches[0] is batch:
            ps.batches.popleft()
        for i, r in enumerate(batch.records):
            if not r.future.done():
                offset = base_offset + i if base_offset >= 0 else -1
                r.future.set_result(RecordMetadata(name, batch.partition, offset,
                                                   log_append_time if log_append_time >= 0 else r.timestamp))

    def _drop(self, name: str, batch: _Batch, error: Exception) -> None:
        """Fails the batch's records; it was not appended, so its sequences are given back."""
        ps = self._topics[name].partition(batch.partition)
        if ps.batches and ps.batches[0] is batch:
            ps.batches.popleft()
        if batch.base_sequence >= 0:
            ps.next_sequence = batch.base_sequence
        for r in batch.records:
            _fail(r, error)

    def _retry(self, name: str, batch: _Batch, code: ErrorCode | None, why: str, *, at_once: bool = False) -> None:
        now = time.monotonic()
        if now - batch.created > self.delivery_timeout:
            self._drop(name, batch, KafkaTimeoutError(f"{name}-{batch.partition}: not delivered within "
                                                      f"delivery_timeout_ms after {batch.attempts} attempts ({why})"))
            return
        self.retries += 1
        if at_once:
            self.hinted_retries += 1
            batch.retry_at = now
        else:
            batch.retry_at = now + self.retry_backoff

    # -- the idempotent producer's sequences --------------------------------------------

    def _start_new_producer_id(self, why: str) -> None:
        if self._new_id is None or self._new_id.done():
            log.info("producer_id_renewed", client_id=self.client_id, producer_id=self.producer_id,
                     producer_epoch=self.producer_epoch, reason=why)
            self._new_id = asyncio.ensure_future(self._new_producer_id())
            self._tasks.add(self._new_id)
            self._wake.set()

    async def _new_producer_id(self) -> None:
        """Once nothing is in flight: a new producer id (InitProducerId), every partition's
        sequence back to 0, every batch not yet acknowledged built again under the new id."""
        try:
            for ts in list(self._topics.values()):
                await ts.idle.wait()
            await self._init_producer_id()
            for ts in self._topics.values():
                for ps in ts.partitions.values():
                    ps.next_sequence = 0
                    for batch in ps.batches:
                        batch.payload = None
                        batch.base_sequence = -1
                        batch.unknown = False
        finally:
            task, self._new_id = self._new_id, None
            if task is not None:
                self._tasks.discard(task)
            self._wake.set()

    # -- KIP-253: re-hashing a topic ----------------------------------------------------

    async def _resolve_unknown(self, name: str, ts: _TopicState) -> None:
        """Before a re-hash: each batch of unknown fate (a partition's first, the only one
        ever sent) is sent once more as it was, same producer id, sequences and KIP-253
        count. The leader answers a batch it has as a duplicate, with its offset, before it
        checks the count (handlers/produce.py): acknowledged where it is. Refused with
        INVALID_PARTITION_METADATA: not appended, re-hashed with the others under the same
        producer id. Any other answer, or none, leaves it unknown."""
        P = Produce.Request
        for index, ps in list(ts.partitions.items()):
            batch = ps.batches[0] if ps.batches else None
            if batch is None or not batch.unknown or batch.payload is None:
                continue
            leader = self._cluster.metadata.leader_for(name, index)
            if leader < 0:
                continue
            req = P(transactional_id=None, acks=self.acks, timeout_ms=self.request_timeout_ms, topic_data=[
                P.TopicProduceData(name=name, undeleted_partition_count=batch.undeleted, partition_data=[
                    P.TopicProduceData.PartitionProduceData(index=index, records=batch.payload)])])
            batch.attempts += 1
            try:
                conn = await self._cluster.connection(leader)
                resp = await conn.request(Produce, req)
            except (BrokerConnectionError, ValueError):
                continue
            p = next((p for t in resp.responses for p in t.partition_responses if p.index == index), None)
            if p is None:
                continue
            if p.error_code == E.NONE:
                self.resolved_unknown += 1
                self._complete(name, batch, p.base_offset, p.log_append_time_ms)
            elif p.error_code == E.INVALID_PARTITION_METADATA:
                self.resolved_unknown += 1
                batch.unknown = False

    def _start_rehash(self, name: str, ts: _TopicState) -> None:
        if not ts.rehashing:
            ts.rehashing = True
            self.rehashes += 1
            self._spawn(self._rehash(name, ts))

    async def _rehash(self, name: str, ts: _TopicState) -> None:
        await ts.idle.wait()  # every answer of the topic in: each batch acknowledged or refused
        await asyncio.sleep(self.retry_backoff)
        while True:  # INVALID_PARTITION_METADATA is an invalid-metadata error: the whole working set
            topics = self._working_set.topics()
            try:
                if await self._cluster.refresh(topics):
                    self._working_set.answered(topics, time.monotonic())
                break
            except KafkaConnectionError:
                await asyncio.sleep(self.retry_backoff)
        if self.enable_idempotence and self.acks != 0:
            await self._resolve_unknown(name, ts)
        if self.enable_idempotence and any(b.unknown for ps in ts.partitions.values() for b in ps.batches):
            # A batch whose answer never came may be in the log: its records go to a partition
            # again, and its sequences must not be given to other records (the broker would
            # take such a batch for a duplicate of that one, and answer its offset). A new
            # producer id makes every sequence start over.
            self._start_new_producer_id(f"{name}: re-hashed with batches of unknown fate")
            if self._new_id is not None:
                await asyncio.wait([self._new_id])
        records: list[_Record] = list(ts.waiting)
        for ps in ts.partitions.values():
            if ps.batches and ps.batches[0].base_sequence >= 0:
                ps.next_sequence = ps.batches[0].base_sequence  # refused, so never appended: see the header
            for batch in ps.batches:
                records.extend(batch.records)
            ps.batches.clear()
        records.sort(key=lambda r: r.number)
        ts.waiting = deque(records)
        ts.sticky = None
        ts.rehashing = False
        self._assign(name, ts)
        self._wake.set()


def _fail(r: _Record, error: Exception) -> None:
    if not r.future.done():
        r.future.set_exception(error)
