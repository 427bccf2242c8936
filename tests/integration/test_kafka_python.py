"""kafka-python 3.x against a real refka broker.

KafkaProducer with acks 0 / 1 / all, keys, headers and every codec
kafka-python has (gzip, snappy, lz4, zstd); KafkaConsumer with assign() and
seek_to_beginning / seek reads everything back byte for byte. The batches the
broker stores are fetched raw to check it kept the client's compression (it
never recompresses). KafkaAdminClient creates, describes and deletes topics.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as kerrors
from kafka.admin import ConfigResource, ConfigResourceType

from refka.protocol.records import Compression
from tests.integration.confluent_helpers import served_batches

pytestmark = pytest.mark.integration

CODECS = {
    None: Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}
BASE_TS = 1_700_000_000_000
WAIT_S = 30.0  # only against hangs


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def sample_records(tag: str) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int]]:
    """(key, value, headers, timestamp_ms): null and empty keys and values,
    binary bytes, a repeated header name, a large compressible value and a large
    incompressible one."""
    rnd = os.urandom(48 * 1024)
    out = [
        (b"key-0", f"value {tag} \u00e9\u4e2d".encode(), [], BASE_TS),
        (None, b"null key", [("trace", b"t-1")], BASE_TS + 1),
        (b"", b"", [("empty", b"")], BASE_TS + 2),
        (b"tombstone", None, [], BASE_TS + 3),
        (bytes(range(256)), bytes(range(255, -1, -1)),
         [("dup", b"1"), ("dup", b"2"), ("bin", b"\x00\xff\x00\n")], BASE_TS + 4),
        (b"big-text", (tag.encode() + b" lorem ipsum ") * 6000, [("kind", b"compressible")], BASE_TS + 5),
        (b"big-random", rnd, [("kind", b"random")], BASE_TS + 6),
    ]
    out += [(f"k{i}".encode(), f"v{i}".encode(), [("i", str(i).encode())], BASE_TS + 10 + i) for i in range(20)]
    return out


@pytest.fixture(scope="module")
def admin(broker):
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000,
                         client_id="refka-test-admin")
    yield a
    a.close()


def create_topic(admin: KafkaAdminClient, name: str, partitions: int = 1, configs: dict | None = None) -> None:
    spec = {"num_partitions": partitions, "replication_factor": 1}
    if configs:
        spec["configs"] = configs
    result = admin.create_topics({name: spec})
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [(name, 0)]


def read_partition(bootstrap: str, tp: TopicPartition, count: int, start: int | None = None) -> list:
    """``count`` records of ``tp`` read with assign(), from the beginning or from offset ``start``."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             fetch_max_wait_ms=200, client_id="refka-test-consumer")
    try:
        consumer.assign([tp])
        if start is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, start)
        got: list = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
        # One more poll: nothing beyond what was produced.
        for records in consumer.poll(timeout_ms=200).values():
            got.extend(records)
        return got
    finally:
        consumer.close()


def as_tuples(records) -> list:
    return [(r.key, r.value, list(r.headers), r.timestamp) for r in records]


@pytest.mark.parametrize("acks", [0, 1, "all"], ids=["acks0", "acks1", "acksall"])
@pytest.mark.parametrize("codec", list(CODECS), ids=[str(c) for c in CODECS])
def test_produce_then_assign_and_read_back_byte_for_byte(broker, admin, codec, acks):
    topic = _topic(f"kp-{codec}")
    create_topic(admin, topic, partitions=2)
    sent = sample_records(f"{codec}/{acks}")
    # Plain (non-idempotent) producers for every acks; kafka-python's default
    # idempotent producer (acks=all) has its own test below.
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=acks, compression_type=codec,
                             enable_idempotence=False, linger_ms=5, max_request_size=4 << 20,
                             client_id="refka-test-producer")
    try:
        futures = [producer.send(topic, key=k, value=v, headers=h, timestamp_ms=ts, partition=1)
                   for k, v, h, ts in sent]
        producer.flush(WAIT_S)
        metas = [f.get(WAIT_S) for f in futures]
    finally:
        producer.close(WAIT_S)
    if acks != 0:  # acks=0 gets no answer, hence no offsets
        assert [(m.topic, m.partition, m.offset) for m in metas] == [(topic, 1, i) for i in range(len(sent))]

    tp = TopicPartition(topic, 1)
    got = read_partition(broker.bootstrap, tp, len(sent))
    assert [r.offset for r in got] == list(range(len(sent)))
    assert as_tuples(got) == [(k, v, h, ts) for k, v, h, ts in sent]
    assert {r.timestamp_type for r in got} == {0}  # CreateTime

    # seek() into the middle of a (compressed) batch starts exactly there.
    tail = read_partition(broker.bootstrap, tp, len(sent) - 5, start=5)
    assert [r.offset for r in tail] == list(range(5, len(sent)))
    assert as_tuples(tail) == as_tuples(got[5:])

    # Stored as the client sent them: kafka-python leaves a batch uncompressed
    # when the codec does not shrink it (the random value), compresses the rest.
    batches = served_batches(broker.bootstrap, topic, 1)
    codecs = {b.compression for b in batches}
    assert CODECS[codec] in codecs and codecs <= {CODECS[codec], Compression.NONE}
    assert sum(b.records_count for b in batches) == len(sent)

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:
        p0, p1 = TopicPartition(topic, 0), tp
        assert consumer.beginning_offsets([p0, p1]) == {p0: 0, p1: 0}
        assert consumer.end_offsets([p0, p1]) == {p0: 0, p1: len(sent)}
    finally:
        consumer.close()


