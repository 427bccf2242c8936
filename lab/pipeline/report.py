"""``report.html``: the audit's summary, tables and plots in one self-contained page
(matplotlib PNGs embedded as data: URLs, no scripts, nothing fetched).

``collect`` gathers what the page shows from the tables the audit wrote (small:
aggregates, or the first rows of a large table); ``render`` turns that into HTML
without Spark, so the page can be tested and rebuilt from plain data.

Plots: latency over time (p50, p99 and max per second of delivery) with leader
changes, faults fired and plan steps marked; violations per key (the keys with
the most); first deliveries per second per partition (the partitions with the most
records; all partitions summed as a dashed line).
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lab.pipeline.audit import Audit

TOP_KEYS = 30
TOP_PARTITIONS = 12
TABLE_ROWS = 50


def collect(spark: SparkSession, out: Path, audit: Audit) -> dict[str, Any]:
    """What the page shows, as plain data, read from the tables ``audit`` wrote in ``out``."""
    from pyspark.sql import functions as F

    def table(name: str) -> DataFrame | None:
        return spark.read.parquet(str(out / f"{name}.parquet")) if name in audit.tables else None

    def rows(df: DataFrame | None, *order: Any, limit: int = TABLE_ROWS) -> list[dict[str, Any]]:
        if df is None:
            return []
        return [r.asDict(recursive=True) for r in (df.orderBy(*order) if order else df).limit(limit).collect()]

    violations = table("violations")
    per_key = (violations.groupBy("producer", "key").count() if violations is not None else None)
    pps = table("latency_per_partition_second")
    top = rows(pps.groupBy("topic", "partition").agg(F.sum("records").alias("records")) if pps is not None else None,
               F.desc("records"), "topic", "partition", limit=TOP_PARTITIONS)
    top_set = {(r["topic"], r["partition"]) for r in top}
    throughput: dict[str, list[tuple[int, int]]] = defaultdict(list)
    if pps is not None and top_set:
        cond = None
        for t, p in top_set:
            c = (F.col("topic") == t) & (F.col("partition") == p)
            cond = c if cond is None else cond | c
        for r in pps.where(cond).select("topic", "partition", "second_ms", "records").orderBy("second_ms").collect():
            throughput[f"{r['topic']}-{r['partition']}"].append((r["second_ms"], r["records"]))
    per_second = rows(table("latency_per_second"), "second_ms", limit=1_000_000)
    return {
        "summary": audit.summary,
        "bad_per_input": audit.bad_per_input,
        "tables": audit.tables,
        "timings_s": audit.timings_s,
        "per_second": per_second,
        "violations_per_key": rows(per_key, F.desc("count"), "producer", "key", limit=TOP_KEYS),
        "throughput": dict(throughput),
        "marks": audit.marks,
        "violations": rows(violations, "producer", "key", "seq"),
        "losses": rows(table("losses"), "producer", "key", "seq"),
        "duplicates": rows(table("duplicates"), F.desc("deliveries"), "producer", "key", "seq"),
        "latency_per_partition": rows(table("latency_per_partition"), F.desc("p99_ms"), "topic", "partition"),
        "leader_changes": rows(table("leader_changes"), "change_ms", limit=200),
        "metadata_per_client": rows(table("metadata_per_client"), "client_id", limit=200),
    }


def write(path: Path, data: dict[str, Any]) -> None:
    path.write_text(render(data), encoding="utf-8")


# -- plots


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def latency_plot(per_second: list[dict[str, Any]], marks: dict[str, list[dict[str, Any]]]) -> str | None:
    if not per_second:
        return None
    plt = _pyplot()
    t0 = per_second[0]["second_ms"]
    xs = [(r["second_ms"] - t0) / 1000 for r in per_second]
    fig, ax = plt.subplots(figsize=(11, 4))
    for col, label, lw in (("p50_ms", "p50", 1.0), ("p99_ms", "p99", 1.0), ("max_ms", "max", 0.6)):
        ax.step(xs, [r[col] for r in per_second], where="post", label=label, lw=lw)
    styles = {"leader_changed": ("tab:red", "-", "leader change"), "fault_fired": ("tab:purple", ":", "fault"),
              "plan_step": ("tab:gray", "--", "plan step")}
    for kind, (color, ls, label) in styles.items():
        for i, m in enumerate(marks.get(kind, [])):
            ax.axvline((m["time_ms"] - t0) / 1000, color=color, ls=ls, lw=0.8, alpha=0.7,
                       label=label if i == 0 else None)
    ax.set_yscale("symlog", linthresh=10)
    ax.set_xlabel(f"seconds after {_utc(t0)}")
    ax.set_ylabel("latency ms (delivered - sent)")
    ax.set_title("Latency of first deliveries per second")
    ax.legend(loc="upper right", fontsize=8)
    return _png(fig)


def violations_plot(per_key: list[dict[str, Any]]) -> str | None:
    if not per_key:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11, 3.5))
    labels = [f"{r['producer']}/{r['key']}" for r in per_key]
    ax.bar(range(len(per_key)), [r["count"] for r in per_key], color="tab:red")
    ax.set_xticks(range(len(per_key)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("violations")
    ax.set_title(f"Order violations per key (the {len(per_key)} keys with the most)")
    return _png(fig)


def throughput_plot(series: dict[str, list[tuple[int, int]]]) -> str | None:
    if not series:
        return None
    plt = _pyplot()
    t0 = min(s[0][0] for s in series.values() if s)
    fig, ax = plt.subplots(figsize=(11, 4))
    total: dict[int, int] = defaultdict(int)
    for name, points in sorted(series.items()):
        ax.step([(t - t0) / 1000 for t, _ in points], [n for _, n in points], where="post", lw=0.8, label=name)
        for t, n in points:
            total[t] += n
    ts = sorted(total)
    if len(series) > 1:
        ax.step([(t - t0) / 1000 for t in ts], [total[t] for t in ts], "k--", where="post", lw=0.8,
                label="these summed")
    ax.set_xlabel(f"seconds after {_utc(t0)}")
    ax.set_ylabel("first deliveries / s")
    ax.set_title(f"Throughput per partition (the {len(series)} partitions with the most records)")
    ax.legend(loc="upper right", fontsize=7, ncol=2)
    return _png(fig)


def _utc(ms: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


# -- the page


def _table(rows: list[dict[str, Any]], title: str, total: int | None = None) -> str:
    if not rows:
        return f"<h3>{html.escape(title)}</h3><p>none</p>"
    cols = list(rows[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(r[c]))}</td>" for c in cols) + "</tr>" for r in rows)
    more = f" (the first {len(rows)} of {total})" if total is not None and total > len(rows) else ""
    return f"<h3>{html.escape(title)}{more}</h3><table><tr>{head}</tr>{body}</table>"


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.3f}".rstrip("0").rstrip(".")
    if isinstance(v, list | dict):
        return json.dumps(v, default=str)
    return str(v)


def _img(src: str | None, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="{src}">' if src else f"<p>{html.escape(alt)}: no data</p>"


STYLE = """body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;font-size:12px;
margin-bottom:1em}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#eee}
td:first-child,th:first-child{text-align:left}img{max-width:100%}code{background:#f4f4f4}"""


def render(data: dict[str, Any]) -> str:
    s = data["summary"]
    tables = data.get("tables", {})
    summary_rows = [{"": k, "value": v} for k, v in s.items() if k not in ("bad_examples", "latency_ms")]
    summary_rows += [{"": f"latency {k}", "value": v} for k, v in (s.get("latency_ms") or {}).items()]
    summary_rows += [{"": f"bad lines in {k}", "value": v} for k, v in data.get("bad_per_input", {}).items()]
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>refka audit</title><style>{STYLE}</style>"
        "</head><body><h1>refka: audit of a lab run</h1>",
        _table(summary_rows, "Summary (summary.json)"),
        _table(s.get("bad_examples") or [], "First bad lines"),
        "<h2>Latency</h2>", _img(latency_plot(data.get("per_second", []), data.get("marks", {})), "latency over time"),
        "<h2>Order</h2>", _img(violations_plot(data.get("violations_per_key", [])), "violations per key"),
        _table(data.get("violations", []), "Violations", tables.get("violations")),
        _table(data.get("losses", []), "Losses", tables.get("losses")),
        _table(data.get("duplicates", []), "Duplicates (most delivered first)", tables.get("duplicates")),
        "<h2>Throughput</h2>", _img(throughput_plot(data.get("throughput", {})), "throughput per partition"),
        _table(data.get("latency_per_partition", []), "Latency per partition (highest p99 first)",
               tables.get("latency_per_partition")),
    ]
    if "leader_changes" in tables:
        parts.append(_table(data.get("leader_changes", []), "Leader changes", tables.get("leader_changes")))
    if "metadata_per_client" in tables:
        parts.append(_table(data.get("metadata_per_client", []), "Metadata traffic per client (KIP-526)",
                            tables.get("metadata_per_client")))
    parts.append(_table([{"table": f"{k}.parquet", "rows": v} for k, v in tables.items()], "Tables written"))
    parts.append(_table([{"step": k, "seconds": v} for k, v in data.get("timings_s", {}).items()], "Timings"))
    parts.append("</body></html>\n")
    return "\n".join(parts)
