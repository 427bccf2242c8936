"""KIP-253's refusals byte for byte: CreatePartitions v3 answers INVALID_PARTITIONS with
the reason for each change the controller refuses, and Produce v9 / Fetch v12 answer
INVALID_PARTITION_METADATA (10253) for a stale undeleted_partition_count and for a
partition marked for deletion (a stock producer, which sends no count, gets
UNKNOWN_TOPIC_OR_PARTITION there: README, "KIP-253 in refka").

One broker of this process (embedded store). Topic ``k253r`` is created with 2
partitions, grown to 4 and shrunk to 3 through the controller, so partition 3 is marked
for deletion; topic ``k253k`` has ``enable.ordered.delivery=false`` (Kafka's rules).
Request and answer bytes are written out from the wire rules, as in test_kip253_wire.py
(whose helpers this module uses); only a record batch is built with refka's codec.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest

from refka.protocol import ErrorCode
from refka.protocol.messages.create_topics import CreateTopics
from refka.protocol.records import build_batch
from tests.integration.cluster_helpers import InProcessCluster, Raw
from tests.integration.test_kip253_wire import cstr, hexes, i32, i64, uvarint
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "k253r"
KAFKA_RULES = "k253k"
INVALID_PARTITIONS = "0025"
INVALID_PARTITION_METADATA = struct.pack(">h", 10253).hex()
UNKNOWN_TOPIC_OR_PARTITION = "0003"
TAG_PARTITION_COUNTS = 10253


def frame(api_key: int, version: int, correlation_id: int, *body: str) -> bytes:
    """Request header v2 (flexible): key, version, correlation id, client id 'k253', no tags."""
    payload = hexes(struct.pack(">hhi", api_key, version, correlation_id).hex(), "0004", b"k253".hex(), "00", *body)
    return struct.pack(">i", len(payload)) + payload


def answer(correlation_id: int, *body: str) -> bytes:
    return hexes(i32(correlation_id), "00", *body)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[InProcessCluster]:
    c = InProcessCluster(tmp_path_factory.mktemp("kip253-refusals"), n=1,
                         overrides={"auto.create.topics.enable": "false"})
    try:
        yield c
    finally:
        c.close()


def call_bytes(cluster: InProcessCluster, request: bytes) -> bytes:
    raw = Raw(int(cluster.bootstrap.rsplit(":", 1)[1]))
    try:
        return raw.call_bytes(request)
    finally:
        raw.close()


def create_partitions(cluster: InProcessCluster, topic: str, count: int, cid: int) -> bytes:
    """CreatePartitions v3 of ``topic`` to ``count`` (assignments null), 15 s, not validate-only."""
    return call_bytes(cluster, frame(37, 3, cid, "02", cstr(topic), i32(count), "00 00", i32(15_000), "00 00"))


def create_partitions_answer(cid: int, topic: str, error: str, message: str | None) -> bytes:
    msg = "00" if message is None else cstr(message)
    return answer(cid, "00000000 02", cstr(topic), error, msg, "00 00")


def counts_of(cluster: InProcessCluster, topic: str) -> tuple[int, int]:
    t = cluster.cluster.broker(0).metadata.topic(topic)
    return (t.initial_partition_count, t.undeleted_partition_count) if t else (-1, -1)


@pytest.fixture(scope="module")
def topics(cluster: InProcessCluster) -> None:
    R = CreateTopics.Request
    for name, configs in ((TOPIC, []), (KAFKA_RULES, [R.CreatableTopic.CreatableTopicConfig(
            name="enable.ordered.delivery", value="false")])):
        raw = Raw(int(cluster.bootstrap.rsplit(":", 1)[1]))
        try:
            resp, _ = raw.call_raw(CreateTopics, R(topics=[R.CreatableTopic(
                name=name, num_partitions=2, replication_factor=1, assignments=[], configs=configs)],
                timeout_ms=15_000, validate_only=False), 7)
        finally:
            raw.close()
        assert resp.topics[0].error_code == ErrorCode.NONE, resp
    assert create_partitions(cluster, TOPIC, 4, 1) == create_partitions_answer(1, TOPIC, "0000", None)
    assert create_partitions(cluster, TOPIC, 3, 2) == create_partitions_answer(2, TOPIC, "0000", None)
    wait_until(lambda: counts_of(cluster, TOPIC) == (2, 3), message="the shrink to 3 on the broker")


@pytest.mark.parametrize("count, message", [
    (5, "Partitions [3] of topic 'k253r' are marked for deletion (KIP-253): it can grow again once they "
        "are drained and removed."),
    (1, "Topic was created with 2 partitions (initial_partition_count): KIP-253 removes partitions down to 2, "
        "not to 1."),
    (3, "Topic already has 3 partitions."),
])
def test_create_partitions_refusals_say_why(cluster, topics, count, message):
    assert create_partitions(cluster, TOPIC, count, 10 + count) == \
        create_partitions_answer(10 + count, TOPIC, INVALID_PARTITIONS, message)
    assert counts_of(cluster, TOPIC) == (2, 3)


def test_without_ordered_delivery_a_topic_only_grows(cluster, topics):
    assert create_partitions(cluster, KAFKA_RULES, 1, 20) == create_partitions_answer(
        20, KAFKA_RULES, INVALID_PARTITIONS, "Topic currently has 2 partitions, which is higher than the requested 1. "
        "(enable.ordered.delivery=false: partitions can only be added; KIP-253 deletion needs it true.)")


def produce_frame(cid: int, partition: int, undeleted: int | None) -> bytes:
    """Produce v9, acks 1: one record to ``partition`` of k253r, with the topic's tagged
    undeleted_partition_count when ``undeleted`` is not None."""
    batch = bytes(build_batch([(None, b"v")]))
    tags = "00" if undeleted is None else "01" + uvarint(TAG_PARTITION_COUNTS) + "04" + i32(undeleted)
    return frame(0, 9, cid, "00 0001", i32(10_000), "02", cstr(TOPIC),
                 "02", i32(partition), uvarint(len(batch) + 1), batch.hex(), "00", tags, "00")


def produce_answer(cid: int, partition: int, error: str, message: str) -> bytes:
    return answer(cid, "02", cstr(TOPIC), "02", i32(partition), error,
                  i64(-1), i64(-1), i64(-1), "01", cstr(message), "00 00 00000000 00")


MARKED = "partition 3 of k253r is marked for deletion (undeleted_partition_count 3): it takes no new records"


def test_produce_refusals(cluster, topics):
    # A KIP-253 producer with the right count, to the marked partition 3:
    assert call_bytes(cluster, produce_frame(30, 3, 3)) == produce_answer(30, 3, INVALID_PARTITION_METADATA, MARKED)
    # A stock producer (no count) there: the retriable code it knows.
    assert call_bytes(cluster, produce_frame(31, 3, None)) == produce_answer(
        31, 3, UNKNOWN_TOPIC_OR_PARTITION, MARKED)
    # A stale count (the one before the shrink), to an undeleted partition:
    assert call_bytes(cluster, produce_frame(32, 0, 4)) == produce_answer(
        32, 0, INVALID_PARTITION_METADATA, "undeleted_partition_count 4 of k253r is not the broker's 3")


def test_fetch_with_a_stale_count_is_refused(cluster, topics):
    """Fetch v12 of k253r partition 0 with undeleted_partition_count 4 (the broker's is 3)."""
    request = frame(1, 12, 40, i32(-1), i32(0), i32(0), i32(1 << 20), "00", i32(0), i32(-1),
                    "02", cstr(TOPIC), "02", i32(0), i32(-1), i64(0), i32(-1), i64(-1), i32(1 << 20), "00",
                    "01" + uvarint(TAG_PARTITION_COUNTS) + "04" + i32(4),
                    "01", "01", "00")
    got = call_bytes(cluster, request)
    assert got == answer(40, "00000000 0000 00000000", "02", cstr(TOPIC), "02", i32(0),
                         INVALID_PARTITION_METADATA, i64(-1), i64(-1), i64(-1), "00 # no aborted transactions",
                         i32(-1), "01 # records: empty, as Kafka's MemoryRecords.EMPTY", "00", "00", "00"), got.hex()


def test_a_retry_of_a_batch_in_the_log_is_its_duplicate_whatever_the_count(cluster, topics):
    """An idempotent producer whose answer was lost sends its batch again after the count
    changed: the leader answers it as the duplicate it is, with its offset, before it checks
    the count; so INVALID_PARTITION_METADATA means "not appended" (producer.py relies on it)."""
    from refka.protocol.messages.produce import Produce

    P = Produce.Request

    def produce(partition: int, undeleted: int, seq: int) -> tuple[int, int]:
        batch = bytes(build_batch([(b"k", f"v{seq}".encode())], producer_id=4242, producer_epoch=0,
                                  base_sequence=seq))
        raw = Raw(int(cluster.bootstrap.rsplit(":", 1)[1]))
        try:
            resp, _ = raw.call_raw(Produce, P(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
                P.TopicProduceData(name=TOPIC, undeleted_partition_count=undeleted, partition_data=[
                    P.TopicProduceData.PartitionProduceData(index=partition, records=batch)])]), 9)
        finally:
            raw.close()
        p = resp.responses[0].partition_responses[0]
        return p.error_code, p.base_offset

    code, offset = produce(0, 3, 0)
    assert code == ErrorCode.NONE
    assert produce(0, 4, 0) == (ErrorCode.NONE, offset)  # the stale count, the same batch: its duplicate
    assert produce(0, 4, 1)[0] == ErrorCode.INVALID_PARTITION_METADATA  # a batch it has not: refused
    assert produce(0, 3, 1) == (ErrorCode.NONE, offset + 1)  # ...and it was not appended
