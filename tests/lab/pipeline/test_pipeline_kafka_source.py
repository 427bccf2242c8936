"""Spark's Kafka source and sink against a 3-broker refka cluster (issue 14): batch reads
between offsets given per partition and by timestamp (ListOffsets by timestamp), a
DataFrame written back with ``df.write.format("kafka")``, and a Structured Streaming query
that keeps running through a leader move and a broker's stop and start, its output every
produced record exactly once.

The cluster keeps its logs on disk (not --memory): a broker started again comes back with
the records it had, as a restarted Kafka broker does."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokers import BrokerProcess, admin_call, free_port_block

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

T0 = 1_700_000_000_000  # the timestamped topic's first record time (in the past)
PER_PARTITION = 20


def wait_until(cond: Callable[[], bool], timeout: float = 60.0, message: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    # (spark: only so that the module skips where pyspark or the connector's jars are missing.)
    admin_port = free_port_block()
    b = BrokerProcess(tmp_path_factory.mktemp("kafka-source") / "data", brokers=3,
                      extra_args=["--admin-port", str(admin_port)]).start(90)
    try:
        yield b, f"http://127.0.0.1:{admin_port}"
    finally:
        b.stop()


def create(bootstrap: str, *topics: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, partitions, 3) for t in topics]).values():
        f.result(30)


@pytest.fixture(scope="module")
def timestamped(cluster: tuple[BrokerProcess, str]) -> str:
    """A topic of 3 partitions x PER_PARTITION records; partition p's record i has value and key
    "p-i" and timestamp T0 + 1000 * i + p."""
    b, _ = cluster
    create(b.bootstrap, "timestamped")
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for part in range(3):
        for i in range(PER_PARTITION):
            p.produce("timestamped", key=f"{part}-{i}", value=f"{part}-{i}", partition=part,
                      timestamp=T0 + 1000 * i + part)
    assert p.flush(30) == 0
    return "timestamped"


def read(spark: Any, bootstrap: str, topic: str, **options: str) -> list[tuple[int, int, str]]:
    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .options(**options).load())
    return sorted((r["partition"], r["offset"], bytes(r["value"]).decode()) for r in df.collect())


def expected(ranges: dict[int, range]) -> list[tuple[int, int, str]]:
    return sorted((p, i, f"{p}-{i}") for p, r in ranges.items() for i in r)


def test_a_batch_read_between_offsets_given_per_partition(spark: Any, cluster: tuple[BrokerProcess, str],
                                                          timestamped: str) -> None:
    b, _ = cluster
    got = read(spark, b.bootstrap, timestamped,
               startingOffsets=json.dumps({timestamped: {"0": 5, "1": -2, "2": 10}}),  # -2: earliest
               endingOffsets=json.dumps({timestamped: {"0": 15, "1": 3, "2": -1}}))  # -1: latest
    assert got == expected({0: range(5, 15), 1: range(0, 3), 2: range(10, PER_PARTITION)})


def test_a_batch_read_between_timestamps(spark: Any, cluster: tuple[BrokerProcess, str], timestamped: str) -> None:
    """Each bound is the first offset whose timestamp is at or after the one given (ListOffsets by
    timestamp); an ending timestamp after every record's is the latest offset (Spark's rule)."""
    b, _ = cluster
    got = read(spark, b.bootstrap, timestamped,
               startingOffsetsByTimestamp=json.dumps({timestamped: {"0": T0 + 4500, "1": T0 + 1001, "2": T0}}),
               endingOffsetsByTimestamp=json.dumps({timestamped: {"0": T0 + 10_000, "1": T0 + 3001,
                                                                  "2": T0 + 10**9}}))
    assert got == expected({0: range(5, 10), 1: range(1, 3), 2: range(0, PER_PARTITION)})


def test_a_dataframe_written_back_is_the_same_records_in_the_same_order(
        spark: Any, cluster: tuple[BrokerProcess, str], timestamped: str) -> None:
    b, _ = cluster
    create(b.bootstrap, "copied")
    source = (spark.read.format("kafka").option("kafka.bootstrap.servers", b.bootstrap)
              .option("subscribe", timestamped).load())
    (source.select("key", "value", "partition").write.format("kafka")
     .option("kafka.bootstrap.servers", b.bootstrap).option("topic", "copied").save())
    # One task per source partition writes it in order to the same partition: the same offsets.
    assert read(spark, b.bootstrap, "copied") == read(spark, b.bootstrap, timestamped)
    assert len(read(spark, b.bootstrap, "copied")) == 3 * PER_PARTITION


def leaders(url: str, topic: str) -> dict[int, int]:
    status, t = admin_call(url, f"/api/topics/{topic}")
    assert status == 200, t
    return {p["partition"]: p["leader"] for p in t["partitions"]}


class SequenceProducer:
    """Produces "0", "1", ... (idempotent, acks=all) from a thread until stopped; ``acked`` are the
    seqs the cluster acknowledged, ``failed`` the delivery errors."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                           "linger.ms": 5, "message.timeout.ms": 120_000})
        self.topic = topic
        self.acked: list[int] = []
        self.failed: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _done(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.append(int(msg.value()))
        else:
            self.failed.append(str(err))

    def _run(self) -> None:
        seq = 0
        while not self.stopping.is_set():  # ~500 records/s at most: a steady load, not a flood
            for _ in range(5):
                self.p.produce(self.topic, key=str(seq % 50), value=str(seq), on_delivery=self._done)
                seq += 1
            self.p.poll(0)
            time.sleep(0.01)

    def __enter__(self) -> SequenceProducer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(30)
        assert self.p.flush(120) == 0


def test_a_streaming_query_reads_every_record_once_through_a_leader_move_and_a_broker_restart(
        spark: Any, cluster: tuple[BrokerProcess, str], tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    b, url = cluster
    create(b.bootstrap, "sequence")
    seen: list[int] = []

    def collect(batch: Any, batch_id: int) -> None:
        seen.extend(int(r["v"]) for r in batch.select(F.col("value").cast("string").alias("v")).collect())

    stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", b.bootstrap)
              .option("subscribe", "sequence").option("startingOffsets", "earliest").load())
    q = (stream.writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "checkpoint"))
         .trigger(processingTime="1 second").start())
    try:
        with SequenceProducer(b.bootstrap, "sequence") as producer:
            def progress(more: int, what: str) -> None:
                target = len(seen) + more
                wait_until(lambda: len(seen) >= target, 90, f"{more} more records in the query's output {what}")

            progress(500, "before the leader move")
            before = leaders(url, "sequence")
            target = (before[0] + 1) % 3
            status, moved = admin_call(url, "/api/topics/sequence/partitions/0/leader", "POST", {"broker": target})
            assert status == 200, moved
            assert leaders(url, "sequence")[0] == target
            progress(500, "after the leader move")
            _, c = admin_call(url, "/api/cluster")
            victim = next(x["id"] for x in c["brokers"] if x["id"] != c["controller"]["id"])
            status, r = admin_call(url, f"/api/brokers/{victim}/stop", "POST")
            assert status == 200, r
            assert victim not in leaders(url, "sequence").values()
            progress(500, f"with broker {victim} stopped")
            status, r = admin_call(url, f"/api/brokers/{victim}/start", "POST")
            assert status == 200, r
            progress(500, f"after broker {victim} started again")
            # Back from its disk log, it caught up and rejoined every partition's ISR.
            wait_until(lambda: all(victim in p["isr"] for p in admin_call(url, "/api/topics/sequence")[1]["partitions"]),
                       90, f"broker {victim} back in the ISR")
            progress(500, f"with broker {victim} back in the ISR")
        assert producer.failed == []
        acked = sorted(producer.acked)
        wait_until(lambda: len(seen) >= len(acked), 90, "the query to read every acknowledged record")
        q.processAllAvailable()
        assert q.isActive and q.exception() is None
    finally:
        q.stop()
    assert len(seen) == len(acked) and sorted(seen) == acked  # each exactly once
    assert acked == list(range(len(acked)))  # and the producer lost none
    print(f"\nstreaming: {len(acked)} records, each read once, through a leader move and broker {victim}'s restart")
