"""KIP-253's group positions: which member of a consumer group needs which
partition's position, and the latest position reported for it (seed 004,
"Proposed Changes" 7)), behind ConsumerGroupPosition.

A consumer that may not read a partition before the group has read far
enough into another one (after an expansion, the partition it was split
from; after a shrink, the partitions marked for deletion) asks the
coordinator for the group's position of that other partition; the member
consuming it is asked to report it. The coordinator (coordinator.py) finds
the group and checks the member as for Heartbeat, and only in a Stable group
(the assignment is known); then the group's ``GroupPositions`` applies these
rules:

- Interest: a request names the partitions whose group position its member
  needs (need_position = true). They replace what that member named before:
  a consumer sends the request every heartbeat interval with what blocks it
  now, so a partition it no longer names is no longer needed by it.
- Positions: a position >= 0 reported for a partition assigned to the
  reporting member is the group's latest position of that partition. A
  position for a partition the member is not assigned is ignored: only the
  member consuming a partition knows how far the group got.
- The answer, sorted by topic and partition: each partition the member needs,
  and each partition assigned to it that some member (itself included)
  needs, which it flags with need_position = true so the member reports it
  next time; every entry carries the group's latest known position (-1:
  none reported).
- Assignments are the group's current ones (stored by the leader's
  SyncGroup), read with the consumer protocol (ConsumerProtocolAssignment,
  any version: its topic partitions); one that does not parse assigns
  nothing.
- A new generation starts over (partitions moved between members: interest
  and positions are reset). A member gone from the group without a new
  generation (a static member's instance rejoined under a new member id) has
  its interest and the positions it reported dropped. A deleted or unloaded
  group takes its positions with it (the coordinator's Shard holds them).

Pure bookkeeping: no I/O, no clock; nothing here is written to
__consumer_offsets (positions are refreshed every heartbeat interval, and a
new coordinator starts with none, like a new generation).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from refka.common import TopicPartition

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

UNKNOWN_POSITION = -1


@dataclass(frozen=True, slots=True)
class PositionReport:
    """One partition of a ConsumerGroupPosition request."""

    tp: TopicPartition
    need_position: bool
    position: int


@dataclass(frozen=True, slots=True)
class PositionAnswer:
    """One partition of its answer."""

    tp: TopicPartition
    need_position: bool
    position: int


def assigned_partitions(assignment: bytes) -> frozenset[TopicPartition]:
    """The partitions of a consumer protocol assignment (ConsumerProtocolAssignment: int16
    version, then an int32 array of (int16 string topic, int32 array of int32 partitions),
    the same in every version); empty when it does not parse."""
    try:
        pos = 2
        (n,) = _I32.unpack_from(assignment, pos)
        pos += 4
        out: list[TopicPartition] = []
        for _ in range(max(n, 0)):
            (length,) = _I16.unpack_from(assignment, pos)
            pos += 2
            if length < 0 or pos + length > len(assignment):
                return frozenset()
            topic = bytes(assignment[pos : pos + length]).decode()
            pos += length
            (count,) = _I32.unpack_from(assignment, pos)
            pos += 4
            if count < 0 or pos + 4 * count > len(assignment):
                return frozenset()
            out.extend((topic, p) for p in struct.unpack_from(f">{count}i", assignment, pos))
            pos += 4 * count
        return frozenset(out)
    except (struct.error, UnicodeDecodeError):
        return frozenset()


class GroupPositions:
    """One group's interest and positions, for one generation (see the module docstring)."""

    __slots__ = ("generation_id", "members", "needs", "needed_by", "positions", "_assigned")

    def __init__(self) -> None:
        self._start(-1)

    def _start(self, generation_id: int) -> None:
        self.generation_id = generation_id
        self.members: frozenset[str] = frozenset()  # the group's members when last seen
        self.needs: dict[str, frozenset[TopicPartition]] = {}  # member -> partitions it needs
        self.needed_by: dict[TopicPartition, set[str]] = {}  # the same, inverted
        self.positions: dict[TopicPartition, tuple[int, str]] = {}  # -> (position, reporter)
        self._assigned: dict[str, tuple[bytes, frozenset[TopicPartition]]] = {}  # decoded once

    def exchange(self, generation_id: int, assignments: Mapping[str, bytes], member_id: str,
                 reports: Iterable[PositionReport]) -> list[PositionAnswer]:
        """A ConsumerGroupPosition from ``member_id`` (checked by the coordinator) of a group in
        ``generation_id`` whose members have ``assignments`` (member id -> assignment bytes)."""
        if generation_id != self.generation_id:
            self._start(generation_id)
        if assignments.keys() != self.members:
            self._forget_members_not_in(assignments)
        assigned = self._assigned_to(member_id, assignments.get(member_id, b""))
        needs: set[TopicPartition] = set()
        for r in reports:
            if r.position >= 0 and r.tp in assigned:
                self.positions[r.tp] = (r.position, member_id)
            if r.need_position:
                needs.add(r.tp)
        self._set_needs(member_id, frozenset(needs))
        answer = needs | {tp for tp in assigned if self.needed_by.get(tp)}
        return [
            PositionAnswer(tp, tp in assigned and bool(self.needed_by.get(tp)),
                           self.positions.get(tp, (UNKNOWN_POSITION, ""))[0])
            for tp in sorted(answer)
        ]

    def _assigned_to(self, member_id: str, assignment: bytes) -> frozenset[TopicPartition]:
        cached = self._assigned.get(member_id)
        if cached is not None and cached[0] is assignment:
            return cached[1]
        partitions = assigned_partitions(assignment)
        self._assigned[member_id] = (assignment, partitions)
        return partitions

    def _set_needs(self, member_id: str, needs: frozenset[TopicPartition]) -> None:
        old = self.needs.get(member_id, frozenset())
        if old == needs:
            return
        for tp in old - needs:
            by = self.needed_by[tp]
            by.discard(member_id)
            if not by:
                del self.needed_by[tp]
        for tp in needs - old:
            self.needed_by.setdefault(tp, set()).add(member_id)
        if needs:
            self.needs[member_id] = needs
        else:
            self.needs.pop(member_id, None)

    def _forget_members_not_in(self, members: Mapping[str, bytes]) -> None:
        for gone in [m for m in self.needs if m not in members]:
            self._set_needs(gone, frozenset())
        for m in [m for m in self._assigned if m not in members]:
            del self._assigned[m]
        self.positions = {tp: p for tp, p in self.positions.items() if p[1] in members}
        self.members = frozenset(members)
