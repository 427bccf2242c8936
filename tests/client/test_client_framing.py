"""refka.client.connection's frame reader, fed the way a transport feeds a
BufferedProtocol (get_buffer, then buffer_updated with what the socket gave),
in every split: frames must come out whole, in order, with one copy at most."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest

from refka.client.connection import _RECV, BrokerConnection, _Protocol


class Collecting(BrokerConnection):
    def __init__(self) -> None:
        super().__init__("127.0.0.1", 1)
        self.frames: list[bytes] = []
        self.views: list[memoryview] = []
        self.failed: list[BaseException] = []

    def _on_frame(self, f: memoryview) -> None:
        self.views.append(f)
        self.frames.append(bytes(f))

    def _fail(self, error: Any) -> None:
        self.failed.append(error)


def feed(proto: _Protocol, data: bytes, rng: random.Random, max_chunk: int) -> None:
    """As a transport does: ask for a buffer, write at most its size, report the count."""
    pos = 0
    while pos < len(data):
        buf = proto.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), rng.randint(1, max_chunk), len(data) - pos)
        buf[:n] = data[pos:pos + n]
        proto.buffer_updated(n)
        pos += n


def framed(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


@pytest.mark.parametrize("max_chunk", [1, 3, 7, 4096, 70_000, 1 << 22])
def test_frames_of_every_size_come_out_whole_and_in_order(max_chunk):
    rng = random.Random(max_chunk)
    sizes = [4, 5, 100, _RECV - 4, _RECV - 3, _RECV, _RECV + 1, 3 * _RECV + 17, 8, 9]
    if max_chunk >= 4096:
        sizes.insert(8, 1 << 20)
    payloads = [struct.pack(">i", i) + rng.randbytes(n - 4) for i, n in enumerate(sizes)]
    conn = Collecting()
    proto = _Protocol(conn)
    feed(proto, framed(payloads) * 2, rng, max_chunk)
    assert conn.failed == []
    assert conn.frames == payloads * 2


def test_a_frame_larger_than_the_shared_buffer_is_read_into_its_own():
    conn = Collecting()
    proto = _Protocol(conn)
    big = struct.pack(">i", 7) + bytes(range(256)) * 1024
    feed(proto, framed([big, b"\0\0\0\x08tail"]), random.Random(1), 1 << 22)
    first, second = conn.views
    assert bytes(first) == big and isinstance(first.obj, bytearray) and len(first.obj) == len(big)
    # Later reads do not touch it: the decoded response may keep views of it.
    feed(proto, framed([b"\0\0\0\x09" + b"x" * 5000] * 20), random.Random(2), 4096)
    assert bytes(first) == big and bytes(second) == b"\0\0\0\x08tail"


@pytest.mark.parametrize("length", [-1, 0, 3, 100 * 1024 * 1024 + 1])
def test_an_impossible_length_fails_the_connection(length):
    conn = Collecting()
    proto = _Protocol(conn)
    feed(proto, struct.pack(">i", length) + b"\0" * 8, random.Random(0), 64)
    assert conn.frames == [] and len(conn.failed) == 1
