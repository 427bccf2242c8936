"""KIP-253's ordered delivery decisions (refka/client/ordering.py)."""

from __future__ import annotations

import math

import pytest

from refka.client.ordering import (
    DeletionBlock,
    PositionReporter,
    creation_blocker,
    creation_hold_released,
    deletion_blockers,
    delivery_limit,
    may_deliver,
    needs_creation_hold,
    offset_threshold,
)
from refka.client.partitioning import partition_for_key


def _hashes(count: int) -> range:
    # Enough hashes that every residue class of every modulus used below is hit several times.
    return range(64 * count)


def test_refinement_the_partition_under_fewer_is_a_function_of_the_one_under_more() -> None:
    for initial in range(1, 6):
        for u0 in range(initial, 5 * initial + 2):
            for u1 in range(initial, u0 + 1):
                for h in _hashes(u0):
                    assert partition_for_key(h, initial, u1) == partition_for_key(
                        partition_for_key(h, initial, u0), initial, u1
                    ), (initial, u0, u1, h)


def _moves(initial: int, u0: int, u1: int) -> dict[int, set[int]]:
    """By enumeration: for each partition under U1, the partitions its keys had under U0."""
    moves: dict[int, set[int]] = {p: set() for p in range(u1)}
    for h in _hashes(max(u0, u1)):
        moves[partition_for_key(h, initial, u1)].add(partition_for_key(h, initial, u0))
    return moves


def test_a_new_partition_is_blocked_by_exactly_one_old_one_for_every_expansion() -> None:
    for initial in range(1, 7):
        for u0 in range(initial, 5 * initial):
            for u1 in range(u0 + 1, 5 * initial + 3):
                moves = _moves(initial, u0, u1)
                for new in range(u0, u1):
                    assert moves[new] == {creation_blocker(new, initial, range(u0))}, (initial, u0, u1, new)
                    assert creation_blocker(new, initial, range(u0)) < u0


def test_creation_blockers_along_the_plan_4_8_6_12_9() -> None:
    # 4 -> 8: each new partition p splits from p - 4 (U0=4, R=4, S=0: p mod 4).
    assert [creation_blocker(p, 4, range(4)) for p in range(4, 8)] == [0, 1, 2, 3]
    # 6 -> 12 (6 and 7 drained and removed first): under U0=6, R=4, S=2.
    # 6: 6 mod 4 = 2, not < 2 -> 2.  7: 3 -> 3.  8: 0 < 2 -> 8 mod 8 = 0.  9: 1 < 2 -> 9 mod 8 = 1.
    # 10: 2 -> 2.  11: 3 -> 3.
    assert [creation_blocker(p, 4, range(6)) for p in range(6, 12)] == [2, 3, 0, 1, 2, 3]


def test_creation_blocker_refuses_what_no_expansion_makes() -> None:
    with pytest.raises(ValueError):
        creation_blocker(7, 4, [0, 1, 3])  # a gap
    with pytest.raises(ValueError):
        creation_blocker(5, 4, range(6))  # not new
    with pytest.raises(ValueError):
        creation_blocker(5, 4, range(3))  # fewer than the initial count


