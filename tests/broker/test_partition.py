"""One partition without sockets (partition.py): the leader's high watermark from
its followers' fetches and the ISR, the min-ISR check and the acks=all wait, and
the high watermark across a restart (replication-offset-checkpoint)."""

from __future__ import annotations

import asyncio

import pytest

from refka.broker.log import PartitionLog
from refka.broker.partition import Partition, PartitionState
from refka.protocol import ErrorCode
from refka.protocol.records import NewRecord, build_batch

T0 = 1_700_000_000_000


def batch(*values: int) -> bytes:
    return build_batch([NewRecord(None, b"v%d" % v, (), T0) for v in values])


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


# -- produce: the min-ISR check and the acks=all wait --------------------------------------------


def test_an_isr_smaller_than_min_insync_replicas_refuses_acks_all(memory_log):
    p = leader_partition(memory_log(), isr=(1, 2))
    assert p.check_enough_replicas(2) == ErrorCode.NONE
    assert p.check_enough_replicas(3) == ErrorCode.NOT_ENOUGH_REPLICAS


def deadline(seconds: float) -> float:
    return asyncio.get_running_loop().time() + seconds


async def test_acks_all_answers_once_the_isr_has_the_records(memory_log):
    p = leader_partition(memory_log(), isr=(1, 2))
    p.append(batch(0, 1), None, False)
    wait = asyncio.ensure_future(p.wait_for_high_watermark(2, deadline(30), 2))
    await asyncio.sleep(0)
    p.on_follower_fetch(2, 1, T0)
    await asyncio.sleep(0)
    assert not wait.done()  # the follower has one of the two records
    p.on_follower_fetch(2, 2, T0)
    assert await wait == ErrorCode.NONE


async def test_acks_all_times_out_when_the_followers_do_not_fetch(memory_log):
    p = leader_partition(memory_log())
    p.append(batch(0), None, False)
    assert await p.wait_for_high_watermark(1, deadline(0.01)) == ErrorCode.REQUEST_TIMED_OUT


async def test_acks_all_committed_by_a_shrunk_isr_is_not_enough_replicas_after_append(memory_log):
    p = leader_partition(memory_log(), isr=(1, 2))
    p.append(batch(0), None, False)
    wait = asyncio.ensure_future(p.wait_for_high_watermark(1, deadline(30), 2))
    await asyncio.sleep(0)
    p.state.isr = [1]  # the leader's ISR write took 2 out
    p.on_isr_changed()
    assert await wait == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


@pytest.mark.parametrize("change", ["leader_moved", "replica_stopped"])
async def test_acks_all_waiters_learn_at_once_that_this_broker_no_longer_leads(memory_log, change):
    p = leader_partition(memory_log())
    p.append(batch(0), None, False)
    wait = asyncio.ensure_future(p.wait_for_high_watermark(1, deadline(30)))
    await asyncio.sleep(0)
    if change == "leader_moved":
        p.state = PartitionState(leader=2, leader_epoch=1, isr=[1, 2, 3], replicas=[1, 2, 3], zk_version=1)
    else:
        p.hosted = False  # what ReplicaManager.stop_replica does
    p.wake()
    assert await wait == ErrorCode.NOT_LEADER_OR_FOLLOWER


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
