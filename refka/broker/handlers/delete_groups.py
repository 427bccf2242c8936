"""DeleteGroups (key 42), v0-v2.

Behavior:
- Deletes Empty groups: tombstones for the group and its committed offsets
  go to __consumer_offsets, and the group is gone at once.
- Per group: GROUP_ID_NOT_FOUND (unknown here), NON_EMPTY_GROUP (it has
  members), NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS.

Version notes:
- v1 as v0 (KIP-219). v2 flexible.
"""

from __future__ import annotations

from refka.protocol.messages.delete_groups import DeleteGroups

from ..registry import handles

Resp = DeleteGroups.Response
RResult = Resp.DeletableGroupResult


@handles(DeleteGroups.key, 0, 2)
def handle_delete_groups(ctx, req):
    results = ctx.broker.groups.delete_groups(list(req.groups_names))
    return Resp(results=[RResult(group_id=gid, error_code=results[gid]) for gid in req.groups_names])
