"""The start-up benchmark (lab/bench/startup.py) at its smallest: ``python -m lab.bench.startup
--runs 2`` prints every row of its table and writes each figure to its JSON file; and its
reading of ``python -X importtime``. The figures' values are not checked (timings are not tests).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.bench.startup import by_package, parse_importtime

ROOT = Path(__file__).resolve().parents[3]
ROWS = ("refka serve --memory: first ApiVersions", "refka serve --memory: Metadata lists it",
        "python -c pass (the interpreter alone)", "with Broker(): first ApiVersions",
        "async with Broker(): first ApiVersions", "imports of refka serve by its first answer")


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_a_tiny_run_prints_and_writes_every_figure(tmp_path):
    results = tmp_path / "startup.json"
    done = subprocess.run([sys.executable, "-m", "lab.bench.startup", "--runs", "2", "--json", str(results)],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for row in ROWS:
        assert row in done.stdout, f"{row!r} missing from:\n{done.stdout}"
    assert "n/a" not in done.stdout, done.stdout

    data = json.loads(results.read_text())
    assert data["config"]["runs"] == 2
    figures = [data["process"]["api_versions"], data["process"]["metadata"], data["interpreter"],
               data["in_process"]["sync"], data["in_process"]["async"]]
    for f in figures:
        assert len(f["seconds"]) == 2 and f["cold_ms"] > 0 and f["warm_median_ms"] > 0, f
    for f in figures[1:]:
        assert len(f["cpu_seconds"]) == 2, f
    assert data["in_process"]["sync"]["import_ms"] > 0
    imports = data["imports"]
    assert imports["modules"] > 100 and {"refka.broker", "refka.protocol", "asyncio"} <= set(imports["by_package_ms"])


def test_importtime_lines_are_summed_by_package_with_refka_by_subpackage():
    trace = "\n".join([
        "import time: self [us] | cumulative | imported package",
        "import time:       120 |        120 |   _io",
        "import time:      2000 |       2500 |     asyncio.events",
        "import time:       500 |       3000 |   asyncio",
        "import time:      4000 |       4000 |       refka.broker.log.log",
        "import time:      1000 |       5000 |     refka.broker",
        "import time:      3000 |       3000 |   refka.protocol.records",
        "import time:        10 |       9000 | refka",
        "2026-01-01 [info     ] listening  broker=0",  # the broker's own log lines, on the same stream
    ])
    imports = parse_importtime(trace)
    assert imports[0] == ("_io", 120) and len(imports) == 7
    assert by_package(imports) == {"refka.broker": 5.0, "refka.protocol": 3.0, "asyncio": 2.5, "_io": 0.12,
                                   "refka": 0.01}
    assert list(by_package(imports)) == ["refka.broker", "refka.protocol", "asyncio", "_io", "refka"]
