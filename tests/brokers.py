"""Real refka brokers for tests: ``refka serve`` in a subprocess on free loopback ports."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def free_port_block(n: int = 1) -> int:
    """A base port p such that p..p+n-1 are free on 127.0.0.1 (best effort)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n >= 65535:
            continue
        ok = True
        for i in range(1, n):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", base + i))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port block")


class BrokerProcess:
    """``refka serve`` as a child process; ``start()`` returns once it printed its ready line."""

    def __init__(self, data_dir: Path, *, brokers: int = 1, memory: bool = False,
                 overrides: dict[str, str] | None = None, port: int | None = None,
                 extra_args: list[str] | None = None, module: str = "refka.cli",
                 env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.brokers = brokers
        self.memory = memory
        self.overrides = dict(overrides or {})
        self.port = port
        self.extra_args = list(extra_args or [])
        self.module = module  # what ``python -m`` runs: refka's command, or a test's wrapper of it
        self.env = dict(env or {})
        self.proc: subprocess.Popen[str] | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}-broker.log"
        self.ready_line = ""
        self.startup_seconds = 0.0

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.port + i}" for i in range(self.brokers))  # type: ignore[operator]

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        if self.port is None:
            self.port = free_port_block(self.brokers)
        cmd = [sys.executable, "-m", self.module, "serve", "--port", str(self.port),
               "--brokers", str(self.brokers), "--data-dir", str(self.data_dir)]
        if self.memory:
            cmd.append("--memory")
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        cmd += self.extra_args
        env = dict(os.environ)
        env.setdefault("REFKA_LOG_LEVEL", "info")
        env.update(self.env)
        t0 = time.monotonic()
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        log.close()
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.startswith("refka ready"):
                self.ready_line = line.strip()
                self.startup_seconds = time.monotonic() - t0
                return self
        self.kill()
        raise RuntimeError(f"broker did not start; see {self.log_path}:\n{self.log_tail()}")

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text().splitlines()[-n:])
        except OSError:
            return ""

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def stop(self) -> int | None:
        """SIGTERM and wait: the clean shutdown path. Returns the exit code."""
        self.kill(signal.SIGTERM)
        return self.proc.returncode if self.proc is not None else None

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def with_admin_api(data_dir: Path, *, brokers: int = 1, overrides: dict[str, str] | None = None
                   ) -> Iterator[tuple[BrokerProcess, str]]:
    """``refka serve --memory --admin-port`` for a test module: (the broker process, the admin
    API's base URL), stopped on the way out."""
    admin_port = free_port_block()
    b = BrokerProcess(data_dir, brokers=brokers, memory=True, overrides=overrides,
                      extra_args=["--admin-port", str(admin_port)]).start()
    try:
        yield b, f"http://127.0.0.1:{admin_port}"
    finally:
        b.stop()


def admin_call(url: str, path: str, method: str = "GET", body: object | None = None,
               timeout: float = 60.0) -> tuple[int, Any]:
    """The admin API's status and JSON answer (4xx and 5xx included, their JSON error)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
