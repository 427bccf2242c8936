"""Where the pipeline's lines come from, and how a line becomes a typed row or a bad line.

A source is a JSON-lines file, a directory of them (read recursively; Spark skips
names starting with ``_`` or ``.``), a glob (``run/deliveries-*.jsonl``), or a refka
topic, ``kafka://host:port[,host:port...]/topic``, read with Spark's Kafka source as a
batch from the earliest to the latest offsets (each record's value is a line). Either
way ``read_lines`` gives one DataFrame of ``value`` (the line's text), ``origin``
(the file, or ``topic-partition``), ``block`` and ``pos``: ordering by (origin, block,
pos) is the lines' order in their file or partition, which is what "the first bad
lines" means. Blank lines are not lines of data (JSON Lines' own rule) and are left out.

``parse`` reads each line with ``from_json`` and an explicit schema and checks it
strictly: a line is *good* when it is a JSON object in which every required field is
present, not null and of its type (a string is a JSON string, not a number Spark would
turn into one; an integer a JSON integer that fits 64 bits, not 1.5 or "5"; a number
any JSON number), and every optional field present is of its type; anything else is a
*bad line*, kept with the first thing wrong with it (``problem``). Fields beyond the
schema's are allowed. Spark's own permissive mode would have made most bad lines rows
of nulls; here none is dropped or half-read.

Known gap: text after a complete JSON object is caught only when the line does not
end with ``}`` (``{...}{...}``, two objects run together, reads as the first).
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

STRING, LONG, NUMBER, ANY = "string", "long", "number", "any"
_KIND_NAMES = {STRING: "a string", LONG: "an integer", NUMBER: "a number", ANY: "a value"}
KAFKA = re.compile(r"^kafka://(?P<bootstrap>[^/]+)/(?P<topic>[^/]+)$")


@dataclass(frozen=True)
class Field:
    name: str
    kind: str
    required: bool = True
    unless: str | None = None  # required, but not in a line where this other field is present


def fields(spec: Mapping[str, str]) -> tuple[Field, ...]:
    return tuple(Field(n, k) for n, k in spec.items())


# The formats of lab/scenarios/audit.py's docstring (written by lab/scenarios/workers.py).
DELIVERY = fields({"consumer": STRING, "topic": STRING, "partition": LONG, "offset": LONG, "key": STRING,
                   "producer": STRING, "seq": LONG, "sent_ms": LONG, "delivered_ms": LONG})
ACK = fields({"producer": STRING, "key": STRING, "seq": LONG, "topic": STRING, "partition": LONG,
              "offset": LONG, "acked_ms": LONG})
# A record the producer gave up on (workers.py): no partition, offset or acked_ms, an "error".
ACK_ERROR = fields({"producer": STRING, "key": STRING, "seq": LONG, "topic": STRING, "error": ANY})
# The control plane's timeline (refka/broker/metadata_cache.py's events as GET /api/timeline
# gives them, refka/client/lab/timeline.py's file): a type and a time, t_ms (the plan's file)
# or time_ms (the admin API's lines); the rest depends on the type. Also lab/scenarios'
# timeline.jsonl, the plan steps of a scenario run: no type but an action, its time at_ms,
# its step a number (a plan file's is a string, "3.2").
TIMELINE = (Field("type", STRING, unless="action"), Field("t_ms", NUMBER, False), Field("time_ms", NUMBER, False),
            Field("at_ms", NUMBER, False),
            Field("broker", LONG, False), Field("topic", STRING, False), Field("partition", LONG, False),
            Field("old_leader", LONG, False), Field("new_leader", LONG, False), Field("old_epoch", LONG, False),
            Field("new_epoch", LONG, False), Field("fault", ANY, False), Field("fault_kind", STRING, False),
            Field("step", ANY, False), Field("action", STRING, False))
# Request recordings (refka/broker/recording.py entry_dict; GET /api/recordings, --record FILE).
# client_id and the software fields are null for a client that did not say; topics is
# Metadata's only: a list of names, or "all".
RECORDING = (Field("time_ms", NUMBER), Field("broker", LONG), Field("client_id", STRING, False),
             Field("software_name", STRING, False), Field("software_version", STRING, False),
             Field("api_key", LONG), Field("api", STRING), Field("topics", ANY, False),
             Field("request_bytes", LONG), Field("response_bytes", LONG), Field("latency_ms", NUMBER))


def read_lines(spark: SparkSession, source: str) -> DataFrame:
    """(value, origin, block, pos) for each non-blank line of ``source`` (module docstring)."""
    from pyspark.sql import functions as F

    m = KAFKA.match(source)
    if m:
        df = kafka_records(spark, m["bootstrap"], m["topic"])
        lines = df.select(F.col("value").cast("string").alias("value"),
                          F.concat_ws("-", "topic", F.col("partition").cast("string")).alias("origin"),
                          F.lit(0).cast("long").alias("block"), F.col("offset").alias("pos"))
    else:
        path = source[len("file://"):] if source.startswith("file://") else source
        reader = spark.read.option("recursiveFileLookup", "true") if not _is_glob(path) else spark.read
        lines = reader.text(path).select(
            "value", F.col("_metadata.file_path").alias("origin"),
            F.col("_metadata.file_block_start").alias("block"),
            F.monotonically_increasing_id().alias("pos"))
    # A null value (a Kafka tombstone) is a bad line, not a blank one.
    return lines.where(F.col("value").isNull() | (F.trim("value") != ""))


def exists(source: str) -> bool:
    """Whether a file source names something on this machine (a topic is not looked up)."""
    if KAFKA.match(source):
        return True
    path = source[len("file://"):] if source.startswith("file://") else source
    return bool(glob.glob(path)) if _is_glob(path) else os.path.exists(path)


def _is_glob(path: str) -> bool:
    return any(c in path for c in "*?[{")


def kafka_records(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    """The topic's records as Spark's Kafka source gives them (key, value, topic, partition,
    offset, timestamp, ...), earliest to latest, as one batch: what ``--deliveries
    kafka://...`` reads, and what a streaming reader starts from."""
    return (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())


