"""aiokafka against a real refka broker.

AIOKafkaProducer (send_and_wait, send_batch; none, gzip, snappy, lz4, zstd)
and AIOKafkaConsumer with assign() reading the records back byte for byte;
the offsets send_and_wait reports; beginning_offsets, end_offsets and
offsets_for_times (ListOffsets by timestamp); LogAppendTime topics.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import OffsetAndTimestamp

from refka.protocol.records import Compression, TimestampType
from tests.integration.confluent_helpers import served_batches

pytestmark = pytest.mark.integration

CODECS = {
    None: Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}
BASE_TS = 1_710_000_000_000
WAIT_S = 30.0  # only against hangs


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def create_topics(bootstrap: str, *topics: NewTopic) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="refka-test-admin")
    await admin.start()
    try:
        resp = await admin.create_topics(list(topics))
    finally:
        await admin.close()
    assert sorted((name, code) for name, code, *_ in resp.topic_errors) == sorted((t.name, 0) for t in topics)


async def read_partition(bootstrap: str, tp: TopicPartition, count: int, start: int | None = None) -> list:
    """``count`` records of ``tp`` read with assign(), from the beginning or from offset ``start``."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                fetch_max_wait_ms=200, client_id="refka-test-consumer")
    await consumer.start()
    try:
        consumer.assign([tp])
        if start is None:
            await consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, start)
        got: list = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_S
        while len(got) < count and loop.time() < deadline:
            for records in (await consumer.getmany(tp, timeout_ms=500)).values():
                got.extend(records)
        for records in (await consumer.getmany(tp, timeout_ms=200)).values():
            got.extend(records)  # nothing beyond what was produced
        return got
    finally:
        await consumer.stop()


def sample_records(tag: str) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int]]:
    """(key, value, headers, timestamp_ms), timestamps increasing by 1000 ms."""
    values: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = [
        (b"key-0", f"value {tag} \u00e9\u4e2d\U0001f600".encode(), []),
        (None, b"null key", [("trace", b"t-1")]),
        (b"", b"", [("empty", b"")]),
        (b"tombstone", None, []),
        (bytes(range(256)), bytes(range(255, -1, -1)), [("dup", b"1"), ("dup", b"2"), ("bin", b"\x00\xff")]),
        (b"big-text", (tag.encode() + b" lorem ipsum ") * 5000, [("kind", b"compressible")]),
        (b"big-random", os.urandom(40 * 1024), [("kind", b"random")]),
    ]
    values += [(f"k{i}".encode(), f"v{i}".encode(), [("i", str(i).encode())]) for i in range(13)]
    return [(k, v, h, BASE_TS + 1000 * i) for i, (k, v, h) in enumerate(values)]


