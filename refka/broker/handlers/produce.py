"""Produce (key 0), v0-v11.

Behavior:
- acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS on every partition);
  acks=0 gets no response at all.
- Each partition's records pass broker/log/validator.py's rules (Kafka's
  LogValidator) before anything is appended: RecordBatch v2 only from v3 (a
  bad CRC or a truncated batch is CORRUPT_MESSAGE, answered without an error
  message as Kafka answers it, the reason logged at info level
  (produce_corrupt_records); magic < 2 INVALID_RECORD),
  compression bits naming no codec UNSUPPORTED_COMPRESSION_TYPE, a batch
  above the topic's max.message.bytes (or decompressing to more than 64
  times it) MESSAGE_TOO_LARGE, records under a valid CRC that do not read
  back (each batch decompressed once and its records walked)
  CORRUPT_MESSAGE, and on a compacted topic a record without a key
  INVALID_RECORD with record_errors (v8+, KIP-467).
- v0-v2 may carry a legacy message set (magic 0 or 1, protocol/legacy_records.py):
  checked by log/validator.py validate_message_set (Kafka's rules for it: a
  message above max.message.bytes MESSAGE_TOO_LARGE, a bad CRC, its own or an
  inner message's, CORRUPT_MESSAGE, a compressed message beside others, mixed
  magics, a zstd wrapper or a compressed inner message INVALID_RECORD, a
  keyless message on a compacted topic INVALID_RECORD, a producer's
  LogAppendTime INVALID_TIMESTAMP) and converted to one RecordBatch v2, as
  Kafka 3.x with message format v2 does: keys, values, magic-1 timestamps
  (magic 0: none, -1) and the wrapper's codec kept, no headers; the log
  assigns its offsets and, on a LogAppendTime topic, its timestamp. v0-v2 may
  carry RecordBatch v2 batches too (Kafka does not check their magic there).
- Offsets and the partition leader epoch are patched into the batch in place,
  then the batch is written as received (no recompression).
- A partition this broker does not lead is NOT_LEADER_OR_FOLLOWER; an
  unknown one UNKNOWN_TOPIC_OR_PARTITION. With v10+ those answers carry the
  current leader and its endpoint (KIP-951) unless
  leader.discovery.hints.enable=false.
- refka KIP-253: a topic whose undeleted_partition_count (tagged, v9+)
  differs from the broker's gets INVALID_PARTITION_METADATA, and so does a
  partition marked for deletion (index >= the broker's count: it takes no
  new records) from a producer that sent a count. A stock producer (no
  count: it hashes over every listed partition, marked ones too) gets
  UNKNOWN_TOPIC_OR_PARTITION there instead, with the same message: a code
  it knows as retriable and invalid-metadata, where 10253 is an unknown,
  non-retriable code, which kafka-python's idempotent producer (its
  default) takes as fatal for every later send. The broker's
  count is the one the controller sent last, with LeaderAndIsr or
  UpdateMetadata (metadata_cache.py); Fetch compares the same one, and
  serves marked partitions (consumers drain them). Before either refusal
  the leader answers a retry of a batch it has already appended (an
  idempotent producer's, one of its last five) as the duplicate it is, with
  its offset: the refusal then means "not appended", so a producer whose
  answer was lost learns the batch's fate before it re-hashes its records
  (refka/client/producer.py), and does not send it again elsewhere.
- acks=-1 answers once the ISR has the records (the high watermark passed
  them); on one replica that is at once. With an ISR smaller than the topic's
  min.insync.replicas nothing is appended: NOT_ENOUGH_REPLICAS. When the high
  watermark passes the records but the ISR shrank below it meanwhile:
  NOT_ENOUGH_REPLICAS_AFTER_APPEND (the records are in the log).
- Idempotent producer (batches with a producer id, KIP-98): the partition's
  producer state checks epoch and sequence before anything is appended
  (rules in broker/log/producer_state.py). A retry of one of a producer's
  last five batches is not appended again and is answered with the original
  base offset; an older retry DUPLICATE_SEQUENCE_NUMBER; a gap or a new
  epoch not starting at sequence 0 OUT_OF_ORDER_SEQUENCE_NUMBER; an epoch
  below the producer's INVALID_PRODUCER_EPOCH. An unknown producer id is
  accepted at any sequence (Kafka 2.5+, never UNKNOWN_PRODUCER_ID).
- Transactions are not served: a transactional_id is refused with
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED (see the gaps list in the README).

Version notes:
- v0 legacy message sets (magic 0). v1 throttle_time_ms. v2 log_append_time_ms,
  magic 1 (KIP-32).
- v3 transactional_id, magic 2 only. v5 log_start_offset. v7 zstd (KIP-110).
- v8 record_errors, error_message (KIP-467). v9 flexible.
- v10 current_leader + node_endpoints tagged (KIP-951). v11 same wire format.
"""

