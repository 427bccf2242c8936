"""The reference producer (refka/client/producer.py) against real brokers.

- Every codec, each with one acks setting: keyed records read back by confluent-kafka
  identical (key, value, headers, timestamp), in send order per partition, at the
  offsets the futures named.
- Idempotence through tests/proxy.py, which swallows every 5th Produce answer and cuts
  the connections: the producer resends, the broker deduplicates, each record is in the
  log once, in order.
- KIP-253: a shrink (CreatePartitions 4 -> 3) while keyed records flow: the producer is
  refused with INVALID_PARTITION_METADATA, re-hashes, and every acknowledged record is
  readable, per key in send order, nothing lands on the marked partition after the shrink.
- KIP-253 seed 9): on a compacted topic expanded 2 -> 4, a key that moved to partition 2
  leaves a tombstone (key, null) on partition 0, whose records up to the expansion were
  deleted (earliest offset past its lowerOffsetThreshold); a key that moved to partition 3
  leaves none on partition 1, whose records are all still there.
- KIP-951: a leader moved by a preferred election; the Produce to the old leader is
  answered with the new one, and the retry goes there without the back-off (which is set
  longer than the test's timeout).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import NewTopic

from refka.client.partitioning import murmur2, partition_for_key, to_positive
from refka.client.producer import Producer, RecordMetadata
from refka.protocol import ErrorCode
from refka.protocol.messages.create_partitions import CreatePartitions
from tests.brokers import BrokerProcess, free_port_block
from tests.integration.cluster_helpers import InProcessCluster, Raw, metadata
from tests.integration.confluent_helpers import (
    admin,
    consume_until_eof,
    consumer,
    create_topic,
    read_partition,
)
from tests.proxy import KafkaProxy
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TIMEOUT = 60.0


def unique(prefix: str) -> str:
    return f"rp-{prefix}-{uuid.uuid4().hex[:8]}"


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = InProcessCluster(tmp_path_factory.mktemp("ref-producer"), n=3,
                         overrides={"auto.create.topics.enable": "false"})
    PORTS[:] = [int(hp.rsplit(":", 1)[1]) for hp in c.bootstrap.split(",")]  # bootstrap drops stopped brokers
    try:
        yield c
    finally:
        c.close()


PORTS: list[int] = []


def port_of(cluster: InProcessCluster, node_id: int) -> int:
    return PORTS[node_id]


def read_all(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Any]]:
    c = consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[Any]] = {p: [] for p in range(partitions)}
        for m in consume_until_eof(c, set(range(partitions))):
            out[m.partition()].append(m)
        return out
    finally:
        c.close()


# -- codecs and acks -------------------------------------------------------------------


@pytest.mark.parametrize("codec, acks", [(None, 1), ("gzip", "all"), ("snappy", 0), ("lz4", -1), ("zstd", 1)])
def test_each_codec_and_acks_reads_back_identical_and_in_order(cluster, codec, acks):
    topic = unique(codec or "none")
    create_topic(cluster.bootstrap, topic, 3)
    sent = [(b"key-%d" % (i % 7), b"value-%d-" % i + b"x" * (i % 50), [("h", b"%d" % i)], 1_700_000_000_000 + i)
            for i in range(600)]

    async def go() -> list[RecordMetadata | None]:
        p = Producer(bootstrap_servers=cluster.bootstrap, acks=acks, compression_type=codec,
                     linger_ms=5, max_batch_size=4096)
        await p.start()
        try:
            futs = [await p.send(topic, v, key=k, headers=h, timestamp_ms=t) for k, v, h, t in sent]
            await p.flush()
            return [f.result() for f in futs]
        finally:
            await p.stop()

    metas = run(go())
    if acks == 0:  # no answers: wait until the broker has them all
        wait_until(lambda: sum(len(v) for v in read_all(cluster.bootstrap, topic, 3).values()) == len(sent),
                   timeout=TIMEOUT, message="acks=0 records in the logs")
    got = read_all(cluster.bootstrap, topic, 3)
    by_partition: dict[int, list[tuple[Any, ...]]] = {p: [] for p in range(3)}
    for (k, v, h, t), meta in zip(sent, metas, strict=True):
        assert meta is not None and meta.topic == topic
        by_partition[meta.partition].append((k, v, h, t, meta.offset))
    for p, records in by_partition.items():
        read = [(m.key(), m.value(), m.headers(), m.timestamp()[1], m.offset()) for m in got[p]]
        if acks == 0:
            assert all(r[4] == -1 for r in records)
            read = [(*r[:4], -1) for r in read]
        assert read == records, f"partition {p}"
    assert all(by_partition.values())  # keys spread over every partition


# -- idempotence through dropped connections -------------------------------------------


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    port = free_port_block(1)
    proxy = KafkaProxy("127.0.0.1", port).start()
    broker = BrokerProcess(tmp_path_factory.mktemp("rp-proxy") / "data", port=port,
                           overrides=proxy.advertised()).start()
    yield proxy, broker
    broker.stop()
    proxy.stop()


def test_idempotent_producer_does_not_duplicate_through_dropped_connections(proxied):
    proxy, broker = proxied
    topic = unique("idem")
    create_topic(broker.bootstrap, topic, 3)
    swallowed = proxy.responses_swallowed

    async def go() -> tuple[list[RecordMetadata], int]:
        p = Producer(bootstrap_servers=proxy.bootstrap, enable_idempotence=True, linger_ms=2,
                     max_batch_size=512, retry_backoff_ms=20, request_timeout_ms=10_000)
        await p.start()
        proxy.drop_produce_responses(every=5)
        try:
            futs = [await p.send(topic, b"r-%d" % i, partition=i % 3) for i in range(1500)]
            await p.flush()
            return [f.result() for f in futs], p.retries
        finally:
            proxy.disarm()
            await p.stop()

    metas, retries = run(go())
    assert proxy.responses_swallowed - swallowed >= 3 and retries >= 3
    for part in range(3):
        values = [m.value() for m in read_partition(broker.bootstrap, topic, part)]
        assert values == [b"r-%d" % i for i in range(part, 1500, 3)], f"partition {part}: duplicated or reordered"
        assert [m.offset for m in metas[part::3]] == list(range(len(values)))


# -- KIP-253: a shrink while sending ---------------------------------------------------


def create_partitions(cluster: InProcessCluster, topic: str, count: int) -> None:
    C = CreatePartitions.Request
    raw = Raw(port_of(cluster, 0))
    try:
        resp, _ = raw.call_raw(CreatePartitions, C(topics=[C.CreatePartitionsTopic(
            name=topic, count=count, assignments=None)], timeout_ms=15_000, validate_only=False), 3)
    finally:
        raw.close()
    assert resp.results[0].error_code == ErrorCode.NONE, resp


def counts(cluster: InProcessCluster, node_id: int, topic: str) -> tuple[int, int] | None:
    (t,) = metadata(port_of(cluster, node_id), topic).topics
    pc = t.partition_counts
    return None if pc is None else (pc.initial_partition_count, pc.undeleted_partition_count)


def test_a_shrink_while_sending_rehashes_and_keeps_every_key_in_order(cluster):
    topic = unique("shrink")
    create_topic(cluster.bootstrap, topic, 2)
    create_partitions(cluster, topic, 4)  # initial 2, undeleted 4: a shrink to 3 is allowed
    wait_until(lambda: all(counts(cluster, n, topic) == (2, 4) for n in range(3)), message="4 partitions everywhere")
    keys = [b"k%02d" % i for i in range(24)]
    sent: list[tuple[bytes, int]] = []
    shrunk_at: dict[str, Any] = {}

    async def go() -> tuple[list[RecordMetadata], int]:
        p = Producer(bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True,
                     linger_ms=2, retry_backoff_ms=50)
        await p.start()
        futs = []
        try:
            for seq in range(120):
                for k in keys:
                    sent.append((k, seq))
                    futs.append(await p.send(topic, b"%s:%d" % (k, seq), key=k))
                if seq == 40:
                    await p.flush()
                    await asyncio.to_thread(create_partitions, cluster, topic, 3)
                    await asyncio.to_thread(wait_until, lambda: all(counts(cluster, n, topic) == (2, 3)
                                                                    for n in range(3)), message="shrunk")
                    shrunk_at["p3"] = (await asyncio.to_thread(read_partition, cluster.bootstrap, topic, 3))
                await asyncio.sleep(0.001)
            await p.flush()
            return [f.result() for f in futs], p.rehashes
        finally:
            await p.stop()

    metas, rehashes = run(go())
    assert rehashes >= 1
    assert all(m.partition < 3 for m in metas[len(keys) * 60:])
    got = read_all(cluster.bootstrap, topic, 4)
    assert [m.value() for m in got[3]] == [m.value() for m in shrunk_at["p3"]], "records on the marked partition"
    where = {(m.partition(), m.offset()): m.value() for ms in got.values() for m in ms}
    for (k, seq), meta in zip(sent, metas, strict=True):
        assert where[(meta.partition, meta.offset)] == b"%s:%d" % (k, seq)
    for k in keys:
        seqs: list[int] = []
        for part in (3, 0, 1, 2):  # the marked partition is drained first by a KIP-253 consumer
            seqs += [int(m.value().split(b":")[1]) for m in got[part] if m.key() == k]
        assert seqs == list(range(120)), f"{k!r}: lost, duplicated or out of order"


# -- KIP-253 seed 9): the compacted-topic tombstone -----------------------------------


def moved_keys(initial: int, before: int, after: int, to: int, n: int) -> list[bytes]:
    """``n`` keys that go to the new partition ``to`` when ``before`` partitions become ``after``."""
    out, i = [], 0
    while len(out) < n:
        k = b"key-%d" % i
        h = to_positive(murmur2(k))
        if partition_for_key(h, initial, after) == to and partition_for_key(h, initial, before) != to:
            out.append(k)
        i += 1
    return out


def test_a_key_moved_by_an_expansion_of_a_compacted_topic_leaves_a_tombstone_where_it_was(cluster):
    topic = unique("compacted")
    create_topic(cluster.bootstrap, topic, 2, config={"cleanup.policy": "compact"})
    to_2, to_3 = moved_keys(2, 2, 4, 2, 5), moved_keys(2, 2, 4, 3, 5)  # from partitions 0 and 1

    async def send_before() -> None:
        p = Producer(bootstrap_servers=cluster.bootstrap, acks="all")
        await p.start()
        try:
            for k in to_2 + to_3:
                await p.send_and_wait(topic, b"before", key=k)
        finally:
            await p.stop()

    run(send_before())
    create_partitions(cluster, topic, 4)
    wait_until(lambda: all(counts(cluster, n, topic) == (2, 4) for n in range(3)), message="4 partitions everywhere")
    a = admin(cluster.bootstrap)  # partition 0's records up to the expansion: all of them
    deleted = a.delete_records([TopicPartition(topic, 0, len(to_2))], request_timeout=TIMEOUT)
    assert deleted[TopicPartition(topic, 0)].result(TIMEOUT).low_watermark == len(to_2)

    async def send_after() -> int:
        p = Producer(bootstrap_servers=cluster.bootstrap, acks="all")
        await p.start()
        try:
            for k in to_2 + to_3:
                meta = await p.send_and_wait(topic, b"after", key=k)
                assert meta.partition == (2 if k in to_2 else 3)
            while p._tombstones.sent < len(to_2):  # fire and forget: wait until handed to a connection
                await asyncio.sleep(0.01)
        finally:
            await p.stop()
        return p._tombstones.sent

    assert run(send_after()) == len(to_2)
    wait_until(lambda: len(read_partition(cluster.bootstrap, topic, 0)) == len(to_2), message="tombstones on 0")
    assert [(m.key(), m.value()) for m in read_partition(cluster.bootstrap, topic, 0)] == [(k, None) for k in to_2]
    assert [(m.key(), m.value()) for m in read_partition(cluster.bootstrap, topic, 1)] == [(k, b"before") for k in to_3]


# -- KIP-951: a leader move followed at once -------------------------------------------


def test_a_leader_move_is_followed_from_the_hint_without_back_off(cluster):
    topic = unique("move")
    a = admin(cluster.bootstrap)
    a.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2]])],
                    operation_timeout=TIMEOUT)[topic].result(TIMEOUT)

    def leader_everywhere(leader: int) -> bool:
        return all(metadata(port_of(cluster, n), topic).topics[0].partitions[0].leader_id == leader
                   for n in range(3))

    wait_until(lambda: leader_everywhere(1), message="broker 1 leads")
    cluster.stop_broker(1)
    wait_until(lambda: all(metadata(port_of(cluster, n), topic).topics[0].partitions[0].leader_id == 2
                           for n in (0, 2)), message="broker 2 leads")
    cluster.start_broker(1)
    wait_until(lambda: 1 in metadata(port_of(cluster, 0), topic).topics[0].partitions[0].isr_nodes,
               message="broker 1 back in the ISR", ignoring=(Exception,))

    async def go() -> tuple[RecordMetadata, RecordMetadata, int, int]:
        p = Producer(bootstrap_servers=cluster.bootstrap, retry_backoff_ms=600_000,  # longer than the test
                     metadata_max_age_ms=600_000)
        await p.start()
        try:
            first = await p.send_and_wait(topic, b"before", partition=0)
            assert p._cluster.metadata.leader_for(topic, 0) == 2
            result = await asyncio.to_thread(
                lambda: a.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(TIMEOUT))
            assert all(e is None for e in result.values()), result
            await asyncio.to_thread(wait_until, lambda: leader_everywhere(1), message="broker 1 leads again")
            second = await p.send_and_wait(topic, b"after", partition=0)
            return first, second, p.hinted_retries, p.retries
        finally:
            await p.stop()

    first, second, hinted, retries = run(go())
    assert (hinted, retries) == (1, 1)
    assert [m.value() for m in read_partition(cluster.bootstrap, topic, 0)] == [b"before", b"after"]
    assert (first.offset, second.offset) == (0, 1)
