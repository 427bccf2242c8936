"""Clients speaking Kafka 0.8-0.10's versions against a real refka broker: Produce v0-v2 with
legacy message sets (magic 0 and 1) and Fetch v0-v3 answered with down-converted ones.

- kafka-python with ``api_version=(0, 9)`` (Produce v1, Fetch v1, magic 0), ``(0, 10)``
  (Produce v2, Fetch v2, magic 1) and ``(0, 10, 1)`` (Fetch v3, KIP-74's max_bytes), each
  codec it has there (lz4 at 0.9 needs the xxhash package for KAFKA-3160's broken
  checksum, which is not installed here);
- confluent-kafka with ``api.version.request=false`` and ``broker.version.fallback`` 0.8.2
  (Produce v0, Fetch v0) and 0.9.0 (Produce v1, Fetch v1), every codec librdkafka has for
  magic 0, lz4 with the broken header checksum included; with 0.10.0 librdkafka asks
  ApiVersions anyway (its documented rule for fallbacks >= 0.10) and uses today's versions;
- what a modern client produced (RecordBatch v2 with headers) read by the old clients
  (down-converted, headers dropped), and what the old clients produced read by modern ones
  (up-converted: magic 0 without timestamps, -1; magic 1 with theirs).

The versions each client used are read back from the broker's request recordings (the
admin API), so a client silently negotiating a newer version fails the test.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.consumer.fetcher import RecordTooLargeError

from refka.protocol.records import Compression
from tests.brokers import BrokerProcess, with_admin_api
from tests.integration.confluent_helpers import Rec as CRec
from tests.integration.confluent_helpers import (
    consume_until_eof,
    consumer,
    create_topic,
    produce,
    producer,
    served_batches,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

T0 = 1_700_000_000_000
WAIT_S = 30.0  # only against hangs
CODECS = {None: Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY, "lz4": Compression.LZ4}
LIBRDKAFKA_CODECS = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
                     "lz4": Compression.LZ4}
# Which Produce and Fetch versions each old configuration sends, and the magic it reads.
KAFKA_PYTHON = {(0, 9): (1, 1, 0), (0, 10): (2, 2, 1), (0, 10, 1): (2, 3, 1)}
LIBRDKAFKA = {"0.8.2": (0, 0, 0), "0.9.0": (1, 1, 0)}


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[BrokerProcess, str]]:
    with with_admin_api(tmp_path_factory.mktemp("legacy") / "data",
                        overrides={"refka.recording.closed.connections": "10000"}) as served:
        yield served


def topic_name(prefix: str) -> str:
    # Long enough: librdkafka 2.x sizes its Metadata v0 parse buffer from the answer's
    # length, and a one-letter topic's answer is too short for it ("tmpabuf memory shortage").
    return f"legacy-{prefix}-{uuid.uuid4().hex[:12]}"


def versions_used(url: str, client_id: str) -> set[tuple[str, int]]:
    """(API, version) of the Produce and Fetch requests ``client_id`` sent."""
    with urllib.request.urlopen(f"{url}/api/recordings?client_id={client_id}", timeout=30) as r:
        rows = [json.loads(line) for line in r.read().decode().splitlines()]
    return {(row["api"], row["api_version"]) for row in rows if row["api"] in ("Produce", "Fetch", "ApiVersions")}


def sample(tag: str, n: int = 12) -> list[tuple[bytes | None, bytes | None, int]]:
    """(key, value, timestamp): null key and null value, empty ones, a compressible large value."""
    out = [(None, b"no key " + tag.encode(), T0), (b"tombstone", None, T0 + 1), (b"", b"", T0 + 2),
           (b"big", tag.encode() * 2000, T0 + 3)]
    return out + [(b"k%d" % i, b"%s value %d" % (tag.encode(), i), T0 + 10 + i) for i in range(n - len(out))]


# -- kafka-python -----------------------------------------------------------------------


def kp_produce(bootstrap: str, topic: str, records, api: tuple[int, int] | None, codec: str | None,
               client_id: str) -> list[int]:
    kwargs = {"api_version": api} if api else {"enable_idempotence": False}
    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5, client_id=client_id,
                      **kwargs)
    try:
        futures = [p.send(topic, key=k, value=v, timestamp_ms=ts, partition=0) for k, v, ts in records]
        p.flush(WAIT_S)
        return [f.get(WAIT_S).offset for f in futures]
    finally:
        p.close(WAIT_S)


def kp_consume(bootstrap: str, topic: str, count: int, api: tuple[int, int] | None, client_id: str) -> list:
    kwargs = {"api_version": api} if api else {}
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, fetch_max_wait_ms=100,
                      client_id=client_id, **kwargs)
    try:
        tp = KTopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        got: list = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < count and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200).values():
                got.extend(records)
        for records in c.poll(timeout_ms=200).values():  # nothing beyond what was produced
            got.extend(records)
        return got
    finally:
        c.close()


@pytest.mark.parametrize("codec", list(CODECS), ids=[str(c) for c in CODECS])
@pytest.mark.parametrize("api", list(KAFKA_PYTHON), ids=["0.9", "0.10", "0.10.1"])
def test_kafka_python_with_old_api_versions_produces_and_consumes(served, api, codec):
    if api == (0, 9) and codec == "lz4":
        pytest.skip("kafka-python writes magic 0 lz4 only with the xxhash package")
    broker, url = served
    produce_v, fetch_v, magic = KAFKA_PYTHON[api]
    topic = topic_name(f"kp{magic}-{codec}")
    create_topic(broker.bootstrap, topic)
    sent = sample(f"{api}/{codec}")
    pid, cid = f"kp-p-{topic}", f"kp-c-{topic}"
    assert kp_produce(broker.bootstrap, topic, sent, api, codec, pid) == list(range(len(sent)))
    got = kp_consume(broker.bootstrap, topic, len(sent), api, cid)
    assert [(r.offset, r.key, r.value) for r in got] == [(i, k, v) for i, (k, v, _ts) in enumerate(sent)]
    if magic == 1:
        assert [r.timestamp for r in got] == [ts for _k, _v, ts in sent]
    assert {("Produce", produce_v)} == {u for u in versions_used(url, pid) if u[0] == "Produce"}
    assert {("Fetch", fetch_v)} == {u for u in versions_used(url, cid) if u[0] == "Fetch"}
    # Stored as RecordBatch v2 in the producer's codec.
    batches = served_batches(broker.bootstrap, topic)
    assert {b.compression for b in batches} == {CODECS[codec]}
    assert sum(b.records_count for b in batches) == len(sent)


# -- confluent-kafka (librdkafka) -------------------------------------------------------


def old_librdkafka(fallback: str, client_id: str) -> dict[str, object]:
    return {"api.version.request": False, "broker.version.fallback": fallback, "client.id": client_id}


@pytest.mark.parametrize("codec", list(LIBRDKAFKA_CODECS))
@pytest.mark.parametrize("fallback", list(LIBRDKAFKA))
def test_confluent_kafka_with_a_fallback_below_0_10_produces_and_consumes(served, fallback, codec):
    broker, url = served
    produce_v, fetch_v, _magic = LIBRDKAFKA[fallback]
    topic = topic_name(f"ck-{fallback}-{codec}")
    create_topic(broker.bootstrap, topic)
    sent = [CRec(k, v, [], ts) for k, v, ts in sample(f"{fallback}/{codec}")]
    pid, cid = f"ck-p-{topic}", f"ck-c-{topic}"
    p = producer(broker.bootstrap, **{"compression.codec": codec, **old_librdkafka(fallback, pid)})
    reports = produce(p, topic, sent)
    assert [(r.error, r.offset) for r in reports] == [(None, i) for i in range(len(sent))]
    c = consumer(broker.bootstrap, **old_librdkafka(fallback, cid))
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got = consume_until_eof(c, {0})
    finally:
        c.close()
    assert [(m.offset(), m.key(), m.value()) for m in got] == [(i, r.key, r.value) for i, r in enumerate(sent)]
    assert {m.timestamp()[1] for m in got} == {0}  # magic 0: no timestamp (TIMESTAMP_NOT_AVAILABLE, 0)
    assert {u for u in versions_used(url, pid) if u[0] == "Produce"} == {("Produce", produce_v)}
    assert {u for u in versions_used(url, cid) if u[0] == "Fetch"} == {("Fetch", fetch_v)}
    assert not {u for u in versions_used(url, pid) | versions_used(url, cid) if u[0] == "ApiVersions"}
    # Stored in librdkafka's codec: lz4 came in with KAFKA-3160's checksum and was read.
    batches = served_batches(broker.bootstrap, topic)
    assert {b.compression for b in batches} == {LIBRDKAFKA_CODECS[codec]}


def test_confluent_kafka_with_fallback_0_10_asks_api_versions_and_uses_todays_versions(served):
    broker, url = served
    topic = topic_name("ck-0.10.0")
    create_topic(broker.bootstrap, topic)
    pid = f"ck-p-{topic}"
    p = producer(broker.bootstrap, **old_librdkafka("0.10.0", pid))
    produce(p, topic, [CRec(b"k", b"v", [], T0)])
    used = versions_used(url, pid)
    assert any(api == "ApiVersions" for api, _v in used)
    assert all(v >= 3 for api, v in used if api == "Produce")


# -- across formats ---------------------------------------------------------------------

MODERN = [CRec(b"k%d" % i, b"modern value %d " % i * 30, [("trace", b"t%d" % i), ("n", None)], T0 + i)
          for i in range(10)]


@pytest.mark.parametrize("codec", list(LIBRDKAFKA_CODECS))
def test_records_a_modern_client_produced_read_by_old_clients_down_converted(served, codec):
    broker, url = served
    topic = topic_name(f"modern-{codec}")
    create_topic(broker.bootstrap, topic)
    reports = produce(producer(broker.bootstrap, **{"compression.codec": codec}), topic, MODERN)
    assert [r.offset for r in reports] == list(range(len(MODERN)))
    expected = [(i, r.key, r.value) for i, r in enumerate(MODERN)]
    for api in KAFKA_PYTHON:
        if api == (0, 9) and codec == "lz4":
            continue  # kafka-python reads magic 0 lz4 only with the xxhash package; librdkafka does below
        cid = f"kp-c-{'.'.join(map(str, api))}-{topic}"
        got = kp_consume(broker.bootstrap, topic, len(MODERN), api, cid)
        assert [(r.offset, r.key, r.value) for r in got] == expected
        assert all(not r.headers for r in got)  # magic 0 and 1 have none
        if api >= (0, 10):
            assert [r.timestamp for r in got] == [r.timestamp for r in MODERN]
        assert {u for u in versions_used(url, cid) if u[0] == "Fetch"} == {("Fetch", KAFKA_PYTHON[api][1])}
    cid = f"ck-c-{topic}"
    c = consumer(broker.bootstrap, **old_librdkafka("0.9.0", cid))
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got_ck = consume_until_eof(c, {0})
    finally:
        c.close()
    assert [(m.offset(), m.key(), m.value()) for m in got_ck] == expected
    assert all(m.headers() is None for m in got_ck)
    assert {u for u in versions_used(url, cid) if u[0] == "Fetch"} == {("Fetch", 1)}


def test_records_old_clients_produced_read_by_modern_clients_up_converted(served):
    broker, _url = served
    topic = topic_name("old-to-new")
    create_topic(broker.bootstrap, topic)
    v0 = sample("magic0", 6)
    v1 = sample("magic1", 6)
    ck = [CRec(k, v, [], ts) for k, v, ts in sample("librdkafka", 6)]
    kp_produce(broker.bootstrap, topic, v0, (0, 9), "gzip", f"kp-p0-{topic}")
    kp_produce(broker.bootstrap, topic, v1, (0, 10), "snappy", f"kp-p1-{topic}")
    produce(producer(broker.bootstrap, **{"compression.codec": "lz4", **old_librdkafka("0.9.0", f"ck-p-{topic}")}),
            topic, ck)
    # What a modern reader sees: magic 0's records without a timestamp (-1), magic 1's with theirs.
    expected = ([(k, v, -1) for k, v, _ts in v0] + [(k, v, ts) for k, v, ts in v1]
                + [(r.key, r.value, -1) for r in ck])
    got = kp_consume(broker.bootstrap, topic, len(expected), None, f"kp-c-{topic}")
    assert [(r.offset, r.key, r.value, r.timestamp, list(r.headers)) for r in got] == [
        (i, k, v, ts, []) for i, (k, v, ts) in enumerate(expected)]
    c = consumer(broker.bootstrap)
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got_ck = consume_until_eof(c, {0})
    finally:
        c.close()
    assert [(m.offset(), m.key(), m.value(), m.timestamp()) for m in got_ck] == [
        (i, k, v, (TIMESTAMP_CREATE_TIME, ts)) for i, (k, v, ts) in enumerate(expected)]
    assert {b.compression for b in served_batches(broker.bootstrap, topic)} == {
        Compression.GZIP, Compression.SNAPPY, Compression.LZ4}


def test_a_message_above_an_old_fetchers_partition_max_bytes_is_too_large_as_from_kafka(served):
    """Fetch v0-v2 predate KIP-74: the broker answers the first message only if it fits, else a
    partial one (Kafka's overflow batch). kafka-python raises RecordTooLargeError on it, as
    against Kafka; librdkafka grows its fetch size and reads the message."""
    broker, _url = served
    topic = topic_name("too-large")
    create_topic(broker.bootstrap, topic)
    produce(producer(broker.bootstrap), topic, [CRec(b"big", b"x" * 5000, [], T0), CRec(b"small", b"y", [], T0)])
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=(0, 9), group_id=None,
                      max_partition_fetch_bytes=1000, fetch_max_wait_ms=100, client_id=f"kp-c-{topic}")
    try:
        tp = KTopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        with pytest.raises(RecordTooLargeError, match="larger than the fetch size"):
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                c.poll(timeout_ms=200)
    finally:
        c.close()
    ck = consumer(broker.bootstrap, **{"fetch.message.max.bytes": 1000, **old_librdkafka("0.9.0", f"ck-c-{topic}")})
    try:
        ck.assign([TopicPartition(topic, 0, 0)])
        got = consume_until_eof(ck, {0})
    finally:
        ck.close()
    assert [(m.offset(), m.key(), len(m.value())) for m in got] == [(0, b"big", 5000), (1, b"small", 1)]
