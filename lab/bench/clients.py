"""Client benchmark: refka's reference Producer and Consumer beside confluent-kafka's, on one refka cluster.

    python -m lab.bench.clients [--quick] [--records N] [--batch-size BYTES] [--json PATH]
    python -m lab.bench --clients [...]      make bench ARGS=--clients

The cluster: ``refka serve --brokers 3`` (three brokers and the controller in
one process, disk logs in a temporary directory), started by the benchmark,
with ``group.initial.rebalance.delay.ms=0`` (each consumer below is a group's
only member: Kafka's 3 s default would only be waited out inside the consume
figure). Every topic is fresh: 12 partitions, RF 1, so each broker leads 4.

Records: N (200,000; 20,000 with --quick; ``--records``) of 1 KiB values (one
random value for all) with distinct 9-byte keys (``b"%09d" % i``), made before
any clock starts. MB are 10^6 bytes of values (keys and batch overhead are not
counted), as in the main benchmark.

1. Produce, each row on its own topic. The clock runs from the first send to
   the end of the flush (every record answered). Before it starts, the
   producer has the topic's metadata and has flushed 96 keyed records to a
   warm-up topic of 12 partitions (connections to every broker open; the
   idempotent producer's id in hand: librdkafka asks for it only once it has
   a record to send). Afterwards the topic's high
   watermarks must add up to N (every record landed, none twice), and for
   refka's producer no send's future may hold an error.
   - refka's ``Producer(acks=1, linger_ms=5)`` (its default ``max_batch_size``,
     16 KiB, Java's), then ``enable_idempotence=True, acks="all"``: ``fut =
     await producer.send(topic, value, key=key)`` in a loop, then ``await
     producer.flush()``. The send loop and the flush are timed apart too (in
     the JSON): ``send`` waits only once ``buffer_memory`` (32 MiB) of
     records are unanswered, so the loop buffers that much before the sender
     task sends any, and the flush sends the rest.
   - confluent-kafka's ``Producer`` with the same settings (``acks=1``,
     ``linger.ms=5``, librdkafka's default ``batch.size``, 1,000,000 bytes),
     then ``enable.idempotence=True, acks=all``: ``produce(topic, value,
     key=key)`` in a loop (``poll(0)`` every 16,384 records, and until there is
     room when its queue is full), then ``flush()``; ``partitioner`` is
     ``murmur2_random`` (Java's and refka's, so the keys land where refka's
     producer put them) and ``queue.buffering.max.messages`` 1,000,000 (the
     main benchmark's: the default, 100,000, only adds waits for room).
   ``--batch-size`` sets both clients' batch size instead of their defaults.
2. Consume, each row in a consumer group of its own (a fresh group id), one
   member, subscribed to the topic refka's acks=1 producer wrote (the same
   records for every consumer; the next produce topic that holds N records if
   that row failed). The clock runs from the first ``getmany`` (``consume``)
   to the last of the N records, so it includes joining the group and the
   first fetches (the time to the first record is in the JSON). Afterwards
   each partition must have delivered exactly its high watermark in records,
   the last at offset high watermark - 1 (none missing, none twice).
   - refka's ``Consumer(topic, group_id=..., auto_offset_reset="earliest")``
     (ordered delivery on: KIP-253's gate, the default), then with
     ``ordered_delivery=False``; ``getmany(timeout_ms=1000)`` in a loop.
   - confluent-kafka's ``Consumer`` (``subscribe``, ``consume(n, 1.0)`` in a
     loop) with the main benchmark's consumer settings (workload.py:
     ``fetch.queue.backoff.ms=10``, without which librdkafka pauses fetching
     for 1 s whenever its queue is full, and no auto-commit).

refka's client runs on uvloop (as the broker does), one ``uvloop.run`` per
row. Both clients run in this process and share the machine's CPUs with the
brokers' process: the CPU columns are % of one core of the brokers' process
and of this one (librdkafka's threads included), over the timed part.

Prints a table (no figure is checked against a target) and writes everything
to lab/bench/results/<UTC timestamp>-clients.json (or --json). A row that
fails is n/a with its reason; the exit status is then 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import confluent_kafka
import uvloop
from confluent_kafka.admin import AdminClient, NewTopic

from lab.bench import failover, report, targets, workload
from refka.broker.logging import configure as configure_logging
from refka.client.consumer import Consumer
from refka.client.producer import Producer

FULL_RECORDS = 200_000
QUICK_RECORDS = 20_000
PARTITIONS = 12
VALUE_BYTES = 1024
LINGER_MS = 5
TIMEOUT = 120.0  # a phase without progress for this long fails
CLUSTER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}
WARMUP_TOPIC = "clients-warmup"
WARMUP_KEYS = [b"warm-up %d" % i for i in range(96)]
RESULTS_DIR = Path(__file__).resolve().parent / "results"

REFKA, CONFLUENT = "refka", "confluent-kafka"
PRODUCE_ROWS = [(REFKA, "acks=1"), (REFKA, "idempotent, acks=all"),
                (CONFLUENT, "acks=1"), (CONFLUENT, "idempotent, acks=all")]
CONSUME_ROWS = [(REFKA, "group, ordered delivery on"), (REFKA, "group, ordered delivery off"),
                (CONFLUENT, "group")]


class PhaseFailed(RuntimeError):
    pass


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _process_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)  # every thread: librdkafka's too
    return r.ru_utime + r.ru_stime


class Clock:
    """Wall time and the CPU time of this process and of the brokers' between start() and stop()."""

    def __init__(self, broker_pid: int) -> None:
        self.broker_pid = broker_pid

    def start(self) -> None:
        self.cpu0, self.bcpu0 = _process_cpu(), targets.cpu_seconds(self.broker_pid)
        self.t0 = time.perf_counter()

    def stop(self) -> float:
        self.t1 = time.perf_counter()
        self.cpu1, self.bcpu1 = _process_cpu(), targets.cpu_seconds(self.broker_pid)
        return self.t1

    def figures(self, records: int) -> dict[str, Any]:
        seconds = self.t1 - self.t0
        return {
            "records": records, "seconds": seconds,
            "mb_per_s": records * VALUE_BYTES / seconds / 1e6, "records_per_s": records / seconds,
            "client_cpu_percent": (self.cpu1 - self.cpu0) / seconds * 100,
            "broker_cpu_percent": None if self.bcpu0 is None or self.bcpu1 is None
            else (self.bcpu1 - self.bcpu0) / seconds * 100,
        }


