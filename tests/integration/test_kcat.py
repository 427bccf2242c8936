"""kcat (librdkafka's command-line client) against a real refka broker.

``-L`` (text and ``-J``) lists brokers, topics, partitions, leaders, replicas
and ISRs; ``-P`` (keys with ``-K``, headers with ``-H``, every ``-z`` codec,
whole files as binary messages) and ``-C -e`` round-trip records exactly;
``-o -N`` reads the tail; ``-Q`` finds offsets by timestamp. One test runs
against a three-broker cluster so leaders differ per partition.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokers import BrokerProcess

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (Debian package kcat)"),
]

KCAT = shutil.which("kcat") or "kcat"
WAIT_S = 60  # only against hangs
BASE_TS = 1_720_000_000_000


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def kcat(bootstrap: str, *args: str, stdin: bytes | None = None) -> bytes:
    """Runs kcat, fails the test with its stderr on a non-zero exit, returns stdout."""
    proc = subprocess.run([KCAT, "-b", bootstrap, *args], input=stdin, capture_output=True, timeout=WAIT_S)
    assert proc.returncode == 0, f"kcat {' '.join(args)} exited {proc.returncode}:\n{proc.stderr.decode()}"
    return proc.stdout


def kcat_json_lines(bootstrap: str, *args: str) -> list[dict]:
    return [json.loads(line) for line in kcat(bootstrap, *args).decode().splitlines() if line.strip()]


def create_topics(bootstrap: str, *topics: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name, fut in admin.create_topics(list(topics), operation_timeout=30).items():
        assert fut.result(WAIT_S) is None, name


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three brokers in one refka process (memory storage), for leader placement."""
    b = BrokerProcess(tmp_path_factory.mktemp("refka-kcat3") / "data", brokers=3, memory=True).start()
    yield b
    # SIGTERM must end in a clean exit, also with partitions replicated over
    # the brokers that stop first (the controller used to hang retrying them).
    assert b.stop() == 0, b.log_tail()


def test_list_text_shows_broker_topic_partitions_and_leaders(broker):
    topic = _topic("kcat-list")
    create_topics(broker.bootstrap, NewTopic(topic, num_partitions=3, replication_factor=1))
    out = kcat(broker.bootstrap, "-L").decode()
    assert re.search(r"^ 1 brokers:$", out, re.M), out
    assert re.search(rf"^  broker 0 at 127\.0\.0\.1:{broker.port} \(controller\)$", out, re.M), out
    block = out[out.index(f'  topic "{topic}" with 3 partitions:'):].splitlines()[1:4]
    assert [line.strip() for line in block] == [
        f"partition {p}, leader 0, replicas: 0, isrs: 0" for p in range(3)
    ]


def test_list_json(broker):
    topic = _topic("kcat-json")
    create_topics(broker.bootstrap, NewTopic(topic, num_partitions=2, replication_factor=1))
    md = json.loads(kcat(broker.bootstrap, "-L", "-J"))
    assert md["controllerid"] == 0
    assert md["brokers"] == [{"id": 0, "name": f"127.0.0.1:{broker.port}"}]
    topics = {t["topic"]: t for t in md["topics"]}
    assert "error" not in topics[topic]
    assert sorted(topics[topic]["partitions"], key=lambda p: p["partition"]) == [
        {"partition": p, "leader": 0, "replicas": [{"id": 0}], "isrs": [{"id": 0}]} for p in range(2)
    ]

    # One topic only (a subset Metadata request).
    one = json.loads(kcat(broker.bootstrap, "-L", "-J", "-t", topic))
    assert [t["topic"] for t in one["topics"]] == [topic]
    assert one["topics"][0]["partitions"] == topics[topic]["partitions"]


