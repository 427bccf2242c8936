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
- What the group would keep in __consumer_offsets must fit Kafka's
  non-flexible record strings (32767 bytes of UTF-8; flexible versions carry
  longer ones): a longer group id is INVALID_GROUP_ID; a longer protocol type
  or protocol name, or a group instance id (else client id) too long to
  prefix a member id ("<it>-<uuid>"), INVALID_REQUEST. Refused before the
  group exists, so no other client's ListGroups or DescribeGroups meets a
  string its version cannot carry. (Kafka accepts them and fails to store
  the group at SyncGroup: UNKNOWN_SERVER_ERROR.)

Version notes:
- v1 rebalance_timeout_ms (KIP-62; v0 uses the session timeout). v2 throttle_time_ms.
- v3 as v2 (KIP-219). v4 MEMBER_ID_REQUIRED on a first join (KIP-394).
- v5 group_instance_id, static membership (KIP-345). v6 flexible.
- v7 protocol_type in the answer, null protocol_name (KIP-559). v8 reason (KIP-800).
- v9 skip_assignment: a returning static leader learns the members without
  assigning (KIP-814).
"""

from __future__ import annotations

from typing import Any

from refka.protocol import ErrorCode
from refka.protocol.messages.join_group import JoinGroup

from ..group import storage
from ..group.membership import JoinRequest
from ..group.metadata import JoinResult
from ..registry import handles

Resp = JoinGroup.Response
RMember = Resp.JoinGroupResponseMember


def client_host(ctx) -> str:
    """The member's host as Kafka shows it ("/127.0.0.1")."""
    return "/" + ctx.conn.peer.rsplit(":", 1)[0]


_MEMBER_ID_SUFFIX = len("-00000000-0000-0000-0000-000000000000")


def _unstorable(req, v: int, client_id: str) -> ErrorCode | None:
    """The error for a string the group could not store (see the header), else None."""
    if not storage.fits(req.group_id):
        return ErrorCode.INVALID_GROUP_ID
    prefix = (req.group_instance_id if v >= 5 else None) or client_id
    if len(prefix.encode()) + _MEMBER_ID_SUFFIX > storage.MAX_STRING_BYTES:
        return ErrorCode.INVALID_REQUEST
    if not storage.fits(req.protocol_type) or not all(storage.fits(p.name) for p in req.protocols):
        return ErrorCode.INVALID_REQUEST
    return None


@handles(JoinGroup.key, 0, 9)
async def handle_join_group(ctx, req):
    v = ctx.api_version
    refused = _unstorable(req, v, ctx.client_id or "")
    if refused is not None:
        return _response(JoinResult(refused, member_id=req.member_id), v)
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
    return _response(result, v)


def _response(result: JoinResult, v: int) -> Any:
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
