"""Size-prefixed frames: every Kafka message is int32 length + payload.

``FrameDecoder`` is fed bytes as they arrive and yields complete frames as
memoryviews (zero copy for frames that arrive in one piece). A length above
``max_frame_size`` or below zero is a protocol violation: ``FrameTooLarge`` /
``BadFrame`` are raised and the connection must close.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

_LEN = struct.Struct(">i")

DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes


class BadFrame(ValueError):
    """The peer sent a frame length that cannot be valid."""


class FrameTooLarge(BadFrame):
    pass


class FrameDecoder:
    __slots__ = ("max_frame_size", "_buf", "_need")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._need = -1  # payload size of the frame being assembled, -1 when unknown

    def feed(self, data: bytes | bytearray | memoryview) -> Iterator[memoryview]:
        """Adds bytes; yields each complete frame payload."""
        buf = self._buf
        if not buf and len(data) >= 4:
            # Fast path: frames that arrive whole are served from the input.
            mv = memoryview(data)
            p = 0
            end = len(mv)
            while end - p >= 4:
                (n,) = _LEN.unpack_from(mv, p)
                self._check(n)
                if end - p - 4 < n:
                    break
                yield mv[p + 4 : p + 4 + n]
                p += 4 + n
            if p < end:
                buf += mv[p:]
            return
        buf += data
        while True:
            if len(buf) < 4:
                return
            (n,) = _LEN.unpack_from(buf, 0)
            self._check(n)
            if len(buf) - 4 < n:
                return
            frame = bytes(buf[4 : 4 + n])
            del buf[: 4 + n]
            yield memoryview(frame)

    def _check(self, n: int) -> None:
        if n < 0:
            raise BadFrame(f"negative frame length {n}")
        if n > self.max_frame_size:
            raise FrameTooLarge(f"frame of {n} bytes exceeds the maximum of {self.max_frame_size}")

    @property
    def buffered(self) -> int:
        return len(self._buf)


def frame(chunks: list) -> list:
    """Prefixes encoded chunks with their total length."""
    total = sum(len(c) for c in chunks)
    return [_LEN.pack(total), *chunks]