def test_list_json_on_three_brokers_and_produce_to_each_leader(cluster):
    spread, replicated = _topic("kcat-spread"), _topic("kcat-rf3")
    create_topics(cluster.bootstrap, NewTopic(spread, num_partitions=6, replication_factor=1),
                  NewTopic(replicated, num_partitions=3, replication_factor=3))
    md = json.loads(kcat(cluster.bootstrap, "-L", "-J"))
    assert sorted((b["id"], b["name"]) for b in md["brokers"]) == [
        (i, f"127.0.0.1:{cluster.port + i}") for i in range(3)
    ]
    assert md["controllerid"] in (0, 1, 2)
    topics = {t["topic"]: t for t in md["topics"]}

    leaders = {}
    for p in topics[spread]["partitions"]:
        replicas = [r["id"] for r in p["replicas"]]
        assert len(replicas) == 1 and [r["id"] for r in p["isrs"]] == replicas and p["leader"] == replicas[0]
        leaders[p["partition"]] = p["leader"]
    assert sorted(leaders) == list(range(6))
    assert set(leaders.values()) == {0, 1, 2}  # the controller spreads leaders over the brokers

    for p in topics[replicated]["partitions"]:
        replicas = [r["id"] for r in p["replicas"]]
        assert sorted(replicas) == [0, 1, 2]
        assert p["leader"] == replicas[0]  # the preferred replica leads
        assert sorted(r["id"] for r in p["isrs"]) == [0, 1, 2]
    assert len({p["leader"] for p in topics[replicated]["partitions"]}) == 3

    # librdkafka sends each partition's records to its leader; every one lands.
    for p in range(6):
        kcat(cluster.bootstrap, "-P", "-t", spread, "-p", str(p), "-K:", "-X", "acks=1",
             stdin=f"k{p}:on-{leaders[p]}\n".encode())
    for p in range(6):
        got = kcat_json_lines(cluster.bootstrap, "-C", "-J", "-t", spread, "-p", str(p), "-o", "beginning", "-e")
        assert [(m["partition"], m["offset"], m["key"], m["payload"], m["broker"]) for m in got] == [
            (p, 0, f"k{p}", f"on-{leaders[p]}", leaders[p])
        ]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_keys_headers_then_consume_exactly(broker, codec):
    topic = _topic(f"kcat-{codec}")
    create_topics(broker.bootstrap, NewTopic(topic, num_partitions=2, replication_factor=1))
    lines = ["k1:v1", "k2:hello world", ":empty key", "no delimiter so a null key", "k3:", "k4:a:b:c",
             "ключ:значение \u4e2d\U0001f600"] + [f"key-{i}:value-{i}" for i in range(50)]
    kcat(broker.bootstrap, "-P", "-t", topic, "-p", "1", "-K", ":", "-z", codec,
         "-H", "a=1", "-H", "b=two words", "-H", "a=again",
         stdin=("\n".join(lines) + "\n").encode())

    expected = []
    for i, line in enumerate(lines):
        key, sep, value = line.partition(":")
        if not sep:  # no ':' in the line: the whole line is the value, the key is null
            key, value = None, line
        expected.append((1, i, key, value))

    got = kcat_json_lines(broker.bootstrap, "-C", "-J", "-t", topic, "-p", "1", "-o", "beginning", "-e")
    assert [(m["partition"], m["offset"], m["key"], m["payload"]) for m in got] == expected
    assert all(m["headers"] == ["a", "1", "b", "two words", "a", "again"] for m in got)
    assert all(m["tstype"] == "create" for m in got)

    fmt = kcat(broker.bootstrap, "-C", "-t", topic, "-p", "1", "-o", "beginning", "-e",
               "-f", "%p|%o|%k|%s|%h\n").decode()
    assert fmt.splitlines() == [f"{p}|{o}|{k or ''}|{v}|a=1,b=two words,a=again" for p, o, k, v in expected]

    # Partition 0 got nothing; the tail of partition 1 by a relative offset.
    assert kcat_json_lines(broker.bootstrap, "-C", "-J", "-t", topic, "-p", "0", "-o", "beginning", "-e") == []
    tail = kcat_json_lines(broker.bootstrap, "-C", "-J", "-t", topic, "-p", "1", "-o", "-3", "-e")
    assert [(m["offset"], m["key"], m["payload"]) for m in tail] == [(o, k, v) for _p, o, k, v in expected[-3:]]


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_binary_files_round_trip_byte_for_byte(broker, tmp_path, codec):
    topic = _topic(f"kcat-bin-{codec}")
    create_topics(broker.bootstrap, NewTopic(topic, num_partitions=1, replication_factor=1))
    payloads = [
        bytes(range(256)) * 4,
        b"\n\n\x00line\r\nbreaks\x00\n",
        os.urandom(200 * 1024),
        b"x",
        b"compressible " * 20000,
    ]
    files = []
    for i, data in enumerate(payloads):
        f = tmp_path / f"m{i}.bin"
        f.write_bytes(data)
        files.append(str(f))
    # Each file given to -P is sent as one message.
    kcat(broker.bootstrap, "-P", "-t", topic, "-p", "0", "-z", codec, "-X", "message.max.bytes=2000000", *files)

    raw = kcat(broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e",
               "-f", "%o %K %S\n%k%s")
    got = []
    pos = 0
    while pos < len(raw):
        nl = raw.index(b"\n", pos)
        offset, klen, vlen = (int(x) for x in raw[pos:nl].split())
        pos = nl + 1
        assert klen == -1  # no key: NULL
        got.append((offset, raw[pos:pos + vlen]))
        pos += vlen
    assert got == list(enumerate(payloads))


