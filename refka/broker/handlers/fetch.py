"""Fetch (key 1), v0-v16 (consumers and follower replicas).

Behavior:
- Reads whole record batches below the high watermark as zero-copy slices of
  the segment files; per partition at most partition_max_bytes, in all at most
  max_bytes, but the first batch found is returned whole even if larger (so a
  consumer can always progress).
- Long poll: with fewer than min_bytes available, waits up to max_wait_ms for
  an append to any of the requested partitions (woken by the append, no
  polling), then answers with what is there.
- Incremental fetch sessions (KIP-227, v7+): see fetch_session.py. Session
  errors (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH) are the
  top-level error_code.
- Per partition: UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID for a v13+ ID
  that names no topic), NOT_LEADER_OR_FOLLOWER when this broker does not
  lead it, KIP-320 epoch checks (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, v9+),
  OFFSET_OUT_OF_RANGE outside [log start, log end] (an errored partition's high
  watermark, last stable and log start offsets are -1, as Kafka answers them;
  to a follower OFFSET_OUT_OF_RANGE carries the real ones, which refka's
  followers restart from, where Kafka's ask ListOffsets); v12+ last_fetched_epoch
  is checked against the leader-epoch cache and a divergence is answered
  with diverging_epoch (KIP-595) instead of records.
- v16: NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH carry current_leader
  and the leader's node endpoint (KIP-951) unless
  leader.discovery.hints.enable=false.
- refka KIP-253: a topic whose undeleted_partition_count (tagged, v12+)
  differs from the broker's (the one Produce compares, metadata_cache.py)
  gets INVALID_PARTITION_METADATA. A partition marked for deletion is served
  like any other: consumers drain it.
- A follower's fetch (replica_id >= 0, v15+ replica_state, KIP-903) reads up
  to the log end offset, not the high watermark; its fetch_offset is that
  follower's log end offset: the leader records it (broker/replication/isr.py),
  may advance the high watermark (waking acks=all producers and long-polling
  consumers) and may add the follower to the ISR. A diverging_epoch answer is
  sent at once, not after the long poll.
- isolation_level read_committed reads up to the high watermark like
  read_uncommitted: no transactions are served, so nothing is ever open.
- v0-v3 (clients of Kafka 0.8-0.10) get legacy message sets, down-converted
  from the log's batches by protocol/legacy_records.py down_convert as Kafka's
  RecordsUtil.downConvert does: magic 0 for v0-v1, magic 1 for v2-v3 (the
  records' timestamps, a LogAppendTime batch's append time with the attribute
  bit), offsets kept, headers dropped, control batches skipped, a compressed
  batch one wrapper in its codec, an uncompressed one a message per record
  from the fetch offset on. Whole messages only, within partition_max_bytes
  and (v3) what max_bytes leaves (Kafka cuts the last message to the size it
  read instead; old clients skip such a partial message). v3 gets the first
  message even when larger (KIP-74); v0-v2 do not: a first message above
  partition_max_bytes is answered with Kafka's overflow filler (that many
  bytes beginning a longer message), which those clients report as a message
  too large for their fetch size. A zstd batch is not converted: the messages
  before it are answered, and a fetch that starts at it gets
  UNSUPPORTED_COMPRESSION_TYPE.

Version notes:
- v0 message format v0. v1 throttle_time_ms. v2 message format v1 (KIP-32).
  v3 max_bytes (KIP-74).
- v4 isolation_level, last_stable_offset, aborted transactions (null, as Kafka, unless
  read_committed: then empty, no transaction is ever aborted). v5 log_start_offset.
- v7 fetch sessions (KIP-227). v9 current_leader_epoch (KIP-320). v11 rack_id (KIP-392).
- v12 flexible; last_fetched_epoch, diverging_epoch (KIP-595). v13 topic IDs (KIP-516).
- v15 replica_state (KIP-903). v16 node_endpoints (KIP-951).
"""

from __future__ import annotations

import asyncio
import time

from refka.protocol import ErrorCode
from refka.protocol.legacy_records import down_convert
from refka.protocol.messages.fetch import Fetch
from refka.protocol.records import UnsupportedCompressionTypeError

