"""What a refka broker keeps across the end of its process.

- kill -9: every record a producer had acknowledged (acks=all, acks=1) is read
  back after a restart on the same data directory, in order and byte for byte;
  the topic keeps its id and partition count. Appends reach the kernel before
  they are acknowledged, so no fsync is needed for this (broker/log/log.py).
- A torn tail on the last segment is cut at start-up; the records before it
  are intact and producing continues at the right offset.
- SIGTERM is a clean shutdown: exit code 0, a log line, a clean-shutdown marker
  per partition; topics, their configs and data survive; leader epochs do not
  go back.
- ``--memory``: nothing survives; a restart is a fresh broker.

Every start logs (never asserts) the time from process start to the first
answered ApiVersions: run with ``-o log_cli=true --log-cli-level=INFO`` to see it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from refka.client.connection import BrokerConnection
from refka.protocol import ErrorCode
from refka.protocol.messages.api_versions import ApiVersions
from refka.protocol.messages.metadata import Metadata
from refka.protocol.records import build_batch, iter_batches, valid_length
from tests.brokers import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

log = logging.getLogger("tests.durability")
log.setLevel(logging.INFO)

Headers = list[tuple[str, str | bytes | None]] | None
Record = tuple[bytes | None, bytes | None, Headers]  # key, value, headers


# -- brokers -----------------------------------------------------------------------------


async def _first_api_versions(port: int) -> None:
    conn = await BrokerConnection("127.0.0.1", port, client_id="durability").connect(negotiate=False)
    try:
        resp = await conn.request(ApiVersions, ApiVersions.Request(client_software_name="durability",
                                                                    client_software_version="1.0"), version=3)
        assert resp.error_code == ErrorCode.NONE
    finally:
        await conn.close()


def start_broker(data_dir: Path, *, port: int | None = None, memory: bool = False, what: str,
                 overrides: dict[str, str] | None = None) -> BrokerProcess:
    t0 = time.monotonic()
    b = BrokerProcess(data_dir, port=port, memory=memory, overrides=overrides).start()
    asyncio.run(_first_api_versions(b.port))  # type: ignore[arg-type]
    log.info("start-up (%s): %.3fs from process start to the first answered ApiVersions; %s",
             what, time.monotonic() - t0, b.ready_line)
    return b


def log_since(b: BrokerProcess, offset: int) -> str:
    """The broker log written after ``offset`` bytes (one log file spans restarts)."""
    with open(b.log_path, "rb") as f:
        f.seek(offset)
        return f.read().decode("utf-8", "replace")


def log_size(b: BrokerProcess) -> int:
    return b.log_path.stat().st_size


async def _metadata(port: int, topics: list[str] | None) -> Any:
    conn = await BrokerConnection("127.0.0.1", port, client_id="durability").connect()
    try:
        req_topics = None if topics is None else [Metadata.Request.MetadataRequestTopic(name=t) for t in topics]
        return await conn.request(Metadata, Metadata.Request(topics=req_topics, allow_auto_topic_creation=False),
                                  version=12)
    finally:
        await conn.close()


def metadata(b: BrokerProcess, topics: list[str] | None = None) -> Any:
    return asyncio.run(_metadata(b.port, topics))  # type: ignore[arg-type]


def topic_state(b: BrokerProcess, topic: str) -> tuple[bytes, dict[int, int]]:
    """The topic's id and {partition: leader epoch}, all partitions led by this broker."""
    [t] = metadata(b, [topic]).topics
    assert t.error_code == ErrorCode.NONE, t
    assert all(p.error_code == ErrorCode.NONE and p.leader_id == 0 for p in t.partitions), t
    return t.topic_id, {p.partition_index: p.leader_epoch for p in t.partitions}


def create_topic(b: BrokerProcess, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})], operation_timeout=15)
    futures[topic].result(30)


# -- clients -----------------------------------------------------------------------------


