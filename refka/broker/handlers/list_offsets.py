"""ListOffsets (key 2), v1-v8.

Behavior:
- timestamp -1 (latest): the high watermark; -2 (earliest) and -4 (earliest
  local, v8): the log start offset; -3 (max timestamp, v7): the offset and
  timestamp of the record with the largest timestamp; any other timestamp:
  the first offset whose record timestamp is at or after it (found through
  the time index, then the batch's records), -1 if none below the high
  watermark.
- A request from a replica (replica_id >= 0, as Kafka: no isolation level
  applies) reads to the log end offset instead of the high watermark: latest
  is the log end offset. KIP-253's drain check asks so (the controller's
  partition_deletion.py): a marked partition is empty only when nothing is
  in its log, not only nothing below its high watermark.
- Each answer carries the leader epoch of the offset returned (v4+, KIP-320).
- Not the leader: NOT_LEADER_OR_FOLLOWER; unknown: UNKNOWN_TOPIC_OR_PARTITION;
  current_leader_epoch checked (v4+): FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH.
- isolation_level read_committed reads the last stable offset, which equals
  the high watermark: no transactions are served.
- A search by timestamp or for the max timestamp decodes the records of the
  batch it lands on. Records that do not decode (stored before leaders walked
  every batch's records, by an older refka) answer that partition
  CORRUPT_MESSAGE, with a warning line naming it; the other partitions and the
  connection carry on. Kafka 3.9 answers UNKNOWN_SERVER_ERROR there (the
  KafkaException a failed decompression raises maps to nothing) or
  INVALID_RECORD (records that do not parse).

Version notes:
- v1 one offset per partition, no max_num_offsets. v2 isolation_level. v4
  current_leader_epoch and leader_epoch (KIP-320). v6 flexible. v7
  MAX_TIMESTAMP (KIP-734). v8 EARLIEST_LOCAL (KIP-405).
"""

from __future__ import annotations

from typing import Any

from refka.protocol import ErrorCode
from refka.protocol.messages.list_offsets import ListOffsets
from refka.protocol.records import RecordError

from ..leader_hints import local_leader
from ..logging import get_logger
from ..registry import handles

log = get_logger("refka.list_offsets")

Resp = ListOffsets.Response
RTopic = Resp.ListOffsetsTopicResponse
RPart = RTopic.ListOffsetsPartitionResponse

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -1, -2, -3, -4


def _answer(broker, topic: str, p, replica_id: int) -> Any:
    out = RPart(partition_index=p.partition_index, error_code=ErrorCode.NONE, timestamp=-1, offset=-1, leader_epoch=-1)
    part, err = local_leader(broker.replicas, broker.metadata, topic, p.partition_index, p.current_leader_epoch)
    if part is None:
        out.error_code = err
        return out
    plog = part.log
    ts = p.timestamp
    # Kafka's lastFetchableOffset: a consumer reads below the high watermark, a replica to the log end
    last = part.high_watermark if replica_id < 0 else plog.log_end_offset
    if ts == LATEST:
        out.offset = last
        out.leader_epoch = plog.epoch_for_offset(max(out.offset - 1, 0)) if out.offset > 0 else plog.latest_epoch()
    elif ts in (EARLIEST, EARLIEST_LOCAL):
        out.offset = part.log_start_offset
        out.leader_epoch = plog.epoch_for_offset(out.offset)
    elif ts < 0 and ts != MAX_TIMESTAMP:
        out.error_code = ErrorCode.INVALID_REQUEST
    else:
        try:
            found = plog.max_timestamp_offset() if ts == MAX_TIMESTAMP else plog.offset_for_timestamp(ts)
        except RecordError as e:
            log.warning("list_offsets_records_unreadable", topic=topic, partition=p.partition_index,
                        timestamp=ts, error=str(e))
            out.error_code = ErrorCode.CORRUPT_MESSAGE
            return out
        if found is not None and found[0] < last:
            out.offset, out.timestamp, out.leader_epoch = found
    return out


@handles(ListOffsets.key, 1, 8)
def handle_list_offsets(ctx, req):
    broker = ctx.broker
    topics = []
    for t in req.topics:
        topics.append(RTopic(name=t.name, partitions=[_answer(broker, t.name, p, req.replica_id) for p in t.partitions]))
    return Resp(topics=topics)
