"""Helpers for driving refka with unmodified confluent-kafka (librdkafka).

Everything here uses the client library as a user would; the only exceptions
are the two *oracles* at the bottom (``metadata_leader_epochs`` and
``served_batches``), which ask the broker directly over the wire with refka's
own connection, to check what the client cannot show (the leader epoch in a
Metadata answer, the compression and size of the batches the broker stores).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from refka.client.connection import connect
from refka.protocol.messages.fetch import Fetch
from refka.protocol.records import BatchHeader, parse_batches
from tests.integration.cluster_helpers import partition_metadata
from tests.waiting import wait_until

# Generous: only there so that a broken broker fails a test instead of hanging it.
TIMEOUT = 30.0


def unique_topic(prefix: str) -> str:
    return f"ck-{prefix}-{uuid.uuid4().hex[:8]}"


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    a = admin(bootstrap)  # kept alive until the answer: a destroyed client fails its futures
    fut = a.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=TIMEOUT)[name]
    fut.result(TIMEOUT)


@dataclass(frozen=True)
class Rec:
    """One record as a user produces it and expects it back."""

    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int = 0


@dataclass
class Report:
    error: KafkaError | None
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def producer(bootstrap: str, **conf: Any) -> Producer:
    base = {"bootstrap.servers": bootstrap, "linger.ms": 50}
    base.update(conf)
    return Producer(base)


def produce(p: Producer, topic: str, records: list[Rec], partition: int = 0, flush: bool = True) -> list[Report]:
    """Produces ``records`` in order; with ``flush`` waits for every delivery report."""
    reports: list[Report] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        reports.append(Report(err, msg.partition(), msg.offset(), msg.key(), msg.value()))

    for r in records:
        kwargs: dict[str, Any] = {"key": r.key, "value": r.value, "partition": partition,
                                  "on_delivery": on_delivery, "timestamp": r.timestamp}
        if r.headers:
            kwargs["headers"] = r.headers
        p.produce(topic, **kwargs)
        p.poll(0)
    if flush:
        left = p.flush(TIMEOUT)
        assert left == 0, f"{left} records still undelivered after {TIMEOUT}s"
        assert len(reports) == len(records)
    return reports


def consumer(bootstrap: str, **conf: Any) -> Consumer:
    # group.id is required by confluent-kafka even for assign(); no group API is used.
    base = {"bootstrap.servers": bootstrap, "group.id": f"ck-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False, "enable.auto.offset.store": False,
            "enable.partition.eof": True, "fetch.wait.max.ms": 100}
    base.update(conf)
    return Consumer(base)


def consume_until_eof(c: Consumer, partitions: set[int]) -> list[Message]:
    """Polls until every partition in ``partitions`` reported end-of-partition.

    The messages in the order they arrived. A message error other than EOF fails.
    """
    out: list[Message] = []
    waiting = set(partitions)
    deadline = time.monotonic() + TIMEOUT
    while waiting:
        assert time.monotonic() < deadline, f"no end of partition {sorted(waiting)}; got {len(out)} messages"
        m = c.poll(0.5)
        if m is None:
            continue
        err = m.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                waiting.discard(m.partition())
                continue
            raise KafkaException(err)
        out.append(m)
    return out


def read_partition(bootstrap: str, topic: str, partition: int = 0, offset: int = OFFSET_BEGINNING, **conf: Any) -> list[Message]:
    """All messages of one partition from ``offset`` (default OFFSET_BEGINNING) to its end."""
    c = consumer(bootstrap, **conf)
    try:
        c.assign([TopicPartition(topic, partition, offset)])
        return consume_until_eof(c, {partition})
    finally:
        c.close()


def wait_for_high_watermark(bootstrap: str, topic: str, partition: int, at_least: int) -> tuple[int, int]:
    """Waits (acks=0 gives no report) until the partition's high watermark reaches ``at_least``."""
    c = consumer(bootstrap)
    try:
        tp = TopicPartition(topic, partition)
        return wait_until(lambda: (w := c.get_watermark_offsets(tp, timeout=TIMEOUT))[1] >= at_least and w,
                          timeout=TIMEOUT, interval=0.05,
                          message=f"{topic}-{partition}'s high watermark at {at_least}")
    finally:
        c.close()


def assert_same_records(messages: list[Message], records: list[Rec], topic: str, partition: int,
                        first_offset: int = 0) -> None:
    """Byte-for-byte: key, value, headers, timestamp (type and value), offset, partition, topic."""
    assert len(messages) == len(records), (len(messages), len(records))
    for i, (m, r) in enumerate(zip(messages, records, strict=True)):
        where = f"record {i}"
        assert m.topic() == topic, where
        assert m.partition() == partition, where
        assert m.offset() == first_offset + i, where
        assert m.key() == r.key, where
        assert m.value() == r.value, where
        # confluent-kafka answers None for a record without headers.
        assert (m.headers() or []) == r.headers, where
        assert m.timestamp() == (TIMESTAMP_CREATE_TIME, r.timestamp), where


class LogCapture(logging.Handler):
    """librdkafka's log lines (``logger`` config) collected in memory."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.logger = logging.getLogger(f"rdkafka.{uuid.uuid4().hex[:8]}")
        self.logger.setLevel(logging.DEBUG)
        self.logger.propagate = False
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


# -- oracles: refka's own wire client, for what librdkafka does not expose

def _run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


def metadata_leader_epochs(bootstrap: str, topic: str) -> dict[int, int]:
    """partition -> leader_epoch as a Metadata v12 answer (librdkafka's version) states it."""
    return {i: p.leader_epoch for i, p in partition_metadata(bootstrap, topic).items()}


def served_batches(bootstrap: str, topic: str, partition: int = 0) -> list[BatchHeader]:
    """The headers of every record batch the broker serves for one partition, from offset 0.

    Fetch v12 (by name), raw: what is stored, before any client decompresses it.
    """

    async def go() -> list[BatchHeader]:
        conn = await connect(bootstrap, "ck-test-oracle")
        out: list[BatchHeader] = []
        try:
            R = Fetch.Request
            offset = 0
            while True:
                req = R(max_wait_ms=0, min_bytes=0, max_bytes=64 * 1024 * 1024, session_id=0, session_epoch=-1,
                        topics=[R.FetchTopic(topic=topic, partitions=[R.FetchTopic.FetchPartition(
                            partition=partition, fetch_offset=offset, partition_max_bytes=16 * 1024 * 1024)])],
                        forgotten_topics_data=[])
                resp = await conn.request(Fetch, req, version=12)
                (t,) = resp.responses
                (p,) = t.partitions
                assert p.error_code == 0, p.error_code
                batches = parse_batches(bytes(p.records or b"")) if p.records else []
                out += batches
                if not batches:
                    return out
                offset = batches[-1].next_offset
                if offset >= p.high_watermark:
                    return out
        finally:
            await conn.close()

    result: list[BatchHeader] = _run(go())
    return result
