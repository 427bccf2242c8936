"""ListGroups (key 16), v0-v5.

Behavior:
- The groups this broker coordinates (admin clients ask every broker), each
  with its protocol_type ("" for a group that only commits offsets); v4+ with
  its state, v5+ with its type ("classic": the only kind served).
- states_filter (v4+) and types_filter (v5+) keep only the groups named
  there, compared without case; empty filters keep all.
- COORDINATOR_LOAD_IN_PROGRESS while an offsets partition is still loading
  (the groups already loaded are listed).

Version notes:
- v1 throttle_time_ms. v2 as v1 (KIP-219). v3 flexible.
- v4 states_filter and group_state (KIP-518). v5 types_filter and group_type (KIP-848).
"""

from __future__ import annotations

from refka.protocol.messages.list_groups import ListGroups

from ..group.coordinator import GROUP_TYPE_CLASSIC
from ..registry import handles

Resp = ListGroups.Response
RGroup = Resp.ListedGroup


@handles(ListGroups.key, 0, 5)
def handle_list_groups(ctx, req):
    v = ctx.api_version
    err, groups = ctx.broker.groups.list_groups(
        req.states_filter if v >= 4 else (), req.types_filter if v >= 5 else ()
    )
    return Resp(error_code=err, groups=[
        RGroup(group_id=gid, protocol_type=ptype, group_state=state, group_type=GROUP_TYPE_CLASSIC)
        for gid, ptype, state in groups
    ])
