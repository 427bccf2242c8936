"""One SparkSession (local[*]) for the tests of this directory: a session costs seconds to
start. Package-scoped, so its JVM (a gigabyte, and busy even when idle) is gone before
the rest of the suite runs.
Tests skip, naming the make target, where pyspark or the Kafka connector's jars are not
installed (`make test` installs both)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="package")
def spark() -> Iterator[Any]:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        pytest.skip("pyspark is not installed: make pipeline")
    from lab.pipeline.session import MissingJars, connector_jars, session, stop_jvm

    try:
        connector_jars()
    except MissingJars as e:
        pytest.skip(str(e))
    t0 = time.monotonic()
    s = session(app_name="refka-tests")
    print(f"\nSparkSession started in {time.monotonic() - t0:.1f} s")
    yield s
    stop_jvm(s)


@pytest.fixture(scope="session")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any]]:
    """Synthetic logs with every kind of planted fault (lab/pipeline/synth.py), and the
    summary they must give: 5 delivery files whose lines are shuffled, leader changes, and
    recordings."""
    from lab.pipeline import synth

    out = tmp_path_factory.mktemp("planted")
    plan = synth.Plan(records=30_000, violations=23, losses=11, duplicates=9, producer_errors=4, bad_lines=15,
                      leader_changes=4, recordings=True, producers=3, keys=40, partitions=6, consumers=3,
                      files=5, rate=2_000, shuffle=True, seed=7)
    return out, synth.generate(plan, out)
