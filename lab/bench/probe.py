"""Start-up probes: raw ApiVersions v0 and Metadata v1 requests over a plain socket.

Deliberately independent of ``refka.protocol`` so they measure every target
the same way, and keep working while the codec is being changed. Both are
old, non-flexible versions that every Kafka-protocol broker answers
(clients open with ApiVersions v0 when they know nothing about the broker).
"""

from __future__ import annotations

import socket
import struct

METADATA = 3
API_VERSIONS = 18
_CLIENT_ID = b"refka-bench"


class ProbeError(OSError):
    """The peer accepted the connection but did not answer like a Kafka broker."""


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ProbeError("connection closed before the response was complete")
        buf += chunk
    return bytes(buf)


def _request(host: str, port: int, api_key: int, version: int, body: bytes, timeout: float,
             correlation_id: int) -> bytes:
    """One request (header v1, non-flexible) on a fresh connection; the response after its header."""
    header = struct.pack(">hhih", api_key, version, correlation_id, len(_CLIENT_ID)) + _CLIENT_ID
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
        if not 4 <= size <= 64 << 20:
            raise ProbeError(f"implausible response size {size}")
        response = _recv_exactly(sock, size)
    (cid,) = struct.unpack_from(">i", response)
    if cid != correlation_id:
        raise ProbeError(f"correlation id {cid}, expected {correlation_id}")
    return response[4:]


def api_versions(host: str, port: int, timeout: float = 2.0, correlation_id: int = 1) -> int:
    """Sends ApiVersions v0 and waits for its answer; returns the answer's error code.

    Raises ``OSError`` (refused, reset, timed out) while nothing is listening
    yet, and ``ProbeError`` when something answers that is not a Kafka response.
    """
    response = _request(host, port, API_VERSIONS, 0, b"", timeout, correlation_id)
    (error_code,) = struct.unpack_from(">h", response)
    return error_code


def metadata_brokers(host: str, port: int, timeout: float = 2.0, correlation_id: int = 2) -> tuple[int, int]:
    """Sends Metadata v1 for no topics; returns (number of brokers listed, controller id).

    A broker is usable by clients once this lists at least one broker:
    librdkafka treats an empty broker list as a failed Metadata request.
    """
    response = _request(host, port, METADATA, 1, struct.pack(">i", 0), timeout, correlation_id)
    (count,) = struct.unpack_from(">i", response)
    pos = 4
    for _ in range(count):
        pos += 4  # node_id
        (host_len,) = struct.unpack_from(">h", response, pos)
        pos += 2 + host_len + 4  # host, port
        (rack_len,) = struct.unpack_from(">h", response, pos)
        pos += 2 + max(rack_len, 0)
    (controller_id,) = struct.unpack_from(">i", response, pos)
    return count, controller_id
