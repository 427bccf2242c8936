"""The scenario's client processes: a producer or a group consumer, refka's
reference client or confluent-kafka's, each writing what it did as JSON lines
(audit.py's formats) until SIGTERM, then stopping as an application would
(producer: flush; consumer: commit and leave the group).

    python -m lab.scenarios.workers produce --client refka --id p0 --bootstrap H:P --topic T --out acks-p0.jsonl
    python -m lab.scenarios.workers consume --client refka --id c0 --bootstrap H:P --topic T --group G \\
        --out deliveries-c0.jsonl --callbacks callbacks-c0.jsonl

A record's value is ``{"producer", "key", "seq", "sent_ms"}`` (JSON), its key the
key's name: seq counts each key's records of one producer from 0, so the audit
can tell, per (producer, key), which record came first. Keys are drawn at
random (seeded by the producer id) from ``--keys`` names, at ``--rate`` records
per second. A consumer delivers at most ``--rate`` records per second (0: as
fast as it can): a slow group is how a backlog builds up, and a backlog at
the moment the partitions change is what tells an ordered client from one
that is not.

confluent-kafka's producer uses librdkafka's ``murmur2_random`` partitioner
(the Java client's hash over every partition Metadata lists), acks=all and one
request in flight per connection, so that its own retries keep each
partition's order; its consumer uses the group's default assignors. Neither
knows KIP-253: that is the control.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Collection
from typing import IO, Any

from refka.client.consumer import Consumer
from refka.client.producer import Producer, RecordMetadata
from refka.client.structs import TopicPartition


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class JsonLines:
    """An append-only JSON-lines file, flushed line by line (a worker killed -9 loses at most
    the line it was writing, which the audit's reader skips)."""

    def __init__(self, path: str) -> None:
        self._f: IO[str] = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 (closed in close())

    def write(self, obj: dict[str, Any]) -> None:
        self._f.write(json.dumps(obj, separators=(",", ":")) + "\n")

    def close(self) -> None:
        self._f.close()


class Keys:
    """(key, seq, value) for the next record of producer ``producer``."""

    def __init__(self, producer: str, keys: int) -> None:
        self.producer = producer
        self.names = [f"k{i}" for i in range(keys)]
        self.seqs = dict.fromkeys(self.names, 0)
        self.rng = random.Random(producer)

    def next(self) -> tuple[str, int, bytes]:
        key = self.rng.choice(self.names)
        seq = self.seqs[key]
        self.seqs[key] = seq + 1
        value = json.dumps({"producer": self.producer, "key": key, "seq": seq, "sent_ms": now_ms()},
                           separators=(",", ":")).encode()
        return key, seq, value


def _ack_line(producer: str, key: str, seq: int, topic: str, partition: int, offset: int) -> dict[str, Any]:
    return {"producer": producer, "key": key, "seq": seq, "topic": topic, "partition": partition, "offset": offset,
            "acked_ms": now_ms()}


def _delivery_line(consumer: str, topic: str, partition: int, offset: int, value: bytes,
                   delivered_ms: int) -> dict[str, Any]:
    v = json.loads(value)
    return {"consumer": consumer, "topic": topic, "partition": partition, "offset": offset, "key": v["key"],
            "producer": v["producer"], "seq": v["seq"], "sent_ms": v["sent_ms"], "delivered_ms": delivered_ms}


# -- refka's reference client


async def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def produce_refka(a: argparse.Namespace) -> int:
    stop = await _stop_event()
    acks = JsonLines(a.out)
    keys = Keys(a.id, a.keys)
    p = Producer(bootstrap_servers=a.bootstrap, client_id=a.id, acks="all", enable_idempotence=True, linger_ms=5,
                 metadata_max_age_ms=a.metadata_max_age_ms, delivery_timeout_ms=a.delivery_timeout_ms)
    await p.start()

    def on_done(key: str, seq: int) -> Callable[[asyncio.Future[RecordMetadata]], None]:
        def done(fut: asyncio.Future[RecordMetadata]) -> None:
            if fut.cancelled() or fut.exception() is not None:
                acks.write({"producer": a.id, "key": key, "seq": seq, "topic": a.topic,
                            "error": "cancelled" if fut.cancelled() else repr(fut.exception())})
                return
            md = fut.result()
            acks.write(_ack_line(a.id, key, seq, a.topic, md.partition, md.offset))
        return done

    t0, sent = time.monotonic(), 0
    try:
        while not stop.is_set():
            key, seq, value = keys.next()
            fut = await p.send(a.topic, value, key=key.encode())
            fut.add_done_callback(on_done(key, seq))
            sent += 1
            wait = t0 + sent / a.rate - time.monotonic()
            if wait > 0:
                try:
                    async with asyncio.timeout(wait):
                        await stop.wait()
                except TimeoutError:
                    pass
        async with asyncio.timeout(a.delivery_timeout_ms / 1000 + 10):
            await p.flush()
    finally:
        await p.stop()
        acks.close()
    print(f"{a.id}: sent {sent}, rehashes {p.rehashes}, retries {p.retries}, hinted retries {p.hinted_retries}",
          file=sys.stderr)
    return 0


class _KeyListener:
    """KIP-253's PartitionKeyRebalanceListener: each call is a line of the callbacks log."""

    def __init__(self, consumer: str, out: JsonLines) -> None:
        self.consumer, self.out = consumer, out

    def _log(self, callback: str, partitions: Collection[TopicPartition]) -> None:
        at = now_ms()
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        for topic, ps in sorted(by_topic.items()):
            self.out.write({"consumer": self.consumer, "callback": callback, "topic": topic,
                            "partitions": sorted(ps), "at_ms": at})

    def on_partition_key_maybe_revoked(self, partitions: Collection[TopicPartition]) -> None:
        self._log("maybe_revoked", partitions)

    def on_partition_key_assigned(self, partitions: Collection[TopicPartition]) -> None:
        self._log("assigned", partitions)


async def consume_refka(a: argparse.Namespace) -> int:
    stop = await _stop_event()
    out = JsonLines(a.out)
    callbacks = JsonLines(a.callbacks)
    c = Consumer(a.topic, bootstrap_servers=a.bootstrap, client_id=a.id, group_id=a.group,
                 key_listener=_KeyListener(a.id, callbacks), ordered_delivery=not a.no_ordered_delivery,
                 auto_offset_reset="earliest", auto_commit_interval_ms=500, session_timeout_ms=a.session_timeout_ms,
                 heartbeat_interval_ms=a.heartbeat_interval_ms, metadata_max_age_ms=a.metadata_max_age_ms)
    await c.start()
    delivered = 0
    try:
        while not stop.is_set():
            got = await c.getmany(timeout_ms=200, max_records=a.max_records)
            at = now_ms()  # before any await: what the application saw, when
            n = 0
            for tp, records in got.items():
                for r in records:
                    if r.value is None:
                        continue  # no record of the scenario's has none
                    out.write(_delivery_line(a.id, tp.topic, tp.partition, r.offset, r.value, at))
                    n += 1
            delivered += n
            if a.rate and n:
                try:
                    async with asyncio.timeout(n / a.rate):
                        await stop.wait()
                except TimeoutError:
                    pass
    finally:
        await c.stop()
        out.close()
        callbacks.close()
    print(f"{a.id}: delivered {delivered}", file=sys.stderr)
    return 0


# -- confluent-kafka (the control)


def _stop_flag() -> threading.Event:
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def produce_confluent(a: argparse.Namespace) -> int:
    from confluent_kafka import Producer as CkProducer

    stop = _stop_flag()
    acks = JsonLines(a.out)
    keys = Keys(a.id, a.keys)
    p = CkProducer({"bootstrap.servers": a.bootstrap, "client.id": a.id, "acks": "all", "linger.ms": 5,
                    "partitioner": "murmur2_random", "max.in.flight.requests.per.connection": 1,
                    "topic.metadata.refresh.interval.ms": a.metadata_max_age_ms,
                    "message.timeout.ms": a.delivery_timeout_ms})

    def report(err: Any, msg: Any) -> None:
        v = json.loads(msg.value())
        if err is not None:
            acks.write({"producer": a.id, "key": v["key"], "seq": v["seq"], "topic": a.topic, "error": err.name()})
        else:
            acks.write(_ack_line(a.id, v["key"], v["seq"], a.topic, msg.partition(), msg.offset()))

    t0, sent = time.monotonic(), 0
    try:
        while not stop.is_set():
            key, _seq, value = keys.next()
            while True:
                try:
                    p.produce(a.topic, key=key.encode(), value=value, on_delivery=report)
                    break
                except BufferError:
                    p.poll(0.05)
            sent += 1
            p.poll(0)
            wait = t0 + sent / a.rate - time.monotonic()
            if wait > 0:
                stop.wait(wait)
        left = p.flush(a.delivery_timeout_ms / 1000 + 10)
    finally:
        acks.close()
    print(f"{a.id}: sent {sent}, unanswered at exit {left}", file=sys.stderr)
    return 0


def consume_confluent(a: argparse.Namespace) -> int:
    from confluent_kafka import Consumer as CkConsumer

    stop = _stop_flag()
    out = JsonLines(a.out)
    c = CkConsumer({"bootstrap.servers": a.bootstrap, "client.id": a.id, "group.id": a.group,
                    "auto.offset.reset": "earliest", "enable.auto.commit": True, "auto.commit.interval.ms": 500,
                    "session.timeout.ms": a.session_timeout_ms, "heartbeat.interval.ms": a.heartbeat_interval_ms,
                    "topic.metadata.refresh.interval.ms": a.metadata_max_age_ms})
    c.subscribe([a.topic])
    delivered = 0
    try:
        while not stop.is_set():
            msgs = c.consume(num_messages=a.max_records or 500, timeout=0.2)
            at = now_ms()
            n = 0
            for m in msgs:
                if m.error() is not None:
                    continue
                out.write(_delivery_line(a.id, m.topic(), m.partition(), m.offset(), m.value(), at))
                n += 1
            delivered += n
            if a.rate and n:
                stop.wait(n / a.rate)
    finally:
        c.close()
        out.close()
    print(f"{a.id}: delivered {delivered}", file=sys.stderr)
    return 0


# -- the command line


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m lab.scenarios.workers", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="role", required=True)
    for role in ("produce", "consume"):
        p = sub.add_parser(role)
        p.add_argument("--client", choices=("refka", "confluent"), default="refka")
        p.add_argument("--id", required=True)
        p.add_argument("--bootstrap", required=True)
        p.add_argument("--topic", required=True)
        p.add_argument("--out", required=True, help="the ack log (produce) or the delivery log (consume)")
        p.add_argument("--rate", type=float, default=200.0 if role == "produce" else 0.0,
                       help="records per second (consume: at most; 0 = no limit)")
        p.add_argument("--metadata-max-age-ms", type=int, default=1000)
        if role == "produce":
            p.add_argument("--keys", type=int, default=100)
            p.add_argument("--delivery-timeout-ms", type=int, default=30000)
        else:
            p.add_argument("--group", required=True)
            p.add_argument("--callbacks", help="the key listener's log (refka's client)")
            p.add_argument("--max-records", type=int, default=100)
            p.add_argument("--session-timeout-ms", type=int, default=10000)
            p.add_argument("--heartbeat-interval-ms", type=int, default=500)
            p.add_argument("--no-ordered-delivery", action="store_true",
                           help="refka's consumer delivers as a stock one does (no KIP-253 holds)")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    if a.role == "produce":
        return asyncio.run(produce_refka(a)) if a.client == "refka" else produce_confluent(a)
    if a.client == "refka":
        if not a.callbacks:
            a.callbacks = a.out + ".callbacks"
        return asyncio.run(consume_refka(a))
    return consume_confluent(a)


if __name__ == "__main__":
    sys.exit(main())
