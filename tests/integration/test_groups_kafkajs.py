"""A KafkaJS consumer group (consumer.run) against refka, reading what confluent-kafka produced.

tests/js/groups_consume.js runs two KafkaJS consumers in one group; they
split the topic's partitions, read every record exactly as confluent-kafka
produced it (keys, values, headers), and commit. confluent-kafka then sees
the group's committed offsets at the end of every partition.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.brokers import BrokerProcess
from tests.integration.confluent_helpers import create_topic, producer
from tests.integration.group_helpers import TIMEOUT

JS_DIR = Path(__file__).resolve().parent.parent / "js"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
    pytest.mark.skipif(not (JS_DIR / "node_modules" / "kafkajs").is_dir(),
                       reason="kafkajs is not installed (cd tests/js && npm install)"),
]

PARTITIONS = 4


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("refka-kjs-groups") / "data", memory=True,
                      overrides={"group.initial.rebalance.delay.ms": "0"}).start()
    yield b
    b.stop()


def b64(v: bytes | None) -> str | None:
    return None if v is None else base64.b64encode(v).decode()


def test_kafkajs_group_reads_what_confluent_produced_and_commits(group_broker):
    bootstrap = group_broker.bootstrap
    topic = f"kjs-grp-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    create_topic(bootstrap, topic, PARTITIONS)
    sent = []
    p = producer(bootstrap, acks="all")
    for i in range(48):
        key = f"key-{i}".encode() if i % 5 else None
        value = bytes([i, 0, 255]) + f"value-{i}".encode()
        headers = [("n", str(i).encode()), ("bin", b"\x00\xff")]
        p.produce(topic, key=key, value=value, headers=headers, partition=i % PARTITIONS)
        sent.append((i % PARTITIONS, b64(key), b64(value), [[k, b64(v)] for k, v in headers]))
    assert p.flush(TIMEOUT) == 0

    proc = subprocess.run(["node", "groups_consume.js", bootstrap, topic, group, str(len(sent)), "2"],
                          cwd=JS_DIR, capture_output=True, text=True, timeout=2 * TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    members = result["members"]
    assignments = [set(m["assignment"]) for m in members]
    assert all(assignments) and not assignments[0] & assignments[1]
    assert assignments[0] | assignments[1] == set(range(PARTITIONS))

    got = [(r["partition"], r["key"], r["value"], r["headers"]) for m in members for r in m["records"]]
    # Every record once, and each partition in offset order from 0.
    assert sorted(got, key=repr) == sorted(sent, key=repr)
    for m in members:
        for part in {r["partition"] for r in m["records"]}:
            offsets = [r["offset"] for r in m["records"] if r["partition"] == part]
            assert offsets == list(range(len(offsets)))

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = c.committed([TopicPartition(topic, i) for i in range(PARTITIONS)], timeout=TIMEOUT)
    finally:
        c.close()
    assert [tp.offset for tp in committed] == [len(sent) // PARTITIONS] * PARTITIONS