def test_deletion_blockers_are_the_marked_partitions_whose_keys_move_in() -> None:
    for initial in range(1, 7):
        for u0 in range(initial + 1, 5 * initial + 3):
            for u1 in range(initial, u0):
                marked = range(u1, u0)
                moves = _moves(initial, u0, u1)
                for partition in range(u1):
                    blockers = deletion_blockers(partition, initial, u1, marked)
                    # the marked partitions (>= U1) whose keys under U0 go to this one under U1
                    moved_in = {p for p in moves[partition] if p >= u1}
                    assert blockers == moved_in, (initial, u0, u1, partition)
                    round_size = initial * 2 ** int(math.log2(u1 // initial))
                    assert len(blockers) <= math.ceil((u0 - u1) / round_size)
                    if u0 <= 2 * u1:
                        assert len(blockers) <= 2
                # every marked partition blocks exactly one undeleted partition
                for p3 in marked:
                    assert sum(p3 in deletion_blockers(p, initial, u1, marked) for p in range(u1)) == 1


def test_deletion_blockers_along_the_plan_4_8_6_12_9_stay_within_log2() -> None:
    # 8 -> 6 (N=4): under U1=6, R=4, S=2: 6 mod 4 = 2, not < 2 -> 2; 7 -> 3.
    assert {p: deletion_blockers(p, 4, 6, {6, 7}) for p in range(6)} == {
        0: frozenset(),
        1: frozenset(),
        2: {6},
        3: {7},
        4: frozenset(),
        5: frozenset(),
    }
    # 12 -> 9 (N=4): under U1=9, R=8, S=1: 9 mod 8 = 1 -> 1; 10 -> 2; 11 -> 3.
    assert {p: deletion_blockers(p, 4, 9, {9, 10, 11}) for p in range(1, 4)} == {1: {9}, 2: {10}, 3: {11}}
    for u0, u1 in [(8, 6), (12, 9), (12, 6), (16, 4), (9, 5)]:
        for p in range(u1):
            assert len(deletion_blockers(p, 4, u1, range(u1, u0))) <= math.ceil(math.log2(u0))


def test_a_shrink_by_more_than_half_can_exceed_the_seeds_log_bound() -> None:
    # N=1, 8 -> 1: every key goes to 0, so 0 waits for all seven marked partitions (log2(8) = 3).
    assert deletion_blockers(0, 1, 1, range(1, 8)) == frozenset(range(1, 8))


def test_deletion_blockers_need_no_previous_count_for_shrinks_in_a_row() -> None:
    # 8 -> 6 and, while 6 and 7 drain, 6 -> 5 (N=4). Under U1=5 (R=4, S=1): 5 -> 1, 6 -> 2, 7 -> 3.
    assert deletion_blockers(1, 4, 5, {5, 6, 7}) == {5}
    assert deletion_blockers(2, 4, 5, {5, 6, 7}) == {6}
    # 7 already removed (drained first): the rest still block as before.
    assert deletion_blockers(3, 4, 5, {5, 6}) == frozenset()
    for h in range(1000):
        if partition_for_key(h, 4, 8) == 6:  # written before both shrinks
            assert partition_for_key(h, 4, 5) == 2


def test_deletion_blockers_refuse_inconsistent_counts() -> None:
    with pytest.raises(ValueError):
        deletion_blockers(6, 4, 6, {6, 7})  # P1 is marked itself
    with pytest.raises(ValueError):
        deletion_blockers(1, 4, 6, {5, 6})  # 5 is not marked under U1=6


def test_only_a_new_partition_without_progress_is_held() -> None:
    assert needs_creation_hold(5, 4, None, 0)
    assert needs_creation_hold(5, 4, 30, 30)  # committed at the earliest offset: nothing delivered
    assert not needs_creation_hold(5, 4, 31, 30)  # the group is already past its start
    assert not needs_creation_hold(3, 4, None, 0)  # an initial partition is never new


def test_the_threshold_is_the_last_offset_of_the_epoch() -> None:
    assert offset_threshold(120) == 119
    assert offset_threshold(0) == -1
    with pytest.raises(ValueError):
        offset_threshold(-1)


def test_a_new_partition_is_released_once_the_group_consumed_the_threshold_record() -> None:
    threshold = offset_threshold(120)  # records 0..119 were produced under the old count
    assert not creation_hold_released(-1, threshold)  # nobody reported P3 yet
    assert not creation_hold_released(119, threshold)  # record 119 not yet consumed
    assert creation_hold_released(120, threshold)  # position 120: 119 consumed
    assert creation_hold_released(500, threshold)


def test_a_new_partition_whose_blocker_had_no_records_is_released_at_once() -> None:
    assert creation_hold_released(-1, offset_threshold(0))


def test_records_of_a_partition_up_to_the_threshold_pass_while_its_blocker_drains() -> None:
    block = DeletionBlock(partition=6, upper_offset_threshold=99, group_position=40, log_end_offset=80)
    assert may_deliver(99, [block])
    assert not may_deliver(100, [block])
    assert delivery_limit([block]) == 99


def test_a_drained_blocker_holds_nothing() -> None:
    block = DeletionBlock(partition=6, upper_offset_threshold=99, group_position=80, log_end_offset=80)
    assert block.drained
    assert may_deliver(10_000, [block])
    assert delivery_limit([block]) is None


def test_the_lowest_threshold_of_undrained_blockers_is_the_limit() -> None:
    blocks = [
        DeletionBlock(partition=9, upper_offset_threshold=50, group_position=10, log_end_offset=70),
        DeletionBlock(partition=13, upper_offset_threshold=30, group_position=5, log_end_offset=90),
        # drained: the group's position reached the log end offset
        DeletionBlock(partition=17, upper_offset_threshold=10, group_position=40, log_end_offset=40),
    ]
    assert delivery_limit(blocks) == 30
    assert may_deliver(30, blocks)
    assert not may_deliver(31, blocks)
    assert delivery_limit([]) is None
    assert may_deliver(10**9, [])


def test_a_partition_is_reported_the_first_time_it_is_needed() -> None:
    r = PositionReporter()
    assert not r.should_report(position=5, high_watermark=100, leader_epoch=0, needed=False)
    assert r.should_report(position=5, high_watermark=100, leader_epoch=0, needed=True)


def test_a_partition_is_reported_when_it_catches_up_with_the_high_watermark() -> None:
    r = PositionReporter()
    r.reported(position=5, leader_epoch=0)
    assert not r.should_report(position=50, high_watermark=100, leader_epoch=0, needed=True)  # moved, behind
    assert r.should_report(position=100, high_watermark=100, leader_epoch=0, needed=True)
    r.reported(position=100, leader_epoch=0)
    assert not r.should_report(position=100, high_watermark=100, leader_epoch=0, needed=True)  # not moved


def test_a_partition_at_the_high_watermark_below_its_last_report_is_not_reported() -> None:
    r = PositionReporter()
    r.reported(position=100, leader_epoch=0)
    # after a seek back: at the high watermark, but not above the last report
    assert not r.should_report(position=60, high_watermark=60, leader_epoch=0, needed=True)


def test_a_partition_is_reported_when_it_crosses_into_a_newer_leader_epoch() -> None:
    r = PositionReporter()
    r.reported(position=5, leader_epoch=3)
    assert not r.should_report(position=50, high_watermark=100, leader_epoch=3, needed=True)
    assert r.should_report(position=51, high_watermark=100, leader_epoch=4, needed=True)
    r.reported(position=51, leader_epoch=4)
    assert not r.should_report(position=52, high_watermark=100, leader_epoch=4, needed=True)


def test_no_report_is_made_unless_the_coordinator_asked() -> None:
    r = PositionReporter()
    r.reported(position=5, leader_epoch=0)
    assert not r.should_report(position=100, high_watermark=100, leader_epoch=7, needed=False)
