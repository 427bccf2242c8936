"""Unmodified confluent-kafka (librdkafka 2.16) against a real refka.

librdkafka speaks Produce v10, Fetch v16 (topic IDs), ListOffsets v7 and
Metadata v12 to refka (checked below), so these tests run the broker's newest
paths: AdminClient topic lifecycle and error codes, the producer with every
acks setting and compression codec and batches/records near 1 MiB, and the
consumer with assign() + seek from earliest, latest and a timestamp. Consumer
groups (subscribe) are not served yet, so only assign() is used.
"""

from __future__ import annotations

import re

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import ConfigResource, ConfigSource, NewPartitions, NewTopic, ResourceType

from refka.protocol.records import Compression
from tests.integration.confluent_helpers import (
    TIMEOUT,
    LogCapture,
    Rec,
    admin,
    assert_same_records,
    consume_until_eof,
    consumer,
    create_topic,
    metadata_leader_epochs,
    produce,
    producer,
    read_partition,
    served_batches,
    unique_topic,
    wait_for_high_watermark,
)

pytestmark = pytest.mark.integration

T0 = 1_700_000_000_000
ONE_MIB = 1024 * 1024
BROKER_MAX_MESSAGE_BYTES = 1048588  # Kafka's (and refka's) default message.max.bytes


@pytest.fixture(scope="module", params=["disk", "memory"])
def any_broker(request):
    """The module's disk broker, then its --memory broker."""
    return request.getfixturevalue("broker" if request.param == "disk" else "memory_broker")


def varied_records(n: int = 12) -> list[Rec]:
    """Records exercising what a user relies on being kept exactly."""
    recs = [
        Rec(b"k0", b"v0", [("h", b"1")], T0),
        Rec(None, b"null key", [], T0 + 1),
        Rec(b"", b"empty key", [], T0 + 2),
        Rec(b"tombstone", None, [("why", b"deleted")], T0 + 3),
        Rec(b"empty value", b"", [], T0 + 4),
        Rec(bytes(range(256)), bytes(range(255, -1, -1)) * 4, [("bin", bytes(range(256)))], T0 + 5),
        # Duplicate header keys keep their order; a header value may be null.
        Rec(b"dup", b"headers", [("a", b"1"), ("b", None), ("a", b"2"), ("a", b""), ("\u043a\u043b\u044e\u0447", b"\xff")],
            T0 + 6),
        # A timestamp earlier than the batch's first: a negative timestamp delta.
        Rec(b"past", b"earlier timestamp", [], T0 - 60_000),
        # (A timestamp of 0 cannot be sent: confluent-kafka takes 0 as "now".)
        Rec(b"early", b"timestamp 1", [], 1),
    ]
    i = len(recs)
    while len(recs) < n:
        recs.append(Rec(b"k%d" % i, b"value-%d" % i * (i + 1), [("seq", str(i).encode())], T0 + 1000 + i))
        i += 1
    return recs


# -- the client really uses the broker's newest versions

def test_librdkafka_uses_produce_v10_fetch_v16_metadata_v12(broker):
    topic = unique_topic("versions")
    create_topic(broker.bootstrap, topic)
    logs = LogCapture()
    p = producer(broker.bootstrap, debug="protocol", logger=logs.logger)
    (rep,) = produce(p, topic, [Rec(b"k", b"v", [], T0)])
    assert rep.error is None
    c = consumer(broker.bootstrap, debug="protocol", logger=logs.logger)
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        (m,) = consume_until_eof(c, {0})
    finally:
        c.close()
    p.poll(0)
    assert (m.key(), m.value()) == (b"k", b"v")
    sent: dict[str, set[int]] = {}
    for line in logs.lines:
        found = re.search(r"Sent (\w+)Request \(v(\d+)", line)
        if found:
            sent.setdefault(found[1], set()).add(int(found[2]))
    assert max(sent["Produce"]) >= 10, sent
    assert max(sent["Fetch"]) == 16, sent
    assert max(sent["Metadata"]) == 12, sent
    assert max(sent["ListOffsets"]) >= 7, sent


# -- AdminClient