@pytest.mark.parametrize("codec", list(CODECS), ids=[str(c) for c in CODECS])
async def test_send_and_wait_then_assign_and_read_back(broker, codec):
    topic = _topic(f"ak-{codec}")
    await create_topics(broker.bootstrap, NewTopic(topic, 2, 1))
    sent = sample_records(str(codec))
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", compression_type=codec,
                                max_request_size=4 << 20, client_id="refka-test-producer")
    await producer.start()
    try:
        metas = [await producer.send_and_wait(topic, value=v, key=k, headers=h, timestamp_ms=ts, partition=0)
                 for k, v, h, ts in sent]
        # send_batch: one batch of 10 records to partition 1.
        batch = producer.create_batch()
        for i in range(10):
            assert batch.append(key=b"b%d" % i, value=b"batch-%d" % i, timestamp=BASE_TS + i,
                                headers=[("n", bytes([i]))]) is not None
        batch_meta = await (await producer.send_batch(batch, topic, partition=1))
    finally:
        await producer.stop()
    assert [(m.topic, m.partition, m.offset, m.timestamp) for m in metas] == \
        [(topic, 0, i, ts) for i, (_k, _v, _h, ts) in enumerate(sent)]
    assert all(m.timestamp_type == 0 for m in metas)
    assert (batch_meta.partition, batch_meta.offset) == (1, 0)

    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    got = await read_partition(broker.bootstrap, tp0, len(sent))
    assert [r.offset for r in got] == list(range(len(sent)))
    assert [(r.key, r.value, list(r.headers), r.timestamp, r.timestamp_type) for r in got] == \
        [(k, v, h, ts, 0) for k, v, h, ts in sent]

    tail = await read_partition(broker.bootstrap, tp0, len(sent) - 7, start=7)
    assert [(r.offset, r.key, r.value) for r in tail] == [(r.offset, r.key, r.value) for r in got[7:]]

    got1 = await read_partition(broker.bootstrap, tp1, 10)
    assert [(r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in got1] == \
        [(i, b"b%d" % i, b"batch-%d" % i, [("n", bytes([i]))], BASE_TS + i) for i in range(10)]

    # The broker stores the client's batches as they came: aiokafka leaves one
    # uncompressed when the codec does not shrink it (the random value).
    codecs0 = {b.compression for b in await asyncio.to_thread(served_batches, broker.bootstrap, topic, 0)}
    assert CODECS[codec] in codecs0 and codecs0 <= {CODECS[codec], Compression.NONE}
    batches1 = await asyncio.to_thread(served_batches, broker.bootstrap, topic, 1)
    assert [(b.base_offset, b.records_count, b.compression) for b in batches1] == [(0, 10, CODECS[codec])]


async def test_beginning_end_offsets_and_offsets_for_times(broker):
    topic = _topic("ak-offsets")
    await create_topics(broker.bootstrap, NewTopic(topic, 3, 1))
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, compression_type="lz4")
    await producer.start()
    try:
        # Partition 0: timestamps BASE_TS, +1000, ... (+5000); partition 1: out of order; partition 2: empty.
        for i in range(6):
            m = await producer.send_and_wait(topic, value=b"p0-%d" % i, partition=0, timestamp_ms=BASE_TS + 1000 * i)
            assert m.offset == i
        for i, ts in enumerate([BASE_TS + 500, BASE_TS + 9000, BASE_TS + 200, BASE_TS + 9500]):
            m = await producer.send_and_wait(topic, value=b"p1-%d" % i, partition=1, timestamp_ms=ts)
            assert m.offset == i
    finally:
        await producer.stop()

    tps = [TopicPartition(topic, p) for p in range(3)]
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        assert await consumer.beginning_offsets(tps) == dict.fromkeys(tps, 0)
        assert await consumer.end_offsets(tps) == {tps[0]: 6, tps[1]: 4, tps[2]: 0}
        p0, p1, p2 = tps
        cases = [
            # an exact timestamp: that record
            ({p0: BASE_TS + 2000, p1: BASE_TS + 200, p2: BASE_TS},
             {p0: OffsetAndTimestamp(2, BASE_TS + 2000), p1: OffsetAndTimestamp(0, BASE_TS + 500), p2: None}),
            # between two: the first record at or after it, by offset
            ({p0: BASE_TS + 2500, p1: BASE_TS + 600, p2: 0},
             {p0: OffsetAndTimestamp(3, BASE_TS + 3000), p1: OffsetAndTimestamp(1, BASE_TS + 9000), p2: None}),
            # before everything: offset 0; after everything: None
            ({p0: 0, p1: BASE_TS + 9501, p2: BASE_TS},
             {p0: OffsetAndTimestamp(0, BASE_TS), p1: None, p2: None}),
            ({p0: BASE_TS + 5000, p1: BASE_TS + 9500},
             {p0: OffsetAndTimestamp(5, BASE_TS + 5000), p1: OffsetAndTimestamp(3, BASE_TS + 9500)}),
        ]
        for query, expected in cases:
            assert await consumer.offsets_for_times(query) == expected, query

        # Seeking to what offsets_for_times found reads from exactly there.
        consumer.assign([p0])
        found = (await consumer.offsets_for_times({p0: BASE_TS + 3500}))[p0]
        consumer.seek(p0, found.offset)
        rec = await asyncio.wait_for(consumer.getone(), WAIT_S)
        assert (rec.offset, rec.value, rec.timestamp) == (4, b"p0-4", BASE_TS + 4000)
    finally:
        await consumer.stop()


async def test_log_append_time_topic_stamps_the_broker_time(broker):
    topic = _topic("ak-logappend")
    await create_topics(broker.bootstrap, NewTopic(topic, 1, 1,
                                                   topic_configs={"message.timestamp.type": "LogAppendTime"}))
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, compression_type="gzip")
    await producer.start()
    before_ms = int(time.time() * 1000)
    try:
        metas = [await producer.send_and_wait(topic, value=b"la-%d" % i, partition=0, timestamp_ms=BASE_TS + i)
                 for i in range(3)]
    finally:
        await producer.stop()
    assert [m.offset for m in metas] == [0, 1, 2]
    assert all(m.timestamp_type == TimestampType.LOG_APPEND_TIME for m in metas)
    # The broker's clock, not the timestamps the producer set.
    assert all(m.timestamp >= before_ms and m.timestamp != BASE_TS + m.offset for m in metas)

    got = await read_partition(broker.bootstrap, TopicPartition(topic, 0), 3)
    assert [(r.offset, r.value, r.timestamp_type, r.timestamp) for r in got] == \
        [(m.offset, b"la-%d" % m.offset, TimestampType.LOG_APPEND_TIME, m.timestamp) for m in metas]


async def test_acks_0_records_arrive_without_answers(broker):
    topic = _topic("ak-acks0")
    await create_topics(broker.bootstrap, NewTopic(topic, 1, 1))
    sent = sample_records("acks0")
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks=0, compression_type="zstd",
                                max_request_size=4 << 20)
    await producer.start()
    try:
        futures = [await producer.send(topic, value=v, key=k, headers=h, timestamp_ms=ts, partition=0)
                   for k, v, h, ts in sent]
        await asyncio.gather(*futures)  # sent; acks=0 has no answer, so no offsets
    finally:
        await producer.stop()

    got = await read_partition(broker.bootstrap, TopicPartition(topic, 0), len(sent))
    assert [(r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in got] == \
        [(i, k, v, h, ts) for i, (k, v, h, ts) in enumerate(sent)]