from __future__ import annotations

import asyncio
from typing import Any

from refka.protocol import ErrorCode
from refka.protocol.legacy_records import is_message_set
from refka.protocol.messages.produce import Produce
from refka.protocol.records import RecordError, parse_batches

from ..leader_hints import current_leader, hints_enabled, node_endpoints
from ..log import RecordTooLargeError
from ..log.producer_state import ProducerStateError
from ..log.validator import RecordValidationError, validate_message_set, validate_records
from ..logging import get_logger
from ..registry import handles

log = get_logger("refka.produce")

Resp = Produce.Response
RTopic = Resp.TopicProduceResponse
RPart = RTopic.PartitionProduceResponse
RLeader = RPart.LeaderIdAndEpoch
RRecordError = RPart.BatchIndexAndErrorMessage
REndpoint = Resp.NodeEndpoint

NONE = ErrorCode.NONE
HINTED = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)

# A partition marked for deletion, to a producer that did not send (False) or sent (True)
# the topic's undeleted_partition_count: see the header.
MARKED_ANSWER = {False: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, True: ErrorCode.INVALID_PARTITION_METADATA}


def _error(index: int, code: ErrorCode, message: str | None = None) -> Any:
    return RPart(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                 log_start_offset=-1, error_message=message)


def _refused(topic: str, index: int, e: RecordValidationError) -> Any:
    # As Kafka: a message only with a record validation error (INVALID_RECORD and the
    # like, LogAppendResult's hasCustomErrorMessage); a corrupt batch answers none, and
    # what was corrupt goes to the broker's log instead.
    if e.error_code == ErrorCode.CORRUPT_MESSAGE:
        log.info("produce_corrupt_records", topic=topic, partition=index, reason=e.message)
        r = _error(index, e.error_code, None)
    else:
        r = _error(index, e.error_code, e.message)
    if e.record_errors:
        r.record_errors = [RRecordError(batch_index=i, batch_index_error_message=m) for i, m in e.record_errors]
    return r


def _duplicate(part: Any, records: Any) -> tuple[Any, Any] | None:
    """(partition, its append info) when this broker leads ``part`` and its log has the
    idempotent batch ``records`` already (a retry); None otherwise, and for records that
    do not parse (they are refused anyway)."""
    if part is None or not part.is_leader or not records:
        return None
    try:
        headers = parse_batches(records)
    except RecordError:
        return None
    info = part.log.duplicate_of(headers)
    return (part, info) if info is not None else None


