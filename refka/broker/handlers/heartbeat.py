"""Heartbeat (key 12), v0-v4.

Behavior:
- Keeps a member in its group: each one restarts the member's session
  timeout (session_timeout_ms of its JoinGroup); without one in that time the
  member is removed and the group rebalances.
- REBALANCE_IN_PROGRESS while the group prepares a rebalance (the member
  must rejoin); ILLEGAL_GENERATION for another generation; UNKNOWN_MEMBER_ID
  for a member the group does not have; FENCED_INSTANCE_ID for a static
  member id its instance has replaced; NOT_COORDINATOR; INVALID_GROUP_ID.
- While the coordinator loads the group's partition the answer is NONE (the
  member cannot be checked yet; Kafka does the same).

Version notes:
- v1 throttle_time_ms. v2 as v1 (KIP-219). v3 group_instance_id (KIP-345). v4 flexible.
"""

from __future__ import annotations

from refka.protocol.messages.heartbeat import Heartbeat

from ..registry import handles

Resp = Heartbeat.Response


@handles(Heartbeat.key, 0, 4)
def handle_heartbeat(ctx, req):
    err = ctx.broker.groups.heartbeat(
        req.group_id, req.generation_id, req.member_id, req.group_instance_id if ctx.api_version >= 3 else None
    )
    return Resp(error_code=err)
