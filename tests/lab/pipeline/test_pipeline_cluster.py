"""The audit on a standalone Spark cluster: a master and a worker started from the pyspark
package's own launcher (bin/spark-class), ``--master spark://...``, the same summary as the
local session's (the planted counts, which test_pipeline_audit.py checks locally)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.brokers import free_port_block

pytestmark = pytest.mark.timeout(400)
ROOT = Path(__file__).resolve().parents[3]


class SparkDaemon:
    """``spark-class <class> ...`` in its own process group, ready when its log says ``ready``."""

    def __init__(self, name: str, cls: str, args: list[str], log_dir: Path) -> None:
        import pyspark

        home = Path(pyspark.__file__).parent
        self.log = log_dir / f"{name}.log"
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
        with open(self.log, "w") as f:
            self.proc = subprocess.Popen([str(home / "bin" / "spark-class"), cls, *args], stdout=f,
                                         stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def wait_for(self, ready: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready in self.log.read_text(errors="replace"):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.5)
        raise RuntimeError(f"{self.log.name} never said {ready!r}:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the worker's executors are in its group too
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


@pytest.fixture(scope="module")
def standalone(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, SparkDaemon, SparkDaemon]]:
    # (spark: only so that the test skips where pyspark or the jars are missing.)
    logs = tmp_path_factory.mktemp("spark-standalone")
    port = free_port_block()
    url = f"spark://127.0.0.1:{port}"
    master = SparkDaemon("master", "org.apache.spark.deploy.master.Master",
                         ["--host", "127.0.0.1", "--port", str(port), "--webui-port", "0"], logs)
    worker = None
    try:
        master.wait_for("I have been elected leader")
        worker = SparkDaemon("worker", "org.apache.spark.deploy.worker.Worker",
                             ["--host", "127.0.0.1", "--cores", "2", "--memory", "2g", "--webui-port", "0",
                              "--work-dir", str(logs / "work"), url], logs)
        worker.wait_for("Successfully registered with master")
        yield url, master, worker
    finally:
        if worker is not None:
            worker.stop()
        master.stop()


def test_the_audit_on_a_standalone_cluster_gives_the_local_summary(
        standalone: tuple[str, SparkDaemon, SparkDaemon], planted: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    url, master, worker = standalone
    logs, expected = planted
    out = tmp_path / "audit"
    r = subprocess.run([sys.executable, "-m", "lab.pipeline", "audit", "--deliveries", str(logs / "deliveries"),
                        "--acks", str(logs / "acks"), "--out", str(out), "--master", url, "--shuffle-partitions", "4", "--no-report"],
                       cwd=ROOT, capture_output=True, text=True, timeout=360)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert {k: v for k, v in summary.items() if k != "bad_examples"} == expected["summary"]
    assert len(summary["bad_examples"]) == 5
    # It ran there: the master took the application, the worker ran its executor.
    assert "Registered app refka-audit" in master.log.read_text()
    assert "Asked to launch executor" in worker.log.read_text()
