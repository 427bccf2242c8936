"""The leader's replication rules without sockets (replication/isr.py): high
watermark, a follower's caught-up time, ISR expansion and shrink."""

from __future__ import annotations

from refka.broker.replication.isr import (
    FollowerState,
    expansion_candidates,
    high_watermark,
    lagging_replicas,
    on_follower_fetch,
)

T0 = 1_700_000_000_000


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