# -- topics


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
    except confluent_kafka.KafkaException as e:
        raise PhaseFailed(f"CreateTopics {topic}: {e}") from e
    deadline = time.monotonic() + TIMEOUT
    while True:
        t = admin.list_topics(topic, timeout=TIMEOUT).topics.get(topic)
        if (t is not None and t.error is None and len(t.partitions) == PARTITIONS
                and all(p.leader >= 0 for p in t.partitions.values())):
            return
        if time.monotonic() > deadline:
            raise PhaseFailed(f"topic {topic} without {PARTITIONS} led partitions after {TIMEOUT:.0f} s")
        time.sleep(0.05)


def delete_topic(bootstrap: str, topic: str) -> None:
    """Best effort, not timed: frees the disk a topic only produced to holds."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.delete_topics([topic], operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
    except confluent_kafka.KafkaException:
        pass


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    """partition -> high watermark (ListOffsets through librdkafka; no group is joined)."""
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "refka-bench-clients-watermarks"})
    try:
        return {p: c.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=TIMEOUT)[1]
                for p in range(PARTITIONS)}
    finally:
        c.close()


def check_landed(bootstrap: str, topic: str, n: int) -> dict[int, int]:
    hw = high_watermarks(bootstrap, topic)
    if sum(hw.values()) != n:
        raise PhaseFailed(f"{sum(hw.values()):,} records in {topic} after {n:,} sent (high watermarks {hw})")
    return hw


def check_consumed(counts: dict[int, int], last: dict[int, int], hw: dict[int, int]) -> None:
    wrong = {p: f"{counts.get(p, 0)} records, last offset {last.get(p)}" for p, h in hw.items()
             if counts.get(p, 0) != h or (h and last.get(p) != h - 1)}
    if wrong or set(counts) - set(hw):
        raise PhaseFailed(f"delivered {wrong or dict(counts)} against high watermarks {hw}")


# -- produce


async def refka_produce(bootstrap: str, topic: str, keys: list[bytes], value: bytes, idempotent: bool,
                        batch_size: int | None, clock: Clock) -> dict[str, Any]:
    settings: dict[str, Any] = {"acks": "all", "enable_idempotence": True} if idempotent else {"acks": 1}
    if batch_size is not None:
        settings["max_batch_size"] = batch_size
    producer = Producer(bootstrap_servers=bootstrap, linger_ms=LINGER_MS, **settings)
    await producer.start()
    try:
        await producer.partitions_for(topic)  # the topic's metadata before the clock
        for key in WARMUP_KEYS:
            await producer.send(WARMUP_TOPIC, value, key=key)
        await asyncio.wait_for(producer.flush(), TIMEOUT)
        send = producer.send
        futures = []
        clock.start()
        for key in keys:
            futures.append(await send(topic, value, key=key))
        sent = time.perf_counter()
        await asyncio.wait_for(producer.flush(), TIMEOUT)
        clock.stop()
    finally:
        await producer.stop()
    failed = [f.exception() for f in futures if f.cancelled() or f.exception() is not None]
    if failed:
        raise PhaseFailed(f"{len(failed):,} sends failed, the first: {failed[0]!r}")
    return {"send_loop_s": sent - clock.t0, "flush_s": clock.t1 - sent, "retries": producer.retries,
            "settings": {"linger_ms": LINGER_MS, "max_batch_size": producer.max_batch_size, **settings}}


def confluent_produce(bootstrap: str, topic: str, keys: list[bytes], value: bytes, idempotent: bool,
                      batch_size: int | None, clock: Clock) -> dict[str, Any]:
    settings: dict[str, Any] = {"acks": "all", "enable.idempotence": True} if idempotent else {"acks": 1}
    if batch_size is not None:
        settings["batch.size"] = batch_size
    config = {"linger.ms": LINGER_MS, "partitioner": "murmur2_random", "queue.buffering.max.messages": 1_000_000,
              **settings}
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, **config})
    producer.list_topics(topic, timeout=TIMEOUT)  # the topic's metadata before the clock
    for key in WARMUP_KEYS:
        producer.produce(WARMUP_TOPIC, value, key=key)
    if producer.flush(TIMEOUT):
        raise PhaseFailed(f"warm-up records undelivered after {TIMEOUT:.0f} s")
    send, poll = producer.produce, producer.poll
    full = 0
    clock.start()
    for i, key in enumerate(keys):
        while True:
            try:
                send(topic, value, key=key)
                break
            except BufferError:
                full += 1
                poll(0.001)
        if not i & 0x3FFF:
            poll(0)  # delivery reports served, so their messages are freed
    sent = time.perf_counter()
    left = producer.flush(TIMEOUT)
    clock.stop()
    if left:
        raise PhaseFailed(f"{left:,} records undelivered after {TIMEOUT:.0f} s")
    return {"send_loop_s": sent - clock.t0, "flush_s": clock.t1 - sent, "queue_full_waits": full, "settings": config}


# -- consume


async def refka_consume(bootstrap: str, topic: str, group_id: str, n: int, ordered: bool,
                        clock: Clock) -> dict[str, Any]:
    consumer = Consumer(topic, bootstrap_servers=bootstrap, group_id=group_id, auto_offset_reset="earliest",
                        **({} if ordered else {"ordered_delivery": False}))
    await consumer.start()
    counts: dict[int, int] = defaultdict(int)
    last: dict[int, int] = {}
    got, first, sizes = 0, None, set()
    try:
        clock.start()
        progress = clock.t0
        while got < n:
            batches = await consumer.getmany(timeout_ms=1000)
            now = time.perf_counter()
            if not batches:
                if now - progress > TIMEOUT:
                    raise PhaseFailed(f"no records for {TIMEOUT:.0f} s after {got:,} of {n:,}")
                continue
            for tp, records in batches.items():
                counts[tp.partition] += len(records)
                last[tp.partition] = records[-1].offset
                sizes.add(len(records[-1].value or b""))
                got += len(records)
            if first is None:
                first = now
            progress = now
        clock.stop()
    finally:
        await consumer.stop()
    if sizes != {VALUE_BYTES}:
        raise PhaseFailed(f"values of {sorted(sizes)} bytes, expected {VALUE_BYTES}")
    return {"counts": dict(counts), "last": last, "first_record_s": (first or clock.t1) - clock.t0}


def confluent_consume(bootstrap: str, topic: str, group_id: str, n: int, clock: Clock) -> dict[str, Any]:
    config = {**workload.CONSUMER_CONFIG, "group.id": group_id}
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, **config})
    counts: dict[int, int] = defaultdict(int)
    last: dict[int, int] = {}
    got, first, sizes = 0, None, set()
    try:
        consumer.subscribe([topic])
        take = consumer.consume
        clock.start()
        progress = clock.t0
        while got < n:
            # Never more than is left: consume() waits for the whole batch (or its timeout).
            batch = take(min(10_000, n - got), 1.0)
            now = time.perf_counter()
            if not batch:
                if now - progress > TIMEOUT:
                    raise PhaseFailed(f"no records for {TIMEOUT:.0f} s after {got:,} of {n:,}")
                continue
            for msg in batch:
                if msg.error() is not None:
                    raise PhaseFailed(f"consumer error after {got:,} records: {msg.error()}")
                p = msg.partition()
                counts[p] += 1
                last[p] = msg.offset()
            sizes.add(len(batch[-1].value() or b""))
            got += len(batch)
            if first is None:
                first = now
            progress = now
        clock.stop()
    finally:
        consumer.close()
    if sizes != {VALUE_BYTES}:
        raise PhaseFailed(f"values of {sorted(sizes)} bytes, expected {VALUE_BYTES}")
    return {"counts": dict(counts), "last": last, "first_record_s": (first or clock.t1) - clock.t0,
            "settings": config}


# -- the run


def _run(coro: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    return uvloop.run(coro)


def _row(phase: str, client: str, mode: str, measure: Callable[[Clock], dict[str, Any]], broker_pid: int,
         records: int) -> dict[str, Any]:
    """One measured row; a failure is the row's error, never a figure."""
    row: dict[str, Any] = {"phase": phase, "client": client, "mode": mode}
    clock = Clock(broker_pid)
    try:
        extra = measure(clock)
    except (PhaseFailed, confluent_kafka.KafkaException, OSError, TimeoutError, RuntimeError) as e:
        row["error"] = f"{type(e).__name__}: {e}"
        _say(f"{phase} {client} {mode}: n/a ({row['error']})")
        return row
    row.update(clock.figures(records), extra=extra)
    _say(f"{phase} {client} {mode}: {row['mb_per_s']:,.1f} MB/s, {row['records_per_s']:,.0f} records/s "
         f"({row['seconds']:.2f} s)")
    return row


