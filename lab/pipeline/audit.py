"""The audit of a lab run on Spark: lab/scenarios/audit.py's definitions over logs of any size.

    python -m lab.pipeline audit --deliveries PATH [--acks PATH] [--timeline PATH] [--recordings PATH]
        --out DIR [--master URL]

Definitions, per (producer, key), as lab/scenarios/audit.py has them (a record is
one seq of its key):

- a record's *first delivery* is its delivery with the smallest delivered_ms (any
  consumer; equal times: the smallest consumer name, then partition and offset);
  deliveries beyond the first are *duplicates*;
- a record is an *order violation* when its first delivery is strictly earlier than
  the first delivery of some smaller seq of its key (it overtook that one): a running
  max of delivered_ms over the key's first deliveries in seq order, without the
  record's own row. Equal times are in order. A seq never delivered is no violation;
  acknowledged (an ack line without "error") and never delivered, it is a *loss*. An
  ack line with "error" is a record the producer gave up on: neither acked nor bad;
- latency is delivered_ms - sent_ms of first deliveries; the summary's percentiles
  are exact, nearest rank (rank round(q * (n - 1)) of the sorted latencies, as
  audit.py), from the histogram of latencies (milliseconds: few distinct values);
  beyond MAX_EXACT_LATENCIES distinct values, percentile_approx at 1e-5 rank error. The
  latency tables' percentiles are exact and nearest rank too (_latency_by), the leader
  changes' windows' are percentile_approx's (1e-4 rank error).

Every input is read once (sources.py), its lines parsed and checked, and staged as
Parquet under DIR/.staging (removed at the end): good rows and bad lines in one
pass over the text or the topic, and one consistent snapshot of a topic that is
still being written. The first deliveries are then kept (persisted) for the rest.

Writes to DIR: ``summary.json`` (SUMMARY_KEYS, nothing else) and Parquet tables
(TABLES says what each holds), from which report.py makes ``report.html``.
"""

from __future__ import annotations

import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lab.pipeline import sources
from lab.pipeline.sources import ACK, DELIVERY, RECORDING, TIMELINE, Field

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

SUMMARY_KEYS = ("records", "bad_lines", "bad_examples", "keys", "violations", "losses", "duplicates",
                "latency_ms")
TABLES = {
    "violations": "one row per record that overtook an earlier seq of its key: its first delivery (topic, "
                  "partition, offset, consumer, sent_ms, delivered_ms) and the overtaken one's (the smallest "
                  "seq with the latest first delivery before it: overtaken_seq, overtaken_partition, ...)",
    "losses": "one row per acknowledged record never delivered: producer, key, seq, the ack's topic, "
              "partition, offset and acked_ms (--acks only)",
    "producer_errors": "ack lines with \"error\": records the producer gave up on (--acks only)",
    "duplicates": "one row per record delivered more than once: how often, by which consumers, from which "
                  "partitions and offsets, first and last delivered_ms",
    "bad_lines": "every bad line: input, origin (file or topic-partition), problem, the line",
    "latency_per_partition": "per topic and partition: first deliveries (records), latency p50/p99/p999/max/mean "
                             "(ms, exact), first and last delivered_ms",
    "latency_per_second": "per second of delivered_ms (second_ms, UTC): first deliveries, latency "
                          "p50/p99/p999/max/mean",
    "latency_per_partition_second": "per topic, partition and second: first deliveries, latency "
                                    "p50/p99/max/mean, first and last delivered_ms",
    "leader_changes": "per leader change of the timeline (topic, partition, new_epoch; the earliest broker "
                      "view): the time to the partition's first delivery after it (gap_ms), and first "
                      "deliveries, records/s and latency in the window_ms before and after it (--timeline only)",
    "metadata_per_client": "KIP-526: per client (client_id, software): Metadata requests, all-topics "
                           "requests, topics named (total, per request mean and max), bytes (--recordings only)",
    "requests_per_client": "per client and API: requests, request and response bytes (--recordings only)",
}
MAX_EXACT_LATENCIES = 2_000_000  # distinct latency values collected to the driver for exact percentiles
EXAMPLES = 5
WINDOW_MS = 5_000
QUANTILES = {"p50": 0.5, "p99": 0.99, "p999": 0.999}
TRIPLE = ["producer", "key", "seq"]


