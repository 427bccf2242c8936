"""The replica fetcher (replication/fetcher.py) without sockets: where a
truncating follower cuts its log given the leader's OffsetsForLeaderEpoch answer
(Kafka's AbstractFetcherThread.getOffsetTruncationState), the back-off after a
state mismatch, and the follower's half of an incremental fetch session."""

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


def test_fetch_session_state_sends_only_what_changed_and_forgets_what_left():
    from refka.broker.replication.fetcher import FetchSessionState

    s = FetchSessionState()
    a, b, c = ("t", 0), ("t", 1), ("u", 0)
    first = {a: (10, 1, 1, 0, 1024), b: (5, 1, 1, 0, 1024)}
    # No session yet: a full fetch of everything, session 0 epoch 0 (asks for one).
    assert s.build(first) == ([a, b], []) and (s.session_id, s.epoch) == (0, 0)
    s.answered(77, first)
    assert (s.session_id, s.epoch) == (77, 1)
    # Incremental: only a moved on; b unchanged; c is new.
    second = {a: (20, 1, 1, 0, 1024), b: (5, 1, 1, 0, 1024), c: (0, 3, -1, 0, 1024)}
    assert s.build(second) == ([a, c], [])
    s.answered(77, second)
    assert s.epoch == 2
    # b is no longer fetched (delayed or removed): forgotten; nothing else changed.
    third = {a: (20, 1, 1, 0, 1024), c: (0, 3, -1, 0, 1024)}
    assert s.build(third) == ([], [b])
    s.answered(77, third)
    # A lost session starts over with a full fetch.
    s.reset()
    assert s.build(third) == ([a, c], []) and (s.session_id, s.epoch) == (0, 0)
    # A leader that keeps no session (id 0): full fetches, each asking again.
    s.answered(0, third)
    assert (s.session_id, s.epoch) == (0, 0) and s.build(third) == ([a, c], [])
    # The epoch wraps to 1, never to 0 (which would ask for a new session).
    s.answered(9, third)
    s.epoch = 0x7FFFFFFF
    s.answered(9, third)
    assert s.epoch == 1


# -- a follower partition the leader did not know yet (fetch sessions) ----------------------------


def memory_broker(node_id: int):
    from refka.broker.broker import Broker
    from refka.broker.config import BrokerConfig

    return Broker(BrokerConfig.load(None, environ={}, overrides={"broker.id": str(node_id)}), memory=True)


async def test_a_partition_answered_with_an_error_is_named_in_full_again():
    """The follower's first fetch can reach the leader before the leader's LeaderAndIsr:
    the partition is answered with an error. It must then be sent again in full, not left
    out as unchanged (the leader's session would keep serving the error)."""
    import asyncio

    from refka.broker.partition import PartitionState
    from refka.protocol import ErrorCode
    from refka.protocol.messages.fetch import Fetch

    b = memory_broker(1)
    tid = b"\x07" * 16
    p = b.replicas.become_leader_or_follower(
        "t", 0, tid, PartitionState(leader=0, leader_epoch=3, isr=[0, 1], replicas=[0, 1], zk_version=0))
    fetcher = b.replicas.fetchers.fetchers[0]
    fetcher.stop()
    await asyncio.sleep(0)
    fetcher._version = 13
    fetcher._session.answered(5, {})  # a session is open
    req, sent, desired = fetcher._request([p])
    assert [t.topic_id for t in req.topics] == [tid]  # new to the session: named
    fetcher._session.answered(5, desired)
    assert fetcher._request([p])[0].topics == []  # unchanged: left out
    R = Fetch.Response
    resp = R(error_code=0, session_id=5, responses=[R.FetchableTopicResponse(topic="", topic_id=tid, partitions=[
        R.FetchableTopicResponse.PartitionData(partition_index=0, error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                                               high_watermark=-1, log_start_offset=-1, records=None)])])
    fetcher._handle(resp, sent)
    assert [t.topic_id for t in fetcher._request([p])[0].topics] == [tid]  # named again
    b.replicas.close()


def test_the_leader_names_a_session_partition_once_it_knows_the_topic():
    from refka.broker.fetch_session import SessionPartition
    from refka.broker.handlers.fetch import _resolve_name
    from refka.broker.partition import PartitionState

    b = memory_broker(0)
    tid = b"\x09" * 16
    sp = SessionPartition(topic="", topic_id=tid, partition=0, fetch_offset=0, partition_max_bytes=1024)
    assert _resolve_name(b, sp) is False and sp.topic == ""
    b.replicas.become_leader_or_follower(
        "late", 0, tid, PartitionState(leader=0, leader_epoch=0, isr=[0], replicas=[0], zk_version=0))
    assert _resolve_name(b, sp) is True and sp.topic == "late"
    b.replicas.close()
