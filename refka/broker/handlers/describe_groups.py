"""DescribeGroups (key 15), v0-v5.

Behavior:
- Per group: its state (Empty, PreparingRebalance, CompletingRebalance,
  Stable, Dead), protocol_type, and members (member id, group_instance_id,
  client id, client host). Only a Stable group shows its chosen protocol and
  each member's subscription and assignment for it (as Kafka does).
- A group the coordinator does not have is state "Dead" with no error.
  NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS per group otherwise.
- authorized_operations (v3+), when asked (include_authorized_operations), of a
  group answered without error: every operation on a group, as Kafka answers
  with no authorizer (acl_operations.py); otherwise -2^31.

Version notes:
- v1 throttle_time_ms. v2 as v1 (KIP-219). v3 authorized operations (KIP-430).
- v4 group_instance_id (KIP-345). v5 flexible.
"""

from __future__ import annotations

from refka.protocol.messages.describe_groups import DescribeGroups

from .. import acl_operations
from ..registry import handles

Resp = DescribeGroups.Response
RGroup = Resp.DescribedGroup
RMember = RGroup.DescribedGroupMember


@handles(DescribeGroups.key, 0, 5)
def handle_describe_groups(ctx, req):
    groups = ctx.broker.groups
    out = []
    asked = ctx.api_version >= 3 and req.include_authorized_operations
    for gid in req.groups:
        err, g = groups.describe_group(gid)
        out.append(RGroup(
            error_code=err,
            group_id=gid,
            group_state=g.state,
            protocol_type=g.protocol_type,
            protocol_data=g.protocol,
            members=[
                RMember(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                        client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment)
                for m in g.members
            ],
            authorized_operations=acl_operations.GROUP if asked and err == 0 else acl_operations.NOT_ASKED,
        ))
    return Resp(groups=out)