from ..fetch_session import FINAL_EPOCH, INITIAL_EPOCH, SessionPartition
from ..leader_hints import current_leader, hints_enabled, node_endpoints
from ..registry import handles

Resp = Fetch.Response
RTopic = Resp.FetchableTopicResponse
RPart = RTopic.PartitionData
RLeader = RPart.LeaderIdAndEpoch
RDiverging = RPart.EpochEndOffset
REndpoint = Resp.NodeEndpoint

NONE = ErrorCode.NONE
EMPTY = b""
HINTED = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


class _Read:
    """One partition's answer being assembled."""

    __slots__ = ("sp", "error", "records", "size", "hw", "log_start", "diverging", "part")

    def __init__(self, sp: SessionPartition) -> None:
        self.sp = sp
        self.error = NONE
        self.records = EMPTY
        self.size = 0
        self.hw = -1
        self.log_start = -1
        self.diverging = None
        self.part = None


def _resolve_name(broker, sp: SessionPartition) -> bool:
    """A session partition named by a topic ID this broker did not know when it was
    added (its LeaderAndIsr or UpdateMetadata came after the fetch): named now if
    known now, so the session serves it from here on."""
    meta = broker.metadata.topic_by_id(sp.topic_id)
    if meta is not None:
        sp.topic = meta.name
        return True
    for (topic, _index), p in broker.replicas.partitions.items():
        if p.topic_id == sp.topic_id:
            sp.topic = topic
            return True
    return False


