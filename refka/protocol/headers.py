"""Request and response headers.

Request header v0: api_key, api_version, correlation_id. v1 adds client_id
(a nullable *non-compact* string, even in flexible versions). v2 adds tagged
fields. Response header v0: correlation_id; v1 adds tagged fields. Which
version a message uses follows from its API and version (see ``Api``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from .codec import DecodeError, read_uvarint, uvarint

_HDR = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


def peek_request_header(frame: Any) -> tuple[int, int, int]:
    """api_key, api_version, correlation_id: readable whatever the header version."""
    if len(frame) < 8:
        raise DecodeError("frame shorter than a request header")
    return _HDR.unpack_from(frame, 0)  # type: ignore[return-value]


def decode_request_header(frame: Any, header_version: int) -> tuple[RequestHeader, int]:
    """Returns the header and the offset of the request body."""
    api_key, api_version, correlation_id = peek_request_header(frame)
    p = 8
    client_id = None
    if header_version >= 1:
        if len(frame) < p + 2:
            raise DecodeError("truncated client_id")
        (n,) = _I16.unpack_from(frame, p)
        p += 2
        if n >= 0:
            if p + n > len(frame):
                raise DecodeError("client_id overruns the frame")
            client_id = str(frame[p : p + n], "utf-8", "replace")
            p += n
    if header_version >= 2:
        try:
            count, p = read_uvarint(frame, p)
            for _ in range(count):
                _tag, p = read_uvarint(frame, p)
                size, p = read_uvarint(frame, p)
                p += size
        except IndexError:
            raise DecodeError("truncated header tagged fields") from None
        if p > len(frame):
            raise DecodeError("header tagged fields overrun the frame")
    return RequestHeader(api_key, api_version, correlation_id, client_id), p


def encode_request_header(h: RequestHeader, header_version: int) -> bytes:
    out = bytearray(_HDR.pack(h.api_key, h.api_version, h.correlation_id))
    if header_version >= 1:
        if h.client_id is None:
            out += _I16.pack(-1)
        else:
            b = h.client_id.encode()
            out += _I16.pack(len(b)) + b
    if header_version >= 2:
        out += b"\x00"
    return bytes(out)


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    if header_version >= 1:
        return _I32.pack(correlation_id) + b"\x00"
    return _I32.pack(correlation_id)


def decode_response_header(frame: Any, header_version: int) -> tuple[int, int]:
    """correlation_id and the offset of the response body."""
    if len(frame) < 4:
        raise DecodeError("frame shorter than a response header")
    (cid,) = _I32.unpack_from(frame, 0)
    p = 4
    if header_version >= 1:
        count, p = read_uvarint(frame, p)
        for _ in range(count):
            _tag, p = read_uvarint(frame, p)
            size, p = read_uvarint(frame, p)
            p += size
    return cid, p


__all__ = [
    "RequestHeader",
    "decode_request_header",
    "decode_response_header",
    "encode_request_header",
    "encode_response_header",
    "peek_request_header",
    "uvarint",
]
