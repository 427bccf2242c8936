"""JoinGroup (key 11), v0-v9.

Behavior:
- Classic groups only (any protocol_type: "consumer", "connect", ...), run
  by the group coordinator (group/membership.py, rules at its top). The
  answer waits while the group rebalances: up to the group's rebalance
  timeout, or group.initial.rebalance.delay.ms for a group that was Empty.
- The leader's answer lists every member and its metadata for the chosen
  protocol (the one all members support that most list first).
- Errors: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID
  (empty), INVALID_SESSION_TIMEOUT (outside group.min/max.session.timeout.ms),
  INCONSISTENT_GROUP_PROTOCOL (no protocol in common, another protocol_type),
  UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED
  (group.max.size), MEMBER_ID_REQUIRED (v4+ first join, with the id to use),
  REBALANCE_IN_PROGRESS (a second JoinGroup from the same member replaced this one).

Version notes:
- v1 rebalance_timeout_ms (KIP-62; v0 uses the session timeout). v2 throttle_time_ms.
- v3 as v2 (KIP-219). v4 MEMBER_ID_REQUIRED on a first join (KIP-394).
- v5 group_instance_id, static membership (KIP-345). v6 flexible.
- v7 protocol_type in the answer, null protocol_name (KIP-559). v8 reason (KIP-800).
- v9 skip_assignment: a returning static leader learns the members without
  assigning (KIP-814).
"""

from __future__ import annotations

from refka.protocol.messages.join_group import JoinGroup

from ..group.membership import JoinRequest
from ..registry import handles

Resp = JoinGroup.Response
RMember = Resp.JoinGroupResponseMember


def client_host(ctx) -> str:
    """The member's host as Kafka shows it ("/127.0.0.1")."""
    return "/" + ctx.conn.peer.rsplit(":", 1)[0]


@handles(JoinGroup.key, 0, 9)
async def handle_join_group(ctx, req):
    v = ctx.api_version
    result = await ctx.broker.groups.join_group(JoinRequest(
        group_id=req.group_id,
        member_id=req.member_id,
        group_instance_id=req.group_instance_id if v >= 5 else None,
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
        session_timeout_ms=req.session_timeout_ms,
        rebalance_timeout_ms=req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms,
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        api_version=v,
        reason=req.reason if v >= 8 else None,
    ))
    protocol_name = result.protocol_name
    if protocol_name is None and v < 7:
        protocol_name = ""  # not nullable before v7
    return Resp(
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[RMember(member_id=mid, group_instance_id=iid, metadata=meta) for mid, iid, meta in result.members],
    )
