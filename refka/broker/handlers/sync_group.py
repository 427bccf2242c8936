"""SyncGroup (key 14), v0-v5.

Behavior:
- After a rebalance's join phase every member sends SyncGroup; the leader's
  carries the assignment. The coordinator stores it (a group metadata record
  in __consumer_offsets), the group becomes Stable, and every waiting member
  gets its own assignment. A member of a Stable group gets its current one.
- Members missing from the leader's assignment get an empty one.
- Errors: NOT_COORDINATOR, REBALANCE_IN_PROGRESS (the group prepares another
  rebalance, or the coordinator is still loading and lost this one),
  UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION,
  INCONSISTENT_GROUP_PROTOCOL (v5 protocol_type/protocol_name not the
  group's), INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE (the group was deleted).

Version notes:
- v1 throttle_time_ms. v2 as v1 (KIP-219). v3 group_instance_id (KIP-345).
- v4 flexible. v5 protocol_type and protocol_name both ways (KIP-559).
"""

from __future__ import annotations

from refka.protocol.messages.sync_group import SyncGroup

from ..registry import handles

Resp = SyncGroup.Response


@handles(SyncGroup.key, 0, 5)
async def handle_sync_group(ctx, req):
    v = ctx.api_version
    result = await ctx.broker.groups.sync_group(
        req.group_id,
        req.generation_id,
        req.member_id,
        req.group_instance_id if v >= 3 else None,
        req.protocol_type if v >= 5 else None,
        req.protocol_name if v >= 5 else None,
        {a.member_id: bytes(a.assignment) for a in req.assignments},
    )
    return Resp(
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