def test_admin_topic_lifecycle(any_broker):
    """create (partitions, RF 1, configs) -> list -> describe -> describe_configs -> delete -> re-create."""
    a = admin(any_broker.bootstrap)
    topic = unique_topic("admin")
    fs = a.create_topics([NewTopic(topic, 3, 1, config={"retention.ms": "3600000", "cleanup.policy": "delete"})],
                         operation_timeout=TIMEOUT)
    assert fs[topic].result(TIMEOUT) is None

    md = a.list_topics(timeout=TIMEOUT)
    assert topic in md.topics
    tmd = md.topics[topic]
    assert tmd.error is None
    assert sorted(tmd.partitions) == [0, 1, 2]
    broker_ids = set(md.brokers)
    assert len(broker_ids) == 1
    (node,) = broker_ids
    for pmd in tmd.partitions.values():
        assert pmd.leader == node
        assert pmd.replicas == [node]
        assert pmd.isrs == [node]
        assert pmd.error is None

    desc = a.describe_topics(TopicCollection([topic]))[topic].result(TIMEOUT)
    assert desc.name == topic
    assert not desc.is_internal
    first_id = str(desc.topic_id)
    assert first_id and first_id != "AAAAAAAAAAAAAAAAAAAAAA"  # not the zero UUID
    assert [p.id for p in desc.partitions] == [0, 1, 2]
    for p in desc.partitions:
        assert p.leader.id == node
        assert [r.id for r in p.replicas] == [node]
        assert [r.id for r in p.isr] == [node]

    res = ConfigResource(ResourceType.TOPIC, topic)
    configs = a.describe_configs([res])[res].result(TIMEOUT)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not configs["retention.ms"].is_default
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # Defaults are there too, with Kafka's values.
    for name, value in [("max.message.bytes", str(BROKER_MAX_MESSAGE_BYTES)), ("segment.bytes", "1073741824"),
                        ("message.timestamp.type", "CreateTime"), ("compression.type", "producer"),
                        ("min.insync.replicas", "1"), ("retention.bytes", "-1")]:
        assert configs[name].value == value, name
        assert configs[name].source == ConfigSource.DEFAULT_CONFIG.value, name
        assert configs[name].is_default, name

    # Put data in, delete, and the topic is gone.
    p = producer(any_broker.bootstrap)
    for part in range(3):
        reps = produce(p, topic, [Rec(b"old", b"data-%d" % part, [], T0)], partition=part)
        assert [r.error for r in reps] == [None]
    assert a.delete_topics([topic], operation_timeout=TIMEOUT)[topic].result(TIMEOUT) is None
    assert topic not in a.list_topics(timeout=TIMEOUT).topics
    with pytest.raises(KafkaException) as gone:
        a.describe_topics(TopicCollection([topic]))[topic].result(TIMEOUT)
    assert gone.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    # Re-created under the same name: a new topic id, empty partitions, no configs carried over.
    assert a.create_topics([NewTopic(topic, 2, 1)], operation_timeout=TIMEOUT)[topic].result(TIMEOUT) is None
    desc2 = a.describe_topics(TopicCollection([topic]))[topic].result(TIMEOUT)
    assert str(desc2.topic_id) != first_id
    assert [p.id for p in desc2.partitions] == [0, 1]
    configs2 = a.describe_configs([res])[res].result(TIMEOUT)
    assert configs2["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    c = consumer(any_broker.bootstrap)
    try:
        for part in range(2):
            assert c.get_watermark_offsets(TopicPartition(topic, part), timeout=TIMEOUT) == (0, 0)
        c.assign([TopicPartition(topic, part, OFFSET_BEGINNING) for part in range(2)])
        assert consume_until_eof(c, {0, 1}) == []
    finally:
        c.close()
    # ... and it works as a fresh topic.
    reps = produce(p, topic, [Rec(b"new", b"data", [], T0)], partition=0)
    assert [(r.error, r.offset) for r in reps] == [(None, 0)]


@pytest.mark.parametrize(
    ("new_topic", "code"),
    [
        pytest.param(lambda existing: NewTopic(existing, 1, 1), KafkaError.TOPIC_ALREADY_EXISTS, id="exists"),
        # INVALID_TOPIC_EXCEPTION is librdkafka's TOPIC_EXCEPTION (17).
        pytest.param(lambda _e: NewTopic("bad name!", 1, 1), KafkaError.TOPIC_EXCEPTION, id="invalid-name"),
        pytest.param(lambda _e: NewTopic("x" * 250, 1, 1), KafkaError.TOPIC_EXCEPTION, id="name-too-long"),
        pytest.param(lambda _e: NewTopic(unique_topic("cfg"), 1, 1, config={"no.such.config": "1"}),
                     KafkaError.INVALID_CONFIG, id="unknown-config"),
        pytest.param(lambda _e: NewTopic(unique_topic("cfg"), 1, 1, config={"retention.ms": "soon"}),
                     KafkaError.INVALID_CONFIG, id="bad-config-value"),
        pytest.param(lambda _e: NewTopic(unique_topic("rf"), 1, 3), KafkaError.INVALID_REPLICATION_FACTOR,
                     id="rf3-on-one-broker"),
    ],
)
def test_admin_create_topic_errors(broker, new_topic, code):
    a = admin(broker.bootstrap)
    existing = unique_topic("exists")
    create_topic(broker.bootstrap, existing)
    nt = new_topic(existing)
    with pytest.raises(KafkaException) as failed:
        a.create_topics([nt], operation_timeout=TIMEOUT)[nt.topic].result(TIMEOUT)
    assert failed.value.args[0].code() == code, failed.value.args[0]
    # Nothing was created by a refused request (the existing topic is still the one partition).
    md = a.list_topics(timeout=TIMEOUT)
    if nt.topic == existing:
        assert sorted(md.topics[existing].partitions) == [0]
    else:
        assert nt.topic not in md.topics


# -- Producer

@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_produce_acks_round_trip(any_broker, acks):
    topic = unique_topic(f"acks{acks}")
    create_topic(any_broker.bootstrap, topic)
    records = varied_records(40)
    reps = produce(producer(any_broker.bootstrap, acks=acks), topic, records)
    assert [r.error for r in reps] == [None] * len(records)
    assert [(r.key, r.value) for r in reps] == [(r.key, r.value) for r in records]
    if acks == "0":
        # No response, so librdkafka cannot know the offsets; the broker still appends in order.
        assert wait_for_high_watermark(any_broker.bootstrap, topic, 0, len(records)) == (0, len(records))
    else:
        assert [(r.partition, r.offset) for r in reps] == [(0, i) for i in range(len(records))]
    assert_same_records(read_partition(any_broker.bootstrap, topic), records, topic, 0)


# librdkafka enables LZ4 only when the broker lists FindCoordinator (key 10) in
# ApiVersions (rdkafka_feature.c: LZ4 depends on FindCoordinator v0); refka serves it.
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_compression_round_trip(any_broker, codec):
    topic = unique_topic(f"codec-{codec}")
    create_topic(any_broker.bootstrap, topic)
    # Compressible values so librdkafka does not fall back to sending them uncompressed.
    records = [Rec(b"key-%d" % i, (b"compressible %d " % (i % 7)) * 50, [("n", b"%d" % i), ("n", None)], T0 + i)
               for i in range(200)]
    p = producer(any_broker.bootstrap, **{"compression.type": codec, "linger.ms": 200})
    reps = produce(p, topic, records)
    assert [(r.error, r.offset) for r in reps] == [(None, i) for i in range(len(records))]
    assert_same_records(read_partition(any_broker.bootstrap, topic), records, topic, 0)
    # The broker keeps the producer's batches as sent (topic compression.type=producer).
    batches = served_batches(any_broker.bootstrap, topic)
    assert sum(b.records_count for b in batches) == len(records)
    assert {b.compression for b in batches} == {Compression[codec.upper()]}
    if codec != "none":
        assert sum(b.length for b in batches) < sum(len(r.value) for r in records) // 2


def test_produce_batch_near_one_mib(any_broker):
    topic = unique_topic("bigbatch")
    create_topic(any_broker.bootstrap, topic)
    # ~2.2 MiB of 1 KiB records, so at least one batch fills batch.size.
    records = [Rec(b"k%05d" % i, bytes([i % 251]) * 1000, [], T0 + i) for i in range(2200)]
    p = producer(any_broker.bootstrap, **{"batch.size": ONE_MIB, "linger.ms": 5000,
                                          "message.max.bytes": BROKER_MAX_MESSAGE_BYTES,
                                          "compression.type": "none"})
    reps = produce(p, topic, records)
    assert [(r.error, r.offset) for r in reps] == [(None, i) for i in range(len(records))]
    batches = served_batches(any_broker.bootstrap, topic)
    biggest = max(b.length for b in batches)
    assert 1_000_000 < biggest <= BROKER_MAX_MESSAGE_BYTES, [b.length for b in batches]
    assert sum(b.records_count for b in batches) == len(records)
    assert_same_records(read_partition(any_broker.bootstrap, topic), records, topic, 0)


def test_produce_single_records_near_one_mib(any_broker):
    topic = unique_topic("bigrec")
    create_topic(any_broker.bootstrap, topic)
    big = ONE_MIB - 100  # its batch is just under the topic's max.message.bytes (1048588)
    records = [
        Rec(b"big-0", bytes(range(256)) * (big // 256) + b"\x00" * (big % 256), [("h", b"x")], T0),
        Rec(b"small", b"between", [], T0 + 1),
        Rec(b"big-1", b"\xab" * big, [], T0 + 2),
        Rec(b"big-2", b"\xcd" * 1_000_000, [], T0 + 3),
    ]
    p = producer(any_broker.bootstrap, **{"message.max.bytes": 2 * ONE_MIB, "linger.ms": 0})
    reps = produce(p, topic, records)
    assert [(r.error, r.offset) for r in reps] == [(None, i) for i in range(len(records))]
    batches = served_batches(any_broker.bootstrap, topic)
    assert max(b.length for b in batches) > ONE_MIB - 100
    assert_same_records(read_partition(any_broker.bootstrap, topic), records, topic, 0)


def test_record_above_topic_max_message_bytes_is_refused(any_broker):
    limit = 4096
    topic = unique_topic("toolarge")
    create_topic(any_broker.bootstrap, topic, config={"max.message.bytes": str(limit)})
    p = producer(any_broker.bootstrap, **{"linger.ms": 0})
    (rep,) = produce(p, topic, [Rec(b"k", b"x" * 8192, [], T0)])
    assert rep.error is not None
    assert rep.error.code() == KafkaError.MSG_SIZE_TOO_LARGE, rep.error
    c = consumer(any_broker.bootstrap)
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT) == (0, 0)
    finally:
        c.close()

    # A record that fits is accepted, at offset 0: nothing of the refused one was written.
    probe = Rec(b"k", b"y" * 2000, [], T0 + 1)
    (rep2,) = produce(p, topic, [probe])
    assert (rep2.error, rep2.offset) == (None, 0)
    # The limit is on the batch: one of exactly max.message.bytes is accepted, one byte more is not.
    (probe_batch,) = served_batches(any_broker.bootstrap, topic)
    exact = Rec(b"k", b"z" * (2000 + limit - probe_batch.length), [], T0 + 2)
    (rep3,) = produce(p, topic, [exact])
    assert (rep3.error, rep3.offset) == (None, 1)
    assert [b.length for b in served_batches(any_broker.bootstrap, topic)] == [probe_batch.length, limit]
    (rep4,) = produce(p, topic, [Rec(b"k", exact.value + b"z", [], T0 + 3)])
    assert rep4.error is not None and rep4.error.code() == KafkaError.MSG_SIZE_TOO_LARGE, rep4.error
    assert_same_records(read_partition(any_broker.bootstrap, topic), [probe, exact], topic, 0)


# -- Consumer (assign + seek)

def test_consume_from_earliest_across_partitions(any_broker):
    topic = unique_topic("earliest")
    create_topic(any_broker.bootstrap, topic, partitions=3)
    p = producer(any_broker.bootstrap, acks="all")
    per_partition = {part: [Rec(b"p%d-%d" % (part, i), b"v%d-%d" % (part, i), [("p", b"%d" % part)], T0 + i)
                            for i in range(5 + part)] for part in range(3)}
    for part, recs in per_partition.items():
        reps = produce(p, topic, recs, partition=part)
        assert [(r.error, r.partition, r.offset) for r in reps] == [(None, part, i) for i in range(len(recs))]
    c = consumer(any_broker.bootstrap)
    try:
        for part, recs in per_partition.items():
            assert c.get_watermark_offsets(TopicPartition(topic, part), timeout=TIMEOUT) == (0, len(recs))
        c.assign([TopicPartition(topic, part, OFFSET_BEGINNING) for part in range(3)])
        msgs = consume_until_eof(c, {0, 1, 2})
    finally:
        c.close()
    for part, recs in per_partition.items():
        assert_same_records([m for m in msgs if m.partition() == part], recs, topic, part)


def test_seek_to_an_offset(any_broker):
    topic = unique_topic("seek")
    create_topic(any_broker.bootstrap, topic)
    records = varied_records(20)
    produce(producer(any_broker.bootstrap), topic, records)
    c = consumer(any_broker.bootstrap)
    try:
        c.assign([TopicPartition(topic, 0, 15)])
        assert_same_records(consume_until_eof(c, {0}), records[15:], topic, 0, first_offset=15)
        # seek() back on the live assignment.
        c.seek(TopicPartition(topic, 0, 7))
        assert_same_records(consume_until_eof(c, {0}), records[7:], topic, 0, first_offset=7)
    finally:
        c.close()


def test_consume_from_latest_gets_only_new_records(any_broker):
    topic = unique_topic("latest")
    create_topic(any_broker.bootstrap, topic)
    p = producer(any_broker.bootstrap)
    old = [Rec(b"old-%d" % i, b"old", [], T0 + i) for i in range(5)]
    produce(p, topic, old)
    c = consumer(any_broker.bootstrap)
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_END)])
        # End of partition: the position is resolved to the log end, and nothing old arrived.
        assert consume_until_eof(c, {0}) == []
        new = [Rec(b"new-%d" % i, b"new", [("n", b"%d" % i)], T0 + 100 + i) for i in range(3)]
        reps = produce(p, topic, new)
        assert [r.offset for r in reps] == [5, 6, 7]
        assert_same_records(consume_until_eof(c, {0}), new, topic, 0, first_offset=len(old))
    finally:
        c.close()


