"""Produce v0-v2 and Fetch v0-v3 on the wire (broker/handlers/produce.py and fetch.py) against
an in-process refka: message sets of magic 0 and 1 appended as RecordBatch v2, each refusal
with its error code and nothing appended, the answer's fields per version, and the log's
batches down-converted for old fetchers (magic 0 for v0-v1, 1 for v2-v3: offsets kept,
headers dropped, whole messages within the limits, zstd refused)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from refka.client.connection import BrokerConnection, connect
from refka.protocol import ErrorCode
from refka.protocol.legacy_records import build_message_set, decode_message_set, encode_message, message_entry
from refka.protocol.messages.fetch import Fetch
from refka.protocol.messages.produce import Produce
from refka.protocol.records import (
    Compression,
    NewRecord,
    TimestampType,
    build_batch,
    iter_records,
    parse_batches,
)
from refka.testing import RefkaCluster

pytestmark = pytest.mark.integration

T0 = 1_700_000_000_000
P = Produce.Request
F = Fetch.Request


@pytest.fixture
async def conn() -> AsyncIterator[tuple[RefkaCluster, BrokerConnection]]:
    async with RefkaCluster(brokers=1) as cluster:
        c = await connect(cluster.bootstrap, "legacy-wire")
        try:
            yield cluster, c
        finally:
            await c.close()


async def produce(c: BrokerConnection, topic: str, records: bytes, version: int, acks: int = 1):
    req = P(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=records)])])
    resp = await c.request(Produce, req, version=version)
    (t,) = resp.responses
    (p,) = t.partition_responses
    return resp, p


async def fetch(c: BrokerConnection, topic: str, offset: int, version: int, partition_max_bytes: int = 1 << 20,
                max_bytes: int = 0x7FFFFFFF):
    req = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, session_id=0, session_epoch=-1,
            topics=[F.FetchTopic(topic=topic, partitions=[F.FetchTopic.FetchPartition(
                partition=0, fetch_offset=offset, partition_max_bytes=partition_max_bytes)])],
            forgotten_topics_data=[])
    resp = await c.request(Fetch, req, version=version)
    (t,) = resp.responses
    (p,) = t.partitions
    return p, bytes(p.records or b"")


def messages(data: bytes) -> list[tuple]:
    """(offset, magic, timestamp, key, value, attributes) of every message, inner ones resolved."""
    out, pos = [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos + 8 : pos + 12], "big")
        for m in decode_message_set(data[pos : pos + 12 + size]).messages:
            out.append((m.offset, m.magic, m.timestamp, m.key, m.value, m.attributes))
        pos += 12 + size
    return out


async def log_end(c: BrokerConnection, topic: str) -> int:
    p, _ = await fetch(c, topic, 0, 12)
    return p.high_watermark


async def test_api_versions_advertise_produce_0_11_and_fetch_0_16(conn):
    _cluster, c = conn
    assert c.versions[Produce.key] == (0, 11)
    assert c.versions[Fetch.key] == (0, 16)


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4],
                         ids=lambda c: c.name)
async def test_produce_v0_to_v2_append_message_sets_as_record_batches(conn, codec):
    cluster, c = conn
    await cluster.create_topic("legacy", 1)
    offset = 0
    for version, magic in ((0, 0), (1, 0), (2, 1)):
        sent = [(b"k%d" % i, b"v%d" % i * 30, T0 + i) for i in range(4)]
        resp, p = await produce(c, "legacy", build_message_set(sent, magic, codec), version)
        assert (p.error_code, p.base_offset) == (0, offset)
        assert p.log_append_time_ms == -1
        offset += len(sent)
    # Stored as RecordBatch v2 in the producer's codec; magic 0's messages have no timestamp.
    _p, stored = await fetch(c, "legacy", 0, 12)
    batches = parse_batches(stored)
    assert [(b.base_offset, b.records_count, b.compression) for b in batches] == [(0, 4, codec), (4, 4, codec),
                                                                                   (8, 4, codec)]
    stamps = [[batches[i].base_timestamp + r.timestamp_delta for r in iter_records(stored[b.position : b.end])]
              for i, b in enumerate(batches)]
    assert stamps == [[-1] * 4, [-1] * 4, [T0, T0 + 1, T0 + 2, T0 + 3]]


async def test_produce_v2_on_a_log_append_time_topic_answers_the_append_time(conn):
    cluster, c = conn
    await cluster.create_topic("lat", 1, configs={"message.timestamp.type": "LogAppendTime"})
    _resp, p = await produce(c, "lat", build_message_set([(b"a", b"1", T0), (b"b", b"2", T0)], 1), 2)
    assert p.error_code == 0 and p.log_append_time_ms > T0
    # Read back by a magic 1 fetcher: the append time on each message, with the LogAppendTime bit.
    _f, data = await fetch(c, "lat", 0, 2)
    assert [(o, ts, attrs & 0x08) for o, _m, ts, _k, _v, attrs in messages(data)] == [
        (0, p.log_append_time_ms, 0x08), (1, p.log_append_time_ms, 0x08)]


async def test_refused_message_sets_get_kafkas_errors_and_nothing_is_appended(conn):
    cluster, c = conn
    await cluster.create_topic("strict", 1, configs={"max.message.bytes": "2000"})
    await cluster.create_topic("compacted", 1, configs={"cleanup.policy": "compact"})
    bad_crc = bytearray(build_message_set([(b"a", b"1", T0)], 1))
    bad_crc[-1] ^= 1
    wrapped = build_message_set([(b"a", b"1")], 0, Compression.GZIP)
    zstd = message_entry(0, encode_message(1, None, b"\x28\xb5\x2f\xfd", T0, Compression.ZSTD))
    cases = [
        ("strict", bytes(bad_crc), ErrorCode.CORRUPT_MESSAGE),
        ("strict", build_message_set([(b"a", b"x" * 3000)], 0), ErrorCode.MESSAGE_TOO_LARGE),
        ("strict", wrapped + wrapped, ErrorCode.INVALID_RECORD),
        ("strict", zstd, ErrorCode.INVALID_RECORD),
        ("strict", build_message_set([(b"a", b"1")], 0) + build_message_set([(b"a", b"1")], 1), ErrorCode.INVALID_RECORD),
        ("compacted", build_message_set([(None, b"no key")], 0), ErrorCode.INVALID_RECORD),
        ("strict", build_message_set([(b"a", b"1", -1)], 1, timestamp_type=TimestampType.LOG_APPEND_TIME),
         ErrorCode.INVALID_TIMESTAMP),
    ]
    for version in (0, 1, 2):
        for topic, records, code in cases:
            _resp, p = await produce(c, topic, records, version)
            assert (p.error_code, p.base_offset) == (code, -1), (version, code)
    assert await log_end(c, "strict") == 0 and await log_end(c, "compacted") == 0


async def test_produce_v2_takes_record_batches_and_v3_refuses_message_sets(conn):
    cluster, c = conn
    await cluster.create_topic("mixed", 1)
    _resp, p = await produce(c, "mixed", bytes(build_batch([(b"a", b"1", [("h", b"x")])])), 2)
    assert (p.error_code, p.base_offset) == (0, 0)
    _resp, p = await produce(c, "mixed", build_message_set([(b"a", b"1", T0)], 1), 3)
    assert p.error_code == ErrorCode.INVALID_RECORD


async def test_acks_0_gets_no_answer_from_v0_either(conn):
    cluster, c = conn
    await cluster.create_topic("quiet", 1)
    req = P(transactional_id=None, acks=0, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name="quiet", partition_data=[P.TopicProduceData.PartitionProduceData(
            index=0, records=build_message_set([(b"a", b"1")], 0))])])
    assert await c.request(Produce, req, version=0, expect_response=False) is None
    _resp, p = await produce(c, "quiet", build_message_set([(b"b", b"2")], 0), 0)
    assert p.base_offset == 1  # the acks=0 one went first


MODERN = [NewRecord(b"k%d" % i, b"value %d " % i * 10, [("trace", b"t%d" % i)], T0 + i) for i in range(5)]


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.LZ4], ids=lambda c: c.name)
async def test_fetch_v0_to_v3_down_convert_modern_batches(conn, codec):
    cluster, c = conn
    await cluster.create_topic("modern", 1)
    for _ in range(2):
        _resp, p = await produce(c, "modern", bytes(build_batch(MODERN, compression=codec)), 9)
        assert p.error_code == 0
    for version, magic in ((0, 0), (1, 0), (2, 1), (3, 1)):
        f, data = await fetch(c, "modern", 0, version)
        assert (f.error_code, f.high_watermark) == (0, 10)
        got = messages(data)
        assert [(o, m, k, v) for o, m, _ts, k, v, _a in got] == [
            (i, magic, MODERN[i % 5].key, MODERN[i % 5].value) for i in range(10)]
        assert [ts for _o, _m, ts, *_ in got] == ([-1] * 10 if magic == 0 else [r.timestamp for r in MODERN] * 2)
        if codec:  # a compressed batch is one wrapper in its codec
            assert data[17] & 7 == codec
    # From the middle: an uncompressed batch starts at the fetch offset, a compressed one is whole.
    _f, data = await fetch(c, "modern", 7, 1)
    assert [o for o, *_ in messages(data)] == (list(range(7, 10)) if not codec else list(range(5, 10)))
    # Fetch v4+ still gets the stored batches, headers and all.
    _f, data = await fetch(c, "modern", 0, 4)
    assert [r.headers for r in iter_records(data[: parse_batches(data)[0].length])] == [r.headers for r in MODERN]


async def test_fetch_v3_answers_whole_messages_within_its_limits(conn):
    cluster, c = conn
    await cluster.create_topic("limits", 1)
    await produce(c, "limits", bytes(build_batch([(b"k", b"x" * 100)] * 10)), 9)
    one = len(message_entry(0, encode_message(1, b"k", b"x" * 100, T0)))
    _f, data = await fetch(c, "limits", 0, 3, partition_max_bytes=3 * one + 5)
    assert [o for o, *_ in messages(data)] == [0, 1, 2] and len(data) == 3 * one
    _f, data = await fetch(c, "limits", 0, 3, max_bytes=2 * one)
    assert [o for o, *_ in messages(data)] == [0, 1]
    _f, data = await fetch(c, "limits", 4, 3, partition_max_bytes=1)  # v3: the first message always goes
    assert [o for o, *_ in messages(data)] == [4]
    # v0-v2 have no KIP-74: a first message above partition_max_bytes is Kafka's overflow filler,
    # that many bytes beginning a longer message (offset -1), which old clients call too large.
    for version in (0, 1, 2):
        size = len(message_entry(0, encode_message(0 if version < 2 else 1, b"k", b"x" * 100, T0)))
        f, data = await fetch(c, "limits", 4, version, partition_max_bytes=size - 1)
        assert (f.error_code, len(data), data[:12]) == (0, size - 1, (-1).to_bytes(8, "big", signed=True)
                                                        + size.to_bytes(4, "big"))
        _f, data = await fetch(c, "limits", 4, version, partition_max_bytes=2 * size + 1)
        assert [o for o, *_ in messages(data)] == [4, 5]


async def test_zstd_batches_are_unsupported_compression_for_old_fetchers(conn):
    cluster, c = conn
    await cluster.create_topic("zstd", 1)
    await produce(c, "zstd", bytes(build_batch(MODERN[:2], compression=Compression.GZIP)), 9)
    await produce(c, "zstd", bytes(build_batch(MODERN[2:], compression=Compression.ZSTD)), 9)
    f, data = await fetch(c, "zstd", 0, 2)  # what precedes the zstd batch is answered
    assert f.error_code == 0 and [o for o, *_ in messages(data)] == [0, 1]
    f, data = await fetch(c, "zstd", 2, 2)
    assert (f.error_code, f.high_watermark, data) == (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, -1, b"")
    f, _data = await fetch(c, "zstd", 2, 4)
    assert f.error_code == 0
