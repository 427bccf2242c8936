"""A request with an older leader epoch, sent to a broker that follows the partition now, is
FENCED_LEADER_EPOCH, as Kafka answers it (Partition.getLocalLog checks the epoch before
leadership); with the current epoch it is NOT_LEADER_OR_FOLLOWER. Fetch and ListOffsets
(leader_hints.local_leader, shared with OffsetForLeaderEpoch and DeleteRecords). Found by the
Java client's failover test: a consumer that fetched from the old leader after a move."""

from __future__ import annotations

import pytest

from refka.client.connection import connect
from refka.protocol import ErrorCode
from refka.protocol.messages.fetch import Fetch
from refka.protocol.messages.list_offsets import ListOffsets
from refka.testing import RefkaCluster

pytestmark = pytest.mark.integration

TOPIC = "epochs"


async def fetch_error(address: str, epoch: int) -> int:
    F = Fetch.Request
    conn = await connect(address)
    try:
        resp = await conn.request(Fetch, F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                           isolation_level=0, topics=[F.FetchTopic(topic=TOPIC, partitions=[
                                               F.FetchTopic.FetchPartition(partition=0, current_leader_epoch=epoch,
                                                                           fetch_offset=0,
                                                                           partition_max_bytes=1 << 20)])],
                                           forgotten_topics_data=[], rack_id=""), 12)
    finally:
        await conn.close()
    return int(resp.responses[0].partitions[0].error_code)


async def list_offsets_error(address: str, epoch: int) -> int:
    R = ListOffsets.Request
    conn = await connect(address)
    try:
        resp = await conn.request(ListOffsets, R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(
            name=TOPIC, partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=epoch, timestamp=-1)])]), 7)
    finally:
        await conn.close()
    return int(resp.topics[0].partitions[0].error_code)


async def test_an_older_epoch_at_a_follower_is_fenced_and_the_current_one_not_leader() -> None:
    async with RefkaCluster(brokers=2) as cluster:
        await cluster.create_topic(TOPIC, partitions=1, replication_factor=2)
        await cluster.wait_for(lambda: len(cluster.partition(TOPIC, 0)["isr"]) == 2, "a full ISR")
        before = cluster.partition(TOPIC, 0)
        old_leader, old_epoch = before["leader"], before["leader_epoch"]
        moved = await cluster.move_leader(TOPIC, 0, 1 - old_leader)
        await cluster.wait_for(lambda: cluster.partition(TOPIC, 0, broker=old_leader)["leader"] == moved["leader"],
                               "the old leader to follow")
        new_epoch = cluster.partition(TOPIC, 0, broker=old_leader)["leader_epoch"]
        assert new_epoch > old_epoch
        at_old = cluster.address(old_leader)
        for call in (fetch_error, list_offsets_error):
            assert await call(at_old, old_epoch) == ErrorCode.FENCED_LEADER_EPOCH
            assert await call(at_old, new_epoch) == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert await call(at_old, new_epoch + 1) == ErrorCode.UNKNOWN_LEADER_EPOCH
            assert await call(at_old, -1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
