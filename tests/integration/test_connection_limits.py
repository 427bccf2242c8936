"""Connection resources on a real ``refka serve``: idle connections are closed after
connections.max.idle.ms, max.connections refuses what is beyond it, and a client
that pipelines thousands of requests without reading its answers does not keep
another client from being served."""

from __future__ import annotations

import socket
import time

import pytest

from refka.protocol.messages.api_versions import ApiVersions
from refka.protocol.messages.metadata import Metadata
from tests.brokers import BrokerProcess
from tests.integration.test_bad_input import request_bytes
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


def api_versions_answered(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request_bytes(ApiVersions, ApiVersions.Request(), 0, 1))
        return len(s.recv(4)) == 4


@pytest.fixture(scope="module")
def limited_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("limits") / "data", memory=True,
                      overrides={"connections.max.idle.ms": "300", "max.connections": "8"}).start()
    yield b
    b.stop()


def test_an_idle_connection_is_closed_after_connections_max_idle_ms(limited_broker):
    with socket.create_connection(("127.0.0.1", limited_broker.port), timeout=10) as s:
        s.sendall(request_bytes(ApiVersions, ApiVersions.Request(), 0, 1))
        assert len(s.recv(4)) == 4
        started = time.monotonic()
        s.settimeout(30)
        while s.recv(65536):  # the rest of the answer, then the broker's close
            pass
        assert time.monotonic() - started >= 0.25


def test_connections_beyond_max_connections_are_refused_and_the_broker_serves_on(limited_broker):
    socks = []
    try:
        for _ in range(12):
            socks.append(socket.create_connection(("127.0.0.1", limited_broker.port), timeout=10))
        served = 0
        for s in socks:
            s.sendall(request_bytes(ApiVersions, ApiVersions.Request(), 0, 1))
            try:
                served += len(s.recv(4)) == 4
            except ConnectionResetError:
                pass
        assert 0 < served <= 8  # the broker's own controller connection counts too
    finally:
        for s in socks:
            s.close()
    wait_until(lambda: api_versions_answered(limited_broker.port), timeout=30, ignoring=(OSError,),
               message="the broker serves once the connections went")


def test_a_client_that_never_reads_its_answers_does_not_stall_another(broker):
    flood = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    try:
        flood.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        frame = request_bytes(Metadata, Metadata.Request(topics=None, allow_auto_topic_creation=False), 9, 1)
        flood.setblocking(False)
        sent = 0
        for _ in range(50_000):  # as many as the socket takes: the broker stops reading this one
            try:
                sent += flood.send(frame)
            except BlockingIOError:
                break
        assert sent > 0
        assert api_versions_answered(broker.port)  # within its socket's 10 s timeout
    finally:
        flood.close()
