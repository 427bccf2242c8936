"""Size-prefixed frames: every Kafka message is int32 length + payload.

``frame`` prefixes encoded chunks with their length. The readers (the broker's
connection, refka.client.connection) split what arrives themselves, into
buffers they own; a length above the maximum or below zero is a protocol
violation (``FrameTooLarge`` / ``BadFrame``) and the connection must close.
"""

from __future__ import annotations

import struct

_LEN = struct.Struct(">i")

DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes


class BadFrame(ValueError):
    """The peer sent a frame length that cannot be valid."""


class FrameTooLarge(BadFrame):
    pass


def frame(chunks: list) -> list:
    """Prefixes encoded chunks with their total length."""
    total = sum(len(c) for c in chunks)
    return [_LEN.pack(total), *chunks]
