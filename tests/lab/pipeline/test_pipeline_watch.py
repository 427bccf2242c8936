"""``python -m lab.pipeline watch`` (lab/pipeline/watch.py): per-minute counts of delivery lines,
streaming, checked on lines with planted duplicates, violations and bad lines: first the
per-window arithmetic on a batch DataFrame, then the query itself over a refka topic, run
twice from one checkpoint (--once: Trigger.AvailableNow), writing JSON to an output topic."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.pipeline import watch
from tests.brokers import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

BASE = 1_700_000_040_000  # a minute boundary (in the past: a broker may refuse future timestamps)
MINUTE = 60_000


def delivery(producer: str, key: str, seq: int, delivered: int, latency: int = 10) -> dict[str, Any]:
    return {"consumer": "c0", "topic": "t", "partition": 0, "offset": seq, "key": key, "producer": producer,
            "seq": seq, "sent_ms": BASE + delivered - latency, "delivered_ms": BASE + delivered}


def planted() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(first part, second part) of the deliveries; window A is [BASE, BASE + 1 min)."""
    first = [delivery("p0", "k0", s, 1000 * s, latency=10 + s) for s in (0, 1, 2, 3, 4, 5, 6, 8, 9)]
    first += [delivery("p0", "k0", 11, 59_000)]  # ahead of seq 10, delivered in the next minute: not seen
    # p0/k1: seq 2 overtakes seq 1 (500 < 1000): a violation.
    first += [delivery("p0", "k1", 0, 0, 100), delivery("p0", "k1", 1, 1000, 100), delivery("p0", "k1", 2, 500, 100),
              delivery("p0", "k1", 3, 3000, 100), delivery("p0", "k1", 4, 4000, 100)]
    # Window B: p1/k0 in order, seq 5 three times (two duplicates); p0/k0's seq 10.
    first += [delivery("p1", "k0", s, MINUTE + 100 * s, 20) for s in range(6)]
    first += [delivery("p1", "k0", 5, MINUTE + 900, 20), delivery("p1", "k0", 5, MINUTE + 950, 20),
              delivery("p0", "k0", 10, MINUTE + 100)]
    # In a later micro-batch: seq 7 of p0/k0 overtakes seq 6 (5500 < 6000), seq 3 again (a duplicate).
    second = [delivery("p0", "k0", 7, 5500, 17), delivery("p0", "k0", 3, 3500, 50)]
    return first, second


# Bad lines carry the record's timestamp: two in window A, a tombstone in window B.
BAD = [(b"not json", BASE + 30_000), (b'{"consumer": "c0", "producer": "p0"}', BASE + 31_000), (None, BASE + MINUTE + 5)]

WANT = {
    BASE: {"window_end_ms": BASE + MINUTE, "records": 17, "bad_lines": 2, "first_deliveries": 16, "duplicates": 1,
           "violations": 2,
           # latencies of the 16 first deliveries: k0 seqs 0..9 -> 10+seq, seq 11 -> 10, k1 -> 100 x 5
           "latency_p50_ms": 17, "latency_p99_ms": 100, "latency_max_ms": 100},
    BASE + MINUTE: {"window_end_ms": BASE + 2 * MINUTE, "records": 9, "bad_lines": 1, "first_deliveries": 7,
                    "duplicates": 2, "violations": 0, "latency_p50_ms": 20, "latency_p99_ms": 20,
                    "latency_max_ms": 20},
}


def by_window(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {r["window_start_ms"]: {k: v for k, v in r.items() if k != "window_start_ms"} for r in rows}


def test_the_windows_counts_duplicates_violations_and_latency_as_planted(spark: Any) -> None:
    from pyspark.sql import functions as F

    first, second = planted()
    rows = [(json.dumps(d), d["delivered_ms"]) for d in first + second] + [
        (None if v is None else v.decode(), ts) for v, ts in BAD]
    lines = (spark.createDataFrame(rows, "value string, ts long")
             .select("value", F.timestamp_millis("ts").alias("timestamp")))
    got = by_window([r.asDict() for r in watch.windows(lines).collect()])
    assert got == WANT


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    # No auto-creation: the output topic is the watch's to create (watch.ensure_topic).
    with BrokerProcess(tmp_path_factory.mktemp("watch") / "data", memory=True,
                       overrides={"auto.create.topics.enable": "false"}) as b:
        yield b


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, int]]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, (value, ts) in enumerate(records):
        p.produce(topic, value=value, partition=i % 2, timestamp=ts)
        p.poll(0)
    assert p.flush(30) == 0


def test_the_query_over_a_topic_keeps_counts_across_micro_batches(spark: Any, broker: BrokerProcess,
                                                                  tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("deliveries", 2, 1)]).values():
        f.result(30)  # "watch-out" is not there: the query creates it
    first, second = planted()
    produce(broker.bootstrap, "deliveries", [(json.dumps(d).encode(), d["delivered_ms"]) for d in first] + BAD)
    o = watch.Options(broker.bootstrap, "deliveries", output_topic="watch-out", checkpoint=str(tmp_path / "ckpt"),
                      once=True)
    watch.run(spark, o)
    after_first = by_window(read_json(spark, broker.bootstrap, "watch-out"))
    assert after_first[BASE]["records"] == 15 and after_first[BASE]["violations"] == 1
    assert after_first[BASE + MINUTE] == WANT[BASE + MINUTE]
    # The same checkpoint: only the new lines are read; the window's state has the earlier ones.
    produce(broker.bootstrap, "deliveries", [(json.dumps(d).encode(), d["delivered_ms"]) for d in second])
    watch.run(spark, o)
    assert by_window(read_json(spark, broker.bootstrap, "watch-out")) == WANT


def read_json(spark: Any, bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """The output topic's objects, the last one of each window winning (one partition: offset order)."""
    from lab.pipeline.sources import kafka_records

    rows = kafka_records(spark, bootstrap, topic).orderBy("offset").select("value").collect()
    last: dict[int, dict[str, Any]] = {}
    for r in rows:
        obj = json.loads(bytes(r["value"]))
        last[obj["window_start_ms"]] = obj
    return list(last.values())


def test_the_command_prints_the_windows_once(spark: Any, broker: BrokerProcess) -> None:
    """`python -m lab.pipeline watch --once` in its own process: the console sink's table."""
    import subprocess
    import sys

    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept: its futures die with it
    admin.create_topics([NewTopic("cli", 2, 1)])["cli"].result(30)
    first, second = planted()
    produce(broker.bootstrap, "cli", [(json.dumps(d).encode(), d["delivered_ms"]) for d in first + second] + BAD)
    r = subprocess.run([sys.executable, "-m", "lab.pipeline", "watch", "--bootstrap", broker.bootstrap,
                        "--topic", "cli", "--once"], cwd=Path(__file__).resolve().parents[3],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {int(cells[0]): [int(c) for c in cells[1:9]] for cells in
            ([c.strip() for c in line.strip("|").split("|")] for line in r.stdout.splitlines()
             if line.startswith(f"|{BASE}") or line.startswith(f"|{BASE + MINUTE}"))}
    want = {start: [w[k] for k in watch.OUTPUT_COLUMNS[1:9]] for start, w in WANT.items()}
    assert rows == want, r.stdout
