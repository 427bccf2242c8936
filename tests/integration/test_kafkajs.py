"""KafkaJS 2.2.4 (Node.js) against a real refka broker.

``tests/js/produce.js`` sends records (keys, a null key, binary values,
headers with a repeated name, explicit timestamps, a gzip batch, keyed records
placed by KafkaJS's Java-compatible partitioner) and prints what it sent and
the offsets it got; confluent-kafka reads them back with assign() and they
must match byte for byte. ``tests/js/admin_offsets.js`` prints the KafkaJS
admin client's fetchTopicMetadata, fetchTopicOffsets and
fetchTopicOffsetsByTimestamp, checked against what kafka-python and
confluent-kafka see. (KafkaJS's consumer needs consumer groups, so records
are read back with assign() from Python.)
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, TopicPartition
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KTopicPartition
from kafka.partitioner.default import murmur2

from tests.integration.confluent_helpers import create_topic, read_partition, unique_topic

pytestmark = pytest.mark.integration

JS_DIR = Path(__file__).resolve().parents[1] / "js"
WAIT_S = 120  # only against hangs (node start-up + npm install on a cold cache)
PARTITIONS = 3


@pytest.fixture(scope="module")
def node() -> str:
    """The node binary, with KafkaJS installed under tests/js (as `make test` does)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (Debian package nodejs)")
    if not (JS_DIR / "node_modules" / "kafkajs" / "package.json").exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed (Debian package npm) and tests/js/node_modules has no kafkajs")
        proc = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=JS_DIR,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"npm install in {JS_DIR} failed:\n{proc.stdout}\n{proc.stderr}"
    return node


def run_js(node: str, script: str, *args: str) -> dict:
    proc = subprocess.run([node, str(JS_DIR / script), *args], capture_output=True, text=True, timeout=WAIT_S)
    assert proc.returncode == 0, f"{script} exited {proc.returncode}:\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])  # the scripts print one JSON line last


def b64(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


def java_partition(key: bytes, partitions: int) -> int:
    """Kafka's DefaultPartitioner for a keyed record: murmur2, positive, modulo."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


@pytest.fixture(scope="module")
def produced(node, broker):
    """A topic KafkaJS produced to, and the JSON produce.js printed."""
    topic = unique_topic("kafkajs")
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    return topic, run_js(node, "produce.js", broker.bootstrap, topic)


def expected_by_partition(sent: dict) -> dict[int, list[tuple]]:
    """partition -> [(offset, key, value, headers, timestamp)] from produce.js's report.

    The records of one send land in order, from the base offset KafkaJS
    reported for their partition; keyed records without a partition go where
    Kafka's DefaultPartitioner puts them.
    """
    out: dict[int, list[tuple]] = {p: [] for p in range(PARTITIONS)}
    for send in sent["sends"]:
        assert all(m["error_code"] == 0 for m in send["metadata"]), send["metadata"]
        base = {m["partition"]: m["base_offset"] for m in send["metadata"]}
        placed: dict[int, int] = {}
        for r in send["records"]:
            key = b64(r["key"])
            p = r["partition"] if r["partition"] is not None else java_partition(key, PARTITIONS)
            offset = base[p] + placed.get(p, 0)
            placed[p] = placed.get(p, 0) + 1
            headers = [(name, b64(v)) for name, v in r["headers"]]
            out[p].append((offset, key, b64(r["value"]), headers, r["timestamp"]))
        assert set(base) == set(placed), "KafkaJS reported offsets for other partitions than the records went to"
    return out


def test_kafkajs_records_read_back_by_confluent_kafka(broker, produced):
    topic, sent = produced
    assert [s["name"] for s in sent["sends"]] == ["plain", "gzip", "keyed"]
    expected = expected_by_partition(sent)
    # Each partition's offsets run from 0 without gaps.
    for p, recs in expected.items():
        assert [r[0] for r in recs] == list(range(len(recs))), p
    keyed_partitions = {java_partition(b64(r["key"]), PARTITIONS) for r in sent["sends"][2]["records"]}
    assert len(keyed_partitions) > 1

    for p in range(PARTITIONS):
        got = read_partition(broker.bootstrap, topic, p)
        assert [m.timestamp()[0] for m in got] == [TIMESTAMP_CREATE_TIME] * len(got)
        assert [(m.offset(), m.key(), m.value(), m.headers() or [], m.timestamp()[1]) for m in got] == expected[p]


def test_kafkajs_records_read_back_by_kafka_python(broker, produced):
    topic, sent = produced
    expected = expected_by_partition(sent)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                             fetch_max_wait_ms=200)
    try:
        tps = [KTopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        total = sum(len(v) for v in expected.values())
        got: dict[int, list] = {p: [] for p in range(PARTITIONS)}
        for _ in range(200):  # bounded: each poll waits at most 500 ms
            if sum(len(v) for v in got.values()) >= total:
                break
            for tp, records in consumer.poll(timeout_ms=500).items():
                got[tp.partition].extend(records)
    finally:
        consumer.close()
    for p in range(PARTITIONS):
        assert [(r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in got[p]] == expected[p]


def test_kafkajs_admin_metadata_and_offsets(node, broker, produced):
    topic, sent = produced
    base_ts = sent["base_timestamp"]
    expected = expected_by_partition(sent)
    # Timestamps: partition 0 has base+0..5000 step 1000; partition 1 gzip records
    # base+100000..100004 then keyed ones (base+200000+i); keyed ones elsewhere.
    queries = [0, base_ts + 1500, base_ts + 100002, base_ts + 200003, base_ts + 10**9]
    out = run_js(node, "admin_offsets.js", broker.bootstrap, topic, *map(str, queries))

    assert topic in out["topics"]
    (md,) = out["metadata"]
    assert md["name"] == topic
    assert md["partitions"] == [
        {"partition": p, "error_code": 0, "leader": 0, "replicas": [0], "isr": [0]} for p in range(PARTITIONS)
    ]
    # The same partitions and leaders kafka-python's admin client sees.
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        (desc,) = admin.describe_topics([topic])
    finally:
        admin.close()
    assert sorted((p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"])
                  for p in desc["partitions"]) == \
        [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in md["partitions"]]

    ends = {p: len(recs) for p, recs in expected.items()}
    assert out["offsets"] == [{"partition": p, "offset": ends[p], "low": 0, "high": ends[p]}
                              for p in range(PARTITIONS)]
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "refka-kafkajs-unused"})
    try:
        for p in range(PARTITIONS):
            assert c.get_watermark_offsets(TopicPartition(topic, p), timeout=30) == (0, ends[p])
        # confluent-kafka's offsets_for_times is the reference for each query.
        for ts in queries:
            found = c.offsets_for_times([TopicPartition(topic, p, ts) for p in range(PARTITIONS)], timeout=30)
            # KafkaJS answers the high watermark where Kafka has no offset (-1).
            reference = [{"partition": tp.partition, "offset": tp.offset if tp.offset >= 0 else ends[tp.partition]}
                         for tp in found]
            assert out["by_timestamp"][str(ts)] == reference, ts
    finally:
        c.close()

    # And against the records themselves: the first offset whose timestamp is >= ts.
    for ts in queries:
        want = []
        for p in range(PARTITIONS):
            hits = [o for o, _k, _v, _h, t in expected[p] if t >= ts]
            want.append({"partition": p, "offset": min(hits) if hits else ends[p]})
        assert out["by_timestamp"][str(ts)] == want, ts
