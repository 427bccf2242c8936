"""ConsumerGroupPosition (refka key 10254), v0: KIP-253's positions shared within a consumer group.

Behavior:
- Served by the group's coordinator (broker/group/coordinator.py finds the
  group and checks the member, broker/group/positions.py keeps who needs
  which partition's position and the latest one reported).
- The member's reported positions (position >= 0) of partitions assigned to
  it become the group's; the partitions it flags need_position replace the
  ones it needed before. The answer lists, sorted by topic and partition,
  each partition it needs and each partition assigned to it that some member
  needs (need_position = true: report it next time), each with the group's
  latest known position (-1: none).
- Errors (error_code, no topics) as for Heartbeat: NOT_COORDINATOR,
  COORDINATOR_LOAD_IN_PROGRESS (the group cannot be checked yet),
  INVALID_GROUP_ID, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
  REBALANCE_IN_PROGRESS (also while CompletingRebalance: no assignment yet),
  COORDINATOR_NOT_AVAILABLE for a group being unloaded.
- It is not a heartbeat: the member's session timeout is Heartbeat's.

Version notes:
- v0 (refka, KIP-253) is flexible.
"""

from __future__ import annotations

from itertools import groupby

from refka.protocol.messages.consumer_group_position import ConsumerGroupPosition

from ..group.positions import PositionReport
from ..registry import handles

Resp = ConsumerGroupPosition.Response
RTopic = Resp.ConsumerGroupPositionResponseTopic
RPart = RTopic.ConsumerGroupPositionResponsePartition


@handles(ConsumerGroupPosition.key, 0, 0)
def handle_consumer_group_position(ctx, req):
    reports = [PositionReport((t.topic, p.partition), p.need_position, p.position)
               for t in req.topics for p in t.partitions]
    err, answers = ctx.broker.groups.group_positions(req.group_id, req.generation_id, req.member_id, reports)
    topics = [RTopic(topic=topic, partitions=[RPart(partition=a.tp[1], need_position=a.need_position,
                                                    position=a.position) for a in entries])
              for topic, entries in groupby(answers, key=lambda a: a.tp[0])]
    return Resp(throttle_time_ms=0, topics=topics, error_code=err)
