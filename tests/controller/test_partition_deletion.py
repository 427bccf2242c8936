"""KIP-253's drain task (partition_deletion.py): the controller asks the leaders of
partitions marked for deletion for their offsets every check interval, and removes each
that is empty: StopReplica(delete), the assignment, the partition and state znodes,
UpdateMetadata with leader -2. A leader that does not answer is asked again; the task
stops with the controller; a controller stopped between the removal's steps is finished
by its successor.

The recording channel of test_controller.py answers ListOffsets from ``channel.offsets``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from refka.controller import admin, faults
from refka.controller.events import PartitionsDrained
from tests.controller.test_controller import BROKERS, Cluster, create, partition_states
from tests.controller.test_topics import StopAt, grow, shrink
from tests.waiting import wait_until_async

INTERVAL_MS = 50


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    c = Cluster()
    await c.start(candidates=(1, 2), config={"partition.deletion.check.interval.ms": str(INTERVAL_MS)})
    yield c
    await c.stop()


async def shrunk_topic(cluster: Cluster, name: str) -> None:
    """Partitions 0-3, 2 and 3 marked for deletion; every leader answers 'not empty'."""
    await create(cluster, name, {0: [1, 2], 1: [2, 3]})
    await grow(cluster, name, 4)
    for c in cluster.channels.values():
        c.offsets.update({(name, p): (0, 10) for p in range(4)})
    await shrink(cluster, name, 2)


async def partitions(cluster: Cluster, name: str) -> list[int]:
    return sorted(int(p) for p in (await cluster.json(f"/brokers/topics/{name}"))["partitions"])


async def gone(cluster: Cluster, name: str, p: int) -> bool:
    return (
        p not in await partitions(cluster, name)
        and await cluster.store.exists(f"/brokers/topics/{name}/partitions/{p}") is None
    )


async def until_gone(cluster: Cluster, name: str, p: int, timeout: float = 30.0) -> None:
    """Polls the store (only a guard against hangs: no test asserts on time)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await gone(cluster, name, p):
        assert asyncio.get_running_loop().time() < deadline, f"partition {name}-{p} was not removed"
        await asyncio.sleep(0.01)


async def test_an_empty_marked_partition_is_removed_and_the_topic_can_grow_again(cluster: Cluster) -> None:
    await shrunk_topic(cluster, "d")
    c = cluster.active
    ch = cluster.channel
    s2 = c.partition_state("d", 2)
    replicas2 = c.context.replicas(("d", 2))
    ch.clear()
    ch.offsets[("d", 2)] = (7, 7)  # drained by DeleteRecords
    await until_gone(cluster, "d", 2)
    await cluster.settle()

    assert await partitions(cluster, "d") == [0, 1, 3]  # 3 still holds records
    assert await cluster.store.exists("/brokers/topics/d/partitions/3") is not None
    assert ("d", 2) not in c.context.states and ("d", 2) not in c.context.partition_znodes
    # Asked as a replica (its own broker id: LATEST answers the log end offset, not the high
    # watermark), fenced with the leader epoch it knows: the log start, then the end.
    asks = [r for r in ch.of("ListOffsets", s2.leader) if any(t.name == "d" for t in r.topics)]
    first = {(t.name, p.partition_index): p for t in asks[0].topics for p in t.partitions}
    second = {(t.name, p.partition_index): p for t in asks[1].topics for p in t.partitions}
    assert asks[0].replica_id == asks[1].replica_id == c.broker_id
    assert (first[("d", 2)].timestamp, second[("d", 2)].timestamp) == (-2, -1)
    assert first[("d", 2)].current_leader_epoch == s2.leader_epoch
    # StopReplica(delete) to its replicas; every broker's metadata drops it (leader -2).
    for b in replicas2:
        stops = {tp: p for r in ch.of("StopReplica", b) for tp, p in partition_states(r).items()}
        assert stops[("d", 2)].delete_partition and stops[("d", 2)].leader_epoch == -2
    for b in BROKERS:
        deleted = {tp: p.leader for r in ch.of("UpdateMetadata", b) for tp, p in partition_states(r).items()}
        assert deleted[("d", 2)] == -2
    with pytest.raises(admin.InvalidPartitionsError, match=r"Partitions \[3\] .* marked for deletion"):
        await admin.create_partitions(cluster.store, "d", 4, None, {b: None for b in BROKERS})

    ch.offsets[("d", 3)] = (10, 10)
    await until_gone(cluster, "d", 3)
    await cluster.settle()
    assert await partitions(cluster, "d") == [0, 1]
    # Nothing marked any more: it grows again, with new partition epochs.
    await grow(cluster, "d", 4)
    assert await partitions(cluster, "d") == [0, 1, 2, 3]
    pz = await cluster.json("/brokers/topics/d/partitions/2")
    assert pz["leaderEpochBeforeDeletion"] == {} and pz["leaderEpochAfterCreation"] == {"0": 2, "1": 2}


