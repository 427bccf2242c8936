"""request_batch.py on its own: a context filled by hand, a batch, and what
BatchSender hands the channel (test_controller's recording FakeChannel)."""

from __future__ import annotations

import pytest
from test_controller import FakeChannel, partition_states

from refka.common import Endpoint
from refka.controller.context import ControllerContext
from refka.controller.election import ControllerElection
from refka.controller.request_batch import BatchSender, RequestBatch
from refka.controller.store import EmbeddedStore
from refka.controller.znodes import (
    LEADER_DURING_DELETE,
    BrokerInfo,
    PartitionStateZnode,
    PartitionZnode,
    TopicAssignment,
)
from refka.protocol.messages.leader_and_isr import TYPE_FULL, TYPE_INCREMENTAL

TOPIC_ID = bytes(range(16))


def broker(b: int) -> BrokerInfo:
    return BrokerInfo(b, (Endpoint("PLAINTEXT", f"host{b}", 9090 + b),), rack=f"r{b}")


@pytest.fixture
def channel() -> FakeChannel:
    return FakeChannel()


@pytest.fixture
def sender(channel: FakeChannel) -> BatchSender:
    """Brokers 1 and 2 live, 3 gone; topic "t": partition 0 on [1, 2] led by 1,
    partition 1 on [2, 3] led by 2 (3 has left its ISR); controller epoch 7."""
    ctx = ControllerContext()
    ctx.live = {1: broker(1), 2: broker(2)}
    ctx.broker_epochs = {1: 101, 2: 102}
    ctx.topics["t"] = TopicAssignment(
        "t", TOPIC_ID, {0: [1, 2], 1: [2, 3]}, initial_partition_count=2, undeleted_partition_count=2,
        topic_epoch=5,
    )
    ctx.states[("t", 0)] = PartitionStateZnode(1, 3, (1, 2), 6)
    ctx.states[("t", 1)] = PartitionStateZnode(2, 4, (2,), 6)
    ctx.state_versions.update({("t", 0): 8, ("t", 1): 9})
    ctx.partition_znodes.update({("t", 0): PartitionZnode(11), ("t", 1): PartitionZnode(12)})
    ctx.max_partition_epoch = 12
    election = ControllerElection(EmbeddedStore(None), 1, lambda epoch: None, lambda: None)
    election.epoch = 7
    election.token = 4242
    return BatchSender(1, ctx, channel, election, None)


def sent(channel: FakeChannel) -> list[tuple[int, str]]:
    return [(b, api) for b, api, _ in channel.sent]


async def test_every_request_carries_the_controller_token_of_the_election(
    sender: BatchSender, channel: FakeChannel,
) -> None:
    batch = RequestBatch()
    batch.add_leader_and_isr([1], ("t", 0))
    batch.update_metadata.add(("t", 0))
    batch.add_stop_replica(1, ("t", 1), delete=False, leader_epoch=4)
    sender.send(batch)
    assert [(api, r.controller_token) for _b, api, r in channel.sent] == [
        ("LeaderAndIsr", 4242), ("UpdateMetadata", 4242), ("UpdateMetadata", 4242), ("StopReplica", 4242),
    ]


async def test_leader_and_isr_then_update_metadata_then_stop_replica_to_live_brokers_only(
    sender: BatchSender, channel: FakeChannel,
) -> None:
    batch = RequestBatch()
    batch.add_leader_and_isr([1, 2, 3], ("t", 0), is_new=True)
    batch.update_metadata.add(("t", 0))
    batch.add_stop_replica(2, ("t", 1), delete=False, leader_epoch=4)
    batch.add_stop_replica(3, ("t", 1), delete=True, leader_epoch=4)
    sender.send(batch)
    assert sent(channel) == [
        (1, "LeaderAndIsr"),
        (2, "LeaderAndIsr"),
        (1, "UpdateMetadata"),
        (2, "UpdateMetadata"),
        (2, "StopReplica"),
    ]


async def test_leader_and_isr_carries_the_partition_state_and_the_live_leaders(
    sender: BatchSender, channel: FakeChannel
) -> None:
    batch = RequestBatch()
    batch.add_leader_and_isr([2], ("t", 0), is_new=True)
    sender.send(batch)
    (lai,) = channel.of("LeaderAndIsr", 2)
    assert (lai.controller_id, lai.controller_epoch, lai.broker_epoch) == (1, 7, 102)
    assert lai.type == TYPE_INCREMENTAL
    (ts,) = lai.topic_states
    assert (ts.topic_name, ts.topic_id) == ("t", TOPIC_ID)
    counts = ts.partition_counts
    assert (counts.initial_partition_count, counts.undeleted_partition_count) == (2, 2)
    ps = partition_states(lai)[("t", 0)]
    assert (ps.leader, ps.leader_epoch, ps.isr, ps.controller_epoch, ps.zk_version) == (1, 3, [1, 2], 6, 8)
    assert (ps.replicas, ps.is_new, ps.partition_epoch) == ([1, 2], True, 11)
    assert [(x.broker_id, x.host_name, x.port) for x in lai.live_leaders] == [(1, "host1", 9091)]