def test_keyed_records_land_on_default_partitioner_partitions(broker, admin):
    """No partition given: kafka-python's murmur2 partitioner picks, and each key reads back in order."""
    topic = _topic("kp-keyed")
    create_topic(admin, topic, partitions=4)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, enable_idempotence=False)
    try:
        futures = [(f"user-{i % 10}".encode(), i, producer.send(topic, key=f"user-{i % 10}".encode(),
                                                                value=str(i).encode()))
                   for i in range(100)]
        producer.flush(WAIT_S)
        placed = [(k, i, f.get(WAIT_S)) for k, i, f in futures]
    finally:
        producer.close(WAIT_S)
    by_partition: dict[int, list] = {}
    for k, i, m in placed:
        by_partition.setdefault(m.partition, []).append((m.offset, k, str(i).encode()))
    assert len({m.partition for _k, _i, m in placed}) > 1
    for p, expected in by_partition.items():
        got = read_partition(broker.bootstrap, TopicPartition(topic, p), len(expected))
        assert [(r.offset, r.key, r.value) for r in got] == expected
        assert [e[0] for e in expected] == list(range(len(expected)))


def test_default_idempotent_producer_with_acks_all(broker, admin):
    """kafka-python 3 makes acks=all producers idempotent by default (InitProducerId, sequences)."""
    topic = _topic("kp-idem")
    create_topic(admin, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", compression_type="gzip",
                             linger_ms=5)
    try:
        futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0) for i in range(50)]
        producer.flush(WAIT_S)
        metas = [f.get(WAIT_S) for f in futures]
    finally:
        producer.close(WAIT_S)
    assert [m.offset for m in metas] == list(range(50))
    got = read_partition(broker.bootstrap, TopicPartition(topic, 0), 50)
    assert [(r.offset, r.key, r.value) for r in got] == [(i, b"k%d" % i, b"v%d" % i) for i in range(50)]
    # The batches carry the producer id the broker handed out and consecutive sequences.
    batches = served_batches(broker.bootstrap, topic, 0)
    assert len({b.producer_id for b in batches}) == 1 and batches[0].producer_id >= 0
    assert [b.base_sequence for b in batches] == [b.base_offset for b in batches]


def test_admin_create_describe_delete_topics(broker, admin):
    a, b = _topic("kp-admin-a"), _topic("kp-admin-b")
    result = admin.create_topics({
        a: {"num_partitions": 3, "replication_factor": 1},
        b: {"num_partitions": 1, "replication_factor": 1,
            "configs": {"retention.ms": "3600000", "max.message.bytes": "2000000"}},
    })
    assert sorted((t["name"], t["error_code"], t["num_partitions"], t["replication_factor"])
                  for t in result["topics"]) == sorted([(a, 0, 3, 1), (b, 0, 1, 1)])
    assert {a, b} <= set(admin.list_topics())

    described = {t["name"]: t for t in admin.describe_topics([a, b])}
    assert set(described) == {a, b}
    for name, count in ((a, 3), (b, 1)):
        t = described[name]
        assert t["error_code"] == 0 and t["is_internal"] is False
        assert uuid.UUID(str(t["topic_id"])).int != 0
        assert [(p["partition_index"], p["error_code"], p["leader_id"], p["replica_nodes"], p["isr_nodes"])
                for p in sorted(t["partitions"], key=lambda p: p["partition_index"])] == \
            [(i, 0, 0, [0], [0]) for i in range(count)]
    assert described[a]["topic_id"] != described[b]["topic_id"]

    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, b)])["topic"][b]
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["max.message.bytes"]["value"] == "2000000"

    with pytest.raises(kerrors.TopicAlreadyExistsError):
        admin.create_topics({a: {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(kerrors.InvalidPartitionsError):
        admin.create_topics({_topic("kp-admin-zero"): {"num_partitions": 0, "replication_factor": 1}})
    with pytest.raises(kerrors.InvalidReplicationFactorError):
        admin.create_topics({_topic("kp-admin-rf"): {"num_partitions": 1, "replication_factor": 3}})

    result = admin.delete_topics([a, b])
    assert sorted((t["name"], t["error_code"]) for t in result["topics"]) == sorted([(a, 0), (b, 0)])
    remaining = set(admin.list_topics())
    assert a not in remaining and b not in remaining
    with pytest.raises(kerrors.UnknownTopicOrPartitionError):
        admin.delete_topics([a])


def test_recreated_topic_starts_empty(broker, admin):
    name = _topic("kp-recreate")
    create_topic(admin, name, partitions=1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, enable_idempotence=False)
    try:
        for i in range(5):
            producer.send(name, value=b"old-%d" % i, partition=0).get(WAIT_S)
    finally:
        producer.close(WAIT_S)
    admin.delete_topics([name])
    create_topic(admin, name, partitions=2)

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, enable_idempotence=False)
    try:
        meta = producer.send(name, value=b"new", partition=0).get(WAIT_S)
    finally:
        producer.close(WAIT_S)
    assert (meta.partition, meta.offset) == (0, 0)
    got = read_partition(broker.bootstrap, TopicPartition(name, 0), 1)
    assert [(r.offset, r.value) for r in got] == [(0, b"new")]
