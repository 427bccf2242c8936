"""Produce and consume phases with confluent-kafka, one topic and one partition per run.

Producer: linger.ms=5, batch.size=1 MiB, acks=1, no compression (``--compression``), values of a
fixed size and no key, all to partition 0. The clock runs from the first
``produce()`` to the delivery report of the last record (the producer's
connection and metadata are warmed up before). Delivery reports arrive in
order within a partition, so the last one closes the run; the consumer
phase then checks that exactly ``count`` records landed.

Consumer: ``assign()`` partition 0 at the beginning (OFFSET_BEGINNING), read
until ``count`` records, librdkafka's default fetch sizes
(fetch.max.bytes 50 MiB, max.partition.fetch.bytes 1 MiB, fetch.wait.max.ms
500) but a short fetch.queue.backoff.ms (see CONSUMER_CONFIG). The clock runs
from ``assign()`` to the last record.

MB are 10^6 bytes of record values (keys, headers and batch overhead are not
counted). Both clients run in this process and share the machine's CPUs with
the broker: on a small machine the client is part of the measurement.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from lab.bench.targets import cpu_seconds

PRODUCER_CONFIG: dict[str, Any] = {
    "linger.ms": 5,
    "batch.size": 1048576,
    "acks": 1,
    "compression.type": "none",
    # Enough room that the produce loop rarely meets BufferError (default 100k).
    "queue.buffering.max.messages": 1_000_000,
}
CONSUMER_CONFIG: dict[str, Any] = {
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "enable.partition.eof": False,
    # librdkafka stops fetching for fetch.queue.backoff.ms (default 1000 ms)
    # whenever its local queue holds queued.min.messages (100k) records, which
    # 100-byte records reach in a fraction of a second: with the default the
    # figure would be librdkafka's back-off, not the broker.
    "fetch.queue.backoff.ms": 10,
}


class PhaseFailed(RuntimeError):
    pass


@dataclass
class PhaseResult:
    records: int
    record_bytes: int
    seconds: float
    broker_cpu_seconds: float | None
    client_cpu_seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def mb_per_s(self) -> float:
        return self.records * self.record_bytes / self.seconds / 1e6

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["mb_per_s"] = self.mb_per_s
        d["records_per_s"] = self.records_per_s
        if self.broker_cpu_seconds is not None:
            d["broker_cpu_percent"] = 100 * self.broker_cpu_seconds / self.seconds
        d["client_cpu_percent"] = 100 * self.client_cpu_seconds / self.seconds
        return d


def _client_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)  # all threads: librdkafka's included
    return r.ru_utime + r.ru_stime


def _leader_ready(client: Producer | Consumer | AdminClient, topic: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            md = client.list_topics(topic, timeout=max(0.5, deadline - time.monotonic()))
        except KafkaException as e:
            last = str(e)
            continue
        t = md.topics.get(topic)
        if t is not None and t.error is None and 0 in t.partitions and t.partitions[0].leader >= 0:
            return
        last = str(t.error) if t is not None else "topic missing from metadata"
        time.sleep(0.05)
    raise PhaseFailed(f"topic {topic} has no leader after {timeout:.0f}s: {last}")


def create_topic(bootstrap: str, topic: str, *, use_create_topics: bool, timeout: float) -> None:
    """A fresh topic with one partition (or the target's auto-created default)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if use_create_topics:
        # librdkafka's CreateTopics waits for a controller and does not ask
        # again if its first Metadata named none: make sure one is known.
        deadline = time.monotonic() + timeout
        while admin.list_topics(timeout=timeout).controller_id < 0:
            if time.monotonic() > deadline:
                raise PhaseFailed(f"no controller in Metadata after {timeout:.0f}s")
            time.sleep(0.05)
        futures = admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=timeout, operation_timeout=timeout)
        try:
            futures[topic].result(timeout=timeout + 5)
        except KafkaException as e:
            raise PhaseFailed(f"CreateTopics {topic}: {e}") from e
    else:
        # A producer's Metadata request for an unknown topic makes an
        # auto-creating broker create it.
        Producer({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=timeout)
    _leader_ready(admin, topic, timeout)


def delete_topic(bootstrap: str, topic: str, timeout: float = 10.0) -> None:
    """Best effort: a failure only leaves the records in the broker."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.delete_topics([topic], request_timeout=timeout, operation_timeout=timeout)[topic].result(timeout + 5)
    except KafkaException:
        pass


def produce(bootstrap: str, topic: str, count: int, record_bytes: int, broker_pid: int,
            timeout: float) -> PhaseResult:
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG})
    _leader_ready(producer, topic, timeout)  # connections and metadata before the clock starts
    value = os.urandom(record_bytes)
    last: dict[str, Any] = {}

    def on_last_delivery(err: Any, msg: Any) -> None:
        last["at"] = time.perf_counter()
        last["error"] = err
        last["offset"] = msg.offset()

    send = producer.produce
    poll = producer.poll
    buffer_full = 0
    cpu0, bcpu0 = _client_cpu(), cpu_seconds(broker_pid)
    t0 = time.perf_counter()
    for i in range(count - 1):
        try:
            send(topic, value, partition=0)
        except BufferError:
            buffer_full += 1
            while True:
                poll(0.001)
                try:
                    send(topic, value, partition=0)
                    break
                except BufferError:
                    if time.perf_counter() - t0 > timeout:
                        raise PhaseFailed(f"producer queue still full after {timeout:.0f}s") from None
        if not i & 0x3FFF:
            poll(0)  # serve delivery reports so their messages are freed
    send(topic, value, partition=0, on_delivery=on_last_delivery)
    left = producer.flush(timeout)
    t_end = last.get("at", time.perf_counter())
    cpu1, bcpu1 = _client_cpu(), cpu_seconds(broker_pid)
    if left:
        raise PhaseFailed(f"{left} records still undelivered after {timeout:.0f}s")
    if last.get("error") is not None:
        raise PhaseFailed(f"last record failed: {last['error']}")
    return PhaseResult(
        records=count, record_bytes=record_bytes, seconds=t_end - t0,
        broker_cpu_seconds=None if bcpu0 is None or bcpu1 is None else bcpu1 - bcpu0,
        client_cpu_seconds=cpu1 - cpu0,
        extra={"last_offset": last.get("offset"), "buffer_full_waits": buffer_full},
    )


def consume(bootstrap: str, topic: str, count: int, record_bytes: int, broker_pid: int,
            stall_timeout: float, *, bounded_retention: bool = False) -> PhaseResult:
    """Reads ``count`` records of partition 0 from its beginning.

    With ``bounded_retention`` (librdkafka's mock keeps only the last ~5 MB of
    a partition) it reads the retained window once: fewer records, so an
    indicative figure only. (Reading the window again after a seek costs
    ~0.5 s of librdkafka back-off per pass, which would measure nothing.)
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}", **CONSUMER_CONFIG})
    try:
        _leader_ready(consumer, topic, stall_timeout)
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=stall_timeout)
        if bounded_retention:
            start, end = low, high  # the retained window
        else:
            # Tansu's ListOffsets may lag its log right after a produce: the
            # records themselves are the check (offsets 0..count-1, in order).
            start, end = 0, count
        if end - start <= 0:
            raise PhaseFailed(f"partition is empty ({low}..{high})")
        want = end - start if bounded_retention else count
        got = 0
        take = consumer.consume
        cpu0, bcpu0 = _client_cpu(), cpu_seconds(broker_pid)
        t0 = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING if start == 0 else start)])
        progress_at = t0
        while got < want:
            # Never ask for more than is left: consume() waits for the whole
            # batch (or its timeout), which would add up to 0.5 s at the end.
            batch = take(min(10000, want - got), 0.5)
            if not batch:
                if time.perf_counter() - progress_at > stall_timeout:
                    raise PhaseFailed(f"no records for {stall_timeout:.0f}s after {got} of {want}")
                continue
            for msg in batch:
                if msg.error() is not None:
                    raise PhaseFailed(f"consumer error after {got} records: {msg.error()}")
            got += len(batch)
            progress_at = time.perf_counter()
            last_offset = batch[-1].offset() or 0
            if last_offset >= end - 1 and got < want:
                raise PhaseFailed(f"offset {last_offset} reached after only {got} of {want} records")
        t_end = time.perf_counter()
        cpu1, bcpu1 = _client_cpu(), cpu_seconds(broker_pid)
        if got != want or last_offset != end - 1:
            raise PhaseFailed(f"read {got} records ending at offset {last_offset}, "
                              f"expected {want} ending at {end - 1}")
        last_value = batch[-1].value() or b""
        if len(last_value) != record_bytes:
            raise PhaseFailed(f"record of {len(last_value)} bytes, expected {record_bytes}")
        extra: dict[str, Any] = {"low_watermark": low, "high_watermark": high}
        if bounded_retention:
            extra["retained_window_only"] = True
        return PhaseResult(
            records=got, record_bytes=record_bytes, seconds=t_end - t0,
            broker_cpu_seconds=None if bcpu0 is None or bcpu1 is None else bcpu1 - bcpu0,
            client_cpu_seconds=cpu1 - cpu0, extra=extra,
        )
    finally:
        consumer.close()