def test_offsets_for_times_and_consume_from_a_timestamp(any_broker):
    topic = unique_topic("bytime")
    create_topic(any_broker.bootstrap, topic)
    records = [Rec(b"t%d" % i, b"at %d" % i, [], T0 + 1000 * i) for i in range(10)]
    p = producer(any_broker.bootstrap)
    # Two batches, so the lookup goes through the time index and into a batch's records.
    produce(p, topic, records[:5])
    produce(p, topic, records[5:])
    expected_epoch = metadata_leader_epochs(any_broker.bootstrap, topic)[0]
    cases = {
        T0 - 1: 0,              # before the first record
        T0: 0,                  # exactly the first
        T0 + 1: 1,              # between: the first at/after it
        T0 + 3000: 3,
        T0 + 3500: 4,
        T0 + 4001: 5,           # the first record of the second batch
        T0 + 6500: 7,
        T0 + 9000: 9,           # exactly the last
        T0 + 9001: OFFSET_END,  # after the last record: -1
    }
    c = consumer(any_broker.bootstrap)
    try:
        answered = {}
        for ts, want in cases.items():
            # One call per timestamp: librdkafka asks once per partition per call.
            (tp,) = c.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=TIMEOUT)
            assert tp.error is None, (ts - T0, tp.error)
            assert tp.offset == want, (ts - T0, tp.offset)
            if want >= 0:
                assert tp.leader_epoch == expected_epoch, (ts - T0, tp.leader_epoch)
            answered[ts] = tp
        c.assign([answered[T0 + 3500]])
        assert_same_records(consume_until_eof(c, {0}), records[4:], topic, 0, first_offset=4)
    finally:
        c.close()