def _variant(f: Field) -> bool:
    # A string is read as a variant so that its JSON type can be checked (Spark's reader would
    # turn 5 or {"a": 1} into "5" or '{"a":1}'); so is an optional field, whose absence a typed
    # read could not tell from a value of the wrong type (both null). A field required unless
    # another is there is read typed: where it is not required, its value does not matter.
    return f.kind in (STRING, ANY) or not f.required


def _json_type(f: Field):  # noqa: ANN202 (a pyspark DataType)
    from pyspark.sql import types as T

    return T.VariantType() if _variant(f) else {LONG: T.LongType(), NUMBER: T.DoubleType()}[f.kind]


def _typed(raw: Column, f: Field) -> tuple[Column, Column]:
    """(the value as its Spark type, whether it is of its kind) for a from_json field; a missing
    or null field is of no kind."""
    from pyspark.sql import functions as F

    if f.kind == ANY:
        return raw, raw.isNotNull() & ~F.is_variant_null(raw)
    if _variant(f):
        json_type = F.schema_of_variant(raw)
        if f.kind == STRING:
            is_kind = json_type == "STRING"
        elif f.kind == LONG:
            is_kind = json_type == "BIGINT"
        else:  # a JSON number is a variant BIGINT, DECIMAL(p,s) or DOUBLE (1e3)
            is_kind = json_type.isin("BIGINT", "DOUBLE") | json_type.startswith("DECIMAL")
        spark_type = {STRING: "string", LONG: "bigint", NUMBER: "double"}[f.kind]
        return F.try_variant_get(raw, "$", spark_type), F.coalesce(is_kind, F.lit(False))
    if f.kind == NUMBER:  # Spark's reader takes "NaN" and "Infinity" strings as doubles
        return raw, F.coalesce(~F.isnan(raw) & (F.abs(raw) != float("inf")), F.lit(False))
    return raw, raw.isNotNull()


