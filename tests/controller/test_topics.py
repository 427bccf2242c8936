"""KIP-253 on the controller (topics.py): the shrink's steps, expansion with and without
``enable.ordered.delivery``, seed change 1 for topic znodes written without counts, and
a controller stopped after each step of an expansion and of a shrink, whose successor
finishes from the znodes: no partition half-marked, no leader epoch stale or bumped twice.

Controllers run in-process over an EmbeddedStore with the recording channel of
test_controller.py; ``faults.step_hook`` freezes the active one after a named step.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from refka.controller import admin, faults, znodes
from tests.controller.test_controller import BROKERS, Cluster, FakeChannel, create, partition_states
from tests.waiting import wait_until_async


async def leader_epochs(cluster: Cluster, name: str) -> dict[int, int]:
    topic = await cluster.json(f"/brokers/topics/{name}")
    return {
        int(p): (await cluster.json(f"/brokers/topics/{name}/partitions/{p}/state"))["leader_epoch"]
        for p in topic["partitions"]
    }


async def marks(cluster: Cluster, name: str) -> dict[int, dict[str, int]]:
    topic = await cluster.json(f"/brokers/topics/{name}")
    return {
        int(p): (await cluster.json(f"/brokers/topics/{name}/partitions/{p}"))["leaderEpochBeforeDeletion"]
        for p in topic["partitions"]
    }


async def grow(cluster: Cluster, name: str, count: int) -> None:
    brokers = {b: None for b in BROKERS}
    await admin.create_partitions(cluster.store, name, count, None, brokers)
    c = cluster.active
    await wait_until_async(lambda: all(c.partition_state(name, p) for p in range(count)))
    await cluster.settle()


async def shrink(cluster: Cluster, name: str, count: int) -> None:
    await admin.create_partitions(cluster.store, name, count, None, {b: None for b in BROKERS})
    await cluster.settle()


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    c = Cluster()
    await c.start(candidates=(1, 2))
    yield c
    await c.stop()


# ---- the shrink --------------------------------------------------------------------------------


async def test_a_shrink_marks_the_partitions_and_bumps_the_undeleted_ones(cluster: Cluster) -> None:
    await create(cluster, "s", {0: [1, 2], 1: [2, 3]})
    await grow(cluster, "s", 4)  # p0, p1 at epoch 1; p2, p3 new at 0
    cluster.channel.clear()
    await shrink(cluster, "s", 3)

    topic = await cluster.json("/brokers/topics/s")
    assert (topic["initial_partition_count"], topic["undeleted_partition_count"]) == (2, 3)
    assert sorted(topic["partitions"]) == ["0", "1", "2", "3"]  # p3 stays until it is drained
    assert await marks(cluster, "s") == {0: {}, 1: {}, 2: {}, 3: {"0": 1, "1": 1, "2": 0}}
    assert await leader_epochs(cluster, "s") == {0: 2, 1: 2, 2: 1, 3: 0}
    # LeaderAndIsr with the bump and the new count first, then the metadata to every broker.
    ch = cluster.channel
    for b in BROKERS:
        kinds = [a for bid, a, _ in ch.sent if bid == b]
        assert kinds[-1] == "UpdateMetadata" and set(kinds[:-1]) <= {"LeaderAndIsr"}, (b, kinds)
    bumped = {}
    for req in ch.of("LeaderAndIsr"):
        assert req.topic_states[0].partition_counts.undeleted_partition_count == 3
        bumped.update({p: s.leader_epoch for p, s in partition_states(req).items()})
    assert bumped == {("s", 0): 2, ("s", 1): 2, ("s", 2): 1}
    um = ch.of("UpdateMetadata", 1)[0]
    counts = um.topic_states[0].partition_counts
    assert (counts.initial_partition_count, counts.undeleted_partition_count) == (2, 3)
    assert {p.partition_index for p in um.topic_states[0].partition_states} == {0, 1, 2, 3}
    assert cluster.active.context.partition_znodes[("s", 3)].marked_for_deletion


async def test_a_second_shrink_marks_only_the_partitions_it_adds(cluster: Cluster) -> None:
    await create(cluster, "s2", {0: [1, 2], 1: [2, 3]})
    await grow(cluster, "s2", 4)
    await shrink(cluster, "s2", 3)
    await shrink(cluster, "s2", 2)
    assert (await cluster.json("/brokers/topics/s2"))["undeleted_partition_count"] == 2
    # p3 keeps what the first shrink recorded; p2 gets the epochs of p0, p1 before the second bump.
    assert await marks(cluster, "s2") == {0: {}, 1: {}, 2: {"0": 2, "1": 2}, 3: {"0": 1, "1": 1, "2": 0}}
    assert await leader_epochs(cluster, "s2") == {0: 3, 1: 3, 2: 1, 3: 0}


async def test_with_ordered_delivery_off_an_expansion_records_and_bumps_nothing(cluster: Cluster) -> None:
    await create(cluster, "plain", {0: [1, 2], 1: [2, 3]}, **{"enable.ordered.delivery": "false"})
    await grow(cluster, "plain", 4)
    topic = await cluster.json("/brokers/topics/plain")
    assert (topic["initial_partition_count"], topic["undeleted_partition_count"]) == (2, 4)
    assert await leader_epochs(cluster, "plain") == {0: 0, 1: 0, 2: 0, 3: 0}
    for p in (2, 3):
        assert (await cluster.json(f"/brokers/topics/plain/partitions/{p}"))["leaderEpochAfterCreation"] == {}


async def test_ordered_delivery_is_read_when_the_topic_changes(cluster: Cluster) -> None:
    """AlterConfigs does not tell the controller: it reads the config as the topic changes."""
    await create(cluster, "flip", {0: [1, 2]}, **{"enable.ordered.delivery": "false"})
    await admin.set_topic_config(cluster.store, "flip", {"enable.ordered.delivery": "true"})
    await grow(cluster, "flip", 2)
    assert (await cluster.json("/brokers/topics/flip/partitions/1"))["leaderEpochAfterCreation"] == {"0": 0}
    assert await leader_epochs(cluster, "flip") == {0: 1, 1: 0}


# ---- seed change 1: topic znodes without the counts ------------------------------------------------


def kafka_topic_znode(partitions: dict[int, list[int]]) -> bytes:
    """A topic znode as Kafka (or an older refka) writes it: no KIP-253 counts, no topic epoch."""
    return znodes.TopicAssignment("x", znodes.new_topic_id(), partitions).to_json()


async def test_counts_are_written_into_a_topic_znode_made_by_hand(cluster: Cluster) -> None:
    await cluster.store.create("/brokers/topics/byhand", kafka_topic_znode({0: [1], 1: [2], 2: [3]}))
    c = cluster.active
    await wait_until_async(lambda: all(c.partition_state("byhand", p) for p in range(3)))
    await cluster.settle()
    topic = await cluster.json("/brokers/topics/byhand")
    assert (topic["initial_partition_count"], topic["undeleted_partition_count"]) == (3, 3)
    assert topic["topic_epoch"] >= 1


async def test_a_new_controller_writes_the_counts_an_older_one_did_not() -> None:
    """Partition and state znodes already there (an older refka made the topic): only the counts
    are missing, and the controller taking over writes them, changing no leader epoch."""
    cl = Cluster()
    await cl.store.start()
    await admin.ensure_cluster(cl.store)
    for b in BROKERS:
        await cl.start_broker(b)
    await cl.store.create("/brokers/topics/old", kafka_topic_znode({0: [1, 2], 1: [2, 3]}))
    for p in (0, 1):
        await cl.store.create(f"/brokers/topics/old/partitions/{p}", b"", makepath=True)  # as Kafka leaves it
        await cl.store.create(f"/brokers/topics/old/partitions/{p}/state",
                              znodes.PartitionStateZnode(p + 1, 7, (p + 1,), 0).to_json())
    cl.channels[1] = FakeChannel()
    from refka.controller.controller import Controller

    cl.controllers[1] = Controller(cl.sessions[1], 1, cl.channels[1])
    await cl.controllers[1].start()
    try:
        await wait_until_async(lambda: cl.controllers[1].is_active)
        await cl.settle()
        topic = await cl.json("/brokers/topics/old")
        assert (topic["initial_partition_count"], topic["undeleted_partition_count"]) == (2, 2)
        assert await leader_epochs(cl, "old") == {0: 7, 1: 7}
    finally:
        await cl.stop()


# ---- a controller stopped after each step ------------------------------------------------------------


class StopAt:
    """A step hook that freezes the first controller to reach ``step`` (it handles nothing
    more) until the test stops it; later controllers pass."""

    def __init__(self, step: str) -> None:
        self.step = step
        self.reached = asyncio.Event()

    async def __call__(self, step: str) -> None:
        if step == self.step and not self.reached.is_set():
            self.reached.set()
            await asyncio.Event().wait()  # cancelled when the controller stops


async def stop_at(cluster: Cluster, monkeypatch: pytest.MonkeyPatch, step: str, change: Any) -> None:
    """Runs ``change`` (an admin write) with the active controller frozen after ``step``, then
    stops that controller and waits for the other candidate to take over and settle."""
    hook = StopAt(step)
    monkeypatch.setattr(faults, "step_hook", hook)
    first = cluster.active
    await change()
    await asyncio.wait_for(hook.reached.wait(), 10)
    await first.stop()
    del cluster.controllers[first.broker_id]
    await wait_until_async(lambda: any(c.is_active for c in cluster.controllers.values()))
    await cluster.settle()
    await asyncio.sleep(0.05)  # watches fired by the successor's own writes
    await cluster.settle()


@pytest.mark.parametrize("step", [
    "expansion.count_raised",
    "expansion.partitions_created",
    "expansion.epochs_bumped",
    "expansion.leader_and_isr_answered",
    "expansion.states_created",
])
async def test_a_new_controller_finishes_an_expansion_stopped_after(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    await create(cluster, "e", {0: [1, 2], 1: [2, 3]})
    brokers = {b: None for b in BROKERS}
    await stop_at(cluster, monkeypatch, step, lambda: admin.create_partitions(cluster.store, "e", 4, None, brokers))

    topic = await cluster.json("/brokers/topics/e")
    assert (topic["initial_partition_count"], topic["undeleted_partition_count"]) == (2, 4)
    assert await leader_epochs(cluster, "e") == {0: 1, 1: 1, 2: 0, 3: 0}  # bumped once, not twice
    for p in (2, 3):
        pz = await cluster.json(f"/brokers/topics/e/partitions/{p}")
        assert pz["leaderEpochAfterCreation"] == {"0": 0, "1": 0}
    # The successor told every broker: full LeaderAndIsr and UpdateMetadata with the new count.
    ch = cluster.channel
    for b in BROKERS:
        la = [r for r in ch.of("LeaderAndIsr", b) if r.topic_states]
        states = {k: v for r in la for k, v in partition_states(r).items() if k[0] == "e"}
        assert {k: v.leader_epoch for k, v in states.items()} == {
            ("e", p): e for p, e in {0: 1, 1: 1, 2: 0, 3: 0}.items() if b in topic["partitions"][str(p)]
        }
        assert all(r.topic_states[0].partition_counts.undeleted_partition_count == 4 for r in la)
        um = ch.of("UpdateMetadata", b)[-1]
        (ts,) = [t for t in um.topic_states if t.topic_name == "e"]
        assert ts.partition_counts.undeleted_partition_count == 4 and len(ts.partition_states) == 4


@pytest.mark.parametrize("step", ["shrink.marked", "shrink.epochs_bumped", "shrink.leader_and_isr_answered"])
async def test_a_new_controller_finishes_a_shrink_stopped_after(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    await create(cluster, "h", {0: [1, 2], 1: [2, 3]})
    await grow(cluster, "h", 4)
    brokers = {b: None for b in BROKERS}
    await stop_at(cluster, monkeypatch, step, lambda: admin.create_partitions(cluster.store, "h", 2, None, brokers))

    assert (await cluster.json("/brokers/topics/h"))["undeleted_partition_count"] == 2
    assert await marks(cluster, "h") == {0: {}, 1: {}, 2: {"0": 1, "1": 1}, 3: {"0": 1, "1": 1}}
    assert await leader_epochs(cluster, "h") == {0: 2, 1: 2, 2: 0, 3: 0}  # bumped once, not twice
    c = cluster.active
    assert {tp[1] for tp, pz in c.context.partition_znodes.items() if tp[0] == "h" and pz.marked_for_deletion} == {2, 3}
    for b in BROKERS:
        um = cluster.channel.of("UpdateMetadata", b)[-1]
        (ts,) = [t for t in um.topic_states if t.topic_name == "h"]
        assert ts.partition_counts.undeleted_partition_count == 2
        assert {p.partition_index: p.leader_epoch for p in ts.partition_states} == {0: 2, 1: 2, 2: 0, 3: 0}
