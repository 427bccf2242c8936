"""tests/compat.py: the README's compatibility matrix is made from a run's outcomes, each
test counted for its client (and version), a client whose tests did not run said so."""

from __future__ import annotations

import json
from pathlib import Path

from tests import compat


def row(text: str, client: str, version: str | None = None) -> str:
    return next(line for line in text.splitlines()
                if line.startswith(f"| {client} |") and (version is None or f"| {version} |" in line))


def test_outcomes_are_counted_per_client_and_version(tmp_path: Path) -> None:
    outcomes = {
        "tests/integration/test_kcat.py::test_a": "passed",
        "tests/integration/test_groups_kcat.py::test_b": "failed",
        "tests/integration/test_kcat.py::test_c": "skipped",
        "tests/integration/test_java_client.py::test_produce[3.9.1]": "passed",
        "tests/integration/test_java_client.py::test_produce[4.1.1]": "skipped",
        "tests/integration/test_durability.py::test_x": "passed",  # no client's
    }
    text = compat.table(outcomes)
    assert row(text, "kcat").endswith("| 1 passed, 1 failed, 1 skipped |")
    assert row(text, "aiokafka").endswith("| not run in this run |")
    if {"3.9.1", "4.1.1"} <= set(compat._java_versions()):
        assert row(text, "Java kafka-clients", "3.9.1").endswith("| 1 passed |")
        assert row(text, "Java kafka-clients", "4.1.1").endswith("| 1 skipped |")

    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{compat.START}\nthe previous table\n{compat.END}\ntail\n")
    results = tmp_path / "outcomes.json"
    results.write_text(json.dumps({"finished": "2026-01-01 00:00 UTC", "args": [], "outcomes": outcomes}))
    assert compat.main(["--outcomes", str(results), "--readme", str(readme)]) == 0
    content = readme.read_text()
    assert "the previous table" not in content and content.endswith(f"{compat.END}\ntail\n")
    assert row(content, "kcat") and "From the test run of 2026-01-01 00:00 UTC (6 tests)." in content