def run(bootstrap: str, broker_pid: int, n: int, batch_size: int | None, stamp: str) -> list[dict[str, Any]]:
    value = os.urandom(VALUE_BYTES)
    keys = [b"%09d" % i for i in range(n)]
    rows: list[dict[str, Any]] = []
    written: dict[str, dict[int, int]] = {}  # produce topics holding N records -> their high watermarks
    create_topic(bootstrap, WARMUP_TOPIC)
    for k, (client, mode) in enumerate(PRODUCE_ROWS):
        topic = f"clients-{stamp}-produce-{k}"
        idempotent = mode.startswith("idempotent")

        def produce(clock: Clock, topic: str = topic, client: str = client, idempotent: bool = idempotent) -> dict[str, Any]:
            create_topic(bootstrap, topic)
            if client == REFKA:
                extra = _run(refka_produce(bootstrap, topic, keys, value, idempotent, batch_size, clock))
            else:
                extra = confluent_produce(bootstrap, topic, keys, value, idempotent, batch_size, clock)
            written[topic] = check_landed(bootstrap, topic, n)
            return {"topic": topic, **extra}

        rows.append(_row("produce", client, mode, produce, broker_pid, n))
    source = next(iter(written), None)
    for topic in written:
        if topic != source:
            delete_topic(bootstrap, topic)
    for k, (client, mode) in enumerate(CONSUME_ROWS):
        group_id = f"clients-{stamp}-consume-{k}"
        ordered = mode.endswith("ordered delivery on")

        def consume(clock: Clock, client: str = client, group_id: str = group_id, ordered: bool = ordered) -> dict[str, Any]:
            if source is None:
                raise PhaseFailed("no produce row left a topic of N records to read")
            if client == REFKA:
                extra = _run(refka_consume(bootstrap, source, group_id, n, ordered, clock))
            else:
                extra = confluent_consume(bootstrap, source, group_id, n, clock)
            check_consumed(extra["counts"], extra["last"], written[source])
            return {"topic": source, "group_id": group_id, **extra}

        rows.append(_row("consume", client, mode, consume, broker_pid, n))
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = ("client", "mode", "records", "MB/s", "records/s", "seconds", "1st record s", "CPU % brokers / client")
    notes: list[str] = []
    cells: list[tuple[str, ...]] = []
    for r in rows:
        mode = f"{r['phase']}, {r['mode']}"
        if "error" in r:
            if r["error"] not in notes:
                notes.append(r["error"])
            na = f"n/a [{notes.index(r['error']) + 1}]"
            cells.append((r["client"], mode, "-", na, na, na, "-", "-"))
            continue
        broker = "?" if r["broker_cpu_percent"] is None else f"{r['broker_cpu_percent']:.0f}"
        cells.append((r["client"], mode, f"{r['records']:,}", f"{r['mb_per_s']:,.1f}", f"{r['records_per_s']:,.0f}",
                      f"{r['seconds']:.2f}", f"{first:.2f}" if (first := r["extra"].get("first_record_s")) else "",
                      f"{broker} / {r['client_cpu_percent']:.0f}"))
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]

    def line(values: tuple[str, ...]) -> str:
        return "  ".join(v.ljust(w) if i < 2 else v.rjust(w) for i, (v, w) in enumerate(zip(values, widths, strict=True)))

    out = [line(head), "-" * len(line(head)), *(line(c) for c in cells)]
    out += [f"[{i}] {note}" for i, note in enumerate(notes, 1)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.bench.clients", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"a smoke run: {QUICK_RECORDS:,} records a row")
    parser.add_argument("--records", type=int, default=None,
                        help=f"records a row (default {FULL_RECORDS:,}; {QUICK_RECORDS:,} with --quick)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="both producers' batch size in bytes (default: each client's own, refka 16384, "
                             "librdkafka 1000000)")
    parser.add_argument("--json", type=Path, default=None,
                        help="results file (default lab/bench/results/<UTC timestamp>-clients.json)")
    args = parser.parse_args(argv)
    configure_logging()  # the reference client's structlog lines to stderr, as the broker's
    n = args.records if args.records is not None else (QUICK_RECORDS if args.quick else FULL_RECORDS)
    if n < 1 or (args.batch_size is not None and args.batch_size < 1):
        parser.error("--records and --batch-size must be at least 1")
    started = datetime.now(UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    results: dict[str, Any] = {
        "started_at": started.isoformat(), "quick": args.quick, "machine": report.machine_info(),
        "config": {"benchmark": "clients", "cluster": "refka serve --brokers 3 (one process, disk)",
                   "broker_overrides": CLUSTER_OVERRIDES, "records": n, "value_bytes": VALUE_BYTES,
                   "partitions": PARTITIONS, "replication_factor": 1, "linger_ms": LINGER_MS,
                   "batch_size": args.batch_size, "event_loop": f"uvloop {uvloop.__version__}",
                   "mb": "10^6 bytes of record values"},
        "rows": [],
    }
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="refka-bench-clients-") as tmp:
        target = failover.ClusterTarget(Path(tmp), 3, CLUSTER_OVERRIDES, "clients")
        try:
            running, ports, _controller = failover.start_cluster(target)
        except (failover.BenchError, OSError, RuntimeError) as e:
            target.stop()
            results["error"] = f"cluster did not start: {e}"
            _say(results["error"])
        else:
            try:
                bootstrap = ",".join(f"{targets.HOST}:{p}" for p in sorted(ports.values()))
                _say(f"cluster up: brokers {ports}, process {running.pid}")
                results["rows"] = run(bootstrap, running.pid, n, args.batch_size, stamp)
            except (PhaseFailed, confluent_kafka.KafkaException) as e:
                results["error"] = f"{type(e).__name__}: {e}"
                _say(results["error"])
            finally:
                target.stop()
    results["finished_at"] = datetime.now(UTC).isoformat()
    results["loadavg_1min_end"] = os.getloadavg()[0]
    results["wall_seconds"] = time.monotonic() - t0
    m = results["machine"]
    print(f"\nrefka bench --clients{' --quick' if args.quick else ''}: {m['nproc']} CPUs ({m['cpu_model']}), "
          f"Python {m['python']}, refka {m['refka']} on uvloop {uvloop.__version__}, "
          f"confluent-kafka {m['confluent_kafka']} / librdkafka {m['librdkafka']}")
    print(f"refka serve --brokers 3 (one process); {n:,} keyed records of 1 KiB a row; topics of {PARTITIONS} "
          f"partitions, RF 1; MB = 10^6 bytes of values; load average before/after: "
          f"{m['loadavg_1min']:.2f} / {results['loadavg_1min_end']:.2f}\n")
    if "error" in results:
        print(f"n/a: {results['error']}")
    else:
        print(table(results["rows"]))
    path = args.json or RESULTS_DIR / f"{stamp}-clients.json"
    report.write_json(results, path)
    print(f"\nresults: {path}  ({results['wall_seconds']:.0f} s)")
    failed = "error" in results or any("error" in r for r in results["rows"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
