"""A truncating follower's rules (replication/fetcher.py): where it cuts its log
given the leader's OffsetsForLeaderEpoch answer for the epoch of its last batch
(Kafka's AbstractFetcherThread.getOffsetTruncationState)."""

from __future__ import annotations

import pytest

from refka.broker.log import LogConfig, PartitionLog
from refka.broker.replication.fetcher import epoch_end_truncation_offset
from refka.protocol.records import NewRecord, build_batch

T0 = 1_700_000_000_000


def batch(*values: int) -> bytes:
    return build_batch([NewRecord(None, b"v%d" % v, (), T0) for v in values])


@pytest.fixture
def follower():
    """A follower log: offsets 0..9 at epoch 0, 10..16 at epoch 1 (a tail nobody fetched)."""
    log = PartitionLog.open(None, LogConfig(), memory=True)
    for v in range(10):
        log.append(batch(v), 0)
    for v in range(10, 17):
        log.append(batch(v), 1)
    yield log
    log.close()


def test_undefined_end_offset_truncates_to_the_high_watermark(follower):
    # The leader has no epoch as old as ours (-1, -1): keep what was committed.
    assert epoch_end_truncation_offset(follower, 8, -1, -1) == 8
    # A high watermark beyond the log (never) does not extend it.
    assert epoch_end_truncation_offset(follower, 40, -1, -1) == 17


def test_no_leader_epoch_takes_the_smaller_of_both_log_ends(follower):
    assert epoch_end_truncation_offset(follower, 0, -1, 12) == 12
    assert epoch_end_truncation_offset(follower, 0, -1, 30) == 17


def test_the_leaders_epoch_end_or_ours_if_smaller(follower):
    # Same epoch 1 on both sides; the leader's ends at 14: our 14..16 go.
    assert epoch_end_truncation_offset(follower, 0, 1, 14) == 14
    # The leader's largest epoch not above ours is 0, ending at 12; ours ends at 10.
    assert epoch_end_truncation_offset(follower, 0, 0, 12) == 10
    # The leader agrees up to beyond our end: nothing to cut.
    assert epoch_end_truncation_offset(follower, 0, 1, 25) == 17
    follower.truncate_to(epoch_end_truncation_offset(follower, 5, 0, 10))
    assert follower.log_end_offset == 10 and follower.latest_epoch() == 0


def test_a_state_mismatch_is_asked_again_soon_then_less_often():
    from refka.broker.replication.fetcher import STATE_MISMATCH_ERRORS, mismatch_backoff
    from refka.protocol import ErrorCode

    # The leader has not applied the LeaderAndIsr we have (or we theirs): 10 ms, then doubling
    # up to replica.fetch.backoff.ms, never the whole second at once.
    assert [mismatch_backoff(n, 1.0) for n in range(8)] == [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0]
    assert mismatch_backoff(1000, 1.0) == 1.0
    assert mismatch_backoff(0, 0.005) == 0.005
    assert ErrorCode.UNKNOWN_LEADER_EPOCH in STATE_MISMATCH_ERRORS
    assert ErrorCode.KAFKA_STORAGE_ERROR not in STATE_MISMATCH_ERRORS