def records_for(n: int, partitions: int, seed: int) -> list[tuple[int, Record]]:
    """(partition, record): random bytes, null keys and values, empty values, headers, a few large ones."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key = None if i % 7 == 0 else b"key-%d-" % i + rng.randbytes(rng.randint(0, 16))
        size = rng.choice((0, 1, 10, 100, 1000)) if i % 50 else 100_000
        value = None if i % 11 == 0 else rng.randbytes(size)
        headers: Headers = [("h", rng.randbytes(4)), ("i", str(i).encode())] if i % 5 == 0 else None
        out.append((i % partitions, (key, value, headers)))
    return out


def produce_all(bootstrap: str, topic: str, records: list[tuple[int, Record]], acks: str,
                first_offsets: dict[int, int] | None = None) -> dict[int, list[Record]]:
    """Sends and waits for every delivery report; returns {partition: acknowledged records by offset}.

    The acknowledged offsets of a partition must run without a gap from its
    ``first_offsets`` entry (0 by default).
    """
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "linger.ms": 5,
        "batch.num.messages": 50,  # many batches: small segments roll between them
        "enable.idempotence": False,  # plain acks semantics: idempotence has its own tests
        "max.in.flight.requests.per.connection": 1,  # offsets in send order, even on a retry
        "message.timeout.ms": 60_000,
    })
    reports: list[tuple[int, Any, int, int]] = []

    def on_delivery(i: int):
        return lambda err, msg: reports.append((i, err, msg.partition(), msg.offset()))

    for i, (partition, (key, value, headers)) in enumerate(records):
        while True:
            try:
                producer.produce(topic, value=value, key=key, headers=headers, partition=partition,
                                 on_delivery=on_delivery(i))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert len(reports) == len(records)
    assert [(i, err) for i, err, _p, _o in reports if err is not None] == []
    acked: dict[int, list[tuple[int, Record]]] = {}
    for i, _err, partition, offset in reports:
        assert partition == records[i][0]
        acked.setdefault(partition, []).append((offset, records[i][1]))
    out = {}
    for partition, entries in acked.items():
        entries.sort()
        first = (first_offsets or {}).get(partition, 0)
        assert [o for o, _r in entries] == list(range(first, first + len(entries))), (partition, first)
        out[partition] = [r for _o, r in entries]
    return out


def consume_all(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Record]]:
    """Every record of every partition, from the beginning to the high watermark."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "durability-check",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
    })
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: dict[int, list[tuple[int, Record]]] = {p: [] for p in range(partitions)}
        at_end: set[int] = set()
        hang_guard = time.monotonic() + 90
        while len(at_end) < partitions:
            if time.monotonic() > hang_guard:
                pytest.fail(f"consumer did not reach the end of {sorted(set(range(partitions)) - at_end)}")
            m: Any = consumer.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                at_end.add(m.partition())
                continue
            out[m.partition()].append((m.offset(), (m.key(), m.value(), m.headers())))
        for p, entries in out.items():
            assert [o for o, _r in entries] == list(range(len(entries))), f"partition {p} has gaps or repeats"
        return {p: [r for _o, r in entries] for p, entries in out.items()}
    finally:
        consumer.close()


# -- kill -9 -----------------------------------------------------------------------------


@pytest.mark.parametrize("acks,segment_bytes", [("all", None), ("1", None), ("all", 65536)],
                         ids=["acks_all", "acks_1", "acks_all_64k_segments"])
def test_kill_9_keeps_every_acknowledged_record(tmp_path, acks, segment_bytes):
    data = tmp_path / "data"
    topic = f"durable-acks-{acks}"
    # Small segments: the log rolls many times, and only the last segment of each
    # partition is re-read at start-up.
    overrides = {"log.segment.bytes": str(segment_bytes)} if segment_bytes else None
    b = start_broker(data, what="fresh", overrides=overrides)
    try:
        create_topic(b, topic, 3)
        topic_id, epochs = topic_state(b, topic)
        acked = produce_all(b.bootstrap, topic, records_for(1500, 3, seed=len(acks)), acks)
        assert sorted(acked) == [0, 1, 2]
    finally:
        b.kill(signal.SIGKILL)
    assert b.proc is not None and b.proc.returncode == -signal.SIGKILL

    mark = log_size(b)
    if segment_bytes:
        assert len(list((data / "broker-0" / f"{topic}-0").glob("*.log"))) > 5
    b2 = start_broker(data, port=b.port, what="after kill -9", overrides=overrides)
    try:
        after_id, after_epochs = topic_state(b2, topic)
        assert after_id == topic_id
        assert sorted(after_epochs) == [0, 1, 2]
        assert all(after_epochs[p] >= epochs[p] for p in epochs)
        # No clean-shutdown marker: every partition's last segment was re-read.
        recovered = [line for line in log_since(b2, mark).splitlines() if "segment_recovered" in line]
        for p in range(3):
            assert any(f"/{topic}-{p} " in line for line in recovered), recovered

        assert consume_all(b2.bootstrap, topic, 3) == acked
        # Producing continues right after the last acknowledged offset.
        more = produce_all(b2.bootstrap, topic, [(p, (b"after", b"restart-%d" % p, None)) for p in range(3)], acks,
                           first_offsets={p: len(acked[p]) for p in range(3)})
        assert consume_all(b2.bootstrap, topic, 3) == {p: acked[p] + more[p] for p in range(3)}
    finally:
        b2.stop()


