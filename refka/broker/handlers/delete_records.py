"""DeleteRecords (key 21), v0-v2.

Behavior:
- Moves each partition's log start offset up to the given offset (-1: the
  high watermark); whole segments below it are deleted, and fetches below it
  get OFFSET_OUT_OF_RANGE. Answers the new low watermark.
- An offset above the high watermark is OFFSET_OUT_OF_RANGE; a partition
  this broker does not lead NOT_LEADER_OR_FOLLOWER; unknown
  UNKNOWN_TOPIC_OR_PARTITION. Lowering the log start offset is a no-op.

Version notes:
- v1 same as v0. v2 flexible.
"""

from __future__ import annotations

from typing import Any

from refka.protocol import ErrorCode
from refka.protocol.messages.delete_records import DeleteRecords

from ..leader_hints import local_leader
from ..registry import handles

Resp = DeleteRecords.Response
RTopic = Resp.DeleteRecordsTopicResult
RPart = RTopic.DeleteRecordsPartitionResult


def _delete(broker, topic: str, p) -> Any:
    out = RPart(partition_index=p.partition_index, low_watermark=-1, error_code=ErrorCode.NONE)
    part, err = local_leader(broker.replicas, broker.metadata, topic, p.partition_index)
    if part is None:
        out.error_code = err
        return out
    offset = part.high_watermark if p.offset == -1 else p.offset
    if offset < 0 or offset > part.high_watermark:
        out.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
        return out
    if offset > part.log_start_offset:
        part.log.delete_records_before(offset)
    out.low_watermark = part.log_start_offset
    return out


@handles(DeleteRecords.key, 0, 2)
def handle_delete_records(ctx, req):
    broker = ctx.broker
    return Resp(topics=[RTopic(name=t.name, partitions=[_delete(broker, t.name, p) for p in t.partitions])
                        for t in req.topics])
