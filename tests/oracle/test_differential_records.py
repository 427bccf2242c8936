"""Produce, Fetch, ListOffsets and DeleteRecords, refka against Apache Kafka 3.9.1.

Each test produces the same batch bytes (one fixed timestamp) to both brokers; Fetch answers'
records are compared as bytes (the stored batch: offsets assigned, the leader epoch written)."""

from __future__ import annotations

import time

import pytest

from refka.protocol.messages.delete_records import DeleteRecords
from refka.protocol.messages.fetch import Fetch
from refka.protocol.messages.list_offsets import ListOffsets
from refka.protocol.messages.produce import Produce
from refka.protocol.records import build_batch
from tests.oracle.differential import Pair, create_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

P = Produce.Request
F = Fetch.Request
L = ListOffsets.Request
D = DeleteRecords.Request
NOW = int(time.time() * 1000)


def batch(n: int, first: int = 0) -> bytes:
    return bytes(build_batch([(b"k%d" % i, b"v%d" % i) for i in range(first, first + n)], timestamp=NOW + first))


def produce(topic: str, records: bytes, acks: int, partition: int = 0) -> object:
    return P(transactional_id=None, acks=acks, timeout_ms=10_000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.TopicProduceData.PartitionProduceData(index=partition, records=records)])])


def fetch(topic: str, offset: int) -> object:
    return F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
             session_epoch=-1, topics=[F.FetchTopic(topic=topic, partitions=[F.FetchTopic.FetchPartition(
                 partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])],
             forgotten_topics_data=[], rack_id="")


def list_offsets(topic: str, timestamp: int) -> object:
    return L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name=topic, partitions=[
        L.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])


@pytest.mark.parametrize("version", [3, 7, 9, 11])
@pytest.mark.parametrize("acks", [1, -1])
def test_produce_to_an_existing_partition(oracle_pair: Pair, acks: int, version: int) -> None:
    topic = f"pr-v{version}-acks{acks}"
    create_topic(oracle_pair, topic)
    oracle_pair.same(Produce, produce(topic, batch(3), acks), version, "first batch")
    oracle_pair.same(Produce, produce(topic, batch(2, 3), acks), version, "second batch")


@pytest.mark.parametrize("version", [3, 9, 11])
def test_produce_to_an_unknown_topic_and_partition(oracle_pair: Pair, version: int) -> None:
    oracle_pair.same(Produce, produce("pr-no-such-topic", batch(1), 1), version, "unknown topic")
    create_topic(oracle_pair, "pr-one-partition")
    oracle_pair.same(Produce, produce("pr-one-partition", batch(1), 1, partition=5), version, "unknown partition")


@pytest.mark.parametrize("version", [3, 9, 11])
def test_produce_a_batch_with_a_corrupt_crc(oracle_pair: Pair, version: int) -> None:
    create_topic(oracle_pair, "pr-corrupt")
    data = bytearray(batch(2))
    data[-1] ^= 0xFF  # the last record's value: the CRC no longer matches
    oracle_pair.same(Produce, produce("pr-corrupt", bytes(data), 1), version)


@pytest.fixture(scope="module")
def filled(oracle_pair: Pair) -> str:
    """A topic with offsets 0-4 on both brokers."""
    create_topic(oracle_pair, "rd-filled")
    oracle_pair.same(Produce, produce("rd-filled", batch(3), -1), 9)
    oracle_pair.same(Produce, produce("rd-filled", batch(2, 3), -1), 9)
    return "rd-filled"


@pytest.mark.parametrize("version", [4, 7, 11, 12])
@pytest.mark.parametrize("offset", [0, 3, 5, 6, 1000])
def test_fetch(oracle_pair: Pair, filled: str, offset: int, version: int) -> None:
    kafka, refka = oracle_pair.same(Fetch, fetch(filled, offset), version, f"offset {offset} v{version}")
    kp, rp = kafka.responses[0].partitions[0], refka.responses[0].partitions[0]
    assert bytes(kp.records or b"") == bytes(rp.records or b""), "the fetched batches differ"


@pytest.mark.parametrize("version", [1, 4, 7, 8])
@pytest.mark.parametrize("timestamp", [-2, -1, -3, NOW + 1])
def test_list_offsets(oracle_pair: Pair, filled: str, timestamp: int, version: int) -> None:
    if timestamp == -3 and version < 7:
        pytest.skip("max-timestamp (-3) is ListOffsets v7+ (KIP-734)")
    oracle_pair.same(ListOffsets, list_offsets(filled, timestamp), version, f"timestamp {timestamp} v{version}")


@pytest.mark.parametrize("version", [0, 2])
def test_delete_records(oracle_pair: Pair, version: int) -> None:
    topic = f"dr-v{version}"
    create_topic(oracle_pair, topic)
    oracle_pair.same(Produce, produce(topic, batch(5), -1), 9)

    def delete(offset: int, name: str = topic, partition: int = 0) -> object:
        return D(topics=[D.DeleteRecordsTopic(name=name, partitions=[
            D.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=partition, offset=offset)])],
            timeout_ms=10_000)

    oracle_pair.same(DeleteRecords, delete(2), version, "to offset 2")
    oracle_pair.same(ListOffsets, list_offsets(topic, -2), 8, "the log start offset after it")
    oracle_pair.same(DeleteRecords, delete(1), version, "below the log start offset")
    oracle_pair.same(DeleteRecords, delete(-1), version, "to the high watermark (-1)")
    oracle_pair.same(DeleteRecords, delete(99), version, "beyond the high watermark")
    oracle_pair.same(DeleteRecords, delete(0, partition=3), version, "unknown partition")
    oracle_pair.same(DeleteRecords, delete(0, name="dr-no-such-topic"), version, "unknown topic")
