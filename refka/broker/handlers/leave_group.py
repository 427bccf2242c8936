"""LeaveGroup (key 13), v0-v5.

Behavior:
- The members leave at once (no wait for their session timeout) and a
  Stable or CompletingRebalance group rebalances; a rebalance waiting for
  them may complete.
- v3+ removes several members, each by member id, or by group_instance_id
  alone (member id "") for an admin's removal of a static member; each gets
  its own error (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID). v0-v2 leave one
  member, its error is the top-level error.
- Top-level errors: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
  INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE (the group was deleted).

Version notes:
- v1 throttle_time_ms. v2 as v1 (KIP-219). v3 batch of members (KIP-345).
- v4 flexible. v5 per-member reason (KIP-800).
"""

from __future__ import annotations

from refka.protocol import ErrorCode
from refka.protocol.messages.leave_group import LeaveGroup

from ..registry import handles

Resp = LeaveGroup.Response
RMember = Resp.MemberResponse


@handles(LeaveGroup.key, 0, 5)
def handle_leave_group(ctx, req):
    groups = ctx.broker.groups
    if ctx.api_version < 3:
        top, errors = groups.leave_group(req.group_id, [(req.member_id, None)])
        return Resp(error_code=top if top else (errors[0] if errors else ErrorCode.NONE))
    leaving = [(m.member_id, m.group_instance_id) for m in req.members]
    top, errors = groups.leave_group(req.group_id, leaving)
    if top:
        return Resp(error_code=top, members=[])
    return Resp(
        error_code=ErrorCode.NONE,
        members=[
            RMember(member_id=mid, group_instance_id=iid, error_code=err)
            for (mid, iid), err in zip(leaving, errors, strict=True)
        ],
    )
