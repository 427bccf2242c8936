"""The reference client's consumer: aiokafka's ``AIOKafkaConsumer`` interface over
refka's codec, as a classic-group member (``group.py``) or with partitions it
assigns itself, and the hook KIP-253's ordered delivery holds records through.

    consumer = Consumer("orders", bootstrap_servers="127.0.0.1:9092", group_id="g",
                        auto_offset_reset="earliest")
    await consumer.start()
    batches = await consumer.getmany(timeout_ms=1000)      # {TopicPartition: [ConsumerRecord]}
    async for record in consumer: ...                       # one at a time
    await consumer.commit()                                 # the positions delivered so far
    await consumer.stop()                                   # commits (auto-commit), leaves the group

Three ways to have partitions, as in aiokafka:

- ``subscribe(topics)`` with a ``group_id``: the group decides (JoinGroup /
  SyncGroup, ``refka-ordered-roundrobin``). Before each rejoin the consumer
  commits its positions (with auto-commit) and gives up every partition
  (eager protocol); after each SyncGroup it refreshes the metadata, lets the
  ordered-delivery gate compute its holds, then positions the partitions at
  the group's committed offsets (OffsetFetch), else by ``auto_offset_reset``.
- ``subscribe(topics)`` without a ``group_id``: every partition of the topics,
  followed as the metadata changes (aiokafka's behaviour without a group).
- ``assign(partitions)``: exactly those, no group; with a ``group_id`` their
  committed offsets are read and ``commit`` writes as a simple consumer
  (generation -1).

All of it runs in one coordination task; the fetcher (``fetcher.py``) has its
own, and so do the metadata refresh, auto-commit (every
``auto_commit_interval_ms``) and the gate's poll (every
``heartbeat_interval_ms`` in a group). The metadata refresh follows KIP-526's
working set (``working_set.py``) over the topics in use (subscribed, assigned,
and the group's when this member leads): each is asked again as it ages, a
share at a time; a fetch error or a new subscription asks for all of them at
once; a topic out of use for ``metadata_max_idle_ms`` leaves the cache.

The ordered-delivery gate (KIP-253 seed 004 sections 7) and 8), the I/O half
of ordering.py) is a collaborator with four calls, used only in a group:
``await gate.on_assigned(member, assigned, metadata)`` after each SyncGroup,
before any record of the assignment can be delivered; ``gate.on_revoked(...)``
before each rejoin; ``gate.limit(tp)`` at each delivery (records with an
offset at or above it stay buffered, and the position only moves over
delivered records); ``await gate.poll(positions, high_watermarks)`` every
heartbeat interval, after which held records may be delivered. In a group
it is ordered_delivery.py's ``OrderedDelivery`` (which itself holds nothing
for topics without KIP-253's counts, a stock Kafka broker's, or with
``enable.ordered.delivery=false``); without a group, or with
``ordered_delivery=False`` (the consumer then delivers as a stock one does:
what a benchmark compares), ``_NoHolds``, which holds nothing. Tests hand in
their own with ``_gate_factory(cluster, group_id, key_listener)``.

Choices: ``getmany`` returns at most ``max_records`` (default
``max_poll_records``, None: all buffered) taking partitions in turn from a
rotating start, so none is always first; records of one partition are always
in offset order. Topics are not auto-created by a subscription (Metadata asks
with allow_auto_topic_creation false): a topic that does not exist yet is
picked up when it is created, at the next metadata refresh. A group error
that retrying cannot mend (JoinGroup refused for good, an error of the gate)
is raised by the next ``getmany``, not swallowed by the coordination task.

Not here: pattern subscriptions, pause/resume, a rebalance listener
(``ConsumerRebalanceListener``), ``max_poll_interval_ms``, static membership,
the incremental (cooperative) protocol, KIP-320's truncation check after a
leader change (OffsetsForLeaderEpoch on the position).

KIP-232 (seed 002; 000 where 002 is silent): commits carry each partition's
OffsetEpoch, the leader epoch of the last record delivered (or of the seek or
committed offset before any delivery) and the topic epoch of the latest
metadata (group.py); ``position_with_offset_epoch(tp)`` gives both with the
position, ``seek(tp, offset, offset_epoch)`` takes them back (an OffsetEpoch or
its ``encode()``d bytes; ValueError for anything else), and fetching waits
until the metadata has caught up with them (fetcher.py), as it does after a
committed offset. A commit the coordinator refuses as older than the last one
raises InvalidInternalMetadataError (not retried; auto-commit logs it).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from typing import Any, Protocol

import structlog

from .cluster import ClusterClient, KafkaConnectionError
from .errors import (
    CommitFailedError,
    ConsumerStoppedError,
    IllegalOperation,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
)
from .fetcher import Fetcher
from .group import GroupMember, MemberIdentity, partition_snapshot
from .metadata import ClusterMetadata
from .ordered_delivery import KeyListener, OrderedDelivery
from .structs import ConsumerRecord, OffsetAndMetadata, OffsetEpoch, TopicPartition
from .working_set import MetadataWorkingSet

log = structlog.get_logger("refka.client.consumer")


class DeliveryGate(Protocol):
    """What the consumer asks of the ordered-delivery gate (ordered_delivery.py's OrderedDelivery)."""

    async def on_assigned(self, member: MemberIdentity, assigned: Collection[TopicPartition],
                          metadata: ClusterMetadata) -> None: ...

    def on_revoked(self, revoked: Collection[TopicPartition]) -> None: ...

    def limit(self, tp: TopicPartition) -> int | None: ...

    async def poll(self, positions: Mapping[TopicPartition, tuple[int, int]],
                   high_watermarks: Mapping[TopicPartition, int]) -> None: ...


class _NoHolds:
    """The gate that holds nothing."""

    def __init__(self, cluster: ClusterClient, group_id: str, listener: Any) -> None:
        pass

    async def on_assigned(self, member: MemberIdentity, assigned: Collection[TopicPartition],
                          metadata: ClusterMetadata) -> None:
        pass

    def on_revoked(self, revoked: Collection[TopicPartition]) -> None:
        pass

    def limit(self, tp: TopicPartition) -> int | None:
        return None

    async def poll(self, positions: Mapping[TopicPartition, tuple[int, int]],
                   high_watermarks: Mapping[TopicPartition, int]) -> None:
        pass


GateFactory = Callable[[ClusterClient, str, Any], DeliveryGate]


class Consumer:
    def __init__(
        self,
        *topics: str,
        bootstrap_servers: str | Iterable[str] = "127.0.0.1:9092",
        client_id: str | None = None,
        group_id: str | None = None,
        key_listener: KeyListener | None = None,
        ordered_delivery: bool = True,
        auto_offset_reset: str = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        session_timeout_ms: int = 45000,
        heartbeat_interval_ms: int = 3000,
        rebalance_timeout_ms: int = 300000,
        max_poll_records: int | None = None,
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 52428800,
        max_partition_fetch_bytes: int = 1048576,
        isolation_level: str = "read_uncommitted",
        request_timeout_ms: int = 40000,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 300000,
        metadata_max_idle_ms: int = 300000,
        _gate_factory: GateFactory | None = None,
    ) -> None:
        if max_poll_records is not None and max_poll_records < 1:
            raise ValueError("max_poll_records must be a positive integer")
        self.client_id = client_id or f"refka-consumer-{id(self):x}"
        self.group_id = group_id
        self.enable_auto_commit = enable_auto_commit and group_id is not None
        self.auto_commit_interval = auto_commit_interval_ms / 1000
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self.max_poll_records = max_poll_records
        self.request_timeout = request_timeout_ms / 1000
        self.retry_backoff = retry_backoff_ms / 1000
        self.metadata_max_age = metadata_max_age_ms / 1000
        self._working_set = MetadataWorkingSet(max_age=self.metadata_max_age, max_idle=metadata_max_idle_ms / 1000,
                                               retry_backoff=self.retry_backoff)
        self._cluster = ClusterClient(bootstrap_servers, self.client_id, request_timeout=self.request_timeout,
                                      allow_auto_topic_creation=False)
        self._group = None if group_id is None else GroupMember(
            self._cluster, group_id, session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms, heartbeat_interval_ms=heartbeat_interval_ms,
            retry_backoff_ms=retry_backoff_ms, request_timeout_ms=request_timeout_ms)
        if _gate_factory is None:
            _gate_factory = OrderedDelivery if group_id is not None and ordered_delivery else _NoHolds
        self._gate: DeliveryGate = _gate_factory(self._cluster, group_id or "", key_listener)
        self._giving_up = False  # _give_up_group is committing: deliver nothing
        self._fetcher = Fetcher(
            self._cluster, limit=self._limit, on_metadata_wanted=self._want_metadata,
            on_stale_counts=self._on_stale_counts, auto_offset_reset=auto_offset_reset,
            isolation_level=isolation_level, fetch_max_wait_ms=fetch_max_wait_ms, fetch_min_bytes=fetch_min_bytes,
            fetch_max_bytes=fetch_max_bytes, max_partition_fetch_bytes=max_partition_fetch_bytes,
            retry_backoff_ms=retry_backoff_ms, request_timeout_ms=request_timeout_ms)
        self._subscription: frozenset[str] | None = frozenset(topics) if topics else None
        self._manual: frozenset[TopicPartition] | None = None
        self._manual_tokens: dict[TopicPartition, int] = {}
        self._changed = asyncio.Event()  # the subscription or the manual assignment changed
        self._metadata_wanted = asyncio.Event()
        self._in_group = False  # the fetcher's partitions are the group's current assignment
        self._snapshot: dict[str, tuple[frozenset[int], int]] | None = None  # subscribe without a group
        self._committed: dict[TopicPartition, int] = {}  # the positions last committed
        self._fatal: Exception | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._started = False
        self._closed = False

    # -- starting and stopping ----------------------------------------------------------

    async def start(self) -> None:
        topics = self._topics_in_use()
        self._working_set.use(topics, time.monotonic())
        if await self._cluster.refresh(topics):
            self._working_set.answered(topics, time.monotonic())
        self._started = True
        for name, coro in (("fetcher", self._fetcher.run()), ("coordination", self._coordinate()),
                           ("metadata", self._metadata_loop()), ("auto-commit", self._auto_commit_loop()),
                           ("gate", self._gate_loop())):
            self._tasks.append(asyncio.create_task(coro, name=f"{self.client_id}-{name}"))

    async def stop(self) -> None:
        """Commits the positions (auto-commit), leaves the group, closes the connections."""
        if self._closed:
            return
        self._closed = True
        self._fetcher.records_ready.set()  # wakes getmany waiters: they find the consumer stopped
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        try:
            if self._started and self.enable_auto_commit:
                await self._commit_positions("stop")
            if self._group is not None:
                await self._group.leave()
        finally:
            if self._group is not None:
                await self._group.close()
            await self._cluster.close()

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- what is consumed -----------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        topics = frozenset(topics)
        if not topics:
            raise ValueError("subscribe needs at least one topic")
        self._subscription, self._manual = topics, None
        self._changed.set()
        self._want_metadata()

    def unsubscribe(self) -> None:
        self._subscription = None
        self._manual = None
        self._changed.set()

    def subscription(self) -> frozenset[str]:
        return self._subscription or frozenset()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Exactly these partitions, no group; positions from the committed offsets (with a
        group_id), else ``auto_offset_reset``; ``seek`` may follow at once."""
        manual = frozenset(TopicPartition(*tp) for tp in partitions)
        self._subscription, self._manual = None, manual
        self._in_group = False
        self._manual_tokens = self._fetcher.assign(manual, committed_first=self._group is not None)
        self._changed.set()
        self._want_metadata()

    def assignment(self) -> frozenset[TopicPartition]:
        return frozenset(self._fetcher.states)

    def partitions_for_topic(self, topic: str) -> frozenset[int] | None:
        tm = self._cluster.metadata.topics.get(topic)
        return None if tm is None else frozenset(tm.partitions)

    # -- records --------------------------------------------------------------------------

    async def getmany(self, *partitions: TopicPartition, timeout_ms: int = 0,
                      max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        """The records delivered now, by partition; waits up to ``timeout_ms`` for some."""
        if max_records is not None and max_records < 1:
            raise ValueError("max_records must be a positive integer")
        return await self._records(partitions, timeout_ms / 1000, max_records or self.max_poll_records)

    async def getone(self, *partitions: TopicPartition) -> ConsumerRecord:
        """The next record (waits as long as it takes)."""
        got = await self._records(partitions, None, 1)
        return next(iter(got.values()))[0]

    def __aiter__(self) -> Consumer:
        if self._closed:
            raise ConsumerStoppedError()
        return self

    async def __anext__(self) -> ConsumerRecord:
        try:
            return await self.getone()
        except ConsumerStoppedError:
            raise StopAsyncIteration from None

    async def _records(self, partitions: Collection[TopicPartition], timeout: float | None,
                       max_records: int | None) -> dict[TopicPartition, list[ConsumerRecord]]:
        ready = self._fetcher.records_ready
        try:
            async with asyncio.timeout(timeout):
                while True:
                    if self._closed:
                        raise ConsumerStoppedError()
                    if self._fatal is not None:
                        raise self._fatal
                    ready.clear()
                    got = self._fetcher.drain(partitions, max_records)
                    if got:
                        return got
                    await ready.wait()
        except TimeoutError:
            return {}

    def _limit(self, tp: TopicPartition) -> int | None:
        if self._giving_up:  # the positions being committed are final: nothing more is delivered
            return 0
        return self._gate.limit(tp) if self._in_group else None

    # -- positions ------------------------------------------------------------------------

    def _state(self, tp: TopicPartition) -> Any:
        s = self._fetcher.states.get(tp)
        if s is None:
            raise IllegalStateError(f"partition {tp} is not assigned")
        return s

    async def position(self, tp: TopicPartition) -> int:
        """The offset of the next record to deliver (waits until it is known)."""
        self._state(tp)
        if not await self._fetcher.wait_positions((tp,), self.request_timeout):
            raise KafkaTimeoutError(f"no position for {tp} within request_timeout_ms")
        s = self._state(tp)
        if s.position is None:  # reassigned while waiting
            raise IllegalStateError(f"partition {tp} was revoked")
        return int(s.position)

    def highwater(self, tp: TopicPartition) -> int | None:
        hw = self._state(tp).high_watermark
        return None if hw < 0 else int(hw)

    def last_stable_offset(self, tp: TopicPartition) -> int | None:
        lso = self._state(tp).last_stable_offset
        return None if lso < 0 else int(lso)

    async def position_with_offset_epoch(self, tp: TopicPartition) -> OffsetAndMetadata:
        """KIP-232: the position with its OffsetEpoch (the leader epoch of the last record
        delivered, the topic epoch of the latest metadata), to store with an offset kept
        outside Kafka and give back to ``seek``."""
        position = await self.position(tp)
        tm = self._cluster.metadata.topics.get(tp.topic)
        return OffsetAndMetadata(position, "", int(self._state(tp).epoch), tm.topic_epoch if tm is not None else -1)

    def seek(self, tp: TopicPartition, offset: int,
             offset_epoch: OffsetEpoch | bytes | bytearray | str | None = None) -> None:
        """The next record delivered from ``tp`` is at ``offset``. With ``offset_epoch``
        (KIP-232: from ``position_with_offset_epoch``, or its encoded bytes) fetching waits
        until the metadata is at least as new, and a commit carries its leader epoch until a
        record is delivered."""
        if not isinstance(offset, int) or offset < 0:
            raise ValueError("offset must be a non-negative integer")
        if offset_epoch is not None and not isinstance(offset_epoch, OffsetEpoch):
            offset_epoch = OffsetEpoch.decode(offset_epoch)
        self._state(tp)
        self._fetcher.seek(tp, offset, offset_epoch)

    async def seek_to_beginning(self, *partitions: TopicPartition) -> bool:
        return await self._seek_to("earliest", partitions)

    async def seek_to_end(self, *partitions: TopicPartition) -> bool:
        return await self._seek_to("latest", partitions)

    async def _seek_to(self, strategy: str, partitions: Collection[TopicPartition]) -> bool:
        tps = list(partitions or self._fetcher.states)
        for tp in tps:
            self._state(tp)
        self._fetcher.request_reset(tps, strategy)
        return await self._fetcher.wait_positions(tps, self.request_timeout)

    # -- offsets --------------------------------------------------------------------------

    async def committed(self, tp: TopicPartition) -> int | None:
        """The group's committed offset of ``tp``, or None."""
        group = self._need_group()
        om = (await group.fetch_committed([tp])).get(tp)
        return None if om is None else om.offset

    async def commit(self, offsets: Mapping[TopicPartition, Any] | None = None) -> None:
        """Commits ``offsets`` (offset, (offset, metadata) or OffsetAndMetadata per partition),
        by default the position of every assigned partition."""
        group = self._need_group()
        if offsets is None:
            if not self._fetcher.states:
                raise IllegalStateError("no partitions are assigned")
            to_commit = {tp: OffsetAndMetadata(pos, "", epoch) for tp, (pos, epoch) in self._fetcher.positions().items()}
        else:
            to_commit = {}
            for tp, value in offsets.items():
                self._state(tp)
                to_commit[tp] = _offset_and_metadata(value)
        await group.commit(to_commit, in_group=self._in_group)
        self._committed.update({tp: om.offset for tp, om in to_commit.items()})

    def _need_group(self) -> GroupMember:
        if self._group is None:
            raise IllegalOperation("needs a group_id")
        return self._group

    async def _commit_positions(self, why: str) -> None:
        """Auto-commit: the positions that moved since the last commit; failures are logged."""
        if self._group is None:
            return
        positions = self._fetcher.positions()
        changed = {tp: OffsetAndMetadata(pos, "", epoch) for tp, (pos, epoch) in positions.items()
                   if self._committed.get(tp) != pos}
        if not changed:
            return
        try:
            await self._group.commit(changed, in_group=self._in_group)
        except (CommitFailedError, KafkaError, KafkaTimeoutError) as e:
            log.warning("auto_commit_failed", group=self.group_id, why=why, error=str(e))
            return
        self._committed.update({tp: om.offset for tp, om in changed.items()})

    # -- the tasks ------------------------------------------------------------------------

    def _topics_in_use(self) -> set[str]:
        topics = set(self._subscription or ())
        topics.update(tp.topic for tp in self._manual or ())
        topics.update(tp.topic for tp in self._fetcher.states)
        if self._group is not None:
            topics.update(self._group.group_topics)
        return topics

    def _want_metadata(self) -> None:
        self._metadata_wanted.set()

    def _on_stale_counts(self, topic: str) -> None:
        """A Fetch answered INVALID_PARTITION_METADATA: the refresh it asks for decides
        whether the partitions changed since the join (GroupMember.metadata_changed)."""
        log.info("partition_counts_stale", topic=topic)
        self._want_metadata()

    async def _refresh(self, topics: Collection[str] | None = None) -> bool:
        """Metadata for ``topics`` (default: every topic in use); False when no broker answered
        (an answer older than the cache counts as one: the cache is newer still)."""
        names = self._topics_in_use() if topics is None else topics
        try:
            if await self._cluster.refresh(names):
                self._working_set.answered(names, time.monotonic())
        except KafkaConnectionError as e:
            log.info("metadata_refresh_failed", error=str(e))
            return False
        self._fetcher.wake()
        return True

    async def _metadata_loop(self) -> None:
        ws = self._working_set
        while True:
            now = time.monotonic()
            in_use = self._topics_in_use()
            ws.use(in_use, now)
            self._cluster.metadata.forget(ws.evict(now, in_use.__contains__))
            if self._metadata_wanted.is_set():
                self._metadata_wanted.clear()
                ws.request_update()
            due = ws.due(now)
            if not due:
                wake_at = min(ws.next_due(now), ws.next_eviction(), now + self.metadata_max_age)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.0, wake_at - now)):
                        await self._metadata_wanted.wait()
                continue
            ws.attempted(now)  # asked again after the back-off when it fails
            if not await self._refresh(due):
                continue
            if self._in_group and self._group is not None:
                self._group.metadata_changed()
            elif self._subscription is not None and self._group is None:
                if partition_snapshot(self._cluster.metadata, self._subscription) != self._snapshot:
                    self._changed.set()

    async def _coordinate(self) -> None:
        while True:
            self._changed.clear()
            try:
                if self._subscription is not None and self._group is not None:
                    await self._rebalance(self._group, self._subscription)
                    await _first(self._changed.wait(), self._group.rejoin.wait())
                    continue
                await self._give_up_group()
                if self._group is not None and self._group.state.member_id:
                    await self._group.leave()  # not subscribed (any more): not a member either
                if self._subscription is not None:
                    await self._assign_all(self._subscription)
                elif self._manual is not None and self._group is not None:
                    committed = await self._group.fetch_committed(self._manual)
                    self._fetcher.apply_committed(committed, self._manual_tokens)
                elif self._manual is None:
                    self._fetcher.assign((), committed_first=False)
            except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as e:
                if not isinstance(e, KafkaError) or e.retriable:
                    log.info("coordination_retry", error=str(e))
                    await asyncio.sleep(self.retry_backoff)
                    continue
                log.error("coordination_failed", group=self.group_id, error=str(e))
                self._fatal = e
                self._fetcher.records_ready.set()
            except Exception as e:  # a bug (ours or the gate's): getmany raises it rather than wait for ever
                log.exception("coordination_crashed", group=self.group_id)
                self._fatal = e
                self._fetcher.records_ready.set()
            await self._changed.wait()

    async def _rebalance(self, group: GroupMember, topics: frozenset[str]) -> None:
        """Gives up the partitions, joins, and takes the new assignment (eager protocol)."""
        await self._give_up_group()
        assigned = await group.join(topics)
        tps = [TopicPartition(t, p) for t, ps in assigned.items() for p in ps]
        while not await self._refresh():
            await asyncio.sleep(self.retry_backoff)
        group.joined_metadata()
        await self._gate.on_assigned(group.identity, tps, self._cluster.metadata)
        tokens = self._fetcher.assign(tps, committed_first=True)
        self._in_group = True
        self._committed = {}
        committed = await group.fetch_committed(tps)
        self._fetcher.apply_committed(committed, tokens)

    async def _give_up_group(self) -> None:
        """Commits the positions (auto-commit) and gives up every partition. Nothing is
        delivered from the moment the positions are taken: a record delivered while the
        commit is on its way would be delivered again by whoever gets its partition."""
        if not self._in_group:
            return
        self._giving_up = True
        try:
            if self.enable_auto_commit:
                await self._commit_positions("rebalance")
            revoked = list(self._fetcher.states)
            self._in_group = False
            self._fetcher.assign((), committed_first=False)
            self._gate.on_revoked(revoked)
        finally:
            self._giving_up = False

    async def _assign_all(self, topics: frozenset[str]) -> None:
        """Without a group: every partition of the subscribed topics."""
        md = self._cluster.metadata
        self._snapshot = partition_snapshot(md, topics)
        tps = [TopicPartition(t, p) for t in sorted(topics) if t in md.topics for p in sorted(md.topics[t].partitions)]
        if frozenset(tps) != frozenset(self._fetcher.states):
            self._fetcher.assign(tps, committed_first=False)

    async def _auto_commit_loop(self) -> None:
        if not self.enable_auto_commit:
            return
        while True:
            await asyncio.sleep(self.auto_commit_interval)
            await self._commit_positions("interval")

    async def _gate_loop(self) -> None:
        if self._group is None:
            return
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            if not self._in_group:
                continue
            try:
                await self._gate.poll(self._fetcher.positions(), self._fetcher.high_watermarks())
            except Exception as e:  # the gate's trouble must not stop the consumer; it asks again
                log.warning("ordered_delivery_poll_failed", group=self.group_id, error=repr(e))
            self._fetcher.records_ready.set()  # holds may have been released


def _offset_and_metadata(value: Any) -> OffsetAndMetadata:
    if isinstance(value, OffsetAndMetadata):
        return value
    if isinstance(value, int):
        return OffsetAndMetadata(value, "")
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], int):
        return OffsetAndMetadata(value[0], str(value[1] or ""))
    raise ValueError(f"an offset to commit is an int, (offset, metadata) or OffsetAndMetadata, not {value!r}")


async def _first(*waits: Awaitable[Any]) -> None:
    """Returns when the first of ``waits`` does; cancels the others."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