@dataclass
class Inputs:
    deliveries: str
    acks: str | None = None
    timeline: str | None = None
    recordings: str | None = None


@dataclass
class Audit:
    """What ``run`` found: the summary, and what the report (report.py) shows beside the tables."""

    summary: dict[str, Any]
    tables: dict[str, int] = field(default_factory=dict)  # table -> rows written
    bad_per_input: dict[str, int] = field(default_factory=dict)
    timings_s: dict[str, float] = field(default_factory=dict)
    # leader_changed, fault_fired, plan_step -> their times (and what they were), from the timeline
    marks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def _ack_spec() -> tuple[Field, ...]:
    # A line is an ack, or a record the producer gave up on (workers.py: an "error", and no
    # partition, offset or acked_ms).
    waived = {"partition", "offset", "acked_ms"}
    return (*(Field(f.name, f.kind, unless="error" if f.name in waived else None) for f in ACK),
            Field("error", sources.ANY, False))


def _timeline_checks() -> list[tuple[Column, str]]:
    from pyspark.sql import functions as F

    leader = ~F.coalesce(F.col("type") == "leader_changed", F.lit(False)) | (
        F.col("topic").isNotNull() & F.col("partition").isNotNull() & F.col("new_leader").isNotNull()
        & F.col("new_epoch").isNotNull())
    return [(F.col("t_ms").isNotNull() | F.col("time_ms").isNotNull() | F.col("at_ms").isNotNull(),
             "missing t_ms, time_ms and at_ms"),
            (leader, "leader_changed without topic, partition, new_leader or new_epoch")]


def stage(spark: SparkSession, name: str, source: str, spec: tuple[Field, ...],
          checks: list[tuple[Column, str]], staging: Path) -> DataFrame:
    """Parse ``source`` and write it to ``staging/name`` in one pass; the staged rows back:
    the fields, ``problem`` (null: a good line), and for bad lines origin, block, pos and the line."""
    from pyspark.sql import functions as F

    parsed = sources.parse(sources.read_lines(spark, source), spec, checks)
    bad = F.col("problem").isNotNull()
    cols = [f.name for f in spec]
    staged = parsed.select(*cols, "problem", *(F.when(bad, F.col(c)).alias(c) for c in ("origin", "block", "pos")),
                           F.when(bad, F.col("value")).alias("value"))
    path = str(staging / name)
    staged.write.mode("overwrite").parquet(path)
    # The schema given, so that an input with no line at all still reads as an empty table.
    return spark.read.schema(staged.schema).parquet(path)


