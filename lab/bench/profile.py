"""Profile a refka broker under the benchmark's produce or consume load, with py-spy.

    python -m lab.bench.profile [--target refka-memory] [--size 1024] [--count 300000]
                                [--phase produce|consume|both] [--out DIR]

Starts the target as ``python -m lab.bench`` does, attaches ``py-spy record``
(``pip install py-spy``) to the broker for each phase, and prints the hottest
functions by self time and by inclusive time. Raw collapsed stacks (one line
per stack, flamegraph.pl / speedscope input) are kept in DIR.

Samples are taken only while a thread runs (py-spy without --idle), so the
share of samples is the share of the broker's busy time.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab.bench import targets, workload


def _py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        sys.exit("py-spy not found: pip install py-spy")
    return found


def summarize(raw: Path, top: int = 20) -> str:
    """Top functions of a py-spy raw (collapsed) profile, by self and inclusive samples."""
    self_samples: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        total += count
        frames = stack.split(";")
        if frames and frames[0].startswith(("process ", "thread ")):
            frames = frames[1:]
        # "function (file.py:line)": aggregate per function, not per line.
        functions = [f.rsplit(":", 1)[0] + ")" if f.endswith(")") and ":" in f else f for f in frames]
        if functions:
            self_samples[functions[-1]] += count
        for function in set(functions):
            inclusive[function] += count
    if not total:
        return "(no samples)"
    out = [f"{total} samples", "", "self %   function"]
    out += [f"{100 * n / total:6.1f}   {f}" for f, n in self_samples.most_common(top)]
    out += ["", "incl %   function"]
    out += [f"{100 * n / total:6.1f}   {f}" for f, n in inclusive.most_common(top)]
    return "\n".join(out)


def _record(pid: int, out: Path, rate: int) -> subprocess.Popen[bytes]:
    spy = subprocess.Popen([_py_spy(), "record", "--pid", str(pid), "--format", "raw", "--output", str(out),
                            "--rate", str(rate), "--nonblocking"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # py-spy attaches asynchronously; nothing to wait on but time
    return spy


def _stop(spy: subprocess.Popen[bytes]) -> None:
    spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    try:
        spy.wait(30)
    except subprocess.TimeoutExpired:
        spy.kill()
        spy.wait(5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.bench.profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="refka-memory", choices=("refka-disk", "refka-memory"))
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--count", type=int, default=300_000)
    parser.add_argument("--phase", default="both", choices=("produce", "consume", "both"))
    parser.add_argument("--rate", type=int, default=200, help="samples per second")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None, help="where raw profiles go (default: a temp dir)")
    args = parser.parse_args(argv)
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="refka-profile-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="refka-profile-run-") as tmp:
        target = targets.make(args.target, Path(tmp))
        try:
            running = target.start()
            topic = f"profile-{args.size}"
            workload.create_topic(running.bootstrap, topic, use_create_topics=True, timeout=30)
            phases = ("produce", "consume") if args.phase == "both" else (args.phase,)
            if "produce" not in phases:
                workload.produce(running.bootstrap, topic, args.count, args.size, running.pid, 300)
            for phase in phases:
                raw = out_dir / f"{args.target}-{phase}-{args.size}.txt"
                spy = _record(running.pid, raw, args.rate)
                try:
                    if phase == "produce":
                        result = workload.produce(running.bootstrap, topic, args.count, args.size, running.pid, 300)
                    else:
                        result = workload.consume(running.bootstrap, topic, args.count, args.size, running.pid, 300)
                finally:
                    _stop(spy)
                print(f"== {args.target} {phase} {args.size} B x {args.count:,}: {result.mb_per_s:,.1f} MB/s, "
                      f"{result.records_per_s:,.0f} records/s, broker CPU "
                      f"{result.as_json().get('broker_cpu_percent', 0):.0f}% (profiled: py-spy slows it)")
                print(f"   raw profile: {raw}")
                print(summarize(raw, args.top) if raw.exists() else f"(py-spy wrote nothing: {spy.stderr})")
                print()
        finally:
            target.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
