"""deploy/k8s/smoke/smoke.py, the smoke Job of `make kind-up`, against three real brokers:
it creates its topic (3 replicas), produces through the bootstrap servers and consumes
back, and says so; against nothing, it fails saying why."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.brokers import BrokerProcess, free_port_block
from tests.deploy.manifests import SMOKE

pytestmark = pytest.mark.integration


def smoke(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SMOKE / "smoke.py"), "--bootstrap", bootstrap, *args],
                          capture_output=True, text=True, timeout=120)


def test_the_smoke_check_passes_on_three_brokers(tmp_path):
    with BrokerProcess(tmp_path / "data", brokers=3, memory=True) as cluster:
        done = smoke(cluster.bootstrap.split(",")[0], "--records", "300")
    assert done.returncode == 0, done.stderr
    assert "smoke ok:" in done.stdout and "300 records acknowledged" in done.stdout


def test_the_smoke_check_fails_saying_why_when_no_broker_answers():
    done = smoke(f"127.0.0.1:{free_port_block()}", "--timeout", "5")
    assert done.returncode == 1 and "smoke FAILED" in done.stderr