def parse(lines: DataFrame, spec: Sequence[Field], checks: Sequence[tuple[Column, str]] = ()) -> DataFrame:
    """``lines`` with each field of ``spec`` as a column of its type and ``problem``: null for a
    good line, else what is wrong with it. ``checks`` are further (condition over the typed
    columns, problem) pairs, for what a line's fields alone do not decide."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField(f.name, _json_type(f)) for f in spec])
    row = lines.withColumn("_j", F.from_json("value", schema))
    ok = F.col("_j").isNotNull() & F.rtrim("value").endswith("}")
    for f in spec:
        raw = F.col("_j")[f.name]
        is_kind = _typed(raw, f)[1]
        if not f.unless:
            ok = ok & (is_kind if f.required else (~_present(raw, f) | is_kind))
        else:
            ok = ok & (is_kind | _waived(f, spec))
    for cond, _ in checks:
        ok = ok & F.coalesce(cond, F.lit(False))
    row = row.select("*", *(_typed(F.col("_j")[f.name], f)[0].alias(f.name) for f in spec))
    problem = F.when(ok, F.lit(None).cast("string")).otherwise(_problem(spec, checks))
    return row.withColumn("problem", problem).drop("_j")


def _waived(f: Field, spec: Sequence[Field]) -> Column:
    from pyspark.sql import functions as F

    other = next(o for o in spec if o.name == f.unless)
    return _present(F.col("_j")[other.name], other)


def _present(raw: Column, f: Field) -> Column:
    from pyspark.sql import functions as F

    # A typed field's JSON null and its absence are both null; a variant's JSON null is a value.
    return raw.isNotNull() & ~F.is_variant_null(raw) if _variant(f) else raw.isNotNull()


def _problem(spec: Sequence[Field], checks: Sequence[tuple[Column, str]]) -> Column:
    """The first thing wrong with a line (evaluated for bad lines only)."""
    from pyspark.sql import functions as F

    v = F.try_parse_json("value")
    reason = (F.when(F.col("value").isNull(), F.lit("no value (a null record)"))
              .when(v.isNull(), F.lit("not JSON"))
              .when(~F.schema_of_variant(v).startswith("OBJECT"), F.lit("not a JSON object"))
              .when(~F.rtrim("value").endswith("}"), F.lit("text after the JSON object")))
    for f in spec:
        field = F.try_variant_get(v, "$." + f.name, "variant")
        is_kind = _typed(F.col("_j")[f.name], f)[1]
        wrong = F.concat(F.lit(f"{f.name} is "), F.lower(F.schema_of_variant(field)),
                         F.lit(f", not {_KIND_NAMES[f.kind]}"))
        if f.unless:
            waived = _waived(f, spec)
            reason = (reason.when(~waived & field.isNull(), F.lit(f"missing {f.name} (and no {f.unless})"))
                      .when(~waived & F.is_variant_null(field), F.lit(f"{f.name} is null (and no {f.unless})"))
                      .when(~waived & ~is_kind, wrong))
        elif f.required:
            reason = (reason.when(field.isNull(), F.lit(f"missing {f.name}"))
                      .when(F.is_variant_null(field), F.lit(f"{f.name} is null"))
                      .when(~is_kind, wrong))
        else:
            reason = reason.when(field.isNotNull() & ~F.is_variant_null(field) & ~is_kind, wrong)
    for cond, problem in checks:
        reason = reason.when(~F.coalesce(cond, F.lit(False)), F.lit(problem))
    return reason.otherwise(F.lit("not as the schema says"))


def kafka_stream_lines(spark: SparkSession, bootstrap: str, topic: str, *, starting_offsets: str = "earliest",
                       options: Mapping[str, str] | None = None) -> DataFrame:
    """A refka topic's records as a stream of lines (Structured Streaming's Kafka source): ``value``
    (the record's value as text; null for a tombstone, a bad line), ``origin`` (topic-partition),
    ``pos`` (the offset) and ``timestamp`` (the record's). Blank lines are left out, as
    ``read_lines`` does. ``failOnDataLoss`` stays Spark's default (true): offsets a broker took
    back, or a log that lost records the query was to read, stop the query rather than skip.
    ``options`` adds or overrides the source's options (``maxOffsetsPerTrigger``, ...)."""
    from pyspark.sql import functions as F

    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", starting_offsets))
    for k, v in (options or {}).items():
        reader = reader.option(k, v)
    lines = reader.load().select(
        F.col("value").cast("string").alias("value"),
        F.concat_ws("-", "topic", F.col("partition").cast("string")).alias("origin"),
        F.col("offset").alias("pos"), "timestamp")
    return lines.where(F.col("value").isNull() | (F.trim("value") != ""))
