"""A follower's truncation to where its log diverged from the leader's (KIP-595),
without sockets (replication/fetcher.py's truncation_offset)."""

from __future__ import annotations

from refka.broker.replication.fetcher import truncation_offset
from refka.protocol.records import NewRecord, build_batch, iter_batches

T0 = 1_700_000_000_000


def batch(*values: int) -> bytes:
    return build_batch([NewRecord(None, b"v%d" % v, (), T0) for v in values])


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
