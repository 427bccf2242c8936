"""The reference consumer's fetcher: for each assigned partition its position
and the records fetched ahead of it, the Fetch requests to the leaders, and
the ListOffsets that set a position when there is none.

Per partition (``PartitionState``): ``position`` (the offset of the next
record to deliver; None until known), the leader epoch of the last record
delivered (KIP-320: what a commit carries), the records fetched and not yet
delivered (in offset order, all >= position), ``next_fetch`` (where the next
Fetch reads from: past the last whole batch fetched), and the high watermark,
last stable offset and log start offset of the last answer.

The rules:

- A partition is fetched only when it has no records buffered, its position
  is known, and no error back-off is running; one Fetch at a time per leader,
  carrying every such partition that broker leads (Kafka's fetcher). So a
  partition whose records are held (``limit``, below) is not fetched further:
  what is buffered is bounded by one answer per partition.
- Fetch is sent at the highest version both sides serve (v13+ names topics by
  id, so a topic whose id the metadata did not give caps it at v12), without
  a fetch session (session_epoch -1: every request names every partition),
  with current_leader_epoch from the metadata (KIP-320) and, for a topic whose
  Metadata carried refka's KIP-253 counts, its undeleted_partition_count.
- Answers: records are decoded with refka's codec (records.py), the batches
  checked by CRC; records below the fetch position (a batch read from its
  middle) are dropped; control batches are never delivered; with
  read_committed, records of aborted transactions are dropped (Kafka's
  algorithm over the answer's aborted_transactions and the abort markers).
  A batch cut off at the end of an answer is fetched again whole.
  OFFSET_OUT_OF_RANGE resets the position by ``auto_offset_reset`` ("none":
  the error reaches ``getmany``). NOT_LEADER_OR_FOLLOWER and
  FENCED_LEADER_EPOCH with a KIP-951 current_leader newer than the cache
  move the partition to that leader at once (the next Fetch goes there, no
  back-off); these and the other invalid-metadata errors ask for a metadata
  refresh; INVALID_PARTITION_METADATA (KIP-253) also tells the consumer
  (``on_stale_counts``), which may rejoin its group. Other errors back the
  partition off for retry_backoff_ms.
- Delivery (``drain``): records in offset order, only those with offset below
  ``limit(tp)`` (the ordered-delivery gate's; None: no limit); the position
  moves past each record delivered. Once a partition's buffer is empty its
  position moves to ``next_fetch``: what lies between is control or aborted
  records, which are never delivered.
- A seek, a reset or a new assignment bumps the partition's ``token``: an
  answer to a request sent before it is ignored.
- KIP-232 (seed 002): a position taken from a committed offset, or from a
  ``seek`` with an OffsetEpoch, keeps that offset's (topic epoch, leader epoch)
  as ``awaited`` and is not fetched while the metadata cache is behind them
  (``ClusterMetadata.behind``); each such check asks for a metadata refresh, so
  the consumer refreshes until the cache has caught up. The leader epoch is
  also the partition's until a record is delivered, so a commit before any
  delivery carries it (seed 002: "the leader_epoch from seek(...) or
  OffsetFetchResponse"). A cache with a newer topic epoch than the offset's
  does not wait (the offset's topic is gone; what to do with such an offset
  is the group's, not the fetcher's).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import struct
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

import structlog

from refka.protocol import ErrorCode
from refka.protocol.messages.fetch import ISOLATION_READ_COMMITTED, ISOLATION_READ_UNCOMMITTED, Fetch
from refka.protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ListOffsets
from refka.protocol.records import (
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    TimestampType,
    iter_records,
    read_header,
)

from .cluster import ClusterClient
from .connection import BrokerConnectionError
from .errors import KafkaError, NoOffsetForPartitionError, OffsetOutOfRangeError
from .metadata import BrokerEndpoint
from .structs import ConsumerRecord, OffsetAndMetadata, OffsetEpoch, TopicPartition

log = structlog.get_logger("refka.client.fetcher")
E = ErrorCode
ISOLATION = {"read_uncommitted": ISOLATION_READ_UNCOMMITTED, "read_committed": ISOLATION_READ_COMMITTED}
RESET_TIMESTAMP = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP}
# Errors after which the metadata is asked again (Java's InvalidMetadataException).
INVALID_METADATA = frozenset({
    E.NOT_LEADER_OR_FOLLOWER, E.UNKNOWN_TOPIC_OR_PARTITION, E.LEADER_NOT_AVAILABLE,
    E.FENCED_LEADER_EPOCH, E.UNKNOWN_LEADER_EPOCH, E.KAFKA_STORAGE_ERROR,
    E.INVALID_PARTITION_METADATA, E.UNKNOWN_TOPIC_ID, E.INCONSISTENT_TOPIC_ID,
})
LEADER_HINTED = frozenset({E.NOT_LEADER_OR_FOLLOWER, E.FENCED_LEADER_EPOCH})  # KIP-951
_NO_TOPIC_ID = b"\x00" * 16
_CONTROL_KEY = struct.Struct(">hh")  # a control record's key: version, type (0 abort, 1 commit)
_ABORT_MARKER = 0
COMMITTED = "committed"  # the reset "strategy" of a partition waiting for the group's committed offset
_tokens = itertools.count(1)  # unique across partitions and assignments: an old answer never matches


# -- decoding an answer's records (pure) ------------------------------------------------


def decode_records(tp: TopicPartition, buf: Any, fetch_offset: int, *, read_committed: bool = False,
                   aborted: Iterable[tuple[int, int]] = ()) -> tuple[list[ConsumerRecord], int]:
    """The records of ``buf`` (one partition's answer) at or after ``fetch_offset``, in
    offset order, and the offset after the last whole batch (``fetch_offset`` when none).
    ``aborted``: the answer's (producer_id, first_offset) pairs, used with read_committed.
    Raises CorruptRecordError when the first batch is bad (a later bad batch ends the
    answer there: the next fetch starts at it, and then it is the first)."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    out: list[ConsumerRecord] = []
    next_offset = fetch_offset
    pending = sorted((first, pid) for pid, first in aborted) if read_committed else []
    aborting: set[int] = set()
    pos, end = 0, len(mv)
    while end - pos >= LOG_OVERHEAD:
        length = int.from_bytes(mv[pos + 8:pos + 12], "big", signed=True) + LOG_OVERHEAD
        if length > end - pos:
            break  # the answer's size limit cut this batch: fetched again whole
        try:
            header = read_header(mv[pos:pos + length], 0, validate_crc=True)
        except CorruptRecordError:
            if not out and next_offset == fetch_offset:
                raise
            break
        batch = mv[pos:pos + length]
        pos += length
        next_offset = max(next_offset, header.next_offset)
        if header.next_offset <= fetch_offset:
            continue
        if read_committed and header.is_transactional:
            while pending and pending[0][0] <= header.last_offset:
                aborting.add(heapq.heappop(pending)[1])
            if header.is_control:
                if header.producer_id in aborting and _is_abort_marker(batch):
                    aborting.discard(header.producer_id)
                continue
            if header.producer_id in aborting:
                continue
        if header.is_control:
            continue
        out.extend(_records(tp, header, batch, fetch_offset))
    return out, next_offset


def _is_abort_marker(batch: memoryview) -> bool:
    for r in iter_records(batch):
        if r.key is not None and len(r.key) >= 4:
            return _CONTROL_KEY.unpack_from(r.key)[1] == _ABORT_MARKER
    return False


def _records(tp: TopicPartition, header: BatchHeader, batch: memoryview, fetch_offset: int) -> list[ConsumerRecord]:
    log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    ts_type = int(header.timestamp_type)
    out = []
    for r in iter_records(batch):
        offset = header.base_offset + r.offset_delta
        if offset < fetch_offset:
            continue
        out.append(ConsumerRecord(
            tp.topic, tp.partition, offset,
            header.max_timestamp if log_append else header.base_timestamp + r.timestamp_delta,
            ts_type, r.key, r.value, None,
            -1 if r.key is None else len(r.key), -1 if r.value is None else len(r.value),
            r.headers, header.partition_leader_epoch))
    return out


# -- per partition ------------------------------------------------------------------------


class PartitionState:
    __slots__ = ("awaited", "epoch", "error", "high_watermark", "last_stable_offset", "log_start_offset", "next_fetch",
                 "position", "records", "reset", "retry_at", "token")

    def __init__(self) -> None:
        self.position: int | None = None
        self.epoch = -1  # the leader epoch of the last record delivered (or of the committed offset)
        self.records: deque[ConsumerRecord] = deque()
        self.next_fetch = -1
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        self.reset: str | None = None  # "earliest" / "latest": a ListOffsets will set the position
        self.retry_at = 0.0
        self.token = next(_tokens)
        self.error: Exception | None = None  # raised by the next getmany
        self.awaited: tuple[int, int] | None = None  # KIP-232: (topic, leader) epochs the metadata must reach

    def seek(self, offset: int, epoch: int = -1, awaited: tuple[int, int] | None = None) -> None:
        self.position = self.next_fetch = offset
        self.epoch = epoch
        self.awaited = awaited if awaited is not None and max(awaited) >= 0 else None
        self.records.clear()
        self.reset = None
        self.retry_at = 0.0
        self.token = next(_tokens)

    def request_reset(self, strategy: str) -> None:
        self.position = None
        self.awaited = None
        self.records.clear()
        self.reset = strategy
        self.retry_at = 0.0
        self.token = next(_tokens)


class Fetcher:
    def __init__(self, cluster: ClusterClient, *, limit: Callable[[TopicPartition], int | None],
                 on_metadata_wanted: Callable[[], None], on_stale_counts: Callable[[str], None],
                 auto_offset_reset: str = "latest", isolation_level: str = "read_uncommitted",
                 fetch_max_wait_ms: int = 500, fetch_min_bytes: int = 1, fetch_max_bytes: int = 52428800,
                 max_partition_fetch_bytes: int = 1048576, retry_backoff_ms: int = 100,
                 request_timeout_ms: int = 40000) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(f"auto_offset_reset must be earliest, latest or none, not {auto_offset_reset!r}")
        if isolation_level not in ISOLATION:
            raise ValueError(f"isolation_level must be read_uncommitted or read_committed, not {isolation_level!r}")
        self._cluster = cluster
        self._limit = limit
        self._want_metadata = on_metadata_wanted
        self._on_stale_counts = on_stale_counts
        self.auto_offset_reset = auto_offset_reset
        self.isolation_level = ISOLATION[isolation_level]
        self.max_wait_ms = fetch_max_wait_ms
        self.min_bytes = fetch_min_bytes
        self.max_bytes = fetch_max_bytes
        self.partition_max_bytes = max_partition_fetch_bytes
        self.retry_backoff = retry_backoff_ms / 1000
        self.request_timeout = request_timeout_ms / 1000
        self.states: dict[TopicPartition, PartitionState] = {}
        self.records_ready = asyncio.Event()  # set when records or an error arrive, or holds may have moved
        self._wake = asyncio.Event()
        self._busy: set[int] = set()  # leaders with a Fetch in flight
        self._resetting: set[TopicPartition] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._rotation = itertools.count()
        self._positioned_event = asyncio.Event()  # a position was set
        self.hinted_moves = 0  # partitions moved to a KIP-951 leader hint (tests read it)

    # -- the assignment -------------------------------------------------------------------

    def assign(self, partitions: Collection[TopicPartition], *, committed_first: bool) -> dict[TopicPartition, int]:
        """Replaces the assignment. With ``committed_first`` the partitions wait for
        ``apply_committed`` (the group's committed offsets), else they take the reset policy.
        Returns each partition's token, for ``apply_committed``."""
        self.states = {}
        for tp in partitions:
            s = self.states[tp] = PartitionState()
            if committed_first:
                s.request_reset(COMMITTED)
            else:
                self._reset_by_policy(tp, s)
        self.wake()
        return {tp: s.token for tp, s in self.states.items()}

    def apply_committed(self, committed: Mapping[TopicPartition, OffsetAndMetadata],
                        tokens: Mapping[TopicPartition, int]) -> None:
        """Positions the partitions still waiting for their committed offset (not sought since)."""
        for tp, token in tokens.items():
            s = self.states.get(tp)
            if s is None or s.token != token or s.reset != COMMITTED:
                continue
            om = committed.get(tp)
            if om is not None:
                s.seek(om.offset, om.leader_epoch, (om.topic_epoch, om.leader_epoch))
            else:
                self._reset_by_policy(tp, s)
        self._positioned()

    def _reset_by_policy(self, tp: TopicPartition, s: PartitionState) -> None:
        if self.auto_offset_reset == "none":
            s.request_reset(COMMITTED)  # no position, and none will come: the error says why
            s.error = NoOffsetForPartitionError(f"{tp}: no committed offset and auto_offset_reset='none'")
            self.records_ready.set()
        else:
            s.request_reset(self.auto_offset_reset)

    def seek(self, tp: TopicPartition, offset: int, offset_epoch: OffsetEpoch | None = None) -> None:
        if offset_epoch is None:
            self.states[tp].seek(offset)
        else:
            self.states[tp].seek(offset, offset_epoch.leader_epoch, (offset_epoch.topic_epoch, offset_epoch.leader_epoch))
        self._positioned()

    def request_reset(self, partitions: Collection[TopicPartition], strategy: str) -> None:
        """Positions ``partitions`` at their start or end (``wait_positions`` waits for it)."""
        for tp in partitions:
            self.states[tp].request_reset(strategy)
        self.wake()

    async def wait_positions(self, partitions: Collection[TopicPartition], timeout: float) -> bool:
        """True once every one of ``partitions`` still assigned has a position; False after ``timeout``."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    self._positioned_event.clear()
                    if all(tp not in self.states or self.states[tp].position is not None for tp in partitions):
                        return True
                    await self._positioned_event.wait()
        except TimeoutError:
            return False

    def _positioned(self) -> None:
        self._positioned_event.set()
        self.wake()

    def wake(self) -> None:
        self._wake.set()

    def positions(self) -> dict[TopicPartition, tuple[int, int]]:
        return {tp: (s.position, s.epoch) for tp, s in self.states.items() if s.position is not None}

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {tp: s.high_watermark for tp, s in self.states.items() if s.high_watermark >= 0}

    # -- delivery -------------------------------------------------------------------------

    def drain(self, partitions: Collection[TopicPartition], max_records: int | None) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Takes the deliverable records of ``partitions`` (all assigned when empty), at most
        ``max_records`` in all; raises the first partition error found."""
        tps = [tp for tp in (partitions or self.states) if tp in self.states]
        if tps:
            start = next(self._rotation) % len(tps)  # no partition always first under max_records
            tps = tps[start:] + tps[:start]
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        left = max_records if max_records is not None else -1
        for tp in tps:
            s = self.states[tp]
            if s.error is not None:
                error, s.error = s.error, None
                raise error
            if left == 0:
                break
            limit = self._limit(tp)
            buf = s.records
            taken: list[ConsumerRecord] = []
            if limit is None and left < 0:  # all of it: no record at a time
                taken = list(buf)
                buf.clear()
            while buf and left != 0 and (limit is None or buf[0].offset < limit):
                taken.append(buf.popleft())
                left -= 1
            if taken:
                s.position = taken[-1].offset + 1
                s.epoch = taken[-1].leader_epoch
                out[tp] = taken
            if not buf and s.position is not None and s.reset is None:
                s.position = max(s.position, s.next_fetch)
                self._wake.set()
        return out

    # -- the fetch loop -------------------------------------------------------------------

    async def run(self) -> None:
        try:
            while True:
                self._wake.clear()
                next_at = self._send_ready(time.monotonic())
                try:
                    async with asyncio.timeout(None if next_at is None else max(0.0, next_at - time.monotonic())):
                        await self._wake.wait()
                except TimeoutError:
                    pass
        finally:
            for t in list(self._tasks):
                t.cancel()

    def _send_ready(self, now: float) -> float | None:
        md = self._cluster.metadata
        fetches: dict[int, list[TopicPartition]] = {}
        resets: dict[int, list[TopicPartition]] = {}
        next_at: float | None = None
        for tp, s in self.states.items():
            if s.retry_at > now:
                next_at = s.retry_at if next_at is None else min(next_at, s.retry_at)
                continue
            if s.error is not None or tp in self._resetting or s.reset == COMMITTED:
                continue
            if s.reset is None and (s.position is None or s.records):
                continue
            if s.reset is None and s.awaited is not None:
                if md.behind(tp.topic, tp.partition, *s.awaited):
                    self._want_metadata()  # KIP-232: refreshed until the cache has caught up
                    continue
                s.awaited = None
            leader = md.leader_for(tp.topic, tp.partition)
            if leader < 0 or leader not in md.brokers:
                self._want_metadata()  # each refresh wakes this loop
                continue
            (resets if s.reset is not None else fetches).setdefault(leader, []).append(tp)
        for leader, tps in resets.items():
            self._resetting.update(tps)
            self._spawn(self._list_offsets(leader, tps))
        for leader, tps in fetches.items():
            if leader not in self._busy:
                self._busy.add(leader)
                self._spawn(self._fetch(leader, tps))
        return next_at

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _back_off(self, tps: Iterable[TopicPartition], tokens: Mapping[TopicPartition, int]) -> None:
        at = time.monotonic() + self.retry_backoff
        for tp in tps:
            s = self.states.get(tp)
            if s is not None and s.token == tokens.get(tp):
                s.retry_at = at

    async def _fetch(self, leader: int, tps: list[TopicPartition]) -> None:
        tps = [tp for tp in tps if tp in self.states]  # an assignment may have come meanwhile
        tokens = {tp: self.states[tp].token for tp in tps}
        offsets = {tp: self.states[tp].next_fetch for tp in tps}
        try:
            conn = await self._cluster.connection(leader)
            req, v = self._fetch_request(offsets, conn.version_for(Fetch))
            if req is None:
                return
            resp = await conn.request(Fetch, req, v, timeout=self.request_timeout + self.max_wait_ms / 1000)
        except (BrokerConnectionError, ValueError) as e:
            log.info("fetch_failed", leader=leader, error=str(e))
            self._want_metadata()
            self._back_off(tps, tokens)
            return
        finally:
            self._busy.discard(leader)
            self._wake.set()
        if v >= 7 and resp.error_code != E.NONE:
            log.info("fetch_refused", leader=leader, error=ErrorCode(resp.error_code).name)
            self._back_off(tps, tokens)
            return
        endpoints = {n.node_id: BrokerEndpoint(n.node_id, n.host, n.port, n.rack)
                     for n in (resp.node_endpoints or ())}
        names = {tm.topic_id: name for name, tm in self._cluster.metadata.topics.items()}
        for t in resp.responses:
            topic = t.topic if v < 13 else names.get(t.topic_id, "")
            for p in t.partitions:
                tp = TopicPartition(topic, p.partition_index)
                s = self.states.get(tp)
                if s is None or tp not in tokens or s.token != tokens[tp] or s.next_fetch != offsets[tp]:
                    continue  # sought, reset or revoked meanwhile
                self._answered(tp, s, p, endpoints)

    def _fetch_request(self, offsets: Mapping[TopicPartition, int], v: int) -> tuple[Any, int]:
        """The Fetch for ``offsets`` (None when the metadata no longer has any of them)."""
        md = self._cluster.metadata
        known = {tp: o for tp, o in offsets.items()
                 if tp.topic in md.topics and tp.partition in md.topics[tp.topic].partitions}
        if not known:
            return None, v
        if v >= 13 and any(md.topics[tp.topic].topic_id == _NO_TOPIC_ID for tp in known):
            v = 12
        R = Fetch.Request
        T = R.FetchTopic
        topics: dict[str, Any] = {}
        for tp, offset in known.items():
            tm = md.topics[tp.topic]
            ft = topics.get(tp.topic)
            if ft is None:
                ft = topics[tp.topic] = T(topic=tp.topic, topic_id=tm.topic_id, partitions=[],
                                          undeleted_partition_count=tm.counts.undeleted if tm.counts else -1)
            ft.partitions.append(T.FetchPartition(
                partition=tp.partition, current_leader_epoch=tm.partitions[tp.partition].leader_epoch,
                fetch_offset=offset, partition_max_bytes=self.partition_max_bytes))
        return R(max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes, max_bytes=self.max_bytes,
                 isolation_level=self.isolation_level, session_id=0, session_epoch=-1,
                 topics=list(topics.values())), v

    def _answered(self, tp: TopicPartition, s: PartitionState, p: Any, endpoints: Mapping[int, BrokerEndpoint]) -> None:
        code = ErrorCode(p.error_code) if p.error_code in ErrorCode._value2member_map_ else E.UNKNOWN_SERVER_ERROR
        if code == E.NONE:
            s.high_watermark = p.high_watermark
            s.last_stable_offset = p.last_stable_offset
            s.log_start_offset = p.log_start_offset
            aborted = [(a.producer_id, a.first_offset) for a in (p.aborted_transactions or ())]
            try:
                records, end = decode_records(tp, p.records or b"", s.next_fetch,
                                              read_committed=self.isolation_level == ISOLATION_READ_COMMITTED,
                                              aborted=aborted)
            except CorruptRecordError as e:
                s.error = KafkaError(E.CORRUPT_MESSAGE, f"{tp} at offset {s.next_fetch}: {e}")
                self.records_ready.set()
                return
            s.records.extend(records)
            s.next_fetch = end
            if not s.records and s.position is not None:
                s.position = max(s.position, end)
            if records:
                self.records_ready.set()
            return
        if code == E.OFFSET_OUT_OF_RANGE:
            if self.auto_offset_reset == "none":
                s.error = OffsetOutOfRangeError({tp: s.next_fetch})
                self.records_ready.set()
            else:
                log.info("offset_out_of_range", topic=tp.topic, partition=tp.partition, offset=s.next_fetch,
                         reset=self.auto_offset_reset)
                s.request_reset(self.auto_offset_reset)
                self.wake()
            return
        hinted = False
        if code in LEADER_HINTED and p.current_leader is not None:
            cl = p.current_leader
            hinted = self._cluster.metadata.update_leader(tp.topic, tp.partition, cl.leader_id, cl.leader_epoch,
                                                          endpoints.get(cl.leader_id))
            self.hinted_moves += hinted
        if code in INVALID_METADATA:
            self._want_metadata()
        if code == E.INVALID_PARTITION_METADATA:
            self._on_stale_counts(tp.topic)
        if not hinted:
            log.debug("fetch_error", topic=tp.topic, partition=tp.partition, error=code.name)
            s.retry_at = time.monotonic() + self.retry_backoff

    # -- ListOffsets: positions from the log's start or end -----------------------------------

    async def _list_offsets(self, leader: int, tps: list[TopicPartition]) -> None:
        self._resetting.difference_update(tps)
        tps = [tp for tp in tps if tp in self.states and self.states[tp].reset is not None]
        self._resetting.update(tps)
        tokens = {tp: self.states[tp].token for tp in tps}
        md = self._cluster.metadata
        R = ListOffsets.Request
        T = R.ListOffsetsTopic
        topics: dict[str, Any] = {}
        for tp in tps:
            tm = md.topics.get(tp.topic)
            pm = tm.partitions.get(tp.partition) if tm is not None else None
            if pm is None:  # gone from the metadata since _send_ready
                self._back_off((tp,), tokens)
                continue
            topics.setdefault(tp.topic, T(name=tp.topic, partitions=[])).partitions.append(T.ListOffsetsPartition(
                partition_index=tp.partition, current_leader_epoch=pm.leader_epoch,
                timestamp=RESET_TIMESTAMP[self.states[tp].reset or "latest"]))
        try:
            conn = await self._cluster.connection(leader)
            resp = await conn.request(ListOffsets, R(replica_id=-1, isolation_level=self.isolation_level,
                                                     topics=list(topics.values())), timeout=self.request_timeout)
        except (BrokerConnectionError, ValueError) as e:
            log.info("list_offsets_failed", leader=leader, error=str(e))
            self._want_metadata()
            self._back_off(tps, tokens)
            return
        finally:
            self._resetting.difference_update(tps)
            self._wake.set()
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                s = self.states.get(tp)
                if s is None or tokens.get(tp) != s.token or s.reset is None:
                    continue
                if p.error_code == E.NONE:
                    s.seek(p.offset)
                    continue
                code = ErrorCode(p.error_code) if p.error_code in ErrorCode._value2member_map_ else E.UNKNOWN_SERVER_ERROR
                if code in INVALID_METADATA:
                    self._want_metadata()
                s.retry_at = time.monotonic() + self.retry_backoff
        self._positioned()
