"""Replication rules without sockets: high watermark, ISR expand/shrink, the
leader's bookkeeping of follower fetches, and a follower's truncation to where
its log diverged from the leader's (KIP-595)."""

from __future__ import annotations

import pytest

from refka.broker.log import LogConfig, PartitionLog
from refka.broker.partition import Partition, PartitionState
from refka.broker.replication.fetcher import truncation_offset
from refka.broker.replication.isr import (
    FollowerState,
    expansion_candidates,
    high_watermark,
    lagging_replicas,
    on_follower_fetch,
)
from refka.protocol.records import NewRecord, build_batch, iter_batches

T0 = 1_700_000_000_000


def batch(*values: int) -> bytes:
    return build_batch([NewRecord(None, b"v%d" % v, (), T0) for v in values])


@pytest.fixture
def memory_log():
    opened = []

    def _open() -> PartitionLog:
        log = PartitionLog.open(None, LogConfig(), memory=True)
        opened.append(log)
        return log

    yield _open
    for log in opened:
        log.close()


# -- the rules (replication/isr.py) ---------------------------------------------------------------


def test_high_watermark_is_the_smallest_log_end_offset_in_the_isr():
    followers = {2: FollowerState(log_end_offset=7), 3: FollowerState(log_end_offset=5)}
    assert high_watermark(0, 1, 10, [1, 2, 3], followers) == 5
    assert high_watermark(0, 1, 10, [1, 2], followers) == 7
    assert high_watermark(0, 1, 10, [1], followers) == 10


def test_high_watermark_never_goes_down_and_waits_for_unknown_followers():
    followers = {2: FollowerState(log_end_offset=3), 3: FollowerState()}
    assert high_watermark(6, 1, 10, [1, 2], followers) == 6
    # A new leader does not know where the ISR's followers are: it holds the mark.
    assert high_watermark(4, 1, 10, [1, 2, 3], followers) == 4


def test_a_follower_is_caught_up_when_it_reaches_the_leaders_log_end():
    f = FollowerState()
    on_follower_fetch(f, 5, 10, now_ms=T0)
    assert (f.log_end_offset, f.last_caught_up_ms) == (5, 0)
    on_follower_fetch(f, 10, 12, now_ms=T0 + 100)
    # It reached the leader's log end offset of its previous fetch: caught up then.
    assert f.last_caught_up_ms == T0
    on_follower_fetch(f, 12, 12, now_ms=T0 + 200)
    assert f.last_caught_up_ms == T0 + 200


def test_expansion_needs_the_high_watermark_and_the_epoch_start():
    followers = {2: FollowerState(log_end_offset=8), 3: FollowerState(log_end_offset=4)}
    assert expansion_candidates(1, [1], [1, 2, 3], followers, 8, 0) == [2]
    assert expansion_candidates(1, [1], [1, 2, 3], followers, 4, 0) == [2, 3]
    assert expansion_candidates(1, [1], [1, 2, 3], followers, 4, 6) == [2]
    assert expansion_candidates(1, [1, 2], [1, 2, 3], followers, 9, 0) == []


def test_shrink_takes_out_followers_not_caught_up_within_the_lag_time():
    followers = {2: FollowerState(last_caught_up_ms=T0), 3: FollowerState(last_caught_up_ms=T0 - 20_000)}
    assert lagging_replicas(1, [1, 2, 3], followers, T0 + 5_000, 30_000) == []
    assert lagging_replicas(1, [1, 2, 3], followers, T0 + 15_000, 10_000) == [2, 3]
    assert lagging_replicas(1, [1, 2, 3], followers, T0 + 5_000, 10_000) == [3]
    assert lagging_replicas(1, [1, 2, 4], followers, T0, 10_000) == [4]  # never fetched


# -- a leader partition ---------------------------------------------------------------------------


def leader_partition(plog: PartitionLog, isr=(1, 2, 3)) -> Partition:
    state = PartitionState(leader=1, leader_epoch=0, isr=list(isr), replicas=[1, 2, 3], zk_version=0)
    p = Partition("t", 0, b"\x01" * 16, plog, state, broker_id=1)
    p.high_watermark = 0
    p.become_leader(T0)
    return p


async def test_acks_all_waiters_wake_when_followers_have_the_records(memory_log):
    p = leader_partition(memory_log())
    p.append(batch(0, 1, 2), None, False)
    assert (p.log_end_offset, p.high_watermark) == (3, 0)
    waiter = p.wait_for_data()
    p.on_follower_fetch(2, 3, T0 + 1)
    assert p.high_watermark == 0 and not waiter.done()  # 3 has not fetched yet
    p.on_follower_fetch(3, 1, T0 + 1)
    assert p.high_watermark == 1 and waiter.done()
    p.on_follower_fetch(3, 3, T0 + 2)
    assert p.high_watermark == 3