def test_kill_9_while_producing_keeps_a_prefix_with_every_acknowledged_record(tmp_path):
    """The broker dies with requests in flight: each partition comes back as the
    first k records sent to it, k at least the acknowledged count, byte for byte."""
    data = tmp_path / "data"
    topic = "durable-in-flight"
    b = start_broker(data, what="fresh", overrides={"log.segment.bytes": "65536"})
    sent = records_for(3000, 3, seed=17)
    delivered: list[tuple[int, int, int]] = []  # (record index, partition, offset)
    try:
        create_topic(b, topic, 3)
        producer = Producer({
            "bootstrap.servers": b.bootstrap,
            "acks": "all",
            "linger.ms": 1,
            "batch.num.messages": 20,
            "queue.buffering.max.messages": 200,  # sending waits for acks: some are always in flight
            "enable.idempotence": False,
            "max.in.flight.requests.per.connection": 1,
        })

        def on_delivery(i: int):
            def report(err: Any, msg: Any) -> None:
                if err is None:
                    delivered.append((i, msg.partition(), msg.offset()))
            return report

        for i, (partition, (key, value, headers)) in enumerate(sent):
            if len(delivered) >= 1000 and b.proc is not None and b.proc.poll() is None:
                b.kill(signal.SIGKILL)
                break
            while True:
                try:
                    producer.produce(topic, value=value, key=key, headers=headers, partition=partition,
                                     on_delivery=on_delivery(i))
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
        else:
            pytest.fail("all records were sent before 1000 were acknowledged")
        # Nothing more can be acknowledged by a dead broker: drop what is left and
        # take the reports already received.
        producer.purge(in_queue=True, in_flight=True)
        assert producer.flush(30) == 0
    finally:
        b.kill(signal.SIGKILL)
    assert len(delivered) >= 1000

    b2 = start_broker(data, port=b.port, what="after kill -9 in flight", overrides={"log.segment.bytes": "65536"})
    try:
        consumed = consume_all(b2.bootstrap, topic, 3)
    finally:
        b2.stop()
    log.info("kill -9 in flight: %d records acknowledged, %d recovered, %d sent",
             len(delivered), sum(len(v) for v in consumed.values()), i)
    for p in range(3):
        sent_to_p = [r for part, r in sent if part == p]
        got = consumed[p]
        assert got == sent_to_p[: len(got)], f"partition {p} is not a prefix of what was sent to it"
    for i, p, offset in delivered:
        assert offset < len(consumed[p]) and consumed[p][offset] == sent[i][1], (i, p, offset)


# -- torn tail ---------------------------------------------------------------------------


