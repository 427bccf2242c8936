"""KIP-253's drain check never removes a marked partition that still holds records: records
appended to the leader but not yet replicated (its high watermark behind its log end) count.

Found in a CI run under load: the check asked ListOffsets LATEST as a consumer (the high
watermark), so a partition marked just after a batch was appended, whose followers had not
fetched it yet, looked empty (log start == high watermark) and was removed; the followers
then fetched the batch, the producer's acks=all answer came, and the acknowledged records
went with the partition. The controller now asks as a replica, which Kafka's ListOffsets
(and refka's) answers with the log end offset.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from refka.client.connection import connect
from refka.protocol.messages.delete_records import DeleteRecords
from refka.protocol.messages.list_offsets import ListOffsets
from refka.testing import RefkaCluster

pytestmark = pytest.mark.integration

TOPIC = "drain-unreplicated"
DELAY_MS = 10_000  # each follower Fetch answered this late: the high watermark stays behind meanwhile


async def latest(address: str, partition: int, replica_id: int) -> int:
    R = ListOffsets.Request
    conn = await connect(address)
    try:
        resp = await conn.request(ListOffsets, R(replica_id=replica_id, isolation_level=0, topics=[
            R.ListOffsetsTopic(name=TOPIC, partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=-1)])]), 7)
    finally:
        await conn.close()
    (p,) = resp.topics[0].partitions
    assert p.error_code == 0, p
    return int(p.offset)


async def delete_records(address: str, partition: int, offset: int) -> None:
    R = DeleteRecords.Request
    conn = await connect(address)
    try:
        resp = await conn.request(DeleteRecords, R(timeout_ms=10_000, topics=[R.DeleteRecordsTopic(
            name=TOPIC, partitions=[R.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=partition,
                                                                                offset=offset)])]), 2)
    finally:
        await conn.close()
    assert resp.topics[0].partitions[0].error_code == 0, resp


async def test_a_marked_partition_with_unreplicated_records_stays_until_they_are_consumed_and_deleted() -> None:
    async with RefkaCluster(brokers=2, overrides={"partition.deletion.check.interval.ms": "100"}) as cluster:
        await cluster.create_topic(TOPIC, partitions=1, replication_factor=2)
        await cluster.set_partition_count(TOPIC, 2)  # KIP-253 removes only partitions added later
        await cluster.wait_for(lambda: (p := cluster.partition(TOPIC, 1)) is not None and len(p["isr"]) == 2,
                               "partition 1 with a full ISR")
        lead = cluster.partition(TOPIC, 1)["leader"]
        delay = cluster.add_fault("replication-delay", broker=lead, latency_ms=DELAY_MS)
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks=1)
        await producer.start()
        try:
            acked = [await producer.send_and_wait(TOPIC, b"v%d" % i, partition=1) for i in range(3)]
        finally:
            await producer.stop()
        assert [m.offset for m in acked] == [0, 1, 2]
        view = cluster.partition(TOPIC, 1)
        assert view["log_end_offset"] == 3 and view["high_watermark"] < 3, view
        # A consumer's LATEST is the high watermark, a replica's the log end offset (Kafka's rule).
        address = cluster.address(lead)
        assert await latest(address, 1, -1) == view["high_watermark"]
        assert await latest(address, 1, 1 - lead) == 3

        await cluster.set_partition_count(TOPIC, 1)  # partition 1 marked for deletion
        # What a group that consumed everything it could see does (as lab/scenarios/ordered_delivery):
        # DeleteRecords to the high watermark. Log start == high watermark < log end.
        await delete_records(address, 1, -1)
        assert cluster.partition(TOPIC, 1)["log_start_offset"] == view["high_watermark"]
        await asyncio.sleep(1.0)  # ten drain checks, well within the replication delay
        assert cluster.partition(TOPIC, 1) is not None, "a partition holding acknowledged records was removed"

        cluster.remove_fault(delay)
        await cluster.wait_for(lambda: cluster.partition(TOPIC, 1)["high_watermark"] == 3, "the follower to catch up",
                               timeout=DELAY_MS / 1000 + 30)
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition(TOPIC, 1)
            consumer.assign([tp])
            consumer.seek(tp, view["high_watermark"])
            got = await consumer.getmany(tp, timeout_ms=10_000)
        finally:
            await consumer.stop()
        # the records past the deleted offset: the marked partition still serves them
        assert [r.value for r in got.get(tp, [])] == [b"v%d" % i for i in range(view["high_watermark"], 3)]

        await delete_records(cluster.address(lead), 1, 3)  # now it is empty, and it goes
        await cluster.wait_for(lambda: cluster.partition(TOPIC, 1) is None, "the drained partition to be removed")
