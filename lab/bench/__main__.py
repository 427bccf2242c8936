"""End-to-end benchmark: refka (disk, memory) against Tansu and librdkafka's mock cluster.

    python -m lab.bench [--quick] [--targets refka-disk,refka-memory,tansu,mock] [--json PATH] [--codec]
    make bench ARGS="--quick"
    python -m lab.bench --groups [...]   the consumer-group benchmark instead (groups.py)
    python -m lab.bench --failover [...] the leadership-failover benchmark instead (failover.py)
    python -m lab.bench --admin-api [...] the admin API's cost to produce, and a leader move through it (admin_api.py)
    python -m lab.bench --partitions [...] the KIP-253 benchmark instead (partitions.py)
    python -m lab.bench --clients [...]  refka's reference client beside confluent-kafka instead (clients.py)
    python -m lab.bench --metadata [...] the KIP-526 benchmark instead: Metadata at 10 to 100,000 topics (metadata.py)
    python -m lab.bench --ordered [...]  the long chaos plan of lab/scenarios/ordered_delivery.py instead
    python -m lab.bench --metadata-clients [...] stock clients' metadata, from the recordings (metadata_clients.py)
    python -m lab.bench --startup [...]  refka serve's and Broker()'s start-up to the first answer (startup.py)

For each target, in one run on this machine:

- start-up: process spawn to the first answered ApiVersions (median of 3
  spawns, 1 with --quick; the last spawn serves the throughput runs);
- for 1 KiB and 100-byte records, each round on a fresh one-partition topic:
  produce MB/s and records/s, then consume MB/s and records/s, with
  confluent-kafka (settings in workload.py); 3 rounds (1 with --quick), the
  median round is reported, all rounds are in the JSON.

Prints a table (target x metric) and the refka/Tansu ratios at 1 KiB, and
writes everything, with a description of the machine, to
lab/bench/results/<UTC timestamp>.json (git-ignored). A target that cannot
run is n/a with its reason, never a number.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from lab.bench import report, targets, workload

# Record counts per value size: sized so one phase takes ~3-10 s on refka
# (1.0 GB of values at 1 KiB, 0.3 GB at 100 B).
FULL_COUNTS = {1024: 1_000_000, 100: 3_000_000}
QUICK_COUNTS = {1024: 100_000, 100: 300_000}
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _run_target(name: str, workdir: Path, counts: dict[int, int], startup_repeats: int, repeats: int,
                timeout: float, stamp: str) -> dict[str, Any]:
    target = targets.make(name, workdir)
    out: dict[str, Any] = {"available": False}
    try:
        target.check()
        out["version"] = target.version()
        spawns: list[targets.Running] = []
        for i in range(startup_repeats):
            spawns.append(target.start(timeout=30.0))
            if i < startup_repeats - 1:
                target.stop()
    except targets.TargetUnavailable as e:
        target.stop()
        out["reason"] = f"{name}: {e}"
        _say(f"{name}: n/a ({e})")
        return out
    out["available"] = True
    running = spawns[-1]
    answered = [r.startup_seconds for r in spawns]
    usable = [r.usable_seconds for r in spawns]
    out["startup"] = {
        "api_versions_seconds": answered, "median_ms": report.median_ms(answered),
        "metadata_seconds": usable, "metadata_median_ms": report.median_ms(usable),
    }
    if running.note:
        out["startup"]["note"] = running.note
    out["bootstrap"] = running.bootstrap
    out["partitions_per_topic"] = target.partitions_per_topic
    _say(f"{name}: up at {running.bootstrap}, start-up {out['startup']['median_ms']:.0f} ms to ApiVersions, "
         f"{out['startup']['metadata_median_ms']:.0f} ms to a Metadata listing a broker (medians)")
    out["runs"] = {}
    try:
        for size, count in counts.items():
            run: dict[str, Any] = {"records": count}
            out["runs"][str(size)] = run
            if not _measure_size(name, target, running, size, count, repeats, timeout, stamp, run):
                break  # the broker died: nothing more to measure
    finally:
        target.stop()
    return out


def _median_sample(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The sample with the median MB/s (a real run, so its CPU figures belong to it)."""
    ordered = sorted(samples, key=lambda s: s["mb_per_s"])
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    chosen["median_of"] = len(samples)
    chosen["all_mb_per_s"] = [s["mb_per_s"] for s in samples]
    return chosen


