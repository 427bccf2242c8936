"""Start-up: how soon refka answers, as a process and in-process.

    python -m lab.bench.startup [--runs 7] [--json PATH] [--pycache-prefix DIR]
    python -m lab.bench --startup [...]

- process: ``refka serve --memory`` on a free port (``targets.RefkaTarget``, the main
  benchmark's start-up figure), from Popen to the first answered ApiVersions and to the first
  Metadata that lists the broker, and the CPU time (user + system, /proc) the process had used
  by then. ``--runs`` spawns: cold is the first, warm the median of the others. For scale, an interpreter that does nothing (``python -c pass``, the same runs), and
  one more spawn under ``python -X importtime``: the imports ``refka serve`` made before its
  first answer, their self times summed by package.
- in-process: ``--runs`` brokers one after the other in one fresh process, ``with Broker()``
  (refka.testing: the brokers' loop in a thread) and ``async with Broker()`` (on the process's
  asyncio loop), from entering to the first answered ApiVersions, and the process's CPU time
  over the same span. Cold is the first, and includes ``import refka.testing`` (in a process
  that has the standard library and asyncio loaded already, as a test run has); warm is the
  median of the others.

On a shared machine the wall-clock figures move with the load; the CPU figures much less
(the process's own work, not its wait for a core): compare those between two versions.

Bytecode: the children inherit this environment. With PYTHONDONTWRITEBYTECODE and no .pyc of
refka's, every process compiles refka from source. ``--pycache-prefix DIR`` gives them a
bytecode cache in DIR instead (as an installed refka has: pip compiles at install), without
writing into the source tree; into an empty DIR the first spawn compiles all it imports.

The targets (150 ms for the process, 50 ms in-process, on the development machine) are
printed beside the figures, never asserted. Prints a table and writes everything to
lab/bench/results/<UTC timestamp>-startup.json (or --json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab.bench import probe, report, targets

RESULTS_DIR = Path(__file__).resolve().parent / "results"
TARGET_PROCESS_MS = 150
TARGET_IN_PROCESS_MS = 50
TOP_PACKAGES = 12  # rows of the import breakdown printed (the JSON has them all)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cold_warm(seconds: list[float], cpu_seconds: list[float] | None = None) -> dict[str, Any]:
    """The first run (cold) and the median of the others (warm), in ms, wall clock and (when
    measured) CPU; every run in seconds."""
    out: dict[str, Any] = {"seconds": seconds, "cold_ms": seconds[0] * 1000,
                           "warm_median_ms": statistics.median(seconds[1:]) * 1000}
    if cpu_seconds is not None:
        out |= {"cpu_seconds": cpu_seconds, "cold_cpu_ms": cpu_seconds[0] * 1000,
                "warm_median_cpu_ms": statistics.median(cpu_seconds[1:]) * 1000}
    return out


# ---- the process --------------------------------------------------------------------------------


def process_startup(runs: int, workdir: Path) -> dict[str, Any]:
    """``runs`` spawns of ``refka serve --memory``, each stopped once it answered."""
    target = targets.RefkaTarget(workdir, memory=True)
    answered: list[float] = []
    usable: list[float] = []
    cpu: list[float] = []
    try:
        for _ in range(runs):
            running = target.start(timeout=60.0)
            used = targets.cpu_seconds(running.pid)  # by its first Metadata answer (and a few ms)
            target.stop()
            if used is None:
                return {"error": f"refka serve: no CPU time in /proc for pid {running.pid}"}
            answered.append(running.startup_seconds)
            usable.append(running.usable_seconds)
            cpu.append(used)
    except targets.TargetUnavailable as e:
        target.stop()
        return {"error": f"refka serve: {e}"}
    return {"api_versions": cold_warm(answered), "metadata": cold_warm(usable, cpu)}


def interpreter_startup(runs: int) -> dict[str, Any]:
    """``python -c pass``: the interpreter, site and the venv's .pth files, nothing of refka's."""
    seconds = []
    cpu = []
    for _ in range(runs):
        t0, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        seconds.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return cold_warm(seconds, cpu)


def parse_importtime(text: str) -> list[tuple[str, int]]:
    """(module, self µs) of each ``-X importtime`` line, in import order."""
    out = []
    for line in text.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        self_us, _cumulative, name = line.removeprefix("import time:").split("|", 2)
        if self_us.strip().isdigit():  # not the header line
            out.append((name.strip(), int(self_us)))
    return out


def by_package(imports: list[tuple[str, int]]) -> dict[str, float]:
    """Self ms summed per top-level package (refka's per subpackage: refka.broker, refka.protocol...),
    largest first."""
    totals: dict[str, int] = defaultdict(int)
    for name, self_us in imports:
        parts = name.split(".")
        totals[".".join(parts[:2]) if parts[0] == "refka" else parts[0]] += self_us
    return {k: v / 1000 for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


def import_profile(workdir: Path, timeout: float = 60.0) -> dict[str, Any]:
    """One ``python -X importtime -m refka.cli serve --memory``: what it imported by its first answer.
    (A module imported through ``importlib.import_module``, as the handler and message registries
    import theirs, has no line of its own: its time is its importer's self time, same package.)"""
    port = targets.free_port()
    trace = workdir / "importtime.txt"
    cmd = [sys.executable, "-X", "importtime", "-m", "refka.cli", "serve", "--memory", "--port", str(port),
           "--data-dir", str(workdir / "importtime-data")]
    with open(trace, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL,
                                cwd=targets.REPO_ROOT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                return {"error": f"refka serve exited with code {proc.returncode} before answering"}
            try:
                probe.api_versions(targets.HOST, port, timeout=1.0)
                break
            except OSError:
                if time.monotonic() > deadline:
                    return {"error": f"refka serve did not answer within {timeout:g} s"}
                time.sleep(0.005)
        imports = parse_importtime(trace.read_text(errors="replace"))  # as of the first answer
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return {"modules": len(imports), "self_ms": sum(us for _, us in imports) / 1000,
            "by_package_ms": by_package(imports)}


# ---- in-process (run in a fresh child: --in-process FORM) ---------------------------------------


def _in_process(form: str, runs: int) -> dict[str, Any]:
    """``runs`` Broker()s one after the other, entering to the first answered ApiVersions."""
    t0, cpu0 = time.perf_counter(), time.process_time()
    from refka.testing import Broker  # the cold run pays for it, as a test run's first broker does

    imported = time.perf_counter() - t0
    seconds: list[float] = []
    cpu: list[float] = []

    def answer(bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        probe.api_versions(host, int(port))

    if form == "sync":
        for i in range(runs):
            start, start_cpu = (t0, cpu0) if i == 0 else (time.perf_counter(), time.process_time())
            with Broker() as b:
                answer(b.bootstrap_servers)
                seconds.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
    else:
        async def measure() -> None:
            for i in range(runs):
                start, start_cpu = (t0, cpu0) if i == 0 else (time.perf_counter(), time.process_time())
                async with Broker() as c:
                    await asyncio.to_thread(answer, c.bootstrap_servers)  # the broker is on this loop
                    seconds.append(time.perf_counter() - start)
                    cpu.append(time.process_time() - start_cpu)

        asyncio.run(measure())
    return {**cold_warm(seconds, cpu), "import_ms": imported * 1000}


def in_process_startup(form: str, runs: int, workdir: Path) -> dict[str, Any]:
    out = workdir / f"in-process-{form}.json"
    cmd = [sys.executable, "-m", "lab.bench.startup", "--in-process", form, "--runs", str(runs), "--out", str(out)]
    # the brokers log to stdout: not wanted here
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=targets.REPO_ROOT,
                          timeout=300)
    if done.returncode:
        return {"error": f"{form}: exit code {done.returncode}: {done.stderr.strip()[-500:]}"}
    return json.loads(out.read_text())  # type: ignore[no-any-return]


# ---- the table ------------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def table(results: dict[str, Any]) -> str:
    header = ("", "cold ms", "warm ms", "cold CPU ms", "warm CPU ms", "target ms")
    rows: list[tuple[str, ...]] = [header]

    def row(label: str, figures: dict[str, Any] | None, target: int | None = None) -> None:
        if figures is None or "error" in figures:
            reason = "not measured" if figures is None else figures["error"]
            rows.append((label, "n/a", "n/a", "n/a", "n/a", f"({reason})"))
            return
        rows.append((label, _ms(figures["cold_ms"]), _ms(figures["warm_median_ms"]),
                     _ms(figures.get("cold_cpu_ms")), _ms(figures.get("warm_median_cpu_ms")),
                     "" if target is None else str(target)))

    process = results["process"]
    row("refka serve --memory: first ApiVersions", process.get("api_versions", process), TARGET_PROCESS_MS)
    row("refka serve --memory: Metadata lists it", process.get("metadata", process))
    row("python -c pass (the interpreter alone)", results["interpreter"])
    for form, label in (("sync", "with Broker()"), ("async", "async with Broker()")):
        row(f"{label}: first ApiVersions", results["in_process"][form], TARGET_IN_PROCESS_MS)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths, strict=True)))
             for r in rows]
    imported = {form: results["in_process"][form].get("import_ms") for form in ("sync", "async")}
    if all(v is not None for v in imported.values()):
        lines.append("(in-process cold includes import refka.testing: "
                     + ", ".join(f"{form} {_ms(ms)} ms" for form, ms in imported.items()) + ")")
    imports = results["imports"]
    if "error" in imports:
        lines.append(f"\nimports of refka serve: n/a ({imports['error']})")
    else:
        lines.append(f"\nimports of refka serve by its first answer (python -X importtime, one spawn): "
                     f"{imports['modules']} modules, {imports['self_ms']:,.1f} ms self time; by package, ms:")
        top = list(imports["by_package_ms"].items())[:TOP_PACKAGES]
        lines.append("  " + ", ".join(f"{name} {ms:,.1f}" for name, ms in top))
    return "\n".join(lines)


