"""A follower's fetcher: one asyncio task per leader broker (Kafka's ReplicaFetcherThread).

A follower's log can hold records its new leader never had (it led before and
took writes nobody fetched, then failed). It is cut back to where both logs
agree in two ways, as in Kafka's AbstractFetcherThread:

- Truncating state (KIP-101/KIP-279): every partition given to ``add`` (each
  time this broker becomes its follower, a restart included) starts
  truncating. Before it is fetched, one OffsetsForLeaderEpoch (v3-v4, the
  highest both sides serve, replica_id = this broker) goes to the leader for
  all truncating partitions, each with the current leader epoch (fencing) and
  the epoch of its last local batch. Per partition of the answer:
  end offset UNDEFINED -> truncate to our own high watermark; no leader epoch
  in the answer (-1) -> to min(leader's end offset, our log end offset);
  otherwise ``truncation_offset`` (the leader's end offset for that epoch, or
  ours for the largest epoch not above it, if smaller). The partition then
  fetches. A log without epochs (empty) needs no round trip. Retriable
  errors keep it truncating for replica.fetch.backoff.ms; a leader that does
  not serve v3+ is fetched without this step (logged once).
- Fetch's diverging_epoch (KIP-595, below) catches any older divergence, and
  all of it when the leader cannot answer OffsetsForLeaderEpoch.

Both log ``follower_truncated`` with ``via`` = ``offsets_for_leader_epoch`` or
``diverging_epoch`` (the former only when it cut something; an answer that
agrees with our log is logged at debug level).

Each fetcher sends Fetch (v12-v15, the highest both sides serve) to its leader
for every partition this broker follows there, in an incremental fetch session
(KIP-227, ``FetchSessionState``: after the first full fetch only partitions
whose fetch state changed are named, and the leader answers only partitions
with news), with this broker's id as
replica_id (v12-14) or replica_state (v15, KIP-903, with the broker epoch),
each partition's log end offset as fetch_offset and the epoch of its last
batch as last_fetched_epoch. Per partition of the answer:

- records: appended as they are (``append_as_follower``); the follower's high
  watermark becomes min(leader's high watermark, own log end offset);
- diverging_epoch (KIP-595): the leader has no such epoch, or it ended
  earlier; the log is truncated to where both agree (the smaller of the
  leader's end offset for that epoch and ours) and the next fetch goes on
  from there, so a restarted old leader drops its divergent tail;
- OFFSET_OUT_OF_RANGE: below the leader's log start the log restarts empty
  there; otherwise the follower's log is truncated to the leader's high
  watermark (all of it committed) and fetches on;
- NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, unknown partition: the
  leader and this follower have not both applied the controller's latest
  LeaderAndIsr yet (one is on its way): that partition is asked again after
  10 ms, doubling per consecutive such answer up to replica.fetch.backoff.ms
  (Kafka waits the whole back-off at once; a topic creation or leader move
  then stalls acks=all for a second when the follower's fetch overtakes the
  leader's LeaderAndIsr). A storage error waits replica.fetch.backoff.ms.

A connection failure (Fetch or OffsetsForLeaderEpoch) backs off
replica.fetch.backoff.ms and reconnects. The answer for a partition whose
leader, epoch or log end offset changed while the request was out is dropped
(it was for another state).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from refka.client.connection import BrokerConnection, BrokerConnectionError
from refka.common import TopicPartition
from refka.protocol import ErrorCode
from refka.protocol.messages.fetch import Fetch
from refka.protocol.messages.offsets_for_leader_epoch import OffsetForLeaderEpoch

from ..log.errors import UnexpectedAppendOffsetError
from ..logging import get_logger

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from ..partition import Partition

log = get_logger("refka.replication.fetcher")

Req = Fetch.Request
FTopic = Req.FetchTopic
FPart = FTopic.FetchPartition
MIN_VERSION, MAX_VERSION = 12, 15
# OffsetsForLeaderEpoch: v3 is the first to say which replica asks (KIP-392).
OFLE_MIN_VERSION, OFLE_MAX_VERSION = 3, 4
OReq = OffsetForLeaderEpoch.Request
OTopic = OReq.OffsetForLeaderTopic
OPart = OTopic.OffsetForLeaderPartition
UNDEFINED_EPOCH = -1
RETRY_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.KAFKA_STORAGE_ERROR,
})
# The leader and this follower disagree on the partition's state: one of them has not yet
# applied the controller's latest LeaderAndIsr, which is milliseconds away. Asked again
# after 10 ms, doubling per consecutive answer up to replica.fetch.backoff.ms (Kafka waits
# the whole back-off at once: after a leader move, acks=all would stall for a second).
STATE_MISMATCH_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
})
FIRST_MISMATCH_BACKOFF_S = 0.01


def truncation_offset(plog: Any, diverging_epoch: int, leader_end_offset: int) -> int:
    """Where a follower's log stops agreeing with its leader's (KIP-595, Kafka's
    AbstractFetcherThread.truncateOnFetchResponse): the leader's end offset for
    ``diverging_epoch``, or ours for it if smaller; when that epoch is not in our
    cache, ours for the largest epoch below it. Never above our log end offset.
    The next fetch (with the new last fetched epoch) finds any older divergence."""
    local_epoch, local_end = plog.end_offset_for_epoch(diverging_epoch)
    target = leader_end_offset if local_epoch < 0 else min(local_end, leader_end_offset)
    return max(min(target, plog.log_end_offset), 0)


def epoch_end_truncation_offset(plog: Any, high_watermark: int, leader_epoch: int, end_offset: int) -> int:
    """Where a truncating follower cuts its log, given the leader's OffsetsForLeaderEpoch
    answer (error NONE) for the epoch of its last batch (Kafka's
    AbstractFetcherThread.getOffsetTruncationState): an UNDEFINED end offset (the
    leader has no epoch that old) -> our high watermark; no epoch in the answer
    -> min(leader's end offset, our log end offset); otherwise
    ``truncation_offset``. Never above our log end offset nor below 0."""
    leo = plog.log_end_offset
    if end_offset < 0:
        return max(min(high_watermark, leo), 0)
    if leader_epoch == UNDEFINED_EPOCH:
        return max(min(end_offset, leo), 0)
    return truncation_offset(plog, leader_epoch, end_offset)


def mismatch_backoff(consecutive: int, max_backoff_s: float) -> float:
    """Seconds to wait after the ``consecutive``-th (from 0) state-mismatch answer in a row."""
    return min(max_backoff_s, FIRST_MISMATCH_BACKOFF_S * 2 ** min(consecutive, 30))


class FetchSessionState:
    """A follower's half of an incremental fetch session (KIP-227, Kafka's
    FetchSessionHandler), without I/O. A full fetch (session 0, epoch 0) names
    every partition and asks for a session; once the leader gave one, each fetch
    names only the partitions whose fetch state (offset, epochs, log start, max
    bytes) changed since the last answered one, and forgets those no longer
    fetched; the leader answers only partitions with news. A lost session
    (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, a new connection)
    starts over with a full fetch."""

    __slots__ = ("session_id", "epoch", "parts")

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = 0  # the epoch of the next request: 0 asks for a new session
        self.parts: dict[Any, tuple[int, ...]] = {}  # (topic key, partition) -> fetch state last sent

    def build(self, desired: dict[Any, tuple[int, ...]]) -> tuple[list[Any], list[Any]]:
        """(keys to send, keys to forget) for a fetch of exactly ``desired``."""
        if self.session_id == 0:
            return list(desired), []
        send = [k for k, st in desired.items() if self.parts.get(k) != st]
        forget = [k for k in self.parts if k not in desired]
        return send, forget

    def answered(self, session_id: int, desired: dict[Any, tuple[int, ...]]) -> None:
        """The leader answered a fetch built from ``desired`` without a top-level error."""
        if self.session_id == 0:
            self.session_id = session_id  # 0: the leader keeps no session for us (full fetches)
            self.epoch = 1 if session_id else 0
        else:
            self.epoch = 1 if self.epoch >= 0x7FFFFFFF else self.epoch + 1
        self.parts = dict(desired)

    def reset(self) -> None:
        self.session_id, self.epoch, self.parts = 0, 0, {}


SESSION_ERRORS = frozenset({ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH})


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    """The replica.fetch.* properties a fetcher uses."""

    wait_ms: int
    backoff: float  # seconds
    partition_max_bytes: int
    max_bytes: int

    @classmethod
    def from_config(cls, cfg: BrokerConfig) -> FetcherSettings:
        return cls(wait_ms=cfg["replica.fetch.wait.max.ms"], backoff=cfg["replica.fetch.backoff.ms"] / 1000,
                   partition_max_bytes=cfg["replica.fetch.max.bytes"],
                   max_bytes=cfg["replica.fetch.response.max.bytes"])


class ReplicaFetcher:
    """Fetches, from broker ``leader_id``, every partition this broker (``node_id``) follows
    there. ``endpoint(leader_id)`` says where the leader is now; ``broker_epoch()`` is this
    broker's registration epoch (KIP-903's replica_state)."""

    def __init__(self, node_id: int, leader_id: int, settings: FetcherSettings,
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]],
                 endpoint: Callable[[int], tuple[str, int] | None], broker_epoch: Callable[[], int]) -> None:
        self.node_id = node_id
        self.spawn = spawn
        self._endpoint = endpoint
        self._broker_epoch = broker_epoch
        self.leader_id = leader_id
        self.partitions: dict[TopicPartition, Partition] = {}
        self._delayed: dict[TopicPartition, float] = {}  # partition -> monotonic time to retry at
        self._mismatches: dict[TopicPartition, int] = {}  # partition -> consecutive state-mismatch answers
        # Partitions to truncate (OffsetsForLeaderEpoch) before their first fetch.
        self._truncating: set[TopicPartition] = set()
        self._ofle_version: int | None = None  # None: the leader serves no v3+
        self._ofle_unsupported_logged = False
        self._changed = asyncio.Event()
        self.wait_ms = settings.wait_ms
        self.backoff = settings.backoff
        self.partition_max_bytes = settings.partition_max_bytes
        self.max_bytes = settings.max_bytes
        self._conn: BrokerConnection | None = None
        self._session = FetchSessionState()
        self._version = MIN_VERSION
        self.task = self.spawn(self._run())

    def add(self, p: Partition) -> None:
        key = (p.topic, p.index)
        self.partitions[key] = p
        self._delayed.pop(key, None)
        self._mismatches.pop(key, None)
        self._truncating.add(key)
        self._changed.set()

    def remove(self, key: TopicPartition) -> None:
        self.partitions.pop(key, None)
        self._delayed.pop(key, None)
        self._mismatches.pop(key, None)
        self._truncating.discard(key)

    def stop(self) -> None:
        self.task.cancel()

    async def _run(self) -> None:
        try:
            while True:
                ready = self._ready_partitions()
                if not ready:
                    await self._idle()
                    continue
                conn = await self._connection()
                if conn is None:
                    await asyncio.sleep(self.backoff)
                    continue
                truncating = self._truncating_partitions(ready)
                if truncating:
                    try:
                        await self._truncate(conn, truncating)
                    except BrokerConnectionError as e:
                        log.info("replica_epoch_request_failed", broker=self.node_id,
                                 leader=self.leader_id, error=str(e))
                        await self._drop_connection()
                        await asyncio.sleep(self.backoff)
                    continue  # the partitions done truncating fetch on the next round
                req, sent, desired = self._request(ready)
                try:
                    resp = await conn.request(Fetch, req, self._version,
                                              timeout=self.wait_ms / 1000 + 30.0)
                except BrokerConnectionError as e:
                    log.info("replica_fetch_failed", broker=self.node_id, leader=self.leader_id,
                             error=str(e))
                    await self._drop_connection()
                    await asyncio.sleep(self.backoff)
                    continue
                if resp.error_code in SESSION_ERRORS:
                    log.info("replica_fetch_session_lost", broker=self.node_id, leader=self.leader_id,
                             session_id=self._session.session_id, error=ErrorCode(resp.error_code).name)
                    self._session.reset()  # the next fetch is a full one
                    continue
                if resp.error_code != ErrorCode.NONE:
                    log.info("replica_fetch_error", broker=self.node_id, leader=self.leader_id,
                             error=ErrorCode(resp.error_code).name)
                    self._session.reset()
                    await asyncio.sleep(self.backoff)
                    continue
                self._session.answered(resp.session_id, desired)
                self._handle(resp, sent)
        except asyncio.CancelledError:
            raise
        except Exception:
            # A bug of ours: logged, and the fetcher starts over rather than stopping for good.
            log.exception("replica_fetcher_failed", broker=self.node_id, leader=self.leader_id)
            await asyncio.sleep(self.backoff)
            self.task = self.spawn(self._run())
        finally:
            await self._drop_connection()

    def _ready_partitions(self) -> list[Partition]:
        now = time.monotonic()
        for key, at in list(self._delayed.items()):
            if at <= now:
                del self._delayed[key]
        return [p for key, p in self.partitions.items() if key not in self._delayed]

    async def _idle(self) -> None:
        """Nothing to fetch now: wait for a new partition or the first delay to end."""
        self._changed.clear()
        timeout = None
        if self._delayed:
            timeout = max(min(self._delayed.values()) - time.monotonic(), 0.0)
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            pass

    async def _connection(self) -> BrokerConnection | None:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        ep = self._endpoint(self.leader_id)
        if ep is None:
            return None
        conn = BrokerConnection(ep[0], ep[1], client_id=f"refka-replica-fetcher-{self.node_id}")
        try:
            await conn.connect()
        except BrokerConnectionError as e:
            log.info("replica_fetcher_connect_failed", broker=self.node_id, leader=self.leader_id,
                     error=str(e))
            return None
        lo, hi = conn.versions.get(Fetch.key, (0, -1))
        if hi < MIN_VERSION:
            log.warning("replica_fetcher_no_common_version", leader=self.leader_id, max_version=hi)
            await conn.close()
            return None
        self._version = min(hi, MAX_VERSION)
        lo, hi = conn.versions.get(OffsetForLeaderEpoch.key, (0, -1))
        v = min(hi, OFLE_MAX_VERSION)
        self._ofle_version = v if v >= max(lo, OFLE_MIN_VERSION) else None
        self._conn = conn
        return conn

    async def _drop_connection(self) -> None:
        self._session.reset()  # sessions live on the leader per connection's client: start over
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    # -- the Truncating state (OffsetsForLeaderEpoch)

    def _truncating_partitions(self, ready: list[Partition]) -> list[Partition]:
        """The ready partitions that still need an OffsetsForLeaderEpoch round trip.
        Those with no epoch in their log, and all of them when the leader cannot
        answer v3+, leave the truncating set at once."""
        out = []
        for p in ready:
            key = (p.topic, p.index)
            if key not in self._truncating:
                continue
            if p.log.latest_epoch() < 0:
                self._truncating.discard(key)
            elif self._ofle_version is None:
                if not self._ofle_unsupported_logged:
                    self._ofle_unsupported_logged = True
                    log.warning("replica_fetcher_no_offsets_for_leader_epoch", broker=self.node_id,
                                leader=self.leader_id,
                                versions=self._conn.versions.get(OffsetForLeaderEpoch.key) if self._conn else None)
                self._truncating.discard(key)
            else:
                out.append(p)
        return out

    def _epoch_request(self, parts: list[Partition]) -> tuple[Any, dict[TopicPartition, tuple[Partition, int, int]]]:
        by_topic: dict[str, list[Any]] = {}
        sent: dict[TopicPartition, tuple[Partition, int, int]] = {}
        for p in parts:
            by_topic.setdefault(p.topic, []).append(OPart(
                partition=p.index,
                current_leader_epoch=p.state.leader_epoch,
                leader_epoch=p.log.latest_epoch(),
            ))
            sent[(p.topic, p.index)] = (p, p.state.leader_epoch, p.log.log_end_offset)
        req = OReq(replica_id=self.node_id,
                   topics=[OTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])
        return req, sent

    async def _truncate(self, conn: BrokerConnection, parts: list[Partition]) -> None:
        """One OffsetsForLeaderEpoch for ``parts``; each answered partition truncates
        and leaves the truncating set, or waits replica.fetch.backoff.ms."""
        assert self._ofle_version is not None
        req, sent = self._epoch_request(parts)
        resp = await conn.request(OffsetForLeaderEpoch, req, self._ofle_version, timeout=30.0)
        answered: set[TopicPartition] = set()
        for t in resp.topics:
            for ep in t.partitions:
                key = (t.topic, ep.partition)
                entry = sent.get(key)
                if entry is None:
                    continue
                answered.add(key)
                p, epoch, leo = entry
                if (self.partitions.get(key) is not p or key not in self._truncating
                        or p.state.leader != self.leader_id or p.state.leader_epoch != epoch
                        or p.log.log_end_offset != leo):
                    continue  # the partition moved on while the request was out
                try:
                    self._handle_epoch_end(p, ep)
                except Exception as e:  # one bad partition must not stop the others
                    log.warning("replica_epoch_partition_failed", topic=p.topic, partition=p.index,
                                error=repr(e))
                    self._delayed[key] = time.monotonic() + self.backoff
        for key in sent.keys() - answered:  # not in the answer: ask again after a pause
            self._delayed[key] = time.monotonic() + self.backoff

    def _handle_epoch_end(self, p: Partition, ep: Any) -> None:
        key = (p.topic, p.index)
        err = ep.error_code
        if err != ErrorCode.NONE:
            if err not in RETRY_ERRORS:
                log.warning("replica_epoch_partition_error", topic=p.topic, partition=p.index,
                            error=ErrorCode(err).name)
            self._back_off(key, err)
            return
        self._mismatches.pop(key, None)
        plog = p.log
        before = plog.log_end_offset
        target = epoch_end_truncation_offset(plog, p.high_watermark, ep.leader_epoch, ep.end_offset)
        leo = plog.truncate_to(target)
        if p.high_watermark > leo:
            p.high_watermark = leo
        self._truncating.discard(key)
        fields = dict(broker=self.node_id, topic=p.topic, partition=p.index,
                      via="offsets_for_leader_epoch", leader_epoch=ep.leader_epoch,
                      leader_end_offset=ep.end_offset, log_end_offset_before=before, log_end_offset=leo)
        if leo < before:
            log.info("follower_truncated", **fields)
        else:  # the logs agree: nothing to cut
            log.debug("follower_truncation_not_needed", **fields)

    # -- fetching

    def _request(self, parts: list[Partition]) -> tuple[Any, dict[Any, tuple[Partition, int, int]],
                                                        dict[Any, tuple[int, ...]]]:
        """The Fetch for ``parts`` in the current session: (request, what each partition's
        answer is checked against, the fetch state of every fetched partition)."""
        v = self._version
        sent: dict[Any, tuple[Partition, int, int]] = {}
        desired: dict[Any, tuple[int, ...]] = {}
        for p in parts:
            key = (p.topic_id if v >= 13 else p.topic, p.index)
            leo = p.log.log_end_offset
            desired[key] = (leo, p.state.leader_epoch, p.log.latest_epoch(), p.log.log_start_offset,
                            self.partition_max_bytes)
            sent[key] = (p, p.state.leader_epoch, leo)
        send, forget = self._session.build(desired)
        by_topic: dict[Any, list[Any]] = {}
        for key in send:
            fetch_offset, leader_epoch, last_epoch, log_start, max_bytes = desired[key]
            by_topic.setdefault(key[0], []).append(FPart(
                partition=key[1], current_leader_epoch=leader_epoch, fetch_offset=fetch_offset,
                last_fetched_epoch=last_epoch, log_start_offset=log_start, partition_max_bytes=max_bytes))
        forgotten: dict[Any, list[int]] = {}
        for tkey, index in forget:
            forgotten.setdefault(tkey, []).append(index)
        FT = Req.ForgottenTopic
        req = Req(
            max_wait_ms=self.wait_ms, min_bytes=1, max_bytes=self.max_bytes, isolation_level=0,
            session_id=self._session.session_id, session_epoch=self._session.epoch,
            topics=[FTopic(topic="", topic_id=t, partitions=ps) if v >= 13 else FTopic(topic=t, partitions=ps)
                    for t, ps in by_topic.items()],
            forgotten_topics_data=[FT(topic="", topic_id=t, partitions=ps) if v >= 13 else FT(topic=t, partitions=ps)
                                   for t, ps in forgotten.items()],
            rack_id="",
        )
        if v >= 15:
            req.replica_state = Req.ReplicaState(replica_id=self.node_id,
                                                 replica_epoch=self._broker_epoch())
        else:
            req.replica_id = self.node_id
        return req, sent, desired

    def _handle(self, resp: Any, sent: dict[Any, tuple[Partition, int, int]]) -> None:
        v = self._version
        for t in resp.responses:
            tkey = t.topic_id if v >= 13 else t.topic
            for pd in t.partitions:
                entry = sent.get((tkey, pd.partition_index))
                if entry is None:
                    continue
                p, epoch, fetch_offset = entry
                key = (p.topic, p.index)
                if pd.error_code != ErrorCode.NONE:
                    # Named in full again next time: the leader's session entry may be stale
                    # (it did not know the partition yet), and an unchanged partition is
                    # otherwise never sent again.
                    self._session.parts.pop((tkey, pd.partition_index), None)
                if (self.partitions.get(key) is not p or p.state.leader != self.leader_id
                        or p.state.leader_epoch != epoch or p.log.log_end_offset != fetch_offset):
                    continue  # the partition moved on while the request was out
                try:
                    self._handle_partition(p, pd, fetch_offset)
                except Exception as e:  # one bad partition must not stop the others
                    log.warning("replica_fetch_partition_failed", topic=p.topic, partition=p.index,
                                error=repr(e))
                    self._delayed[key] = time.monotonic() + self.backoff

    def _back_off(self, key: TopicPartition, err: int) -> None:
        """A retriable partition error: replica.fetch.backoff.ms, or for a state mismatch
        10 ms doubling per consecutive one up to it (STATE_MISMATCH_ERRORS)."""
        delay = self.backoff
        if err in STATE_MISMATCH_ERRORS:
            n = self._mismatches.get(key, 0)
            self._mismatches[key] = n + 1
            delay = mismatch_backoff(n, self.backoff)
        self._delayed[key] = time.monotonic() + delay

    def _handle_partition(self, p: Partition, pd: Any, fetch_offset: int) -> None:
        err = pd.error_code
        key = (p.topic, p.index)
        plog = p.log
        if err == ErrorCode.NONE:
            self._mismatches.pop(key, None)
            div = pd.diverging_epoch
            if div is not None and div.end_offset >= 0:
                before = plog.log_end_offset
                leo = plog.truncate_to(truncation_offset(plog, div.epoch, div.end_offset))
                log.info("follower_truncated", broker=self.node_id, topic=p.topic, partition=p.index,
                         via="diverging_epoch", leader_epoch=div.epoch, leader_end_offset=div.end_offset,
                         log_end_offset_before=before, log_end_offset=leo)
                p.follower_high_watermark(pd.high_watermark)
                return
            records = pd.records
            if records is not None and len(records):
                try:
                    plog.append_as_follower(records)
                except UnexpectedAppendOffsetError as e:
                    log.warning("follower_append_out_of_order", topic=p.topic, partition=p.index, error=str(e))
                    self._delayed[key] = time.monotonic() + self.backoff
                    return
            p.follower_high_watermark(pd.high_watermark)
        elif err == ErrorCode.OFFSET_OUT_OF_RANGE:
            if 0 <= fetch_offset < pd.log_start_offset:
                plog.truncate_fully_and_start_at(pd.log_start_offset)
            elif pd.high_watermark >= 0:
                plog.truncate_to(pd.high_watermark)
            log.info("follower_offset_out_of_range", topic=p.topic, partition=p.index, fetch_offset=fetch_offset,
                     leader_log_start_offset=pd.log_start_offset, leader_high_watermark=pd.high_watermark,
                     log_end_offset=plog.log_end_offset)
        elif err in RETRY_ERRORS:
            self._back_off(key, err)
        else:
            log.warning("replica_fetch_partition_error", topic=p.topic, partition=p.index,
                        error=ErrorCode(err).name)
            self._delayed[key] = time.monotonic() + self.backoff
