"""One client connection without sockets (connection.py): pipelined requests are
answered in request order even when an earlier handler waits, frames may arrive
in pieces, client requests wait until the broker is ready, and a peer that
breaks the protocol loses its connection."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from types import SimpleNamespace

import pytest
from structlog.testing import capture_logs

import refka.broker.handlers  # noqa: F401  (registers every handler)
from refka.broker import registry
from refka.broker.broker_metrics import LatencyHistograms
from refka.broker.connection import Connection, ConnectionLimits
from refka.broker.connection import _Slot as conn_slot
from refka.broker.faults import FaultTable
from refka.broker.recording import BrokerRecordings
from refka.broker.stats import Stats
from refka.protocol import RequestHeader, decode_response_header, encode_request_header, join
from refka.protocol.messages.api_versions import ApiVersions
from refka.protocol.messages.list_groups import ListGroups


class FakeTransport:
    def __init__(self) -> None:
        self.written = bytearray()
        self.closed = False

    def writelines(self, chunks) -> None:
        for c in chunks:
            self.written += c

    def get_extra_info(self, name):
        return ("127.0.0.1", 50000) if name == "peername" else None

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def request_frame(api, version: int, correlation_id: int, request) -> bytes:
    header = encode_request_header(RequestHeader(api.key, version, correlation_id, "test"),
                                   api.request_header_version(version))
    body = header + join(api.encode_request(request, version))
    return len(body).to_bytes(4, "big") + body


def answered_correlation_ids(written: bytes) -> list[int]:
    out, p = [], 0
    while p < len(written):
        n = int.from_bytes(written[p:p + 4], "big")
        cid, _ = decode_response_header(written[p + 4:p + 4 + n], 0)
        out.append(cid)
        p += 4 + n
    return out


@pytest.fixture
def conn():
    owner = SimpleNamespace(connections=set(), ready=asyncio.Event(), stats=Stats(), recordings=BrokerRecordings(0), latency=LatencyHistograms(), faults=FaultTable(), node_id=0, request_log=False,
                            queued_request_bytes=0)
    owner.ready.set()
    c = Connection(owner, "PLAINTEXT", ConnectionLimits(max_frame_size=1 << 20))
    c.transport_ = FakeTransport()
    c.connection_made(c.transport_)
    yield c
    c.connection_lost(None)


def feed(c: Connection, data: bytes) -> None:
    buf = c.get_buffer(len(data))
    buf[:len(data)] = data
    c.buffer_updated(len(data))


@pytest.fixture
def slow_list_groups(monkeypatch):
    """ListGroups answered only once the test sets the returned event."""
    release = asyncio.Event()

    async def handle(ctx, req):
        await release.wait()
        return ListGroups.Response(error_code=0, groups=[])

    monkeypatch.setitem(registry.HANDLERS, ListGroups.key,
                        replace(registry.HANDLERS[ListGroups.key], fn=handle, is_async=True))
    return release


LIST_GROUPS = ListGroups.Request()
API_VERSIONS = ApiVersions.Request()


async def test_a_later_answer_waits_for_an_earlier_handler_that_waits(conn, slow_list_groups):
    feed(conn, request_frame(ListGroups, 2, 1, LIST_GROUPS) + request_frame(ApiVersions, 0, 2, API_VERSIONS))
    await asyncio.sleep(0.01)
    assert conn.transport_.written == b""  # ApiVersions is done, but ListGroups came first
    slow_list_groups.set()
    await asyncio.sleep(0.01)
    assert answered_correlation_ids(conn.transport_.written) == [1, 2]


async def test_a_frame_in_pieces_is_answered_once_whole(conn):
    frame = request_frame(ApiVersions, 0, 7, API_VERSIONS)
    for i in range(len(frame)):
        feed(conn, frame[i:i + 1])
    assert answered_correlation_ids(conn.transport_.written) == [7]


async def test_client_requests_wait_until_the_broker_is_ready(conn):
    conn.broker.ready.clear()
    feed(conn, request_frame(ApiVersions, 0, 1, API_VERSIONS) + request_frame(ListGroups, 2, 2, LIST_GROUPS))
    await asyncio.sleep(0.01)
    # ApiVersions is answered at once (a client may ask before the broker is ready);
    # ListGroups waits, as its handler needs the broker's state.
    assert answered_correlation_ids(conn.transport_.written) == [1]


def _raises(ctx, req):
    raise RuntimeError("a bug of ours")


async def _raises_later(ctx, req):
    raise RuntimeError("a bug of ours")


def _unencodable(ctx, req):
    return ListGroups.Response(error_code=0, groups=[ListGroups.Response.ListedGroup(group_id=None)])


@pytest.mark.parametrize("fn, event", [
    (_raises, "handler_failed"),
    (_raises_later, "handler_failed"),
    (_unencodable, "response_encode_failed"),  # a null group_id, which ListGroups cannot carry
])
async def test_our_own_failure_is_logged_with_its_traceback_and_the_peer(conn, monkeypatch, fn, event):
    monkeypatch.setitem(registry.HANDLERS, ListGroups.key, replace(
        registry.HANDLERS[ListGroups.key], fn=fn, is_async=asyncio.iscoroutinefunction(fn)))
    with capture_logs() as logs:
        feed(conn, request_frame(ListGroups, 2, 1, LIST_GROUPS))
        await asyncio.sleep(0.01)
    assert conn.closed and conn.transport_.written == b""
    [failed] = [e for e in logs if e["event"] == event]
    assert failed["peer"] == "127.0.0.1:50000" and failed["api"] == "ListGroups"
    assert failed.get("exc_info")  # the traceback: this one is ours to fix
    [closing] = [e for e in logs if e["event"] == "closing_after_handler_failure"]
    assert closing["peer"] == "127.0.0.1:50000" and closing["log_level"] == "warning"


@pytest.mark.parametrize("frame", [
    (-1).to_bytes(4, "big", signed=True),  # negative length
    (2 << 20).to_bytes(4, "big") + b"x",  # above socket.request.max.bytes
    (8).to_bytes(4, "big") + (999).to_bytes(2, "big") + bytes(6),  # unknown API key
])
async def test_a_peer_that_breaks_the_protocol_loses_its_connection(conn, frame):
    feed(conn, frame)
    assert conn.closed and conn.transport_.closed and conn.transport_.written == b""


# -- resources: buffers, fairness, back-pressure, limits ----------------------------------------


async def test_an_idle_connection_holds_no_receive_buffer(conn):
    feed(conn, request_frame(ApiVersions, 0, 1, API_VERSIONS))
    assert answered_correlation_ids(conn.transport_.written) == [1]
    assert conn._buf is None  # lent back to the pool once every byte was handled


async def test_pipelined_requests_are_handled_a_few_per_loop_turn_and_all_answered_in_order(conn):
    feed(conn, b"".join(request_frame(ApiVersions, 0, i, API_VERSIONS) for i in range(200)))
    first_turn = answered_correlation_ids(conn.transport_.written)
    assert 0 < len(first_turn) < 200  # the loop went to others before the rest
    await asyncio.sleep(0.05)
    assert answered_correlation_ids(conn.transport_.written) == list(range(200))


async def test_no_request_is_taken_while_the_client_does_not_read_its_answers(conn):
    conn.pause_writing()  # the transport's buffer of unsent answers passed its high-water mark
    feed(conn, request_frame(ApiVersions, 0, 1, API_VERSIONS))
    await asyncio.sleep(0.01)
    assert conn.transport_.written == b""
    conn.resume_writing()
    await asyncio.sleep(0.01)
    assert answered_correlation_ids(conn.transport_.written) == [1]


async def test_queued_max_request_bytes_holds_every_connection_until_answers_go(slow_list_groups):
    owner = SimpleNamespace(connections=set(), ready=asyncio.Event(), stats=Stats(), recordings=BrokerRecordings(0), latency=LatencyHistograms(), faults=FaultTable(), node_id=0, request_log=False,
                            queued_request_bytes=0)
    owner.ready.set()
    limits = ConnectionLimits(max_frame_size=1 << 20, queued_max_request_bytes=10)
    a, b = Connection(owner, "PLAINTEXT", limits), Connection(owner, "PLAINTEXT", limits)
    for c in (a, b):
        c.transport_ = FakeTransport()
        c.connection_made(c.transport_)
    feed(a, request_frame(ListGroups, 2, 1, LIST_GROUPS))  # waits in its handler: its bytes stay queued
    feed(b, request_frame(ApiVersions, 0, 2, API_VERSIONS))
    await asyncio.sleep(0.01)
    assert owner.queued_request_bytes > 10 and b.transport_.written == b""
    slow_list_groups.set()
    await asyncio.sleep(0.01)
    assert answered_correlation_ids(a.transport_.written) == [1]
    assert answered_correlation_ids(b.transport_.written) == [2]
    assert owner.queued_request_bytes == 0


@pytest.mark.parametrize("limits", [ConnectionLimits(max_connections=1),
                                    ConnectionLimits(max_connections_per_ip=1)])
async def test_connections_beyond_the_limits_are_refused(limits):
    owner = SimpleNamespace(connections=set(), ready=asyncio.Event(), stats=Stats(), recordings=BrokerRecordings(0), latency=LatencyHistograms(), faults=FaultTable(), node_id=0, request_log=False,
                            queued_request_bytes=0)
    first, second = Connection(owner, "PLAINTEXT", limits), Connection(owner, "PLAINTEXT", limits)
    first.connection_made(FakeTransport())
    t = FakeTransport()
    second.connection_made(t)
    assert t.closed and owner.connections == {first}


async def test_idle_time_counts_from_the_last_byte_read_or_written_and_not_while_answers_are_due(conn):
    feed(conn, request_frame(ApiVersions, 0, 1, API_VERSIONS))
    assert conn.idle_for_ms(conn.last_active + 5) == pytest.approx(5000)
    conn.pending.append(conn_slot())  # an answer due (a long poll, say)
    assert conn.idle_for_ms(conn.last_active + 5) == 0