def _read_partition(broker, sp: SessionPartition, undeleted: int, budget: int, min_one: bool, v: int,
                    replica: int = -1, now_ms: int = -1) -> _Read:
    r = _Read(sp)
    if not sp.topic and not _resolve_name(broker, sp):
        r.error = ErrorCode.UNKNOWN_TOPIC_ID
        return r
    part = broker.replicas.get(sp.topic, sp.partition)
    r.part = part
    if part is not None and not part.is_leader:  # the epoch first, as Kafka's Partition.getLocalLog
        err = part.check_leader_epoch(sp.current_leader_epoch)
        if err != NONE:
            r.error = err
            return r
    if part is None or not part.is_leader:
        tmeta = broker.metadata.topic(sp.topic)
        if part is None and (tmeta is None or sp.partition not in tmeta.partitions):
            # As KafkaApis: UNKNOWN_TOPIC_ID only when the ID names no topic; a known
            # topic without this partition (e.g. a KIP-253 partition removed) is
            # UNKNOWN_TOPIC_OR_PARTITION at every version.
            r.error = (ErrorCode.UNKNOWN_TOPIC_ID if v >= 13 and tmeta is None
                       else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        else:
            r.error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        return r
    if undeleted >= 0:
        known = broker.metadata.undeleted_partition_count(sp.topic)
        if known >= 0 and known != undeleted:
            r.error = ErrorCode.INVALID_PARTITION_METADATA
            return r
    err = part.check_leader_epoch(sp.current_leader_epoch)
    if err != NONE:
        r.error = err
        return r
    offset = sp.fetch_offset
    if offset < part.log_start_offset or offset > part.log_end_offset:
        r.error = ErrorCode.OFFSET_OUT_OF_RANGE
        if replica >= 0:  # refka's followers restart from these (replication/fetcher.py)
            r.hw, r.log_start = part.high_watermark, part.log_start_offset
        return r
    r.hw = part.high_watermark
    r.log_start = part.log_start_offset
    if sp.last_fetched_epoch >= 0:
        epoch, end = part.log.end_offset_for_epoch(sp.last_fetched_epoch)
        if epoch != sp.last_fetched_epoch or end < offset:
            r.diverging = RDiverging(epoch=epoch, end_offset=end)
            return r
    limit = r.hw
    if replica >= 0:
        if now_ms >= 0 and part.on_follower_fetch(replica, offset, now_ms):
            broker.replicas.isr.maybe_expand(part)
        r.hw = part.high_watermark
        limit = part.log_end_offset
    if offset >= limit or budget <= 0 and not min_one:
        return r
    res = part.read(offset, min(sp.partition_max_bytes, budget), min_one, to_log_end=replica >= 0)
    if res.size:
        r.records = res.records
        r.size = res.size
        broker.traffic.fetched(sp.topic, res.size, replica >= 0)
    return r


def _read_all(broker, plan, max_bytes: int, v: int, replica: int = -1,
              now_ms: int = -1) -> tuple[list[_Read], int]:
    """``now_ms`` >= 0 on a follower's first read: its fetch offsets are recorded then."""
    budget = max_bytes
    total = 0
    reads = []
    for sp, undeleted in plan:
        # v0-v2 read the first batch whole too: down-converted, its first message tells
        # whether the partition's answer is a message or "too large" (_down_convert).
        r = _read_partition(broker, sp, undeleted, budget, total == 0 or v < 3, v, replica, now_ms)
        if v < 4 and r.size:
            _down_convert(r, v, min(sp.partition_max_bytes, budget), total == 0)
        reads.append(r)
        total += r.size
        budget -= r.size
    return reads, total


def _down_convert(r: _Read, v: int, max_bytes: int, min_one: bool) -> None:
    """Fetch v0-v3: ``r``'s batches as the legacy message set the version reads (the header).
    v0-v2 have no KIP-74: their limit holds for the first message too."""
    try:
        r.records = down_convert(r.records, 0 if v <= 1 else 1, r.sp.fetch_offset, max_bytes, min_one,
                                 hard_limit=v < 3)
    except UnsupportedCompressionTypeError:
        # As Kafka's FetchResponse.partitionResponse(tp, UNSUPPORTED_COMPRESSION_TYPE).
        r.error = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        r.records, r.hw, r.log_start = EMPTY, -1, -1
    r.size = len(r.records)


def _resolve_topics(broker, req, v):
    """The request's partitions as (key, SessionPartition, undeleted count)."""
    out = []
    cache = broker.metadata
    for t in req.topics:
        if v >= 13:
            meta = cache.topic_by_id(t.topic_id)
            name = meta.name if meta is not None else ""
            key: bytes | str = t.topic_id
            tid = t.topic_id
        else:
            name = t.topic
            key = name
            meta = cache.topic(name)
            tid = meta.topic_id if meta is not None else b"\x00" * 16
        for p in t.partitions:
            sp = SessionPartition(
                topic=name,
                topic_id=tid,
                partition=p.partition,
                fetch_offset=p.fetch_offset,
                partition_max_bytes=p.partition_max_bytes,
                current_leader_epoch=p.current_leader_epoch,
                last_fetched_epoch=p.last_fetched_epoch,
            )
            out.append(((key, p.partition), sp, t.undeleted_partition_count))
    return out


@handles(Fetch.key, 0, 16)
def handle_fetch(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    sessions = broker.fetch_sessions
    session = None
    requested = _resolve_topics(broker, req, v)
    session_id, epoch = (req.session_id, req.session_epoch) if v >= 7 else (0, FINAL_EPOCH)

    if session_id == 0 and epoch == INITIAL_EPOCH:
        session = sessions.create(v >= 13)
    elif session_id != 0 and epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        sessions.remove(session_id)
        if epoch == INITIAL_EPOCH:
            session = sessions.create(v >= 13)
    elif session_id != 0:
        session = sessions.get(session_id)
        if session is None:
            return Resp(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[])
        if session.epoch != epoch:
            return Resp(error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id=0, responses=[])
    incremental = session is not None and epoch > 0

    if session is not None:
        if not incremental:
            session.partitions.clear()
        for key, sp, _u in requested:
            old = session.partitions.get(key)
            if old is not None:
                sp.sent_high_watermark = old.sent_high_watermark
                sp.sent_log_start_offset = old.sent_log_start_offset
            session.partitions[key] = sp
        for ft in req.forgotten_topics_data if v >= 7 else ():
            tkey = ft.topic_id if v >= 13 else ft.topic
            for p in ft.partitions:
                session.partitions.pop((tkey, p), None)
        session.epoch = epoch + 1 if incremental else 1
        undeleted = {key: u for key, _sp, u in requested}
        plan = [(sp, undeleted.get(key, -1)) for key, sp in session.partitions.items()]
    else:
        plan = [(sp, u) for _key, sp, u in requested]

    max_bytes = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
    replica = _replica_id(req, v)
    reads, total = _read_all(broker, plan, max_bytes, v, replica, int(time.time() * 1000) if replica >= 0 else -1)
    if (req.max_wait_ms > 0 and total < max(req.min_bytes, 1)
            and not any(r.error or r.diverging is not None for r in reads)):
        return _long_poll(ctx, req, session, incremental, plan, max_bytes, replica)
    return _respond(ctx, req, session, incremental, reads)


def _replica_id(req, v: int) -> int:
    """The fetching follower's broker id; -1 for a consumer."""
    if v >= 15:
        return req.replica_state.replica_id if req.replica_state is not None else -1
    return req.replica_id


async def _long_poll(ctx, req, session, incremental, plan, max_bytes, replica: int = -1):
    broker = ctx.broker
    loop = asyncio.get_running_loop()
    deadline = loop.time() + req.max_wait_ms / 1000
    while True:
        waiters = []
        for sp, _u in plan:
            part = broker.replicas.get(sp.topic, sp.partition) if sp.topic else None
            if part is not None:
                waiters.append(part.wait_for_data())
        # Read once the waiters are registered: an append between the handler's read
        # and this task's first step (e.g. a Produce pipelined right after this Fetch)
        # woke nobody, and waiting now would sleep through it until max_wait_ms.
        reads, total = _read_all(broker, plan, max_bytes, ctx.api_version, replica)
        remaining = deadline - loop.time()
        if (total >= max(req.min_bytes, 1) or any(r.error or r.diverging is not None for r in reads)
                or not waiters or remaining <= 0):
            for w in waiters:
                w.cancel()
            return _respond(ctx, req, session, incremental, reads)
        _done, pending = await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        for w in pending:
            w.cancel()


def _respond(ctx, req, session, incremental: bool, reads: list[_Read]):
    broker = ctx.broker
    v = ctx.api_version
    # as Kafka: aborted_transactions only for read_committed (none: no transactions), else null
    read_committed = v >= 4 and req.isolation_level == 1
    want_hints = v >= 16 and hints_enabled(broker.config)
    hinted: set[int] = set()
    topics: list = []
    by_topic: dict = {}
    for r in reads:
        sp = r.sp
        if incremental and not (
            r.size or r.error or r.diverging is not None
            or r.hw != sp.sent_high_watermark or r.log_start != sp.sent_log_start_offset
        ):
            continue
        sp.sent_high_watermark = r.hw
        sp.sent_log_start_offset = r.log_start
        p = RPart(
            partition_index=sp.partition,
            error_code=r.error,
            high_watermark=r.hw,
            last_stable_offset=r.hw,
            log_start_offset=r.log_start,
            aborted_transactions=[] if read_committed and not r.error else None,
            preferred_read_replica=-1,
            records=r.records,
            diverging_epoch=r.diverging,
        )
        if r.error in HINTED and want_hints:
            hint = current_leader(broker.replicas, broker.metadata, sp.topic, sp.partition)
            if hint is not None:  # on FENCED_LEADER_EPOCH that may be this broker itself
                p.current_leader = RLeader(leader_id=hint[0], leader_epoch=hint[1])
                hinted.add(hint[0])
        key = sp.topic_id if v >= 13 else sp.topic
        t = by_topic.get(key)
        if t is None:
            t = by_topic[key] = RTopic(topic=sp.topic, topic_id=sp.topic_id, partitions=[])
            topics.append(t)
        t.partitions.append(p)
    resp = Resp(error_code=NONE, session_id=session.session_id if session is not None else 0, responses=topics)
    if hinted:
        resp.node_endpoints = node_endpoints(broker.metadata, hinted, ctx.conn.listener, REndpoint)
    return resp
