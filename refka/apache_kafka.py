"""Apache Kafka 3.9.1's own broker as a child process, in ZooKeeper mode: the reference refka
is compared with. Used by the differential tests (tests/oracle/, Kafka as the oracle) and by
the benchmark's ``kafka`` target (lab/bench/targets.py)::

    from refka.apache_kafka import ApacheKafka

    broker = ApacheKafka(workdir, zookeeper_connect, port, {"num.partitions": "1"})
    broker.start()            # returns at once; wait for its port as for any broker
    ...
    broker.stop()             # SIGTERM (Kafka's controlled shutdown), then SIGKILL

``make kafka-oracle`` copies its jars (``org.apache.kafka:kafka_2.13:3.9.1`` and its runtime
dependencies, with slf4j-reload4j) into ``.cache/kafka-3.9.1/`` with Maven; nothing is
downloaded here. The broker gets a ``server.properties`` (``broker.id`` 0 unless the settings
say otherwise, one PLAINTEXT listener on loopback) and a ``log4j.properties`` that writes
``server.log`` in its directory, nothing to the console; its JVM is QUICK_START_JVM (tests)
or SERVER_JVM (benchmarks: Kafka's own start script's settings). ``kafka_unavailable()`` says why it cannot run here,
or None.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

VERSION = "3.9.1"
REPO = Path(__file__).resolve().parent.parent
JARS = REPO / ".cache" / f"kafka-{VERSION}"
STAMP = JARS / ".refka-installed"
MAKE_TARGET = "make kafka-oracle"

# The JVM: for tests, small and quick to start (512 MB heap, serial GC, C1 only: ~5 s);
# for benchmarks, what Kafka's bin/kafka-server-start.sh gives it (1 GB heap, G1).
QUICK_START_JVM = ("-Xms256m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
SERVER_JVM = ("-Xms1g", "-Xmx1g", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
              "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent")

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
    """Why Apache Kafka cannot run here, or None."""
    if not STAMP.exists():
        return f"no Apache Kafka {VERSION} jars in {JARS} (run `{MAKE_TARGET}`)"
    if shutil.which("java") is None:
        return "no java on PATH for Apache Kafka (Debian: default-jre-headless)"
    return None


class ApacheKafka:
    """One Kafka broker on ``port`` (loopback) under ``zookeeper_connect`` (give it a chroot of
    its own), its files in ``workdir``; ``settings`` are more server properties."""

    def __init__(self, workdir: Path, zookeeper_connect: str, port: int, settings: dict[str, str] | None = None,
                 jvm: tuple[str, ...] = QUICK_START_JVM) -> None:
        self.workdir = workdir
        self.jvm = jvm
        self.zookeeper_connect = zookeeper_connect
        self.port = port
        self.settings = dict(settings or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "server.log"

    def command(self) -> list[str]:
        """Writes the broker's configuration; the command that runs it."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        props = {
            "broker.id": "0",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.workdir / "data"),
            "zookeeper.connect": self.zookeeper_connect,
            "zookeeper.connection.timeout.ms": "30000",
            **self.settings,
        }
        config = self.workdir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        log4j = self.workdir / "log4j.properties"
        log4j.write_text(LOG4J.format(log=self.log_path))
        return ["java", *self.jvm, "-Djava.awt.headless=true", f"-Dlog4j.configuration=file:{log4j}",
                f"-Dkafka.logs.dir={self.workdir}", "-cp", f"{JARS}/*", "kafka.Kafka", str(config)]

    def start(self) -> subprocess.Popen[bytes]:
        """Spawns it (its console output to ``stdout.log`` in its directory); does not wait."""
        cmd = self.command()
        env = dict(os.environ)
        env.pop("KAFKA_OPTS", None)
        with open(self.workdir / "stdout.log", "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        return self.proc

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
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