def bytecode_mode() -> str:
    """How the children get refka's bytecode, from this environment."""
    prefix = os.environ.get("PYTHONPYCACHEPREFIX")
    if prefix:
        return f"cached in {prefix} (PYTHONPYCACHEPREFIX)"
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return "not written (PYTHONDONTWRITEBYTECODE): what has no .pyc compiles at every start"
    return "cached next to the sources (__pycache__)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.bench.startup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7,
                        help="starts per measure: cold is the first, warm the median of the others (default 7)")
    parser.add_argument("--pycache-prefix", type=Path, default=None, metavar="DIR",
                        help="give the children a bytecode cache in DIR (PYTHONPYCACHEPREFIX, "
                             "PYTHONDONTWRITEBYTECODE unset)")
    parser.add_argument("--json", type=Path, default=None,
                        help="results file (default lab/bench/results/<UTC timestamp>-startup.json)")
    parser.add_argument("--in-process", choices=("sync", "async"), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.runs < 2:
        parser.error("--runs must be at least 2 (a cold run and a warm one)")
    if args.in_process is not None:  # the child of in_process_startup
        if args.out is None:
            parser.error("--in-process needs --out")
        args.out.write_text(json.dumps(_in_process(args.in_process, args.runs)))
        return 0
    if args.pycache_prefix is not None:
        os.environ["PYTHONPYCACHEPREFIX"] = str(args.pycache_prefix.resolve())
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

    started = datetime.now(UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    results: dict[str, Any] = {
        "started_at": started.isoformat(), "benchmark": "startup", "machine": report.machine_info(),
        "config": {"runs": args.runs, "bytecode": bytecode_mode(),
                   "targets_ms": {"process": TARGET_PROCESS_MS, "in_process": TARGET_IN_PROCESS_MS}},
    }
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="refka-bench-startup-") as tmp:
        workdir = Path(tmp)
        _say(f"refka serve --memory x {args.runs}")
        results["process"] = process_startup(args.runs, workdir)  # first: its cold run is the first spawn
        _say(f"python -c pass x {args.runs}")
        results["interpreter"] = interpreter_startup(args.runs)
        _say("refka serve under -X importtime")
        results["imports"] = import_profile(workdir)
        results["in_process"] = {}
        for form in ("sync", "async"):
            _say(f"in-process {form} x {args.runs}")
            results["in_process"][form] = in_process_startup(form, args.runs, workdir)
    results["finished_at"] = datetime.now(UTC).isoformat()
    results["loadavg_1min_end"] = os.getloadavg()[0]
    results["wall_seconds"] = time.monotonic() - t0

    m = results["machine"]
    print(f"\nrefka start-up: {m['nproc']} CPUs ({m['cpu_model']}), Python {m['python']}; cold = the first of "
          f"{args.runs} starts, warm = the median of the others")
    print(f"bytecode: {results['config']['bytecode']}; load average before/after: "
          f"{m['loadavg_1min']:.2f} / {results['loadavg_1min_end']:.2f}\n")
    print(table(results))
    path = args.json or RESULTS_DIR / f"{stamp}-startup.json"
    report.write_json(results, path)
    print(f"\nresults: {path}  ({results['wall_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