def test_query_offsets_by_timestamp(broker):
    topic = _topic("kcat-query")
    create_topics(broker.bootstrap, NewTopic(topic, num_partitions=2, replication_factor=1))
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(5):
        producer.produce(topic, value=b"v%d" % i, partition=0, timestamp=BASE_TS + 1000 * i)
    assert producer.flush(WAIT_S) == 0

    def query(*specs: str) -> dict:
        out = json.loads(kcat(broker.bootstrap, "-Q", "-J", *(a for s in specs for a in ("-t", s))))
        return {int(k): v["offset"] for k, v in out[topic].items() if k != "topic"}

    assert query(f"{topic}:0:{BASE_TS + 2000}") == {0: 2}  # an exact timestamp
    assert query(f"{topic}:0:{BASE_TS + 2001}") == {0: 3}  # the first record at or after it
    assert query(f"{topic}:0:0") == {0: 0}
    assert query(f"{topic}:0:-1", f"{topic}:1:-1") == {0: 5, 1: 0}  # latest: the high watermark
    assert query(f"{topic}:0:-2") == {0: 0}  # earliest

    # A timestamp past the last record has no offset: kcat reports end of partition.
    proc = subprocess.run([KCAT, "-b", broker.bootstrap, "-Q", "-t", f"{topic}:0:{BASE_TS + 10_000}"],
                          capture_output=True, timeout=WAIT_S)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().strip() == f"{topic} [0] offset -1"


def test_produce_to_a_new_topic_creates_it(memory_broker):
    """auto.create.topics.enable (default true): -P to an unknown topic works."""
    topic = _topic("kcat-auto")
    kcat(memory_broker.bootstrap, "-P", "-t", topic, "-K:", stdin=b"a:1\nb:2\n")
    md = json.loads(kcat(memory_broker.bootstrap, "-L", "-J", "-t", topic))
    assert [(t["topic"], len(t["partitions"]), t.get("error")) for t in md["topics"]] == [(topic, 1, None)]
    got = kcat_json_lines(memory_broker.bootstrap, "-C", "-J", "-t", topic, "-o", "beginning", "-e")
    assert [(m["partition"], m["offset"], m["key"], m["payload"]) for m in got] == [(0, 0, "a", "1"), (0, 1, "b", "2")]
