"""The group membership protocol: JoinGroup, SyncGroup, Heartbeat and LeaveGroup.

Kafka's classic rebalance protocol (its GroupCoordinator's join, sync,
heartbeat and leave handling and their delayed operations), run over a group
the coordinator (coordinator.py) has found: the coordinator answers
INVALID_GROUP_ID, NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS first, and
writes the group metadata record for this module. What a group is and which
moves it may make is the model's (metadata.py). The rules:

- A first JoinGroup has an empty member id. v4+ answers it at once with
  MEMBER_ID_REQUIRED and a new id (the member is "pending" until it joins
  with it, or for one session timeout); v0-v3 and static members
  (group_instance_id, KIP-345) are added at once.
- A join into Empty starts the rebalance after group.initial.rebalance.delay.ms,
  extended by the same delay (bounded by the rebalance timeout) while new
  members keep arriving. Otherwise the join phase ends when every member and
  no pending member has rejoined, or after the group's rebalance timeout (the
  largest of its members' rebalance_timeout_ms, which is the consumer's
  max.poll.interval.ms): dynamic members that did not rejoin are removed.
  Ending it bumps the generation, picks the protocol every member supports
  that most members list first, and answers every JoinGroup; the leader's
  answer carries every member's subscription.
- SyncGroup from the leader stores the assignment (group metadata record) and
  answers every member waiting in SyncGroup; members that do not sync within
  the rebalance timeout are removed and the group rebalances again.
- Heartbeats keep a member: a member that sends none for session_timeout_ms is
  removed (members waiting in JoinGroup/SyncGroup are covered by the
  rebalance timeout instead). Heartbeat says REBALANCE_IN_PROGRESS while the
  group prepares a rebalance; a wrong generation is ILLEGAL_GENERATION, an
  unknown member UNKNOWN_MEMBER_ID, a static member id that is not the
  current one for its instance FENCED_INSTANCE_ID.
- A new member, a member changing its protocols, the leader rejoining,
  LeaveGroup, and a removed member all rebalance a Stable or
  CompletingRebalance group. A static member rejoining with an empty member
  id takes over its old member id's place: in a Stable group whose protocol
  would not change there is no rebalance (the group keeps its generation and
  assignment).

Timers (timer.py) are keyed per group and member: a group's join phase and
its pending syncs, each member's session (a pending member's too), replaced
on each heartbeat. A group loaded from the log gives its members a fresh
session timeout (``on_group_loaded``); a group unloaded answers its waiting
members NOT_COORDINATOR and is Dead (``on_group_unloaded``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from refka.protocol import ErrorCode

from ..logging import get_logger
from . import storage
from .metadata import Group, GroupState, IllegalGroupTransition, JoinResult, Member, SyncResult
from .timer import Timer

log = get_logger("refka.group")

E = ErrorCode
S = GroupState


@dataclass(slots=True)
class JoinRequest:
    """A JoinGroup as the handler read it (one member, every version's fields)."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    api_version: int
    reason: str | None = None


def _join_key(g: Group) -> tuple[Any, ...]:
    return ("join", g.group_id)


def _sync_key(g: Group) -> tuple[Any, ...]:
    return ("sync", g.group_id)


def _heartbeat_key(g: Group, member_id: str) -> tuple[Any, ...]:
    return ("heartbeat", g.group_id, member_id)


class GroupMembership:
    """The group membership protocol over the groups the coordinator finds (see the module
    docstring). It gets a ``timer``, a ``clock`` (ms), the coordinator's two writes of the
    group metadata record (``append_group(group, assignment)`` appends it,
    ``after_write(group, result, then)`` calls ``then(error)`` once it is replicated), and
    three settings: group.max.size, group.initial.rebalance.delay.ms and how long a new
    member may take to complete its first join."""

    def __init__(self, timer: Timer, clock: Callable[[], int],
                 append_group: Callable[[Group, dict[str, bytes]], storage.AppendResult],
                 after_write: Callable[[Group, storage.AppendResult, Callable[[ErrorCode], None]], None],
                 *, max_size: int, initial_rebalance_delay_ms: int, new_member_join_timeout_ms: int) -> None:
        self.timer = timer
        self.clock = clock
        self._append_group = append_group
        self._after_write = after_write
        self.max_size = max_size
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.new_member_join_timeout_ms = new_member_join_timeout_ms

    # -- groups loaded and unloaded

    def on_group_loaded(self, g: Group) -> None:
        """Live clients carry on, dead ones are expired: each member a fresh session timeout.
        A group over group.max.size rebalances: rejoins beyond the size are refused."""
        for m in g.members.values():
            self._reschedule_heartbeat(g, m)
        if len(g.members) > self.max_size:
            self._prepare_rebalance(g, "loaded group is over group.max.size")

    def on_group_unloaded(self, g: Group) -> None:
        """Another broker coordinates the group now: whoever waits is told to find it."""
        for m in g.members.values():
            m.complete_join(JoinResult(E.NOT_COORDINATOR, member_id=m.member_id))
            m.complete_sync(SyncResult(E.NOT_COORDINATOR))
            self.timer.cancel(_heartbeat_key(g, m.member_id))
        for mid in g.pending_members:
            self.timer.cancel(_heartbeat_key(g, mid))
        self.timer.cancel(_join_key(g))
        self.timer.cancel(_sync_key(g))
        g.transition(S.DEAD, self.clock())

    # -- JoinGroup

    async def join_group(self, g: Group, req: JoinRequest) -> JoinResult:
        """JoinGroup into a group the coordinator found (or made, for a first join)."""
        if not self._accept_joining_member(g, req.member_id):
            if req.member_id in g.members:
                self._remove_member_and_update_group(g, g.members[req.member_id], "group is over group.max.size")
            return JoinResult(E.GROUP_MAX_SIZE_REACHED)
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        if req.member_id == "":
            self._join_new_member(g, req, waiter)
        else:
            self._join_existing_member(g, req, waiter)
        return await asyncio.shield(waiter)

    def _accept_joining_member(self, g: Group, member_id: str) -> bool:
        if g.state in (S.EMPTY, S.DEAD):
            return True
        if g.state is S.PREPARING_REBALANCE:
            m = g.members.get(member_id)
            return (m is not None and m.join_waiter is not None) or g.awaiting_join() < self.max_size
        return member_id in g.members or len(g.members) < self.max_size

    def _join_new_member(self, g: Group, req: JoinRequest, waiter: asyncio.Future[JoinResult]) -> None:
        if g.state is S.DEAD:
            waiter.set_result(JoinResult(E.COORDINATOR_NOT_AVAILABLE))
            return
        if not g.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            waiter.set_result(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_id = f"{req.group_instance_id or req.client_id}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            existing = g.static_members.get(req.group_instance_id)
            if existing is not None:
                self._update_static_member(g, req, existing, new_id, waiter)
            else:
                self._add_member_and_rebalance(g, req, new_id, waiter)
        elif req.api_version >= 4:
            # KIP-394: the member must come back with this id before it counts.
            g.pending_members.add(new_id)
            self.timer.schedule(_heartbeat_key(g, new_id), req.session_timeout_ms, self._heartbeat_expired, g, new_id)
            waiter.set_result(JoinResult(E.MEMBER_ID_REQUIRED, member_id=new_id))
        else:
            self._add_member_and_rebalance(g, req, new_id, waiter)

    def _join_existing_member(self, g: Group, req: JoinRequest, waiter: asyncio.Future[JoinResult]) -> None:
        mid = req.member_id
        if g.state is S.DEAD:
            waiter.set_result(JoinResult(E.COORDINATOR_NOT_AVAILABLE, member_id=mid))
            return
        if not g.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            waiter.set_result(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=mid))
            return
        if mid in g.pending_members:
            if req.group_instance_id is not None:
                waiter.set_result(JoinResult(E.UNKNOWN_MEMBER_ID, member_id=mid))
                return
            g.pending_members.discard(mid)
            self._add_member_and_rebalance(g, req, mid, waiter)
            return
        err = g.validate_member(mid, req.group_instance_id)
        if err:
            waiter.set_result(JoinResult(err, member_id=mid))
            return
        m = g.members[mid]
        if g.state is S.PREPARING_REBALANCE:
            self._update_member_and_rebalance(g, m, req, waiter, "member joins during the rebalance")
        elif g.state is S.COMPLETING_REBALANCE:
            if m.matches(req.protocols):
                # Lost the first answer: the same one again.
                waiter.set_result(self._join_answer(g, m, with_members=g.is_leader(mid)))
            else:
                self._update_member_and_rebalance(g, m, req, waiter, "member changed its protocols")
        elif g.state is S.STABLE:
            if g.is_leader(mid) or not m.matches(req.protocols):
                # The leader's JoinGroup asks for a rebalance (e.g. its topics' partitions changed).
                reason = "leader rejoins" if g.is_leader(mid) else "member changed its protocols"
                self._update_member_and_rebalance(g, m, req, waiter, reason)
            else:
                waiter.set_result(self._join_answer(g, m, with_members=False))
        else:  # Empty: the member is from a generation that is gone
            waiter.set_result(JoinResult(E.UNKNOWN_MEMBER_ID, member_id=mid))

    def _join_answer(self, g: Group, m: Member, *, with_members: bool, leader: str | None = None,
                     skip_assignment: bool = False) -> JoinResult:
        return JoinResult(
            E.NONE,
            member_id=m.member_id,
            generation_id=g.generation_id,
            protocol_type=g.protocol_type,
            protocol_name=g.protocol_name,
            leader_id=(leader if leader is not None else g.leader_id) or "",
            members=g.members_for_leader() if with_members else [],
            skip_assignment=skip_assignment,
        )

    def _add_member_and_rebalance(self, g: Group, req: JoinRequest, member_id: str,
                                  waiter: asyncio.Future[JoinResult]) -> None:
        m = Member(member_id, req.group_instance_id, req.client_id, req.client_host, req.rebalance_timeout_ms,
                   req.session_timeout_ms, req.protocol_type, req.protocols)
        m.is_new = True
        if g.state is S.PREPARING_REBALANCE and g.previous_state is S.EMPTY:
            g.new_member_added = True
        g.add(m, waiter)
        # A new member cannot heartbeat until its first join completes: bound that wait.
        self._reschedule_heartbeat(g, m, self.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(g, f"member {member_id} joins")

    def _update_member_and_rebalance(self, g: Group, m: Member, req: JoinRequest,
                                     waiter: asyncio.Future[JoinResult], reason: str) -> None:
        g.update_member(m, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, waiter)
        self._maybe_prepare_rebalance_or_complete_join(g, reason)

    def _update_static_member(self, g: Group, req: JoinRequest, old_id: str, new_id: str,
                              waiter: asyncio.Future[JoinResult]) -> None:
        instance_id = req.group_instance_id
        assert instance_id is not None
        current_leader = g.leader_id
        m = g.replace_static_member(instance_id, old_id, new_id)
        self.timer.cancel(_heartbeat_key(g, old_id))
        self._reschedule_heartbeat(g, m)
        old = (m.protocols, m.rebalance_timeout_ms, m.session_timeout_ms)
        g.update_member(m, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, waiter)
        if g.state is S.STABLE:
            if g.protocol_name == g.select_protocol():
                # KIP-345: same protocol, no rebalance; remember the new member id.
                assignment = {mid: mm.assignment for mid, mm in g.members.items()}
                res = self._append_group(g, assignment)
                if res.error:
                    # Not stored: the old member id stays the instance's.
                    m.join_waiter = None
                    m.protocols, m.rebalance_timeout_ms, m.session_timeout_ms = old
                    g.replace_static_member(instance_id, new_id, old_id)
                    self.timer.cancel(_heartbeat_key(g, new_id))
                    self._reschedule_heartbeat(g, m)
                    waiter.set_result(JoinResult(res.error, generation_id=g.generation_id,
                                                 leader_id=current_leader or ""))
                    return
                if req.api_version >= 9:
                    # KIP-814: the leader learns the members but must not assign.
                    leader = g.is_leader(new_id)
                    m.complete_join(self._join_answer(g, m, with_members=leader, skip_assignment=leader))
                else:
                    # The old leader id: a returning leader thinks it is a follower and
                    # does not compute an assignment a Stable group would not send out.
                    m.complete_join(self._join_answer(g, m, with_members=False, leader=current_leader))
                log.info("static_member_rejoined", group=g.group_id, group_instance_id=instance_id,
                         member=new_id, generation=g.generation_id)
            else:
                self._maybe_prepare_rebalance_or_complete_join(g, f"static member {instance_id} changes the protocol")
        elif g.state is S.COMPLETING_REBALANCE:
            # The leader may have assigned to the old id: assign again.
            self._prepare_rebalance(g, f"static member {instance_id} rejoins during the sync phase")
        else:  # PreparingRebalance (Empty/Dead cannot have a static member)
            self._maybe_complete_join_phase(g)

    # -- the join phase

    def _maybe_prepare_rebalance_or_complete_join(self, g: Group, reason: str) -> None:
        if g.can_rebalance:
            self._prepare_rebalance(g, reason)
        else:
            self._maybe_complete_join_phase(g)

    def _maybe_complete_join_phase(self, g: Group) -> None:
        if g.state is S.PREPARING_REBALANCE and g.has_all_members_joined() and g.previous_state is not S.EMPTY:
            self._complete_join(g)

    def _prepare_rebalance(self, g: Group, reason: str) -> None:
        if g.state is S.COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment_error(g, E.REBALANCE_IN_PROGRESS)
        g.pending_sync.clear()
        self.timer.cancel(_sync_key(g))
        initial = g.state is S.EMPTY
        g.transition(S.PREPARING_REBALANCE, self.clock())
        log.info("group_rebalance_prepared", group=g.group_id, generation=g.generation_id, reason=reason,
                 members=len(g.members))
        if initial:
            delay = self.initial_rebalance_delay_ms
            remaining = max(g.rebalance_timeout_ms() - delay, 0)
            self.timer.schedule(_join_key(g), delay, self._initial_join_timer, g, delay, remaining)
        elif g.has_all_members_joined():
            self._complete_join(g)
        else:
            self.timer.schedule(_join_key(g), g.rebalance_timeout_ms(), self._complete_join, g)

    def _initial_join_timer(self, g: Group, delay: int, remaining: int) -> None:
        if g.state is not S.PREPARING_REBALANCE:
            return
        if g.new_member_added and remaining != 0:
            g.new_member_added = False
            new_delay = min(self.initial_rebalance_delay_ms, remaining)
            self.timer.schedule(_join_key(g), new_delay, self._initial_join_timer, g, new_delay,
                                max(remaining - delay, 0))
        else:
            self._complete_join(g)

    def _complete_join(self, g: Group) -> None:
        self.timer.cancel(_join_key(g))
        if g.state is not S.PREPARING_REBALANCE:
            return
        gone = [m for m in g.members.values() if m.join_waiter is None and m.group_instance_id is None]
        for m in gone:
            g.remove(m.member_id)
            self.timer.cancel(_heartbeat_key(g, m.member_id))
        if gone:
            log.info("group_members_removed", group=g.group_id, reason="did not rejoin",
                     members=[m.member_id for m in gone])
        if not g.maybe_elect_new_joined_leader() and g.members:
            # Only static members that have not rejoined: wait for them (or their session timeout).
            self.timer.schedule(_join_key(g), g.rebalance_timeout_ms(), self._complete_join, g)
            return
        now = self.clock()
        g.new_member_added = False
        g.init_next_generation(now)
        if g.state is S.EMPTY:
            log.info("group_empty", group=g.group_id, generation=g.generation_id)
            res = self._append_group(g, {})
            if res.error:
                log.warning("group_metadata_write_failed", group=g.group_id, error=res.error.name)
            return
        log.info("group_join_completed", group=g.group_id, generation=g.generation_id,
                 protocol=g.protocol_name, leader=g.leader_id, members=len(g.members))
        for m in g.members.values():
            m.complete_join(self._join_answer(g, m, with_members=g.is_leader(m.member_id)))
            self._reschedule_heartbeat(g, m)
            m.is_new = False
            g.pending_sync.add(m.member_id)
        self.timer.schedule(_sync_key(g), g.rebalance_timeout_ms(), self._pending_sync_expired, g, g.generation_id)

    def _pending_sync_expired(self, g: Group, generation: int) -> None:
        if generation != g.generation_id or g.state not in (S.COMPLETING_REBALANCE, S.STABLE):
            return
        if not g.pending_sync:
            return
        late = sorted(g.pending_sync)
        for mid in late:
            g.remove(mid)
            self.timer.cancel(_heartbeat_key(g, mid))
        log.info("group_members_removed", group=g.group_id, reason="no SyncGroup in the rebalance timeout",
                 members=late)
        self._prepare_rebalance(g, "members did not sync")

    # -- SyncGroup

    async def sync_group(self, g: Group, generation_id: int, member_id: str, group_instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        """SyncGroup; the leader's ``assignments`` (member id -> assignment) are stored."""
        if g.state is S.DEAD:
            return SyncResult(E.COORDINATOR_NOT_AVAILABLE)
        err = g.validate_member(member_id, group_instance_id)
        if err:
            return SyncResult(err)
        if generation_id != g.generation_id:
            return SyncResult(E.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != g.protocol_type) or (
            protocol_name is not None and protocol_name != g.protocol_name
        ):
            return SyncResult(E.INCONSISTENT_GROUP_PROTOCOL)
        if g.state is S.EMPTY:
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if g.state is S.PREPARING_REBALANCE:
            return SyncResult(E.REBALANCE_IN_PROGRESS)
        m = g.members[member_id]
        self._synced(g, member_id)
        if g.state is S.STABLE:
            return SyncResult(E.NONE, m.assignment, g.protocol_type, g.protocol_name)
        # CompletingRebalance: wait for the leader's assignment.
        waiter: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        if m.sync_waiter is not None:
            m.complete_sync(SyncResult(E.REBALANCE_IN_PROGRESS))
        m.sync_waiter = waiter
        if g.is_leader(member_id):
            self._store_assignment(g, dict(assignments))
        return await asyncio.shield(waiter)

    def _synced(self, g: Group, member_id: str) -> None:
        g.pending_sync.discard(member_id)
        if not g.pending_sync:
            self.timer.cancel(_sync_key(g))

    def _store_assignment(self, g: Group, assignment: dict[str, bytes]) -> None:
        missing = [mid for mid in g.members if mid not in assignment]
        if missing:
            log.warning("group_assignment_missing_members", group=g.group_id, members=missing)
        assignment = {mid: assignment.get(mid, b"") for mid in g.members}
        generation = g.generation_id
        res = self._append_group(g, assignment)

        def stored(error: ErrorCode) -> None:
            # Another member may have joined meanwhile: only this generation's sync completes.
            if g.state is not S.COMPLETING_REBALANCE or g.generation_id != generation:
                return
            if error:
                self._reset_and_propagate_assignment_error(g, error)
                self._maybe_prepare_rebalance_or_complete_join(g, f"storing the assignment failed: {error.name}")
                return
            for mid, m in g.members.items():
                m.assignment = assignment.get(mid, b"")
            self._propagate_assignment(g, E.NONE)
            g.transition(S.STABLE, self.clock())
            log.info("group_stable", group=g.group_id, generation=g.generation_id, members=len(g.members))

        self._after_write(g, res, stored)

    def _reset_and_propagate_assignment_error(self, g: Group, error: ErrorCode) -> None:
        if g.state is not S.COMPLETING_REBALANCE:
            raise IllegalGroupTransition(f"group {g.group_id}: assignment reset in {g.state.value}")
        for m in g.members.values():
            m.assignment = b""
        self._propagate_assignment(g, error)

    def _propagate_assignment(self, g: Group, error: ErrorCode) -> None:
        ok = error == E.NONE
        for m in g.members.values():
            answer = SyncResult(error, m.assignment if ok else b"",
                                g.protocol_type if ok else None, g.protocol_name if ok else None)
            if m.complete_sync(answer):
                # Heartbeats may have lapsed while it waited: a fresh session timeout.
                self._reschedule_heartbeat(g, m)

    # -- Heartbeat and LeaveGroup

    def heartbeat(self, g: Group, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """Heartbeat: a fresh session timeout for a current member, and whether to rejoin."""
        if g.state is S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        err = g.validate_member(member_id, group_instance_id)
        if err:
            return err
        if generation_id != g.generation_id:
            return E.ILLEGAL_GENERATION
        if g.state is S.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        self._reschedule_heartbeat(g, g.members[member_id])
        return E.REBALANCE_IN_PROGRESS if g.state is S.PREPARING_REBALANCE else E.NONE

    def leave_group(self, g: Group, leaving: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """LeaveGroup: (top-level error, an error per (member_id, group_instance_id))."""
        if g.state is S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE, []
        errors = []
        left = []
        for member_id, instance_id in leaving:
            if member_id == "":
                # Admin removal of a static member by its instance id.
                current = g.static_members.get(instance_id) if instance_id is not None else None
                if current is None:
                    errors.append(E.UNKNOWN_MEMBER_ID)
                    continue
                member_id = current
            elif member_id in g.pending_members:
                g.pending_members.discard(member_id)
                self.timer.cancel(_heartbeat_key(g, member_id))
                errors.append(E.NONE)
                left.append(member_id)
                continue
            else:
                e = g.validate_member(member_id, instance_id)
                if e:
                    errors.append(e)
                    continue
            self.timer.cancel(_heartbeat_key(g, member_id))
            g.remove(member_id)
            errors.append(E.NONE)
            left.append(member_id)
        if left:
            log.info("group_members_left", group=g.group_id, members=left)
            if g.state in (S.STABLE, S.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(g, "members left")
            elif g.state is S.PREPARING_REBALANCE:
                self._maybe_complete_join_phase(g)
        return E.NONE, errors

    def _reschedule_heartbeat(self, g: Group, m: Member, timeout_ms: int | None = None) -> None:
        delay = m.session_timeout_ms if timeout_ms is None else timeout_ms
        self.timer.schedule(_heartbeat_key(g, m.member_id), delay, self._heartbeat_expired, g, m.member_id)

    def _heartbeat_expired(self, g: Group, member_id: str) -> None:
        if g.state is S.DEAD:
            return
        if member_id in g.pending_members:
            g.pending_members.discard(member_id)
            log.info("group_pending_member_expired", group=g.group_id, member=member_id)
            if g.state is S.PREPARING_REBALANCE and g.has_all_members_joined():
                self._complete_join(g)
            return
        m = g.members.get(member_id)
        if m is None:
            return
        if not m.is_new and (m.join_waiter is not None or m.sync_waiter is not None):
            return  # waiting in a rebalance: the rebalance timeout covers it
        log.info("group_member_session_expired", group=g.group_id, member=member_id,
                 session_timeout_ms=m.session_timeout_ms)
        self._remove_member_and_update_group(g, m, "session timeout")

    def _remove_member_and_update_group(self, g: Group, m: Member, reason: str) -> None:
        self.timer.cancel(_heartbeat_key(g, m.member_id))
        g.remove(m.member_id)
        if g.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(g, f"member {m.member_id} removed: {reason}")
        elif g.state is S.PREPARING_REBALANCE and g.has_all_members_joined():
            self._complete_join(g)