def _measure_size(name: str, target: targets.Target, running: targets.Running, size: int, count: int,
                  repeats: int, timeout: float, stamp: str, run: dict[str, Any]) -> bool:
    """``repeats`` produce+consume rounds, each on a fresh topic; False if the broker died."""
    label = report.size_label(size)
    samples: dict[str, list[dict[str, Any]]] = {"produce": [], "consume": []}
    for rep in range(repeats):
        topic = f"bench-{size}-{stamp}-{rep}"
        try:
            workload.create_topic(running.bootstrap, topic, use_create_topics=target.create_topics,
                                  timeout=timeout)
            p = workload.produce(running.bootstrap, topic, count, size, running.pid, timeout)
            samples["produce"].append(p.as_json())
            _say(f"{name}: produce {label} x {count:,}: {p.mb_per_s:,.1f} MB/s, "
                 f"{p.records_per_s:,.0f} records/s ({p.seconds:.2f} s)")
            c = workload.consume(running.bootstrap, topic, count, size, running.pid, timeout,
                                 bounded_retention=target.bounded_retention)
            samples["consume"].append(c.as_json())
            window = ", the retained window only" if c.extra.get("retained_window_only") else ""
            _say(f"{name}: consume {label} x {c.records:,}: {c.mb_per_s:,.1f} MB/s, "
                 f"{c.records_per_s:,.0f} records/s ({c.seconds:.2f} s{window})")
            if target.create_topics:
                workload.delete_topic(running.bootstrap, topic)  # frees a memory broker's records
        except (workload.PhaseFailed, KafkaException) as e:
            died = target.proc is None or target.proc.poll() is not None
            reason = f"{name} {label}: {e}" + (" (broker process exited)" if died else "")
            _say(f"{name}: {reason}")
            for phase in ("produce", "consume"):
                run[phase] = {"error": reason}
            return not died
    for phase in ("produce", "consume"):
        run[phase] = _median_sample(samples[phase])
    return True


def _codec_figures(quick: bool) -> list[str]:
    """codec.py's figures, then validate.py's (Produce validation per codec)."""
    lines: list[str] = []
    for module in ("lab.bench.codec", "lab.bench.validate"):
        cmd = [sys.executable, "-m", module] + (["--quick"] if quick and module == "lab.bench.validate" else [])
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=targets.REPO_ROOT, timeout=1800)
        lines += done.stdout.splitlines()
        if done.returncode:
            lines.append(f"({module} failed with code {done.returncode}: {done.stderr.strip()[-500:]})")
        lines.append("")
    return lines[:-1]


ORDERED_LONG_PLAN = ["--plan", "4,8,6,12,9,16,12", "--cluster", "zookeeper", "--chaos", "controller",
                     "--step-seconds", "8", "--finish-timeout", "300", "--drain-timeout", "300"]