def run(spark: SparkSession, inputs: Inputs, out: Path, *, window_ms: int = WINDOW_MS,
        examples: int = EXAMPLES, keep_staging: bool = False) -> Audit:
    """The audit of ``inputs`` into ``out`` (module docstring); returns what it found."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    if window_ms < 1000:
        raise ValueError("window_ms must be at least 1000 (leader_changes' gap relies on it)")
    out = out.resolve()  # a cluster's executors have working directories of their own
    out.mkdir(parents=True, exist_ok=True)
    staging = out / ".staging"
    timings: dict[str, float] = {}
    clock = time.monotonic()

    def lap(what: str) -> None:
        nonlocal clock
        now = time.monotonic()
        timings[what] = round(now - clock, 3)
        clock = now

    wanted = [("deliveries", inputs.deliveries, DELIVERY, []), ("acks", inputs.acks, _ack_spec(), []),
              ("timeline", inputs.timeline, TIMELINE, _timeline_checks()),
              ("recordings", inputs.recordings, RECORDING, [])]
    # One Spark job per input, run together: a small input is one task, and a job's fixed costs
    # (planning, code generation) are what a small run spends its time on.
    with ThreadPoolExecutor(len(wanted)) as pool:
        futures = {name: pool.submit(stage, spark, name, source, spec, checks, staging)
                   for name, source, spec, checks in wanted if source}
        staged = {name: f.result() for name, f in futures.items()}
    lap("read_and_parse")

    tables: dict[str, int] = {}

    def write(name: str, df: DataFrame) -> DataFrame:
        path = out / f"{name}.parquet"
        df.coalesce(1).write.mode("overwrite").parquet(str(path))
        tables[name] = _rows(path)
        return spark.read.parquet(str(path))

    good = {n: df.where(F.col("problem").isNull()) for n, df in staged.items()}
    bad_tables = [df.where(F.col("problem").isNotNull()).select(
        F.lit(n).alias("input"), F.lit(i).alias("input_order"), "origin", "block", "pos", "problem",
        F.col("value").alias("line")) for i, (n, df) in enumerate(staged.items())]
    bad_all = bad_tables[0]
    for b in bad_tables[1:]:
        bad_all = bad_all.unionByName(b)
    bad_lines = write("bad_lines", bad_all)
    bad_per_input = {r["input"]: r["count"] for r in bad_lines.groupBy("input").count().collect()}
    first_bad = [{"input": r["input"], "origin": r["origin"], "problem": r["problem"], "line": _clip(r["line"])}
                 for r in bad_lines.orderBy("input_order", "origin", "block", "pos").limit(examples).collect()]
    lap("bad_lines")

    deliveries = good["deliveries"].select(*(f.name for f in DELIVERY))
    firsts = (deliveries.groupBy(*TRIPLE)
              .agg(F.min(F.struct("delivered_ms", "consumer", "topic", "partition", "offset", "sent_ms")).alias("f"),
                   F.count(F.lit(1)).alias("deliveries"))
              .select(*TRIPLE, "f.*", "deliveries")
              .withColumn("latency_ms", F.col("delivered_ms") - F.col("sent_ms"))
              .persist(StorageLevel.MEMORY_AND_DISK))
    totals = firsts.agg(F.count(F.lit(1)).alias("records"), F.sum("deliveries").alias("lines")).first()
    n_firsts, records = totals["records"], totals["lines"] or 0
    lap("first_deliveries")

    write("violations", _violations(firsts))
    write("duplicates", _duplicates(deliveries, firsts))
    lap("violations_and_duplicates")

    keys_df = firsts.select("producer", "key")
    losses: int | None = None
    if "acks" in good:
        acks = good["acks"]
        acked = acks.where(F.col("error").isNull())
        # An ack line twice (a producer's log appended twice) is one loss: deduplicated after the
        # join, on the few left, not before it on every ack.
        write("losses", acked.join(firsts.select(*TRIPLE), TRIPLE, "left_anti").groupBy(*TRIPLE)
              .agg(F.min(F.struct("acked_ms", "topic", "partition", "offset")).alias("a"))
              .select(*TRIPLE, "a.topic", "a.partition", "a.offset", "a.acked_ms"))
        losses = tables["losses"]
        write("producer_errors", acks.where(F.col("error").isNotNull()).select(
            *TRIPLE, "topic", F.to_json("error").alias("error")))
        keys_df = keys_df.unionByName(acked.select("producer", "key"))
    keys = keys_df.distinct().count()
    lap("losses")

    latency = _exact_latency(firsts)
    lap("latency")
    pps = write("latency_per_partition_second", _per_partition_second(firsts))
    write("latency_per_second", _per_second(firsts))
    write("latency_per_partition", _per_partition(firsts))
    lap("latency_tables")

    timeline_marks: dict[str, list[dict[str, Any]]] = {}
    if "timeline" in good:
        # lab/scenarios' lines (sources.TIMELINE): an action without a type is a plan step
        tl = (good["timeline"].withColumn("time_ms", F.coalesce("t_ms", "time_ms", "at_ms"))
              .withColumn("type", F.coalesce("type", F.lit("plan_step")))
              .withColumn("step", F.coalesce(F.try_variant_get("step", "$", "string"), F.to_json("step"))))
        write("leader_changes", _leader_changes(tl, firsts, pps, window_ms))
        timeline_marks = _timeline_marks(tl)
        lap("leader_changes")
    if "recordings" in good:
        write("metadata_per_client", _metadata_per_client(good["recordings"]))
        write("requests_per_client", _requests_per_client(good["recordings"]))
        lap("recordings")

    summary = {
        "records": records,
        "bad_lines": sum(bad_per_input.values()),
        "bad_examples": first_bad,
        "keys": keys,
        "violations": tables["violations"],
        "losses": losses,
        "duplicates": records - n_firsts,
        "latency_ms": latency,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    audit = Audit(summary, tables, bad_per_input, timings, timeline_marks)
    firsts.unpersist()
    if not keep_staging:
        shutil.rmtree(staging, ignore_errors=True)
    return audit


def _rows(path: Path) -> int:
    """A written table's rows, from its Parquet footers (no Spark job)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_rows for p in path.glob("part-*.parquet"))