async def test_a_leader_that_does_not_answer_is_asked_again(cluster: Cluster) -> None:
    await shrunk_topic(cluster, "u")
    c = cluster.active
    ch = cluster.channel
    leader2, leader3 = c.partition_state("u", 2).leader, c.partition_state("u", 3).leader
    assert leader2 != leader3
    ch.silent.add(leader2)
    ch.offsets[("u", 2)] = ch.offsets[("u", 3)] = (4, 4)
    await until_gone(cluster, "u", 3)  # the other leader's partition goes
    asked = len(ch.of("ListOffsets", leader2))
    await wait_until_async(lambda: len(ch.of("ListOffsets", leader2)) >= asked + 4)  # and again
    assert 2 in await partitions(cluster, "u")
    ch.silent.discard(leader2)
    await until_gone(cluster, "u", 2)


async def test_the_task_stops_with_the_controller_and_its_successor_carries_on(cluster: Cluster) -> None:
    await shrunk_topic(cluster, "r")
    first = cluster.active
    await first.stop()
    del cluster.controllers[first.broker_id]
    sent = len(cluster.channels[first.broker_id].of("ListOffsets"))
    await wait_until_async(lambda: any(c.is_active for c in cluster.controllers.values()))
    await asyncio.sleep(5 * INTERVAL_MS / 1000)
    assert len(cluster.channels[first.broker_id].of("ListOffsets")) == sent
    cluster.channel.offsets[("r", 2)] = cluster.channel.offsets[("r", 3)] = (0, 0)
    await until_gone(cluster, "r", 2)
    await until_gone(cluster, "r", 3)


async def test_an_answer_about_an_older_leader_epoch_removes_nothing(cluster: Cluster) -> None:
    await shrunk_topic(cluster, "o")
    c = cluster.active
    topic_id = c.context.topics["o"].topic_id
    old = c.partition_state("o", 2).leader_epoch - 1
    c._events.put_nowait(PartitionsDrained(c.epoch, {("o", 2): (topic_id, old)}))
    c._events.put_nowait(PartitionsDrained(c.epoch - 1, {("o", 3): (topic_id, old + 1)}))  # an older term's
    await cluster.settle()
    assert await partitions(cluster, "o") == [0, 1, 2, 3]


@pytest.mark.parametrize("step", ["removal.assignment_written", "removal.replicas_stopped"])
async def test_a_new_controller_finishes_a_removal_stopped_after(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    await shrunk_topic(cluster, "x")
    first = cluster.active
    replicas = first.context.replicas(("x", 2))
    hook = StopAt(step)
    monkeypatch.setattr(faults, "step_hook", hook)
    cluster.channels[first.broker_id].offsets[("x", 2)] = (3, 3)
    await asyncio.wait_for(hook.reached.wait(), 10)
    await first.stop()
    del cluster.controllers[first.broker_id]
    await wait_until_async(lambda: any(c.is_active for c in cluster.controllers.values()))
    await until_gone(cluster, "x", 2)
    await cluster.settle()

    assert await partitions(cluster, "x") == [0, 1, 3]
    # The successor stopped it on every live broker (it no longer knows the replicas) and
    # told every broker's metadata to drop it.
    ch = cluster.channel
    for b in BROKERS:
        stops = {tp: p for r in ch.of("StopReplica", b) for tp, p in partition_states(r).items()}
        assert stops[("x", 2)].delete_partition
        assert any(p.leader == -2 for r in ch.of("UpdateMetadata", b) for tp, p in partition_states(r).items()
                   if tp == ("x", 2))
    assert set(replicas) <= set(BROKERS)
    # Nothing half-done is left: 3 is still marked, 2 is nowhere.
    c = cluster.active
    assert ("x", 2) not in c.context.partition_znodes and c.context.partition_znodes[("x", 3)].marked_for_deletion
