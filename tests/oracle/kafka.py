"""Apache Kafka 3.9.1's broker as a child process: the oracle the differential tests compare
refka with (tests/oracle/). ``make kafka-oracle`` puts its jars in ``.cache/kafka-3.9.1/``;
this module writes a ``server.properties`` and a ``log4j.properties`` (the broker logs to
``server.log`` in its directory, nothing to the console) and runs
``java -cp '.cache/kafka-3.9.1/*' kafka.Kafka server.properties`` in ZooKeeper mode."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from refka.protocol.messages.api_versions import ApiVersions
from tests.brokers import free_port_block
from tests.integration.cluster_helpers import Raw

REPO = Path(__file__).resolve().parents[2]
KAFKA_VERSION = "3.9.1"
JARS = REPO / ".cache" / f"kafka-{KAFKA_VERSION}"
STAMP = JARS / ".refka-installed"

LOG4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
"""


def kafka_unavailable() -> str | None:
    """Why the oracle cannot run here, or None."""
    if not STAMP.exists():
        return f"no Apache Kafka {KAFKA_VERSION} jars in {JARS} (run `make kafka-oracle`)"
    if shutil.which("java") is None:
        return "no java on PATH for the Apache Kafka oracle (Debian: default-jre-headless)"
    return None


class KafkaBroker:
    """One Kafka 3.9.1 broker, ``broker.id`` 0, on a free loopback port, under ``zookeeper_connect``
    (a chroot of its own). ``start()`` returns once it answers ApiVersions."""

    def __init__(self, workdir: Path, zookeeper_connect: str, settings: dict[str, str]) -> None:
        self.workdir = workdir
        self.zookeeper_connect = zookeeper_connect
        self.settings = dict(settings)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "server.log"
        self.startup_seconds = 0.0

    def _write_config(self) -> Path:
        self.workdir.mkdir(parents=True, exist_ok=True)
        props = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.workdir / "data"),
            "zookeeper.connect": self.zookeeper_connect,
            "zookeeper.connection.timeout.ms": "30000",
            **self.settings,
        }
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.workdir / "log4j.properties").write_text(LOG4J.format(log=self.log_path))
        return path

    def start(self, timeout: float = 120.0) -> KafkaBroker:
        self.port = free_port_block()
        config = self._write_config()
        env = dict(os.environ)
        env.pop("KAFKA_OPTS", None)
        cmd = ["java", "-Xms256m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Djava.awt.headless=true",
               f"-Dlog4j.configuration=file:{self.workdir / 'log4j.properties'}",
               f"-Dkafka.logs.dir={self.workdir}",
               "-cp", f"{JARS}/*", "kafka.Kafka", str(config)]
        t0 = time.monotonic()
        out = open(self.workdir / "stdout.log", "ab")
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if self._answers_api_versions():
                self.startup_seconds = time.monotonic() - t0
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"Apache Kafka {KAFKA_VERSION} did not start; see {self.log_path}:\n{self.log_tail()}")

    def _answers_api_versions(self) -> bool:
        try:
            raw = Raw(self.port)
        except OSError:
            return False
        try:
            resp, _ = raw.call_raw(ApiVersions, ApiVersions.Request(
                client_software_name="refka-oracle", client_software_version="0"), 3)
            return resp.error_code == 0
        except (TimeoutError, OSError, ConnectionError):
            return False
        finally:
            raw.close()

    def log_tail(self, n: int = 40) -> str:
        texts = []
        for p in (self.log_path, self.workdir / "stdout.log"):
            try:
                texts.append("\n".join(p.read_text(errors="replace").splitlines()[-n:]))
            except OSError:
                pass
        return "\n".join(texts)

    def stop(self) -> None:
        """SIGTERM (Kafka's controlled shutdown), then SIGKILL if it lingers."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