def _clip(line: str | None, n: int = 300) -> str | None:
    return line if line is None or len(line) <= n else line[:n] + "..."


def _violations(firsts: DataFrame) -> DataFrame:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # The running max of the key's earlier first deliveries (rows before this one in seq order);
    # ties on delivered_ms go to the smallest seq (-seq is largest): the one the max reached first.
    earlier = Window.partitionBy("producer", "key").orderBy("seq").rowsBetween(Window.unboundedPreceding, -1)
    before = F.max(F.struct("delivered_ms", (-F.col("seq")).alias("neg_seq"), "topic", "partition", "offset",
                            "consumer")).over(earlier)
    return (firsts.withColumn("b", before).where(F.col("b.delivered_ms") > F.col("delivered_ms"))
            .select(*TRIPLE, "topic", "partition", "offset", "consumer", "sent_ms", "delivered_ms",
                    (-F.col("b.neg_seq")).alias("overtaken_seq"),
                    F.col("b.delivered_ms").alias("overtaken_delivered_ms"),
                    F.col("b.topic").alias("overtaken_topic"), F.col("b.partition").alias("overtaken_partition"),
                    F.col("b.offset").alias("overtaken_offset"), F.col("b.consumer").alias("overtaken_consumer"),
                    (F.col("b.delivered_ms") - F.col("delivered_ms")).alias("ahead_ms")))


