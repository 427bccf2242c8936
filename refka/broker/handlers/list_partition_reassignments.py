"""ListPartitionReassignments (key 46), v0.

Behavior:
- Served by the active controller; another broker answers NOT_CONTROLLER.
- Lists the reassignments in progress (the topic znodes' adding_replicas /
  removing_replicas, controller/reassignment.py) of the named partitions, or
  all of them when topics is null: replicas (target then origin),
  adding_replicas, removing_replicas. A partition with none in progress, or
  unknown, is left out, as Kafka does.

Version notes:
- v0 flexible (KIP-455).
"""

from __future__ import annotations

from collections import defaultdict

from refka.protocol import ErrorCode
from refka.protocol.messages.list_partition_reassignments import ListPartitionReassignments

from ..registry import handles

Resp = ListPartitionReassignments.Response
RTopic = Resp.OngoingTopicReassignment
RPart = RTopic.OngoingPartitionReassignment


@handles(ListPartitionReassignments.key, 0, 0)
def handle_list_partition_reassignments(ctx, req):
    side = ctx.broker.controller_side
    controller = side.active_controller if side is not None else None
    if controller is None:
        return Resp(throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER,
                    error_message="This is not the correct controller for this cluster.", topics=[])
    wanted = None if req.topics is None else [(t.name, p) for t in req.topics for p in t.partition_indexes]
    by_topic: dict[str, list] = defaultdict(list)
    for (name, p), (replicas, adding, removing) in sorted(controller.ongoing_reassignments(wanted).items()):
        by_topic[name].append(RPart(partition_index=p, replicas=replicas, adding_replicas=adding,
                                    removing_replicas=removing))
    return Resp(throttle_time_ms=0, error_code=ErrorCode.NONE,
                topics=[RTopic(name=n, partitions=ps) for n, ps in by_topic.items()])