def _torn_batch(next_offset: int) -> bytes:
    """The first part of a batch whose write was cut short."""
    batch = build_batch([(b"k", bytes(200)) for _ in range(5)], base_offset=next_offset)
    return bytes(batch[: len(batch) // 2])


GARBAGE = {
    "random_bytes": lambda _next: random.Random(11).randbytes(1000),
    "torn_batch": _torn_batch,
    "zeros": lambda _next: bytes(4096),
    "short_header": lambda next_offset: bytes(build_batch([(b"k", b"v")], base_offset=next_offset)[:30]),
}


@pytest.mark.parametrize("garbage", GARBAGE)
def test_torn_tail_is_cut_and_producing_continues(tmp_path, garbage):
    data = tmp_path / "data"
    topic = "torn"
    b = start_broker(data, what="fresh")
    try:
        create_topic(b, topic, 1)
        acked = produce_all(b.bootstrap, topic, records_for(200, 1, seed=3), "all")
    finally:
        assert b.stop() == 0
    n = len(acked[0])

    [segment, *_] = sorted((data / "broker-0" / f"{topic}-0").glob("*.log"), reverse=True)
    original = segment.read_bytes()
    # A clean close leaves exactly the batches in the file.
    assert valid_length(original) == len(original)
    assert [h.next_offset for h in iter_batches(original)][-1] == n
    tail = GARBAGE[garbage](n)
    with open(segment, "ab") as f:
        f.write(tail)

    mark = log_size(b)
    b2 = start_broker(data, port=b.port, what=f"after a torn tail ({garbage})")
    try:
        assert f"truncated_bytes={len(tail)}" in log_since(b2, mark)
        assert consume_all(b2.bootstrap, topic, 1) == acked
        more = produce_all(b2.bootstrap, topic, [(0, (b"next", b"after the torn tail", None))], "all",
                           first_offsets={0: n})
        assert consume_all(b2.bootstrap, topic, 1) == {0: acked[0] + more[0]}
    finally:
        assert b2.stop() == 0

    # The garbage is gone from the file: the old bytes, then the new batch at offset n.
    contents = segment.read_bytes()
    assert contents[: len(original)] == original
    new = list(iter_batches(contents[len(original):]))
    assert [(h.base_offset, h.records_count) for h in new] == [(n, 1)]
    assert valid_length(contents) == len(contents)


# -- clean restart (SIGTERM) --------------------------------------------------------------


def _retention_ms(b: BrokerProcess, topic: str) -> tuple[str, ConfigSource]:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    resource = ConfigResource("topic", topic)
    entries = admin.describe_configs([resource])[resource].result(30)
    entry = entries["retention.ms"]
    return entry.value, ConfigSource(entry.source)


def test_sigterm_is_a_clean_shutdown_and_everything_survives(tmp_path):
    data = tmp_path / "data"
    topic = "kept"
    b = start_broker(data, what="fresh")
    try:
        create_topic(b, topic, 2, {"retention.ms": "7200000"})
        topic_id, epochs = topic_state(b, topic)
        assert _retention_ms(b, topic) == ("7200000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
        acked = produce_all(b.bootstrap, topic, records_for(600, 2, seed=5), "all")
        mark = log_size(b)
    finally:
        rc = b.stop()
    assert rc == 0
    stop_log = log_since(b, mark)
    assert "shutting_down" in stop_log and "broker_stopped" in stop_log
    assert "[error" not in stop_log and "Traceback" not in stop_log
    for p in range(2):
        assert (data / "broker-0" / f"{topic}-{p}" / ".clean_shutdown").exists()
    # The high watermarks, in Kafka's replication-offset-checkpoint: everything acknowledged.
    lines = (data / "broker-0" / "replication-offset-checkpoint").read_text().splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2
    hws = {(t, int(p)): int(o) for t, p, o in (line.split() for line in lines[2:])}
    assert {p: hws[(topic, p)] for p in range(2)} == {p: len(acked[p]) for p in range(2)}

    mark = log_size(b)
    b2 = start_broker(data, port=b.port, what="after SIGTERM")
    try:
        # A clean shutdown leaves nothing to recover.
        assert "segment_recovered" not in log_since(b2, mark)
        after_id, after_epochs = topic_state(b2, topic)
        assert after_id == topic_id
        assert sorted(after_epochs) == [0, 1]
        assert all(after_epochs[p] >= epochs[p] for p in epochs), (epochs, after_epochs)
        assert _retention_ms(b2, topic) == ("7200000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
        assert consume_all(b2.bootstrap, topic, 2) == acked
    finally:
        assert b2.stop() == 0


# -- --memory -----------------------------------------------------------------------------


def test_memory_broker_forgets_everything_on_restart(tmp_path):
    data = tmp_path / "data"
    topic = "ephemeral"
    b = start_broker(data, memory=True, what="--memory")
    try:
        create_topic(b, topic, 1, {"retention.ms": "7200000"})
        produce_all(b.bootstrap, topic, records_for(20, 1, seed=7), "all")
        before = metadata(b)
        assert [t.name for t in before.topics] == [topic]
    finally:
        assert b.stop() == 0
    # Nothing was written to the data directory.
    assert not data.exists() or not any(data.rglob("*"))

    b2 = start_broker(data, port=b.port, memory=True, what="--memory again")
    try:
        after = metadata(b2)
        assert after.topics == []
        assert after.cluster_id != before.cluster_id
        [t] = metadata(b2, [topic]).topics
        assert t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        assert b2.stop() == 0
