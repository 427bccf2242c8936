"""``refka health``: the image's HEALTHCHECK and the pods' readiness probe, against a real
broker and against ports that do not answer as one."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from tests.brokers import free_port_block

pytestmark = pytest.mark.integration


def health(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("REFKA_")}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "refka.cli", "health", *args], env=full, capture_output=True,
                          text=True, timeout=60)


def test_a_serving_broker_is_alive_and_ready(memory_broker):
    alive = health("--bootstrap", memory_broker.bootstrap)
    assert alive.returncode == 0 and "answers ApiVersions" in alive.stdout
    ready = health("--ready", "--bootstrap", memory_broker.bootstrap)
    assert ready.returncode == 0 and "ready (controller 0, 1 brokers)" in ready.stdout


def test_without_bootstrap_it_asks_the_first_listener_of_the_configuration(memory_broker):
    # As in the image: REFKA_LISTENERS binds every address; the check asks the loopback.
    done = health("--ready", env={"REFKA_LISTENERS": f"PLAINTEXT://0.0.0.0:{memory_broker.port}"})
    assert done.returncode == 0 and f"127.0.0.1:{memory_broker.port} ready" in done.stdout


def test_a_closed_port_is_unhealthy_at_once():
    port = free_port_block()
    t0 = time.monotonic()
    done = health("--bootstrap", f"127.0.0.1:{port}")
    assert done.returncode == 1 and "refused" in done.stderr.lower()
    assert time.monotonic() - t0 < 10


def test_a_listener_that_never_answers_is_unhealthy_after_the_timeout():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        t0 = time.monotonic()
        done = health("--ready", "--timeout", "1", "--bootstrap", f"127.0.0.1:{server.getsockname()[1]}")
    assert done.returncode == 1 and "did not answer within 1s" in done.stderr
    assert time.monotonic() - t0 < 10
