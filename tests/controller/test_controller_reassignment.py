"""Reassignment (controller/reassignment.py) and unclean ElectLeaders on the
controller, over the embedded store with a fake channel (test_controller's
cluster fixture): what is written to the znodes and sent to whom."""

from __future__ import annotations

import pytest
from test_controller import Cluster, create, partition_states

from refka.controller import admin, znodes
from refka.protocol.errors import ErrorCode
from tests.waiting import wait_until_async

TOPIC = "/brokers/topics/"


@pytest.fixture
async def cluster():
    c = Cluster()
    await c.start()
    yield c
    await c.stop()


async def join_isr(cluster: Cluster, topic: str, p: int, isr: tuple[int, ...]) -> None:
    """What the leader would do once the followers caught up: write the ISR and notify."""
    c = cluster.active
    st = c.partition_state(topic, p)
    v = (await cluster.store.exists(f"{TOPIC}{topic}/partitions/{p}/state")).version
    await admin.update_isr(cluster.store, topic, p, znodes.PartitionStateZnode(st.leader, st.leader_epoch, isr, 1), v)
    await admin.notify_isr_change(cluster.store, [(topic, p)])


async def test_reassignment_adds_then_completes_when_the_target_is_in_the_isr(cluster: Cluster) -> None:
    await create(cluster, "mv", {0: [1, 2]})
    c = cluster.active
    epoch0 = c.partition_state("mv", 0).leader_epoch
    cluster.channel.clear()
    assert await c.alter_partition_reassignments({("mv", 0): [3, 2]}) == {("mv", 0): (ErrorCode.NONE, None)}
    doc = await cluster.json(TOPIC + "mv")
    assert (doc["partitions"]["0"], doc["adding_replicas"], doc["removing_replicas"]) == (
        [3, 2, 1], {"0": [3]}, {"0": [1]})
    assert c.ongoing_reassignments() == {("mv", 0): ([3, 2, 1], [3], [1])}
    st = c.partition_state("mv", 0)
    assert (st.leader, st.leader_epoch) == (1, epoch0 + 1)
    lai3 = partition_states(cluster.channel.of("LeaderAndIsr", 3)[0])[("mv", 0)]
    assert (lai3.is_new, lai3.replicas, lai3.adding_replicas, lai3.removing_replicas) == (True, [3, 2, 1], [3], [1])

    cluster.channel.clear()
    await join_isr(cluster, "mv", 0, (1, 2, 3))
    await wait_until_async(lambda: c.ongoing_reassignments() == {})
    await cluster.settle()
    st = c.partition_state("mv", 0)
    assert (st.leader, st.leader_epoch, st.isr) == (3, epoch0 + 2, (2, 3))  # leader 1 left: 3 leads
    doc = await cluster.json(TOPIC + "mv")
    assert (doc["partitions"]["0"], doc["adding_replicas"], doc["removing_replicas"]) == ([3, 2], {}, {})
    (stop,) = cluster.channel.of("StopReplica", 1)
    assert {k: p.delete_partition for k, p in partition_states(stop).items()} == {("mv", 0): True}


async def test_cancel_returns_to_the_original_replicas(cluster: Cluster) -> None:
    await create(cluster, "cx", {0: [1, 2]})
    c = cluster.active
    await c.alter_partition_reassignments({("cx", 0): [1, 3]})
    assert c.ongoing_reassignments() == {("cx", 0): ([1, 3, 2], [3], [2])}
    cluster.channel.clear()
    assert await c.alter_partition_reassignments({("cx", 0): None}) == {("cx", 0): (ErrorCode.NONE, None)}
    # Back to [1, 2], both still in the ISR: done at once, the added replica 3 stopped and deleted.
    assert c.ongoing_reassignments() == {}
    doc = await cluster.json(TOPIC + "cx")
    assert (doc["partitions"]["0"], doc["adding_replicas"], doc["removing_replicas"]) == ([1, 2], {}, {})
    stops = cluster.channel.of("StopReplica", 3)
    assert stops and all(p.delete_partition for s in stops for p in partition_states(s).values())
    assert await c.alter_partition_reassignments({("cx", 0): None}) == {
        ("cx", 0): (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)}


async def test_reassignment_errors(cluster: Cluster) -> None:
    await create(cluster, "bad", {0: [1, 2]})
    c = cluster.active
    got = await c.alter_partition_reassignments(
        {("bad", 0): [], ("bad", 5): [1], ("nope", 0): [1]})
    assert {tp: code for tp, (code, _m) in got.items()} == {
        ("bad", 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ("bad", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    got = await c.alter_partition_reassignments({("bad", 0): [1, 2, 3]}, allow_replication_factor_change=False)
    assert got[("bad", 0)][0] == ErrorCode.INVALID_REPLICATION_FACTOR
    got = await c.alter_partition_reassignments({("bad", 0): [1, 42]})
    assert got[("bad", 0)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT


async def test_unclean_election(cluster: Cluster) -> None:
    await create(cluster, "un", {0: [2, 3]})
    c = cluster.active
    assert await c.elect_unclean_leaders([("un", 0)]) == {("un", 0): ErrorCode.ELECTION_NOT_NEEDED}
    await cluster.kill_broker(3)
    await wait_until_async(lambda: c.partition_state("un", 0).isr == (2,))
    await cluster.kill_broker(2)
    await wait_until_async(lambda: c.partition_state("un", 0).leader == -1)
    assert await c.elect_unclean_leaders([("un", 0)]) == {("un", 0): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE}
    await cluster.start_broker(3)
    await wait_until_async(lambda: 3 in c.context.live)
    await cluster.settle()
    assert c.partition_state("un", 0).leader == -1  # 3 is not in the ISR: no clean election
    epoch = c.partition_state("un", 0).leader_epoch
    assert await c.elect_unclean_leaders([("un", 0)]) == {("un", 0): ErrorCode.NONE}
    st = c.partition_state("un", 0)
    assert (st.leader, st.isr, st.leader_epoch) == (3, (3,), epoch + 1)
    assert await c.elect_unclean_leaders([("nope", 0)]) == {("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
