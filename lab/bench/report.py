"""Machine description, the printed table, and the JSON results file."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from lab.bench.targets import REPO_ROOT

SIZE_LABELS = {1024: "1 KiB", 100: "100 B"}


def size_label(size: int) -> str:
    return SIZE_LABELS.get(size, f"{size} B")


def _first_line_with(path: str, prefix: str) -> str | None:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def machine_info() -> dict[str, Any]:
    import confluent_kafka

    import refka

    try:
        import uvloop

        uvloop_version: str | None = uvloop.__version__
    except ImportError:
        uvloop_version = None
    mem_kb = _first_line_with("/proc/meminfo", "MemTotal")
    status = _git("status", "--porcelain", "--", "refka")
    return {
        "nproc": os.cpu_count(),
        # Other work on the machine skews every figure: note how busy it was.
        "loadavg_1min": os.getloadavg()[0],
        "cpus_available": len(os.sched_getaffinity(0)),
        "cpu_model": _first_line_with("/proc/cpuinfo", "model name"),
        "mem_total": mem_kb,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "tempdir": tempfile.gettempdir(),
        "refka": refka.__version__,
        "refka_git_commit": _git("rev-parse", "HEAD"),
        "refka_worktree_dirty": bool(status) if status is not None else None,
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
        "uvloop": uvloop_version,
    }


WINDOW_NOTE = ("* librdkafka's mock keeps only the last ~5 MB of a partition: its consume figure is one read "
               "of that window ({records}), indicative only")


def _cell(target: dict[str, Any], path: tuple[str, ...], fmt: str, notes: list[str],
          stars: list[str] | None = None) -> str:
    """A formatted figure, or n/a with a numbered note giving the reason."""
    if not target.get("available", False):
        reason = target.get("reason", "unavailable")
    else:
        node: Any = target
        parent: Any = None
        for key in path:
            if not isinstance(node, dict) or key not in node:
                node = {"error": "not measured"}
                break
            parent, node = node, node[key]
        if not isinstance(node, dict) or "error" not in node:
            text = format(node, fmt) if isinstance(node, int | float) else str(node)
            if stars is not None and isinstance(parent, dict) and parent.get("extra", {}).get("retained_window_only"):
                note = WINDOW_NOTE.format(records="; ".join(
                    f"{run['consume']['records']:,} records of {size_label(int(size))}"
                    for size, run in target.get("runs", {}).items()
                    if isinstance(run.get("consume"), dict) and "records" in run["consume"]))
                if note not in stars:
                    stars.append(note)
                text += "*"
            return text
        reason = node["error"]
    if reason not in notes:
        notes.append(reason)
    return f"n/a [{notes.index(reason) + 1}]"


def _cpu_cell(target: dict[str, Any], size: str, phase: str) -> str:
    run = target.get("runs", {}).get(size, {}).get(phase)
    if not target.get("available") or not isinstance(run, dict) or "error" in run:
        return "-"
    broker = run.get("broker_cpu_percent")
    b = "?" if broker is None else f"{broker:.0f}"
    return f"{b} / {run['client_cpu_percent']:.0f}"


def table(results: dict[str, Any]) -> str:
    targets: dict[str, dict[str, Any]] = results["targets"]
    names = list(targets)
    notes: list[str] = []
    stars: list[str] = []
    rows: list[tuple[str, list[str]]] = []
    repeats = results["config"]["startup_repeats"]
    rows.append((f"start-up ms to ApiVersions (median of {repeats})",
                 [_cell(targets[n], ("startup", "median_ms"), ".0f", notes) for n in names]))
    rows.append(("start-up ms to Metadata with a broker",
                 [_cell(targets[n], ("startup", "metadata_median_ms"), ".0f", notes) for n in names]))
    for size in results["config"]["sizes"]:
        key, label = str(size), size_label(size)
        for phase in ("produce", "consume"):
            rows.append((f"{phase} {label} MB/s",
                         [_cell(targets[n], ("runs", key, phase, "mb_per_s"), ",.1f", notes, stars)
                          for n in names]))
            rows.append((f"{phase} {label} records/s",
                         [_cell(targets[n], ("runs", key, phase, "records_per_s"), ",.0f", notes, stars)
                          for n in names]))
    cpu_rows = []
    for size in results["config"]["sizes"]:
        for phase in ("produce", "consume"):
            cpu_rows.append((f"  {phase} {size_label(size)}",
                             [_cpu_cell(targets[n], str(size), phase) for n in names]))
    label_w = max(len(r[0]) for r in rows + cpu_rows)
    col_w = [max(len(n), *(len(r[1][i]) for r in rows + cpu_rows)) for i, n in enumerate(names)]
    lines = [f"{'':<{label_w}}  " + "  ".join(f"{n:>{w}}" for n, w in zip(names, col_w, strict=True))]
    lines.append("-" * len(lines[0]))
    for label, cells in rows:
        lines.append(f"{label:<{label_w}}  " + "  ".join(f"{c:>{w}}" for c, w in zip(cells, col_w, strict=True)))
    lines.append("CPU % of one core, broker / client:")
    for label, cells in cpu_rows:
        lines.append(f"{label:<{label_w}}  " + "  ".join(f"{c:>{w}}" for c, w in zip(cells, col_w, strict=True)))
    lines.extend(f"[{i}] {note}" for i, note in enumerate(notes, 1))
    lines.extend(stars)
    return "\n".join(lines)


def ratios(results: dict[str, Any]) -> dict[str, float | None]:
    """refka / Tansu throughput at 1 KiB (MB/s), for disk and memory refka."""
    targets = results["targets"]
    out: dict[str, float | None] = {}

    def mbps(name: str, phase: str) -> float | None:
        run = targets.get(name, {}).get("runs", {}).get("1024", {}).get(phase)
        if not targets.get(name, {}).get("available") or not isinstance(run, dict) or "error" in run:
            return None
        return float(run["mb_per_s"])

    for refka_target in ("refka-disk", "refka-memory"):
        if refka_target not in targets or "tansu" not in targets:
            continue
        for phase in ("produce", "consume"):
            a, b = mbps(refka_target, phase), mbps("tansu", phase)
            out[f"{refka_target}/tansu {phase} MB/s 1 KiB"] = None if a is None or not b else a / b
    return out


def median_ms(seconds: list[float]) -> float:
    return statistics.median(seconds) * 1000


def write_json(results: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, sort_keys=False) + "\n")