def test_leader_epoch_of_messages_matches_metadata(any_broker):
    """Message.leader_epoch() is the epoch of the leader that appended it, as Metadata stated it.

    CreatePartitions bumps the old partitions' leader epoch (KIP-253), so the
    records before and after it carry different epochs.
    """
    topic = unique_topic("epoch")
    create_topic(any_broker.bootstrap, topic)
    p = producer(any_broker.bootstrap)
    before = [Rec(b"b%d" % i, b"before", [], T0 + i) for i in range(3)]
    produce(p, topic, before)
    epoch_before = metadata_leader_epochs(any_broker.bootstrap, topic)[0]
    assert epoch_before >= 0

    a = admin(any_broker.bootstrap)
    assert a.create_partitions([NewPartitions(topic, 2)], operation_timeout=TIMEOUT)[topic].result(TIMEOUT) is None
    epochs_after = metadata_leader_epochs(any_broker.bootstrap, topic)
    assert sorted(epochs_after) == [0, 1]
    epoch_after = epochs_after[0]
    assert epoch_after > epoch_before

    after = [Rec(b"a%d" % i, b"after", [], T0 + 10 + i) for i in range(3)]
    reps = produce(p, topic, after)
    assert [(r.error, r.offset) for r in reps] == [(None, 3), (None, 4), (None, 5)]
    # A new producer: the first one's metadata does not know partition 1 yet.
    (rep1,) = produce(producer(any_broker.bootstrap), topic, [Rec(b"new", b"partition", [], T0)], partition=1)
    assert (rep1.error, rep1.offset) == (None, 0)

    c = consumer(any_broker.bootstrap)
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING), TopicPartition(topic, 1, OFFSET_BEGINNING)])
        msgs = consume_until_eof(c, {0, 1})
    finally:
        c.close()
    p0 = [m for m in msgs if m.partition() == 0]
    assert_same_records(p0, before + after, topic, 0)
    assert [m.leader_epoch() for m in p0] == [epoch_before] * 3 + [epoch_after] * 3
    (m1,) = [m for m in msgs if m.partition() == 1]
    assert m1.leader_epoch() == epochs_after[1]
