"""@platformatic/kafka 1.35.0 (Node.js, what npm installs on Node 20) against refka.

``tests/js/platformatic_roundtrip.mjs`` creates a topic with its Admin client,
produces keyed records and consumes them back in a consumer group. That client
mis-reads tagged fields it does not know in Metadata v12, so it works only
because refka sends its KIP-232/253 fields to clients that ask for them
(refka.protocol.extensions=requested, the default); with ``always`` its every
metadata call fails, which the second test shows.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.brokers import BrokerProcess

pytestmark = pytest.mark.integration

JS_DIR = Path(__file__).resolve().parents[1] / "js"
WAIT_S = 120  # against hangs only: the script gives up after 60 s of consuming
COUNT = 60


@pytest.fixture(scope="module")
def node() -> str:
    """The node binary, with @platformatic/kafka installed under tests/js (as `make test` does)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (Debian package nodejs)")
    if not (JS_DIR / "node_modules" / "@platformatic" / "kafka" / "package.json").exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed (Debian package npm) and tests/js/node_modules has no @platformatic/kafka")
        proc = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=JS_DIR,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"npm install in {JS_DIR} failed:\n{proc.stdout}\n{proc.stderr}"
    return node


def roundtrip(node: str, bootstrap: str) -> subprocess.CompletedProcess[str]:
    topic, group = f"platformatic-{uuid.uuid4().hex[:6]}", f"platformatic-g-{uuid.uuid4().hex[:6]}"
    return subprocess.run([node, str(JS_DIR / "platformatic_roundtrip.mjs"), bootstrap, topic, group, str(COUNT)],
                          capture_output=True, text=True, timeout=WAIT_S)


def test_it_produces_and_consumes_through_a_consumer_group(node, tmp_path):
    with BrokerProcess(tmp_path / "data", brokers=3, memory=True) as b:
        proc = roundtrip(node, b.bootstrap)
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{proc.stderr[-3000:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    consumed = out["consumed"]
    assert sorted(m["value"] for m in consumed) == sorted(f"value-{i}" for i in range(COUNT))
    assert all(m["key"] == f"key-{int(m['value'].split('-')[1]) % 7}" for m in consumed)
    # One key, one partition; offsets within a partition in order, without gaps from 0.
    partitions_of_key: dict[str, set[int]] = {}
    by_partition: dict[int, list[int]] = {}
    for m in consumed:
        partitions_of_key.setdefault(m["key"], set()).add(m["partition"])
        by_partition.setdefault(m["partition"], []).append(m["offset"])
    assert all(len(ps) == 1 for ps in partitions_of_key.values())
    assert all(offsets == list(range(len(offsets))) for offsets in by_partition.values())


def test_with_refkas_fields_sent_to_every_client_it_cannot_read_metadata(node, tmp_path):
    overrides = {"refka.protocol.extensions": "always"}
    with BrokerProcess(tmp_path / "data", memory=True, overrides=overrides) as b:
        proc = roundtrip(node, b.bootstrap)
    assert proc.returncode != 0
