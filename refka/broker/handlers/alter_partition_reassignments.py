"""AlterPartitionReassignments (key 45), v0-v1.

Behavior:
- Served by the active controller (clients send it there, as to Kafka);
  another broker answers NOT_CONTROLLER at the top.
- Each partition's replicas start (or change the target of) a reassignment;
  null cancels the one in progress. The controller (controller/reassignment.py)
  writes the ongoing reassignment into the topic znode (replicas,
  adding_replicas, removing_replicas), has the added replicas follow, and
  completes once every target replica is in the ISR: leader from the target,
  the removed replicas stopped and deleted. The answer comes once the
  reassignment is started (or cancelled), not completed.
- Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT
  (empty, a broker twice, a broker not alive), NO_REASSIGNMENT_IN_PROGRESS (a
  cancel with none running), INVALID_REPLICATION_FACTOR (v1,
  allow_replication_factor_change false and a different replica count).
  A partition named twice is INVALID_REQUEST.

Version notes:
- v0 flexible (KIP-455). v1 allow_replication_factor_change (KIP-860).
"""

from __future__ import annotations

from refka.protocol import ErrorCode
from refka.protocol.messages.alter_partition_reassignments import AlterPartitionReassignments

from ..registry import handles

Resp = AlterPartitionReassignments.Response
RTopic = Resp.ReassignableTopicResponse
RPart = RTopic.ReassignablePartitionResponse


@handles(AlterPartitionReassignments.key, 0, 1)
async def handle_alter_partition_reassignments(ctx, req):
    side = ctx.broker.controller_side
    controller = side.active_controller if side is not None else None
    allow = req.allow_replication_factor_change if ctx.api_version >= 1 else True
    if controller is None:
        return Resp(throttle_time_ms=0, allow_replication_factor_change=allow, error_code=ErrorCode.NOT_CONTROLLER,
                    error_message="This is not the correct controller for this cluster.", responses=[])
    targets: dict[tuple[str, int], list[int] | None] = {}
    twice: set[tuple[str, int]] = set()
    for t in req.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if tp in targets:
                twice.add(tp)
            targets[tp] = None if p.replicas is None else list(p.replicas)
    results = await controller.alter_partition_reassignments(
        {tp: r for tp, r in targets.items() if tp not in twice}, allow)
    responses = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if tp in twice:
                code, message = ErrorCode.INVALID_REQUEST, "The partition is named more than once."
            else:
                code, message = results.get(tp, (ErrorCode.NOT_CONTROLLER, None))
            parts.append(RPart(partition_index=p.partition_index, error_code=code, error_message=message))
        responses.append(RTopic(name=t.name, partitions=parts))
    return Resp(throttle_time_ms=0, allow_replication_factor_change=allow, error_code=ErrorCode.NONE,
                responses=responses)