# The other benchmarks, each with options of its own (python -m <module> --help): flag ->
# (module, leading arguments, help). The first flag of this order found in the arguments wins:
# --ordered and --metadata-clients come first, their modules have a --clients option of their own.
SUB_BENCHMARKS: dict[str, tuple[str, list[str], str]] = {
    "--ordered": ("lab.scenarios.ordered_delivery", ORDERED_LONG_PLAN,
                  "the long chaos plan of lab/scenarios/ordered_delivery.py (plan 4,8,6,12,9,16,12, three "
                  "ZooKeeper-backed processes, the controller killed after each change; its options override)"),
    "--metadata-clients": ("lab.bench.metadata_clients", [],
                           "what confluent-kafka, kafka-python and refka's producer do with metadata (1,000 "
                           "topics then 10; a broker's frozen Metadata), read from refka's recordings"),
    "--groups": ("lab.bench.groups", [], "the consumer-group benchmark"),
    "--failover": ("lab.bench.failover", [], "the leadership-failover benchmark"),
    "--admin-api": ("lab.bench.admin_api", [], "the admin API benchmark (its cost to produce, a leader move)"),
    "--partitions": ("lab.bench.partitions", [], "the KIP-253 benchmark"),
    "--clients": ("lab.bench.clients", [],
                  "the client benchmark: refka's reference Producer and Consumer beside confluent-kafka's"),
    "--metadata": ("lab.bench.metadata", [],
                   "the KIP-526 benchmark: Metadata latency and CreateTopics at 10 to 100,000 topics"),
    "--startup": ("lab.bench.startup", [],
                  "the start-up benchmark: refka serve and refka.testing.Broker() to their first answer"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    for flag, (module, lead, _help) in SUB_BENCHMARKS.items():
        if flag in argv:
            import importlib

            return importlib.import_module(module).main([*lead, *(a for a in argv if a != flag)])  # type: ignore[no-any-return]
    parser = argparse.ArgumentParser(prog="python -m lab.bench", description=__doc__.split("\n\n")[0])
    for flag, (module, _lead, what) in SUB_BENCHMARKS.items():
        parser.add_argument(flag, action="store_true",
                            help=f"run {what} instead (its options: python -m {module} --help)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 10x fewer records, one start-up spawn (well under 2 min)")
    parser.add_argument("--targets", default=",".join(targets.ALL),
                        help=f"comma-separated subset of {','.join(targets.ALL)}")
    parser.add_argument("--json", type=Path, default=None,
                        help="results file (default lab/bench/results/<UTC timestamp>.json)")
    parser.add_argument("--repeat", type=int, default=None,
                        help="produce+consume rounds per size and target, the median is reported "
                             "(default 3, 1 with --quick)")
    parser.add_argument("--compression", default="none", choices=("none", "gzip", "snappy", "lz4", "zstd"),
                        help="the producer's compression.type (default none): what a broker spends validating "
                             "compressed batches shows in the produce figures")
    parser.add_argument("--codec", action="store_true",
                        help="also run the codec micro-benchmarks (codec.py, validate.py)")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.targets.split(",") if n.strip()]
    unknown = [n for n in names if n not in targets.ALL]
    if unknown or not names:
        parser.error(f"unknown target(s) {', '.join(unknown)}; choose from {', '.join(targets.ALL)}")

    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat must be at least 1")
    workload.PRODUCER_CONFIG["compression.type"] = args.compression
    counts = QUICK_COUNTS if args.quick else FULL_COUNTS
    startup_repeats = 1 if args.quick else 3
    repeats = args.repeat if args.repeat is not None else (1 if args.quick else 3)
    timeout = 30.0 if args.quick else 120.0
    started = datetime.now(UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    results: dict[str, Any] = {
        "started_at": started.isoformat(),
        "quick": args.quick,
        "machine": report.machine_info(),
        "config": {
            "sizes": list(counts),
            "records": {str(k): v for k, v in counts.items()},
            "startup_repeats": startup_repeats,
            "repeats": repeats,
            "producer": workload.PRODUCER_CONFIG,
            "consumer": workload.CONSUMER_CONFIG,
            "mb": "10^6 bytes of record values",
        },
        "targets": {},
    }
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="refka-bench-") as tmp:
        for name in names:
            results["targets"][name] = _run_target(name, Path(tmp), counts, startup_repeats, repeats,
                                                   timeout, stamp)
    if args.codec:
        results["codec"] = _codec_figures(args.quick)
    results["finished_at"] = datetime.now(UTC).isoformat()
    results["loadavg_1min_end"] = os.getloadavg()[0]
    results["wall_seconds"] = time.monotonic() - t0
    results["ratios"] = report.ratios(results)

    m = results["machine"]
    print(f"\nrefka bench{' --quick' if args.quick else ''}: {m['nproc']} CPUs ({m['cpu_model']}), "
          f"Python {m['python']}, confluent-kafka {m['confluent_kafka']} / librdkafka {m['librdkafka']}")
    print("records: " + ", ".join(f"{report.size_label(s)} x {c:,}" for s, c in counts.items())
          + f"; compression {args.compression}; median of {repeats} round(s); MB = 10^6 bytes of values; "
          + "load average before/after: {:.2f} / {:.2f}\n".format(m["loadavg_1min"], results["loadavg_1min_end"]))
    print(report.table(results))
    print()
    for key, value in results["ratios"].items():
        print(f"{key}: {'n/a' if value is None else f'{value:.2f}'}")
    if args.codec:
        print("\ncodec (lab/bench/codec.py, lab/bench/validate.py):")
        print("\n".join(results["codec"]))
    path = args.json or RESULTS_DIR / f"{stamp}.json"
    report.write_json(results, path)
    print(f"\nresults: {path}  ({results['wall_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
