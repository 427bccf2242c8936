"""A private ZooKeeper server from Debian's ``zookeeper`` package.

Used by ``refka zookeeper`` (a local ZooKeeper for multi-process clusters) and
by the tests::

    from refka.zookeeper import ZooKeeperServer

    server = ZooKeeperServer(tmp_dir)
    server.start()            # free loopback port, waits for ruok -> imok
    ZooKeeperStore(server.connect + "/my-chroot")
    server.stop()

The server runs ``QuorumPeerMain`` in standalone mode straight from
``/usr/share/java/zookeeper.jar`` (its manifest's Class-Path brings netty,
jute, slf4j, ...), with a ``zoo.cfg`` and its data directory under the given
directory. ``zookeeper_unavailable()`` says why it cannot run here, or None.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
# Quiet logging: slf4j with no binding prints a warning and drops everything.
SLF4J_NOP = Path("/usr/share/java/slf4j-nop.jar")
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


def zookeeper_unavailable() -> str | None:
    if not ZOOKEEPER_JAR.exists():
        return f"Debian's zookeeper package is not installed ({ZOOKEEPER_JAR} is missing)"
    if shutil.which("java") is None:
        return "no java on PATH to run ZooKeeper"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def four_letter(port: int, word: str, timeout: float = 1.0) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(word.encode())
        chunks = []
        while True:
            b = s.recv(4096)
            if not b:
                break
            chunks.append(b)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    def __init__(self, workdir: Path, port: int | None = None, tick_ms: int = 500, heap_mb: int = 256) -> None:
        """``heap_mb``: the JVM's -Xmx. 256 MB holds ~40,000 one-partition topics; a lab with
        more needs more (the KIP-526 bench gives 100,000 topics 2 GB)."""
        self.workdir = Path(workdir)
        self.port = port or free_port()
        self.tick_ms = tick_ms
        self.heap_mb = heap_mb
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        reason = zookeeper_unavailable()
        if reason:
            raise RuntimeError(reason)
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "zoo.cfg"
        cfg.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_ms}",
                    f"dataDir={data}",
                    f"clientPort={self.port}",
                    "clientPortAddress=127.0.0.1",
                    "maxClientCnxns=0",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat",
                    "",
                ]
            )
        )
        cp = [str(ZOOKEEPER_JAR)] + ([str(SLF4J_NOP)] if SLF4J_NOP.exists() else [])
        self._log = open(self.workdir / "zookeeper.log", "wb")
        # setpriv (util-linux) makes the JVM get SIGTERM when this process dies, even by
        # SIGKILL: no ZooKeeper is left behind by a killed `refka zookeeper` or test run.
        guard = ["setpriv", "--pdeathsig", "TERM", "--"] if shutil.which("setpriv") else []
        self.proc = subprocess.Popen(
            # Out of heap, the JVM says so in zookeeper.log and exits (ZooKeeper's own logging
            # goes to slf4j-nop), rather than limping on.
            [*guard, "java", f"-Xmx{self.heap_mb}m", "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError",
             "-cp", ":".join(cp), MAIN, str(cfg)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if four_letter(self.port, "ruok") == "imok":
                    return
            except OSError:
                pass
            time.sleep(0.1)
        log = (self.workdir / "zookeeper.log").read_text(errors="replace")[-2000:]
        self.stop()
        raise RuntimeError(f"ZooKeeper did not answer ruok on port {self.port}:\n{log}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if getattr(self, "_log", None) is not None:
            self._log.close()
            self._log = None  # type: ignore[assignment]


def run_zookeeper(port: int, workdir: Path, heap_mb: int = 512) -> int:
    """``refka zookeeper``: runs until Ctrl-C."""
    import signal

    server = ZooKeeperServer(workdir, port=port, heap_mb=heap_mb)
    try:
        server.start()
    except RuntimeError as e:
        print(f"refka zookeeper: {e}")
        return 1
    print(f"zookeeper ready: {server.connect} (data in {workdir}); "
          f"join with: refka serve --zookeeper {server.connect}/refka --broker-id N", flush=True)
    stop_signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)  # after the JVM started: it keeps its own
    try:
        signal.sigwait(stop_signals)
    finally:
        server.stop()
    return 0