async def test_the_isr_alone_moves_the_high_watermark(memory_log):
    p = leader_partition(memory_log(), isr=(1, 2))
    p.append(batch(0, 1), None, False)
    # A follower outside the ISR asks to join once caught up; it does not hold the mark.
    assert p.on_follower_fetch(3, 0, T0) is True
    assert p.high_watermark == 0
    assert p.on_follower_fetch(2, 2, T0) is False
    assert p.high_watermark == 2
    # Shrinking the ISR (after the controller's znode write) lets the mark move on.
    p.append(batch(2), None, False)
    p.state.isr = [1]
    p.on_isr_changed()
    assert p.high_watermark == 3
    # Not a replica at all: ignored.
    assert p.on_follower_fetch(9, 3, T0) is False


async def test_a_single_replica_leader_commits_at_once(memory_log):
    p = leader_partition(memory_log(), isr=(1,))
    p.append(batch(0, 1, 2), None, False)
    assert p.high_watermark == 3


# -- a follower's truncation ----------------------------------------------------------------------


def test_follower_truncates_its_divergent_tail_and_takes_the_leaders_records(memory_log):
    leader, follower = memory_log(), memory_log()
    for v in range(10):
        leader.append(batch(v), 0)
        follower.append(batch(v), 0)
    # The old leader (now the follower) wrote 10..16 at epoch 1 that nobody fetched;
    # the new leader, elected at epoch 2, wrote 10..14.
    for v in range(10, 17):
        follower.append(batch(v), 1)
    for v in range(100, 105):
        leader.append(batch(v), 2)

    # The follower's fetch: offset 17, last fetched epoch 1. The leader's check (handlers/fetch.py):
    last_epoch = follower.latest_epoch()
    epoch, end = leader.end_offset_for_epoch(last_epoch)
    assert last_epoch == 1 and (epoch, end) == (0, 10)  # diverging_epoch in the answer
    follower.truncate_to(truncation_offset(follower, epoch, end))
    assert follower.log_end_offset == 10
    # The next fetch from 10 with last fetched epoch 0 agrees; the leader's records follow.
    epoch, end = leader.end_offset_for_epoch(follower.latest_epoch())
    assert (epoch, end) == (0, 10)
    res = leader.read(10, 1 << 20)
    follower.append_as_follower(b"".join(bytes(v) for v in res.records))
    assert follower.log_end_offset == leader.log_end_offset == 15
    mine = b"".join(bytes(v) for v in follower.read(0, 1 << 20).records)
    theirs = b"".join(bytes(v) for v in leader.read(0, 1 << 20).records)
    assert mine == theirs
    assert [h.partition_leader_epoch for h in iter_batches(mine)][-1] == 2
    assert follower.epoch_entries() == leader.epoch_entries()


def test_truncation_never_goes_past_the_followers_log_end(memory_log):
    follower = memory_log()
    for v in range(3):
        follower.append(batch(v), 0)
    assert truncation_offset(follower, 0, 10) == 3
    assert truncation_offset(follower, 5, 2) == 2  # an epoch we never had: the leader's end


# -- the high watermark across a restart (replication-offset-checkpoint) --------------------------


async def test_a_restarted_leader_exposes_only_what_was_committed(memory_log):
    # The log holds 0..9, but only 0..5 were committed (the checkpointed high watermark).
    plog = memory_log()
    for v in range(10):
        plog.append(batch(v), 0, None)
    state = PartitionState(leader=1, leader_epoch=1, isr=[1, 2, 3], replicas=[1, 2, 3], zk_version=0)
    p = Partition("t", 0, b"\x01" * 16, plog, state, broker_id=1, high_watermark=6)
    p.become_leader(T0)
    assert p.high_watermark == 6
    # Consumers read only below it until the ISR has the rest.
    assert p.read(0, 1 << 20, True).next_offset == 6
    p.on_follower_fetch(2, 10, T0 + 1)
    p.on_follower_fetch(3, 8, T0 + 1)
    assert p.high_watermark == 8
    assert p.read(0, 1 << 20, True).next_offset == 8


def test_a_partition_without_a_checkpoint_starts_at_the_log_start(memory_log):
    plog = memory_log()
    plog.append(batch(*range(4)), 0, None)
    state = PartitionState(leader=2, leader_epoch=0, isr=[1, 2], replicas=[1, 2], zk_version=0)
    assert Partition("t", 0, b"\x01" * 16, plog, state, broker_id=1).high_watermark == 0
    # A checkpoint beyond the data (the tail was lost) is clamped to the log end.
    assert Partition("t", 0, b"\x01" * 16, plog, state, broker_id=1, high_watermark=99).high_watermark == 4