@handles(Produce.key, 0, 11)
def handle_produce(ctx, req):
    broker = ctx.broker
    acks = req.acks
    legacy = ctx.api_version < 3
    out = []
    waits = []
    hinted_leaders: set[int] = set()
    want_hints = ctx.api_version >= 10 and hints_enabled(broker.config)
    if req.transactional_id is not None:
        ctx.not_served("transactions: Produce with a transactional id", ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        for t in req.topic_data:
            out.append(RTopic(name=t.name, partition_responses=[
                _error(p.index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactions are not served")
                for p in t.partition_data]))
        return Resp(responses=out)
    if acks not in (0, 1, -1):
        for t in req.topic_data:
            out.append(RTopic(name=t.name, partition_responses=[
                _error(p.index, ErrorCode.INVALID_REQUIRED_ACKS) for p in t.partition_data]))
        return None if acks == 0 else Resp(responses=out)

    replicas = broker.replicas
    cache = broker.metadata
    for t in req.topic_data:
        name = t.name
        parts_out = []
        tmeta = cache.topic(name)
        min_isr = replicas.min_insync_replicas(name) if acks == -1 else 0
        undeleted = cache.undeleted_partition_count(name)
        stale_count = t.undeleted_partition_count >= 0 and undeleted >= 0 and t.undeleted_partition_count != undeleted
        for pd in t.partition_data:
            idx = pd.index
            if stale_count or cache.is_marked_for_deletion(name, idx):
                dup = _duplicate(replicas.get(name, idx), pd.records)
                if dup is not None:
                    part, info = dup
                    r = RPart(index=idx, error_code=NONE, base_offset=info.base_offset,
                              log_append_time_ms=info.log_append_time, log_start_offset=part.log_start_offset)
                    parts_out.append(r)
                    if acks == -1 and part.high_watermark <= info.last_offset:  # as an append's answer
                        waits.append((part, info.last_offset + 1, r, min_isr))
                elif stale_count:
                    parts_out.append(_error(idx, ErrorCode.INVALID_PARTITION_METADATA, (
                        f"undeleted_partition_count {t.undeleted_partition_count} of {name} is not the "
                        f"broker's {undeleted}")))
                else:
                    parts_out.append(_error(idx, MARKED_ANSWER[t.undeleted_partition_count >= 0], (
                        f"partition {idx} of {name} is marked for deletion (undeleted_partition_count "
                        f"{undeleted}): it takes no new records")))
                continue
            part = replicas.get(name, idx)
            if part is None or not part.is_leader:
                if part is None and (tmeta is None or idx not in tmeta.partitions):
                    parts_out.append(_error(idx, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                r = _error(idx, ErrorCode.NOT_LEADER_OR_FOLLOWER)
                if want_hints:
                    hint = current_leader(broker.replicas, broker.metadata, name, idx)
                    if hint is not None:
                        r.current_leader = RLeader(leader_id=hint[0], leader_epoch=hint[1])
                        hinted_leaders.add(hint[0])
                parts_out.append(r)
                continue
            records = pd.records
            cfg = part.log.config
            try:
                if legacy and is_message_set(records):
                    appended, batches = validate_message_set(records, cfg, name, idx)
                else:
                    appended = records
                    batches = validate_records(records, cfg, name, idx)
            except RecordValidationError as e:
                parts_out.append(_refused(name, idx, e))
                continue
            if acks == -1 and part.check_enough_replicas(min_isr) != NONE:
                parts_out.append(_error(idx, ErrorCode.NOT_ENOUGH_REPLICAS,
                                        f"the ISR {part.state.isr} is smaller than min.insync.replicas"))
                continue
            try:
                info = part.append(appended, batches, cfg.log_append_time)
            except RecordTooLargeError as e:
                parts_out.append(_error(idx, ErrorCode.MESSAGE_TOO_LARGE, str(e)))
                continue
            except ProducerStateError as e:
                parts_out.append(_error(idx, ErrorCode(e.error_code), str(e)))
                continue
            except OSError as e:
                parts_out.append(_error(idx, ErrorCode.KAFKA_STORAGE_ERROR, str(e)))
                continue
            if not info.duplicate:
                broker.traffic.produced(name, info.records_count, len(records))
            r = RPart(
                index=idx,
                error_code=NONE,
                base_offset=info.base_offset,
                log_append_time_ms=info.log_append_time if cfg.log_append_time else -1,
                log_start_offset=part.log_start_offset,
            )
            parts_out.append(r)
            if acks == -1 and part.high_watermark <= info.last_offset:
                waits.append((part, info.last_offset + 1, r, min_isr))
        out.append(RTopic(name=name, partition_responses=parts_out))

    if acks == 0:
        return None
    resp = Resp(responses=out)
    if hinted_leaders:
        resp.node_endpoints = node_endpoints(broker.metadata, hinted_leaders, ctx.conn.listener, REndpoint)
    if waits:
        # The connection awaits a coroutine a handler returns (and keeps order).
        return _await_isr(waits, req.timeout_ms, resp)
    return resp


async def _await_isr(waits, timeout_ms: int, resp):
    """acks=-1: each partition's acks=all wait (Partition.wait_for_high_watermark)."""
    deadline = asyncio.get_running_loop().time() + max(timeout_ms, 0) / 1000
    for part, needed, r, min_isr in waits:
        r.error_code = await part.wait_for_high_watermark(needed, deadline, min_isr)
    return resp
