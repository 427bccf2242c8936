"""The pipeline's commands.

    python -m lab.pipeline audit --deliveries PATH [--acks PATH] [--timeline PATH] [--recordings PATH]
        --out DIR [--master URL] [--window-ms MS]
    python -m lab.pipeline synth --records N [--violations K] [--losses L] ... --out DIR
    python -m lab.pipeline watch --bootstrap HOST:PORT --topic T [--output-topic T2] [--checkpoint DIR]
        [--trigger-seconds N] [--minutes M | --once]

PATH: a JSON-lines file, a directory of them, a glob, or ``kafka://host:port/topic``
(sources.py). ``--master``: ``local[*]`` (the default) or ``spark://host:port``, a
standalone cluster. Exit status: 0 when the audit ran (whatever it found), 2 when it
could not (an input missing, the connector's jars missing: `make spark-jars`). ``watch``
(watch.py): the streaming form, per-minute counts of delivery lines a topic receives; exit
status 1 when the query failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from lab.pipeline import audit, report, sources, synth, watch


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m lab.pipeline", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    a = sub.add_parser("audit", help="audit a lab run's logs (audit.py)")
    a.add_argument("--deliveries", required=True, help="delivery lines: file, directory, glob or kafka://host:port/topic")
    a.add_argument("--acks", help="ack lines (losses are counted only with them)")
    a.add_argument("--timeline", help="the control plane's timeline lines (leader changes, faults, plan steps)")
    a.add_argument("--recordings", help="request recording lines (metadata traffic per client)")
    a.add_argument("--out", type=Path, required=True, help="where summary.json, the tables and report.html go")
    a.add_argument("--master", help="Spark master URL (default local[*]; spark://host:port for a standalone cluster)")
    a.add_argument("--shuffle-partitions", type=int,
                   help="tasks per shuffle (default 4 when local, Spark's 200 on a cluster)")
    a.add_argument("--window-ms", type=int, default=audit.WINDOW_MS, metavar="MS",
                   help="leader_changes' window before and after each change (>= 1000)")
    a.add_argument("--no-report", action="store_true", help="skip report.html")
    s = sub.add_parser("synth", help="write synthetic logs with known faults (synth.py)")
    synth.add_arguments(s)
    w = sub.add_parser("watch", help="per-minute counts of a topic's delivery lines, streaming (watch.py)",
                       description=watch.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    watch.add_arguments(w)
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    if a.command == "synth":
        try:
            expected = synth.generate(synth.plan_of(a), a.out)
        except ValueError as e:
            print(f"synth: {e}", file=sys.stderr)
            return 2
        print(json.dumps(expected["summary"]))
        return 0
    if a.command == "watch":
        return _watch(a)
    return _audit(a)


def _watch(a: argparse.Namespace) -> int:
    from lab.pipeline.session import MissingJars, session

    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("watch: pyspark is not installed: run `make pipeline` (pip install -e '.[pipeline]')", file=sys.stderr)
        return 2
    try:
        spark = session(a.master, app_name="refka-watch")
    except MissingJars as e:
        print(f"watch: {e}", file=sys.stderr)
        return 2
    from pyspark.errors import StreamingQueryException

    try:
        watch.run(spark, watch.options_of(a))
    except StreamingQueryException as e:
        print(f"watch: the query failed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    finally:
        spark.stop()
    return 0


def _audit(a: argparse.Namespace) -> int:
    from lab.pipeline.session import MissingJars, session

    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("audit: pyspark is not installed: run `make pipeline` (pip install -e '.[pipeline]')", file=sys.stderr)
        return 2
    missing = [f"--{n} {v}" for n, v in vars(a).items()
               if n in ("deliveries", "acks", "timeline", "recordings") and v and not sources.exists(v)]
    if missing:
        print(f"audit: no such input: {', '.join(missing)}", file=sys.stderr)
        return 2
    if a.window_ms < 1000:
        print("audit: --window-ms must be at least 1000", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    try:
        spark = session(a.master, app_name="refka-audit", shuffle_partitions=a.shuffle_partitions)
    except MissingJars as e:
        print(f"audit: {e}", file=sys.stderr)
        return 2
    started = time.monotonic() - t0
    try:
        result = audit.run(spark, audit.Inputs(a.deliveries, a.acks, a.timeline, a.recordings), a.out,
                           window_ms=a.window_ms)
        if not a.no_report:
            report.write(a.out / "report.html", report.collect(spark, a.out, result))
    finally:
        spark.stop()
    print(json.dumps(result.summary, indent=2))
    print(f"audit: {result.summary['records']} delivery lines in {time.monotonic() - t0:.1f} s "
          f"(session start {started:.1f} s); {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
