"""OffsetDelete (key 47), v0.

Behavior:
- Deletes a group's committed offsets for the partitions named (tombstones in
  __consumer_offsets); an Empty group left without offsets is deleted too.
- An Empty group may delete any; a consumer group with members only those of
  topics none of them subscribes to (GROUP_SUBSCRIBED_TO_TOPIC for the
  others); any other group with members is NON_EMPTY_GROUP.
- Top-level errors: GROUP_ID_NOT_FOUND, NOT_COORDINATOR,
  COORDINATOR_LOAD_IN_PROGRESS. Per partition: UNKNOWN_TOPIC_OR_PARTITION
  for a partition the metadata does not have.

Version notes:
- v0 only (KIP-496).
"""

from __future__ import annotations

from refka.protocol import ErrorCode
from refka.protocol.messages.offset_delete import OffsetDelete

from ..registry import handles

Resp = OffsetDelete.Response
RTopic = Resp.OffsetDeleteResponseTopic
RPart = RTopic.OffsetDeleteResponsePartition


@handles(OffsetDelete.key, 0, 0)
async def handle_offset_delete(ctx, req):
    broker = ctx.broker
    errors: dict[tuple[str, int], ErrorCode] = {}
    wanted = []
    for t in req.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if broker.metadata.partition(*tp) is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                wanted.append(tp)
    top, result = await broker.groups.delete_offsets(req.group_id, wanted)
    if top:
        return Resp(error_code=top, topics=[])
    errors.update(result)
    return Resp(error_code=ErrorCode.NONE, topics=[
        RTopic(name=t.name, partitions=[
            RPart(partition_index=p.partition_index, error_code=errors.get((t.name, p.partition_index), ErrorCode.NONE))
            for p in t.partitions
        ])
        for t in req.topics
    ])
