"""KIP-253's ordered delivery, the consumer's decisions without the I/O: which
partitions hold which, when a hold is released, and when a consumer reports a
position (seed 004, "Proposed Changes" 7) and 8)).

The consumer asks the brokers (PartitionLeaderEpochsForPartitions,
OffsetsForLeaderEpoch, ListOffsets, ConsumerGroupPosition) and hands the
answers to these functions; nothing here sends, waits or reads a clock.

Write f_U(h) = ``partition_for_key(h, N, U)`` (``partitioning.py``) for the
partition of hash h when U partitions are undeleted. Everything below rests on
one lemma:

**Refinement.** For N <= U1 <= U0 and every h >= 0, f_U1(h) = f_U1(f_U0(h)):
the partition a key has under the smaller count is a function of the one it
has under the larger count. Proof: let R0, R1 be the rounds (N * 2^L <= U) and
S0, S1 the split pointers. f_U1(h) depends on h only through h mod 2*R1. Under
U0, f_U0(h) = h mod M0 with M0 = R0 or 2*R0.
- If R0 > R1 then M0 >= R0 >= 2*R1, and both are N times a power of two, so
  2*R1 divides M0 and h mod 2*R1 = f_U0(h) mod 2*R1: the same partition.
- If R0 = R1 = R then S1 <= S0. When h mod R < S0, M0 = 2R and again
  h mod 2R = f_U0(h) mod 2R. When h mod R >= S0 >= S1, f_U0(h) = h mod R, and
  f_U1 maps both h and h mod R to h mod R (neither bucket is split under U1).

Two consequences the seed relies on (its "Proposed Changes" 5)):

- **No key moves between partitions that exist on both sides.** If p =
  f_U1(h) < U0 <= U1 then f_U0(h) = f_U0(p) = p, since f_U maps every
  p < U to itself.
- Hence a key changes partition only to or from a partition that the change
  adds or removes, which is what the two blocker functions compute.

Choices where the seed is not precise are written at each function.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from .partitioning import partition_for_key


def creation_blocker(partition: int, initial: int, partitions_before: Collection[int]) -> int:
    """The one partition P3 that blocks the new partition P1 = ``partition``
    (seed 8) step 4.2): every key that maps to P1 after the expansion mapped to
    P3 before it.

    ``partitions_before`` are the keys of P1's ``leaderEpochAfterCreation``:
    the partitions that existed before the expansion, 0 .. U0-1 (an
    expansion is refused while a partition is marked for deletion, so there is
    no gap). The expansion may add several partitions at once (U0 -> U1); P3
    is still one partition below U0, never another new one.

    Why exactly one: by the refinement lemma (module header) with U0 < U1,
    f_U0(h) = f_U0(f_U1(h)) = f_U0(P1) for every h with f_U1(h) = P1. So P3 =
    f_U0(P1), the same for all of P1's keys; linear hashing splits one bucket
    at a time and the keys of a new bucket all come from the one it split.

    Raises ValueError when the partitions before are not 0 .. U0-1 with
    N <= U0 <= P1 (not an expansion linear hashing can have made)."""
    before = len(partitions_before)
    if set(partitions_before) != set(range(before)):
        raise ValueError(f"partitions before an expansion must be 0..U0-1, got {sorted(partitions_before)}")
    if not initial <= before <= partition:
        raise ValueError(
            f"need initial ({initial}) <= partitions before ({before}) <= new partition ({partition})"
        )
    return partition_for_key(partition, initial, before)


def deletion_blockers(partition: int, initial: int, undeleted: int, marked: Iterable[int]) -> frozenset[int]:
    """The partitions marked for deletion that block the undeleted partition
    P1 = ``partition`` (seed 8) step 5.1): those P3 whose keys now map to P1.

    A record of P3 was produced while U0 > P3 partitions were undeleted, so
    by the refinement lemma its key maps under the current count U1 to
    f_U1(f_U0(h)) = f_U1(P3), whatever U0 was. So P3 blocks exactly the one
    partition f_U1(P3), and P1's blockers are the marked P3 with f_U1(P3) = P1.
    This needs no U0: it holds for several shrinks in a row (refka allows a
    second shrink while partitions drain) and for marked partitions already
    removed from the middle of the range (they drain one by one).

    How many: P1's keys under U1 are those with h mod M = P1, where M is the
    modulus P1 uses (R1, or 2*R1 when P1's bucket is split); so are the marked
    partitions it takes over. Among U1 .. U0-1 there are at most
    ceil((U0 - U1) / R1) of them. For a shrink to at least half (U0 <= 2*U1)
    that is at most 2. The seed's "at most O(log n)" is true of those shrinks,
    not of larger ones: N = 1, 8 -> 1 makes partition 0 wait for all seven
    others. (Each marked partition blocks exactly one, as the seed's goals
    say.)

    Raises ValueError unless N <= U1, P1 < U1 and every marked partition is
    >= U1."""
    if not 0 <= partition < undeleted:
        raise ValueError(f"partition {partition} is not undeleted (undeleted count {undeleted})")
    marked = frozenset(marked)
    if any(p < undeleted for p in marked):
        raise ValueError(f"marked partitions {sorted(marked)} include undeleted ones (< {undeleted})")
    return frozenset(p for p in marked if partition_for_key(p, initial, undeleted) == partition)


def needs_creation_hold(
    partition: int, initial: int, start_position: int | None, earliest_offset: int
) -> bool:
    """Whether the consumer must hold P1 until its creation blocker is consumed
    (seed 8) step 4): P1 >= N, and no committed position or the committed one
    is the earliest offset (the group has delivered nothing of P1 that is
    still there, so it may be about to deliver the first records of moved
    keys)."""
    return partition >= initial and (start_position is None or start_position == earliest_offset)


def offset_threshold(epoch_end_offset: int) -> int:
    """lowerOffsetThreshold / upperOffsetThreshold from an OffsetsForLeaderEpoch
    answer. The seed's threshold is "the last offset of messages published
    under the oldLeaderEpoch"; OffsetsForLeaderEpoch answers the epoch's end
    offset, one past its last offset (the first offset of the next epoch). So
    the threshold is end_offset - 1, and -1 when no record was written up to
    that epoch. Raises ValueError for a negative end offset (UNDEFINED, -1:
    the leader does not know the epoch; the caller asks again)."""
    if epoch_end_offset < 0:
        raise ValueError(f"epoch end offset {epoch_end_offset} is undefined")
    return epoch_end_offset - 1


def creation_hold_released(group_position: int, lower_offset_threshold: int) -> bool:
    """Whether a new partition may be consumed (seed 8) step 4.4): the group's
    position of its blocker P3 > P3's lowerOffsetThreshold.

    A position is the next offset to consume, so position > T (that is,
    position >= T + 1) means the record at T, the last one produced under the
    old count, has been delivered. The seed's ">" is kept as it is. A
    threshold of -1 (P3 had no record before the expansion) releases at once,
    even while the group's position of P3 is unknown (-1 from
    ConsumerGroupPosition): there is nothing to wait for."""
    return lower_offset_threshold < 0 or group_position > lower_offset_threshold


@dataclass(frozen=True, slots=True)
class DeletionBlock:
    """What a consumer knows of one marked partition P3 that blocks P1."""

    partition: int
    upper_offset_threshold: int  # P1's last offset under its epoch before the shrink (offset_threshold)
    group_position: int  # the group's position of P3 from ConsumerGroupPosition; -1 unknown
    log_end_offset: int  # P3's, from ListOffsets (latest); final, P3 takes no records

    @property
    def drained(self) -> bool:
        """The group has consumed all of P3 (seed 8) step 5.3: its position
        "has reached the LogEndOffset")."""
        return self.group_position >= self.log_end_offset


def delivery_limit(blocks: Iterable[DeletionBlock]) -> int | None:
    """The largest offset of P1 that may be delivered now, or None when
    nothing holds P1 (seed 8) step 5.3): records up to each undrained
    blocker's upperOffsetThreshold were produced under the old count, before
    any key of that blocker moved to P1."""
    limits = [b.upper_offset_threshold for b in blocks if not b.drained]
    return min(limits) if limits else None


def may_deliver(offset: int, blocks: Iterable[DeletionBlock]) -> bool:
    """Seed 8) step 5.3 for the record at ``offset`` of P1: for every blocker,
    either the group drained it or offset <= its upperOffsetThreshold."""
    limit = delivery_limit(blocks)
    return limit is None or offset <= limit


class PositionReporter:
    """When a consumer includes its position of one assigned partition P1 in a
    ConsumerGroupPosition request, and so calls
    ``on_partition_key_maybe_revoked`` for it (seed 7)).

    Only when the coordinator asked for P1 (need_position in the last
    answer), and then iff one of the seed's three conditions holds:

    1. P1's position has not been reported since this consumer started;
    2. the position increased since the last report AND equals the high
       watermark of P1 in the last FetchResponse (the consumer caught up, so
       a waiting consumer may be released now);
    3. the largest leader epoch of the records before the position increased
       since the last report (the consumer crossed an epoch boundary, which
       is what a threshold is).

    The callback comes before the request is sent: a position reported may
    release another consumer to take over keys of P1, so state kept for those
    keys must be flushed first.

    Choices: "increased" is compared with the last *reported* position, so a
    seek back and forth below it reports nothing; one reporter lives as long
    as the consumer ("since this consumer starts"), not one assignment, so a
    partition assigned again is not reported again unless 2 or 3 holds. The
    leader epoch is -1 before any record was consumed.
    """

    __slots__ = ("_reported_position", "_reported_leader_epoch")

    def __init__(self) -> None:
        self._reported_position: int | None = None
        self._reported_leader_epoch = -1

    def should_report(self, *, position: int, high_watermark: int, leader_epoch: int, needed: bool) -> bool:
        """Whether to report ``position`` now (and call on_partition_key_maybe_revoked)."""
        if not needed:
            return False
        if self._reported_position is None:
            return True
        if position > self._reported_position and position == high_watermark:
            return True
        return leader_epoch > self._reported_leader_epoch

    def reported(self, *, position: int, leader_epoch: int) -> None:
        """Record that ``position`` went out in a ConsumerGroupPosition request."""
        self._reported_position = position
        self._reported_leader_epoch = max(self._reported_leader_epoch, leader_epoch)