async def test_a_full_leader_and_isr_names_every_partition_the_broker_hosts(
    sender: BatchSender, channel: FakeChannel
) -> None:
    batch = RequestBatch()
    batch.full_leader_and_isr.add(2)
    batch.add_leader_and_isr([2], ("t", 1), is_new=True)
    futures = sender.send_leader_and_isr(batch)
    assert len(futures) == 1 and sent(channel) == [(2, "LeaderAndIsr")]
    (lai,) = channel.of("LeaderAndIsr", 2)
    assert lai.type == TYPE_FULL
    assert {tp: ps.is_new for tp, ps in partition_states(lai).items()} == {("t", 0): False, ("t", 1): True}


async def test_one_update_metadata_broadcast_takes_one_metadata_epoch(
    sender: BatchSender, channel: FakeChannel
) -> None:
    batch = RequestBatch()
    batch.update_metadata.add(("t", 1))
    batch.update_metadata_full_to.add(1)
    sender.send(batch)
    um1, um2 = channel.of("UpdateMetadata", 1)[0], channel.of("UpdateMetadata", 2)[0]
    assert um1.controller_metadata_epoch == um2.controller_metadata_epoch == 0
    assert set(partition_states(um1)) == {("t", 0), ("t", 1)}  # full to broker 1
    assert set(partition_states(um2)) == {("t", 1)}
    assert (um2.max_partition_epoch, um2.topic_states[0].topic_epoch, um2.broker_epoch) == (12, 5, 102)
    assert partition_states(um2)[("t", 1)].offline_replicas == [3]
    assert [b.id for b in um2.live_brokers] == [1, 2]

    sender.send(RequestBatch())  # nothing to say: no request, no metadata epoch drawn
    assert len(channel.sent) == 2
    assert sender.election.metadata_epoch == 1


async def test_update_metadata_carries_each_partition_znode_kip253_maps_as_they_are_now(
    sender: BatchSender, channel: FakeChannel
) -> None:
    ctx = sender.context
    ctx.partition_znodes[("t", 1)] = PartitionZnode(
        12, leader_epoch_after_creation={0: 3}, leader_epoch_before_deletion={0: 4})
    batch = RequestBatch()
    batch.update_metadata.update({("t", 0), ("t", 1)})
    sender.send(batch)

    states = partition_states(channel.of("UpdateMetadata", 2)[0])
    assert states[("t", 0)].leader_epoch_maps is None  # both empty: nothing on the wire
    maps = states[("t", 1)].leader_epoch_maps
    assert [(e.partition, e.leader_epoch) for e in maps.leader_epoch_after_creation] == [(0, 3)]
    assert [(e.partition, e.leader_epoch) for e in maps.leader_epoch_before_deletion] == [(0, 4)]


async def test_a_broker_change_alone_broadcasts_the_broker_list(
    sender: BatchSender, channel: FakeChannel
) -> None:
    batch = RequestBatch()
    batch.update_metadata_brokers = True
    sender.send(batch)
    assert sent(channel) == [(1, "UpdateMetadata"), (2, "UpdateMetadata")]
    assert channel.of("UpdateMetadata", 1)[0].topic_states == []


async def test_a_deleted_partition_goes_out_with_leader_minus_two(
    sender: BatchSender, channel: FakeChannel
) -> None:
    ctx = sender.context
    batch = RequestBatch()
    batch.deleted[("t", 1)] = ctx.states.pop(("t", 1))
    del ctx.topics["t"]  # the topic is gone from the context too
    sender.send(batch)
    um = channel.of("UpdateMetadata", 1)[0]
    ps = partition_states(um)[("t", 1)]
    assert (ps.leader, ps.leader_epoch, ps.isr, ps.replicas, ps.controller_epoch) == (
        LEADER_DURING_DELETE, 4, [2], [], 7)


async def test_stop_replica_groups_partitions_by_topic(
    sender: BatchSender, channel: FakeChannel
) -> None:
    batch = RequestBatch()
    batch.add_stop_replica(1, ("t", 0), delete=True, leader_epoch=-2)
    batch.add_stop_replica(1, ("u", 3), delete=False, leader_epoch=9)
    sender.send(batch)
    (stop,) = channel.of("StopReplica", 1)
    assert (stop.controller_id, stop.controller_epoch, stop.broker_epoch) == (1, 7, 101)
    assert {
        (t.topic_name, p.partition_index): (p.delete_partition, p.leader_epoch)
        for t in stop.topic_states
        for p in t.partition_states
    } == {("t", 0): (True, -2), ("u", 3): (False, 9)}