def _duplicates(deliveries: DataFrame, firsts: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    again = firsts.where(F.col("deliveries") > 1).select(*TRIPLE)
    return (deliveries.join(again, TRIPLE, "left_semi").groupBy(*TRIPLE)
            .agg(F.count(F.lit(1)).alias("deliveries"),
                 F.array_sort(F.collect_set("consumer")).alias("consumers"),
                 F.array_sort(F.collect_set(F.struct("topic", "partition", "offset"))).alias("positions"),
                 F.min("delivered_ms").alias("first_delivered_ms"), F.max("delivered_ms").alias("last_delivered_ms")))


def percentile_of_histogram(hist: list[tuple[int, int]], q: float) -> int | None:
    """The nearest-rank percentile (lab/scenarios/audit.py's: rank round(q * (n - 1))) of the
    values a sorted (value, count) histogram describes."""
    n = sum(c for _, c in hist)
    if n == 0:
        return None
    rank = min(n - 1, max(0, round(q * (n - 1))))
    seen = 0
    for value, count in hist:
        seen += count
        if seen > rank:
            return value
    return hist[-1][0]


def _exact_latency(firsts: DataFrame) -> dict[str, int | float | None]:
    from pyspark.sql import functions as F

    rows = firsts.groupBy("latency_ms").count().limit(MAX_EXACT_LATENCIES + 1).collect()
    if len(rows) <= MAX_EXACT_LATENCIES:
        hist = sorted((r["latency_ms"], r["count"]) for r in rows)
        out: dict[str, int | float | None] = {k: percentile_of_histogram(hist, q) for k, q in QUANTILES.items()}
        out["max"] = hist[-1][0] if hist else None
        return out
    r = firsts.agg(F.percentile_approx("latency_ms", list(QUANTILES.values()), 100_000).alias("p"),
                   F.max("latency_ms").alias("max")).first()
    return {**dict(zip(QUANTILES, r["p"], strict=True)), "max": r["max"]}


def _latency_by(firsts: DataFrame, keys: list[Column], names: tuple[str, ...],
                edges: bool = False) -> DataFrame:
    """Per group of ``keys``: first deliveries (records), the latency percentiles ``names``
    (exact, nearest rank as the summary's: from each group's histogram of latencies, a
    cumulative count over it), max and mean; with ``edges``, first and last delivered_ms."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    extra = [F.min("delivered_ms").alias("first_delivered_ms"), F.max("delivered_ms").alias("last_delivered_ms")]
    hist = (firsts.groupBy(*keys, "latency_ms").agg(F.count(F.lit(1)).alias("n"), *(extra if edges else [])))
    group = [k for k in hist.columns if k not in ("latency_ms", "n", "first_delivered_ms", "last_delivered_ms")]
    w = Window.partitionBy(*group)
    hist = (hist.withColumn("cum", F.sum("n").over(w.orderBy("latency_ms").rowsBetween(Window.unboundedPreceding,
                                                                                       Window.currentRow)))
            .withColumn("total", F.sum("n").over(w)))
    ranks = [F.min(F.when(F.col("cum") > F.bround(F.lit(QUANTILES[n]) * (F.col("total") - 1)), F.col("latency_ms")))
             .alias(f"{n}_ms") for n in names]
    finals = [F.min("first_delivered_ms").alias("first_delivered_ms"),
              F.max("last_delivered_ms").alias("last_delivered_ms")] if edges else []
    return hist.groupBy(*group).agg(F.sum("n").alias("records"), *ranks, F.max("latency_ms").alias("max_ms"),
                                    (F.sum(F.col("latency_ms") * F.col("n")) / F.sum("n")).alias("mean_ms"), *finals)


def _second(col: str = "delivered_ms") -> Column:
    from pyspark.sql import functions as F

    return (F.floor(F.col(col) / 1000) * 1000).cast("long")


def _per_partition_second(firsts: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return _latency_by(firsts, [F.col("topic"), F.col("partition"), _second().alias("second_ms")], ("p50", "p99"),
                       edges=True)


def _per_second(firsts: DataFrame) -> DataFrame:
    return _latency_by(firsts, [_second().alias("second_ms")], ("p50", "p99", "p999"))


def _per_partition(firsts: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return _latency_by(firsts, [F.col("topic"), F.col("partition")], ("p50", "p99", "p999"), edges=True)


def _leader_changes(tl: DataFrame, firsts: DataFrame, pps: DataFrame, window_ms: int) -> DataFrame:
    """One row per leader change (TABLES["leader_changes"]). The window's deliveries are found by
    an equi-join on (topic, partition, second) over the seconds each window covers; the first
    delivery after a change that has none within window_ms is the earliest of the seconds after
    it (latency_per_partition_second): with window_ms >= 1000 no second holds deliveries both
    before the change and after its window."""
    from pyspark.sql import functions as F

    changes = (tl.where(F.col("type") == "leader_changed")
               .groupBy("topic", "partition", "new_epoch", "new_leader")
               .agg(F.min(F.struct("time_ms", "old_leader", "old_epoch")).alias("c"),
                    F.countDistinct("broker").alias("brokers_seen"))
               .select("topic", "partition", F.col("c.time_ms").alias("change_ms"), F.col("c.old_leader"),
                       "new_leader", F.col("c.old_epoch"), "new_epoch", "brokers_seen"))
    key = ["topic", "partition", "change_ms", "new_epoch"]
    seconds = changes.select(*key, F.explode(F.sequence(
        F.floor((F.col("change_ms") - window_ms) / 1000).cast("long"),
        F.floor((F.col("change_ms") + window_ms) / 1000).cast("long"))).alias("sec"))
    near = (firsts.withColumn("sec", F.floor(F.col("delivered_ms") / 1000).cast("long"))
            .join(F.broadcast(seconds), ["topic", "partition", "sec"])
            .where((F.col("delivered_ms") >= F.col("change_ms") - window_ms)
                   & (F.col("delivered_ms") < F.col("change_ms") + window_ms)))
    is_after = F.col("delivered_ms") >= F.col("change_ms")
    before_lat = F.when(~is_after, F.col("latency_ms"))
    after_lat = F.when(is_after, F.col("latency_ms"))
    window = near.groupBy(*key).agg(
        F.count(before_lat).alias("before_records"),
        F.percentile_approx(before_lat, [0.5, 0.99], 10_000).alias("bp"), F.max(before_lat).alias("before_max_ms"),
        F.count(after_lat).alias("after_records"),
        F.percentile_approx(after_lat, [0.5, 0.99], 10_000).alias("ap"), F.max(after_lat).alias("after_max_ms"),
        F.min(F.when(is_after, F.col("delivered_ms"))).alias("first_in_window"))
    later = (changes.select(*key).join(pps.select("topic", "partition", "first_delivered_ms", "last_delivered_ms"),
                                       ["topic", "partition"])
             .where(F.col("last_delivered_ms") >= F.col("change_ms"))
             .groupBy(*key).agg(F.min("first_delivered_ms").alias("first_later")))
    per_s = 1000.0 / window_ms
    return (changes.join(window, key, "left").join(later, key, "left")
            .select("topic", "partition", "change_ms", "old_leader", "new_leader", "old_epoch", "new_epoch",
                    "brokers_seen",
                    F.coalesce("first_in_window", "first_later").alias("first_delivery_after_ms"),
                    (F.coalesce("first_in_window", "first_later") - F.col("change_ms")).alias("gap_ms"),
                    F.lit(window_ms).alias("window_ms"),
                    F.coalesce("before_records", F.lit(0)).alias("before_records"),
                    (F.coalesce("before_records", F.lit(0)) * per_s).alias("before_records_per_s"),
                    F.col("bp")[0].alias("before_p50_ms"), F.col("bp")[1].alias("before_p99_ms"), "before_max_ms",
                    F.coalesce("after_records", F.lit(0)).alias("after_records"),
                    (F.coalesce("after_records", F.lit(0)) * per_s).alias("after_records_per_s"),
                    F.col("ap")[0].alias("after_p50_ms"), F.col("ap")[1].alias("after_p99_ms"), "after_max_ms")
            .orderBy("change_ms", "topic", "partition"))


MARK_LIMIT = 2_000  # timeline marks per kind drawn in the report


def _timeline_marks(tl: DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Times the report marks: leader changes (earliest broker view), faults fired, plan steps."""
    from pyspark.sql import functions as F

    kinds: dict[str, tuple[Column, list[str]]] = {
        "leader_changed": (F.col("type") == "leader_changed", ["topic", "partition", "new_leader", "new_epoch"]),
        "fault_fired": (F.col("type") == "fault_fired", ["broker", "fault_kind"]),
        "plan_step": (F.col("type") == "plan_step", ["step", "action"]),
    }
    out: dict[str, list[dict[str, Any]]] = {}
    for kind, (cond, cols) in kinds.items():
        df = tl.where(cond)
        if kind == "leader_changed":
            df = df.groupBy(*cols).agg(F.min("time_ms").alias("time_ms"))
        out[kind] = [r.asDict() for r in df.select("time_ms", *cols).orderBy("time_ms").limit(MARK_LIMIT).collect()]
    return out


def _client(df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return df.withColumn("client_id", F.coalesce("client_id", F.lit(""))).withColumn(
        "software_name", F.coalesce("software_name", F.lit(""))).withColumn(
        "software_version", F.coalesce("software_version", F.lit("")))


def _metadata_per_client(rec: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    md = _client(rec.where(F.col("api") == "Metadata"))
    all_topics = F.coalesce(F.try_variant_get("topics", "$", "string") == "all", F.lit(False))
    named = F.size(F.try_variant_get("topics", "$", "array<string>"))
    named = F.when(F.try_variant_get("topics", "$", "array<string>").isNotNull(), named)
    return (md.groupBy("client_id", "software_name", "software_version")
            .agg(F.count(F.lit(1)).alias("metadata_requests"),
                 F.count(F.when(all_topics, 1)).alias("all_topics_requests"),
                 F.count(named).alias("named_topics_requests"),
                 F.coalesce(F.sum(named), F.lit(0)).alias("topics_named"),
                 F.avg(named).alias("topics_per_request_mean"), F.max(named).alias("topics_per_request_max"),
                 F.sum("request_bytes").alias("request_bytes"), F.sum("response_bytes").alias("response_bytes"),
                 F.countDistinct("broker").alias("brokers"),
                 F.min("time_ms").alias("first_ms"), F.max("time_ms").alias("last_ms"))
            .orderBy("client_id", "software_name"))


def _requests_per_client(rec: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return (_client(rec).groupBy("client_id", "software_name", "software_version", "api")
            .agg(F.count(F.lit(1)).alias("requests"), F.sum("request_bytes").alias("request_bytes"),
                 F.sum("response_bytes").alias("response_bytes"),
                 F.avg("latency_ms").alias("latency_mean_ms"))
            .orderBy("client_id", "software_name", "api"))
