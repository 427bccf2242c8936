"""The consumer protocol: what a classic-group consumer puts in JoinGroup's
member metadata (``Subscription``) and what the leader's assignor puts in
SyncGroup's assignments (``Assignment``), protocol type "consumer".

Kafka declares them as data types (ConsumerProtocolSubscription and
ConsumerProtocolAssignment, versions 0-3, never flexible): an int16 version,
then the fields below. Newer versions only append fields, and a reader of a
version newer than it knows reads the fields it knows, as Kafka's
ConsumerProtocol does.

    Subscription: topics [string], user_data nullable bytes,
                  owned_partitions [topic string, partitions [int32]]  (v1+, KIP-429),
                  generation_id int32                                  (v2+, KIP-792; -1 none),
                  rack_id nullable string                              (v3+, KIP-881)
    (strings: int16 length; bytes and arrays: int32 length; -1 is null)
    Assignment:   assigned_partitions [topic string, partitions [int32]],
                  user_data nullable bytes                             (the same in v0-v3)

No I/O. Malformed bytes raise ``DecodeError`` (the peer broke the rules).
The broker reads only the topics of a subscription and the partitions of an
assignment, with its own lenient readers (broker/group/offsets.py,
broker/group/positions.py): a group member's bytes are not the broker's to
refuse.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .codec import DecodeError

CONSUMER_PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 3  # the newest we write, Kafka's current
ASSIGNMENT_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@dataclass(frozen=True)
class Subscription:
    topics: Sequence[str]
    user_data: bytes | None = None
    owned_partitions: Mapping[str, Sequence[int]] = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None

    def encode(self, version: int = SUBSCRIPTION_VERSION) -> bytes:
        out = [_I16.pack(version), _strings(self.topics), _nullable_bytes(self.user_data)]
        if version >= 1:
            out.append(_topic_partitions(self.owned_partitions))
        if version >= 2:
            out.append(_I32.pack(self.generation_id))
        if version >= 3:
            out.append(_nullable_string(self.rack_id))
        return b"".join(out)

    @classmethod
    def decode(cls, data: bytes) -> Subscription:
        r = _Reader(data)
        version = r.int16()
        topics = [r.string() for _ in range(r.count())]
        user_data = r.nullable_bytes()
        owned = r.topic_partitions() if version >= 1 else {}
        generation_id = r.int32() if version >= 2 else -1
        rack_id = r.nullable_string() if version >= 3 else None
        return cls(topics, user_data, owned, generation_id, rack_id)


@dataclass(frozen=True)
class Assignment:
    assigned_partitions: Mapping[str, Sequence[int]]
    user_data: bytes | None = None

    def encode(self, version: int = ASSIGNMENT_VERSION) -> bytes:
        return b"".join(
            [_I16.pack(version), _topic_partitions(self.assigned_partitions), _nullable_bytes(self.user_data)]
        )

    @classmethod
    def decode(cls, data: bytes) -> Assignment:
        r = _Reader(data)
        r.int16()  # every version has the same layout
        assigned = r.topic_partitions()
        return cls(assigned, r.nullable_bytes())


def _string(s: str) -> bytes:
    b = s.encode()
    return _I16.pack(len(b)) + b


def _strings(items: Sequence[str]) -> bytes:
    return _I32.pack(len(items)) + b"".join(_string(s) for s in items)


def _nullable_string(s: str | None) -> bytes:
    return _I16.pack(-1) if s is None else _string(s)


def _nullable_bytes(b: bytes | None) -> bytes:
    return _I32.pack(-1) if b is None else _I32.pack(len(b)) + b


def _topic_partitions(tps: Mapping[str, Sequence[int]]) -> bytes:
    out = [_I32.pack(len(tps))]
    for topic, partitions in tps.items():
        out.append(_string(topic))
        out.append(_I32.pack(len(partitions)))
        out.extend(_I32.pack(p) for p in partitions)
    return b"".join(out)


class _Reader:
    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes) -> None:
        self._data = bytes(data)
        self._pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self._pos + n > len(self._data):
            raise DecodeError(f"consumer protocol: {n} bytes wanted at {self._pos} of {len(self._data)}")
        b = self._data[self._pos : self._pos + n]
        self._pos += n
        return b

    def int16(self) -> int:
        (v,) = _I16.unpack(self._take(2))
        return int(v)

    def int32(self) -> int:
        (v,) = _I32.unpack(self._take(4))
        return int(v)

    def count(self) -> int:
        n = self.int32()
        if n < 0:
            raise DecodeError(f"consumer protocol: array length {n}")
        return n

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise DecodeError("consumer protocol: null where a string is required")
        return s

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as e:
            raise DecodeError(f"consumer protocol: string not UTF-8: {e}") from None

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        return None if n == -1 else self._take(n)

    def topic_partitions(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for _ in range(self.count()):
            topic = self.string()
            out.setdefault(topic, []).extend(self.int32() for _ in range(self.count()))
        return out
