"""Wire-level mutations of an encoded request (no I/O).

A frame is ``size | header | body``. ``mutate`` returns a new frame with one
mutation and the name of what it did:

- ``truncate``: the body cut short (the size prefix tells the truth);
- ``length_lie``: an int16/int32 somewhere in the body replaced by a length or
  count that lies (huge, negative, one too many);
- ``overlong_varint`` (flexible versions): the top-level tagged-field count
  written as an overlong varint;
- ``unknown_tag`` (flexible versions): an unknown tagged field appended to the
  top-level struct; a broker must skip it and answer as usual;
- ``wrong_version``: the header's api_version outside what is served;
- ``empty_body``: the header alone;
- ``bit_flip``: a few bits of the body flipped;
- ``trailing_bytes``: garbage after the body;
- ``size_lie``: the size prefix larger than what follows (the broker must wait,
  not misread the next frame) or negative.
"""

from __future__ import annotations

import random
import struct

MUTATIONS = ("truncate", "length_lie", "overlong_varint", "unknown_tag", "wrong_version", "empty_body",
             "bit_flip", "trailing_bytes", "size_lie")

_LIES = (0x7FFFFFFF, -1, -2, 0x7FFF, 1 << 20)


def frame(header: bytes, body: bytes) -> bytes:
    return struct.pack(">i", len(header) + len(body)) + header + body


def mutate(rng: random.Random, header: bytes, body: bytes, flexible: bool, max_version: int) -> tuple[bytes, str]:
    kinds = [m for m in MUTATIONS if flexible or m not in ("overlong_varint", "unknown_tag")]
    kind = rng.choice(kinds)
    if kind == "truncate" and body:
        return frame(header, body[: rng.randrange(len(body))]), kind
    if kind == "length_lie" and len(body) >= 4:
        b = bytearray(body)
        pos = rng.randrange(len(b) - 3)
        lie = rng.choice(_LIES)
        if rng.random() < 0.5:
            struct.pack_into(">i", b, pos, lie)
        else:
            struct.pack_into(">h", b, pos, max(min(lie, 0x7FFF), -0x8000))
        return frame(header, bytes(b)), kind
    if kind == "overlong_varint" and body.endswith(b"\x00"):
        return frame(header, body[:-1] + b"\x80\x80\x80\x80\x80\x80\x00"), kind
    if kind == "unknown_tag" and body.endswith(b"\x00"):
        # one tagged field: tag 10000 (uvarint 0x90 0x4e), 3 bytes of data
        return frame(header, body[:-1] + b"\x01\x90\x4e\x03fzz"), kind
    if kind == "wrong_version":
        h = bytearray(header)
        struct.pack_into(">h", h, 2, rng.choice((max_version + 1, -1, 0x7FFF)))
        return frame(bytes(h), body), kind
    if kind == "empty_body":
        return frame(header, b""), kind
    if kind == "trailing_bytes":
        return frame(header, body + bytes(rng.getrandbits(8) for _ in range(rng.choice((1, 7, 100))))), kind
    if kind == "size_lie":
        size = rng.choice((len(header) + len(body) + 1000, -5))
        return struct.pack(">i", size) + header + body, kind
    b = bytearray(body)
    for _ in range(rng.choice((1, 2, 8))):
        if b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    return frame(header, bytes(b)), "bit_flip"
