"""The streaming audit (issue 14): a lab's delivery lines, as its consumers publish them to a
refka topic, watched per minute by a Structured Streaming query.

    python -m lab.pipeline watch --bootstrap HOST:PORT[,...] --topic T [--output-topic T2]
        [--checkpoint DIR] [--trigger-seconds N] [--watermark "2 minutes"]
        [--starting-offsets earliest|latest] [--minutes M | --once] [--master URL]

Each record's value is one delivery line (sources.DELIVERY, the audit's format), parsed as
strictly as the audit parses it (sources.parse); a record that is not a good line is a *bad
line*. Lines are grouped into one-minute windows of event time: a good line's delivered_ms,
a bad line's record timestamp (it has no delivered_ms to trust). The watermark (default two
minutes behind the latest event time seen) says how late a line may come and still count;
a window is dropped from the state once the watermark has passed its end.

Per window (one output row, written again each trigger that changed it: the update mode):

- ``records``: good delivery lines; ``bad_lines``: bad ones;
- ``duplicates``: deliveries of a (producer, key, seq) beyond its first in the window;
- ``violations``: records whose first delivery in the window is strictly earlier than the
  first delivery of a smaller seq of the same (producer, key) in the window (audit.py's
  running max over the key's first deliveries in seq order);
- ``first_deliveries`` and their latency (delivered_ms - sent_ms) ``latency_p50_ms``,
  ``latency_p99_ms`` (exact, nearest rank as audit.py: rank round(q * (n - 1))) and
  ``latency_max_ms``.

How it is computed, and what that leaves out: one stateful streaming aggregation (Spark's
state store, kept in the checkpoint) per window keeps the window's deliveries, (producer,
key, seq, delivered_ms, sent_ms), with collect_list; each trigger's output row is computed
from that list (sorted: first deliveries, the running max per key, the latencies). So the
counts are exact across micro-batches, restarts from the checkpoint and late lines within
the watermark, **but per window**: a duplicate whose deliveries fall in different minutes,
or a record that overtook a smaller seq delivered in another minute, is not counted (the
batch audit, ``python -m lab.pipeline audit``, counts those). A line later than the
watermark is dropped. Nothing of pandas (applyInPandasWithState / transformWithStateInPandas
would keep per-key state across windows, but need pandas, which lab/pipeline does not
install). The state holds each open window's deliveries: a few hundred bytes per delivery,
for the minutes the watermark keeps open.

Sinks: the console (each trigger's updated windows), or ``--output-topic``: each updated
window as one JSON object per record (the window's last record is its current count). The
output topic is created first when it does not exist (the brokers' default partitions and
replication factor), so the sink works on a cluster with auto.create.topics.enable=false.
``--once``: what the topic holds now, then stop (Trigger.AvailableNow); ``--minutes M``:
run M minutes; neither: until interrupted. ``--checkpoint``: where the query's offsets and
state live (a restart with the same directory resumes); default a temporary directory,
removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lab.pipeline import sources
from lab.pipeline.sources import DELIVERY
from refka.client.connection import connect
from refka.protocol import ErrorCode
from refka.protocol.messages.create_topics import CreateTopics

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

WINDOW = "1 minute"
WATERMARK = "2 minutes"
QUANTILES = {"p50": 0.5, "p99": 0.99}
OUTPUT_COLUMNS = ("window_start_ms", "window_end_ms", "records", "bad_lines", "first_deliveries", "duplicates",
                  "violations", "latency_p50_ms", "latency_p99_ms", "latency_max_ms")


@dataclass
class Options:
    bootstrap: str
    topic: str
    output_topic: str | None = None
    checkpoint: str | None = None
    trigger_seconds: float = 10.0
    watermark: str = WATERMARK
    starting_offsets: str = "earliest"
    once: bool = False
    minutes: float | None = None


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--bootstrap", required=True, help="refka's bootstrap servers, host:port[,host:port...]")
    ap.add_argument("--topic", required=True, help="the topic the consumers publish their delivery lines to")
    ap.add_argument("--output-topic", help="write each updated window there as JSON (default: print them)")
    ap.add_argument("--checkpoint", help="the query's checkpoint directory (default: a temporary one)")
    ap.add_argument("--trigger-seconds", type=float, default=10.0, metavar="N", help="a micro-batch every N s")
    ap.add_argument("--watermark", default=WATERMARK,
                    help=f"how late a line may be and still count (default {WATERMARK!r})")
    ap.add_argument("--starting-offsets", default="earliest", choices=("earliest", "latest"),
                    help="where a new query starts in the topic (a checkpoint's offsets win)")
    when = ap.add_mutually_exclusive_group()
    when.add_argument("--once", action="store_true", help="what the topic holds now, then stop")
    when.add_argument("--minutes", type=float, metavar="M", help="run M minutes, then stop")
    ap.add_argument("--master", help="Spark master URL (default local[*])")


def options_of(a: argparse.Namespace) -> Options:
    return Options(a.bootstrap, a.topic, a.output_topic, a.checkpoint, a.trigger_seconds, a.watermark,
                   a.starting_offsets, a.once, a.minutes)


def windows(lines: DataFrame, watermark: str = WATERMARK) -> DataFrame:
    """Per-minute counts (OUTPUT_COLUMNS) of ``lines`` (value, timestamp, ...: sources.kafka_stream_lines),
    a streaming DataFrame or, for tests, a batch one (the watermark is then no-op)."""
    from pyspark.sql import functions as F

    parsed = sources.parse(lines, DELIVERY)
    good = F.col("problem").isNull()
    event_ms = F.when(good, F.col("delivered_ms")).otherwise(F.unix_millis("timestamp"))
    delivery = F.when(good, F.struct("producer", "key", "seq", "delivered_ms", "sent_ms"))
    per_window = (parsed.withColumn("event_time", F.timestamp_millis(event_ms))
                  .withWatermark("event_time", watermark)
                  .groupBy(F.window("event_time", WINDOW).alias("w"))
                  .agg(F.count(F.when(good, 1)).alias("records"), F.count(F.when(~good, 1)).alias("bad_lines"),
                       F.collect_list(delivery).alias("d")))
    # Sorted by (producer, key, seq, delivered_ms): a triple's first delivery leads its run.
    sorted_ = per_window.select("w", "records", "bad_lines", F.array_sort("d").alias("s"))
    firsts = sorted_.select("*", F.filter("s", lambda x, i: F.coalesce(~_same(x, F.get(F.col("s"), i - 1)),
                                                                       F.lit(True))).alias("f"))
    with_latency = firsts.select(
        "*", F.array_sort(F.transform("f", lambda x: x["delivered_ms"] - x["sent_ms"])).alias("lat"))
    n = F.size("lat")
    return with_latency.select(
        F.unix_millis(F.col("w.start")).alias("window_start_ms"), F.unix_millis(F.col("w.end")).alias("window_end_ms"),
        "records", "bad_lines", F.size("f").cast("long").alias("first_deliveries"),
        (F.col("records") - F.size("f")).alias("duplicates"), _violations(F.col("f")).alias("violations"),
        *(F.when(n > 0, F.get("lat", F.bround(F.lit(q) * (n - 1)).cast("int"))).alias(f"latency_{name}_ms")
          for name, q in QUANTILES.items()),
        F.array_max("lat").alias("latency_max_ms"))


def _same(x: Column, y: Column) -> Column:
    return (x["producer"] == y["producer"]) & (x["key"] == y["key"]) & (x["seq"] == y["seq"])


def _violations(firsts: Column) -> Column:
    """Over first deliveries sorted by (producer, key, seq): those earlier than the running max
    of their key's smaller seqs' first deliveries."""
    from pyspark.sql import functions as F

    def acc(producer: Column, key: Column, max_ms: Column, n: Column) -> Column:
        return F.struct(producer.alias("producer"), key.alias("key"), max_ms.alias("max_ms"), n.alias("n"))

    zero = acc(F.lit(None).cast("string"), F.lit(None).cast("string"), F.lit(None).cast("long"),
               F.lit(0).cast("long"))

    def step(a: Column, x: Column) -> Column:
        same_key = F.coalesce((a["producer"] == x["producer"]) & (a["key"] == x["key"]), F.lit(False))
        overtook = (x["delivered_ms"] < a["max_ms"]).cast("long")
        return F.when(same_key, acc(x["producer"], x["key"], F.greatest(a["max_ms"], x["delivered_ms"]),
                                    a["n"] + overtook)) \
            .otherwise(acc(x["producer"], x["key"], x["delivered_ms"], a["n"]))

    return F.aggregate(firsts, zero, step, lambda a: a["n"])


def ensure_topic(bootstrap: str, topic: str) -> bool:
    """Creates ``topic`` with the brokers' defaults unless it exists; True when it was created.
    RuntimeError with the broker's answer for any other outcome."""
    R = CreateTopics.Request

    async def create() -> tuple[int, str | None]:
        conn = await connect(bootstrap.split(",")[0])
        try:
            resp = await conn.request(CreateTopics, R(topics=[R.CreatableTopic(
                name=topic, num_partitions=-1, replication_factor=-1, assignments=[], configs=[])],
                timeout_ms=30_000))
        finally:
            await conn.close()
        return resp.topics[0].error_code, resp.topics[0].error_message

    code, message = asyncio.run(create())
    if code == ErrorCode.TOPIC_ALREADY_EXISTS:
        return False
    if code != ErrorCode.NONE:
        raise RuntimeError(f"cannot create the output topic {topic}: {ErrorCode(code).name} {message or ''}".rstrip())
    return True


