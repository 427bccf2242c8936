"""``--deliveries kafka://host:port/topic``: delivery lines produced to a real refka broker and
read back with Spark's Kafka source (the connector's jars of `make spark-jars`), audited as
the same lines in files are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from lab.pipeline import audit, synth
from tests.brokers import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_a_topic_of_delivery_lines_is_audited_like_files(spark: Any, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    expected = synth.generate(synth.Plan(records=3000, violations=4, duplicates=2, bad_lines=7, partitions=3,
                                         keys=10, shuffle=True), logs)
    lines = [line for p in sorted((logs / "deliveries").iterdir()) for line in p.read_bytes().splitlines()]
    with BrokerProcess(tmp_path / "data", memory=True) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept: its futures die with it
        admin.create_topics([NewTopic("deliveries", 3, 1)])["deliveries"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        for i, line in enumerate(lines):
            producer.produce("deliveries", value=line, partition=i % 3)
            producer.poll(0)
        producer.produce("deliveries", value=None, partition=0)  # a tombstone: a bad line too
        assert producer.flush(30) == 0
        result = audit.run(spark, audit.Inputs(f"kafka://{broker.bootstrap}/deliveries"), tmp_path / "audit")
    s = result.summary
    want = {**expected["summary"], "losses": None, "bad_lines": 8}
    assert {k: v for k, v in s.items() if k != "bad_examples"} == want
    assert {e["origin"] for e in s["bad_examples"]} <= {"deliveries-0", "deliveries-1", "deliveries-2"}
    assert "no value (a null record)" in {r["problem"] for r in
                                          spark.read.parquet(str(tmp_path / "audit" / "bad_lines.parquet")).collect()}