def start(spark: SparkSession, o: Options, checkpoint: str) -> StreamingQuery:
    """The watch query over ``o.topic``, started (module docstring)."""
    from pyspark.sql import functions as F

    if o.output_topic:
        ensure_topic(o.bootstrap, o.output_topic)

    frame = windows(sources.kafka_stream_lines(spark, o.bootstrap, o.topic, starting_offsets=o.starting_offsets),
                    o.watermark)
    if o.output_topic:
        writer = (frame.select(F.to_json(F.struct(*OUTPUT_COLUMNS), {"ignoreNullFields": "false"}).alias("value")).writeStream.format("kafka")
                  .option("kafka.bootstrap.servers", o.bootstrap).option("topic", o.output_topic))
    else:
        writer = frame.writeStream.format("console").option("truncate", "false").option("numRows", 10_000)
    writer = writer.outputMode("update").option("checkpointLocation", checkpoint).queryName("refka_watch")
    writer = writer.trigger(availableNow=True) if o.once else writer.trigger(processingTime=f"{round(o.trigger_seconds * 1000)} milliseconds")
    return writer.start()


def run(spark: SparkSession, o: Options) -> StreamingQuery:
    """Runs the query to its end (``--once``, ``--minutes``) or an interrupt; the stopped query back."""
    tmp = None if o.checkpoint else tempfile.mkdtemp(prefix="refka-watch-")
    try:
        q = start(spark, o, o.checkpoint or tmp)  # type: ignore[arg-type]
        try:
            if o.once:
                q.awaitTermination()
            else:
                q.awaitTermination(round(o.minutes * 60) if o.minutes is not None else None)
        finally:
            q.stop()
        return q
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
