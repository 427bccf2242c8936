"""Requests for the fuzzer, from refka's own declarations (no I/O).

``Seeds.request(api, version)`` walks the declared request struct of that
version and gives every field that exists in it a plausible value: names from
a small pool of topics and groups that exist on the broker under test (so
requests reach the code behind the lookups), small counts, valid record
batches in every codec. With ``edge`` set, each value is, with that
probability, one at its type's edge instead: integers at their minimum,
maximum, -1 and 0; strings null, empty or 32 KiB; arrays null, empty or long;
record batches whose contents are corrupt under a correct CRC. Nothing here
is written per API: an API declared tomorrow is fuzzed too.
"""

from __future__ import annotations

import random
from typing import Any

from crc32c import crc32c

from refka.protocol.api import Api
from refka.protocol.records import Compression, NewRecord, build_batch
from refka.protocol.schema import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    Array,
    Field,
    Primitive,
    Struct,
    in_range,
)

TOPICS = ("fz-t0", "fz-t1", "fz-compact")
GROUPS = ("fz-g0", "fz-g1")

_INT_EDGES: dict[Primitive, tuple[int, ...]] = {
    INT8: (-(2**7), 2**7 - 1, -1, 0),
    INT16: (-(2**15), 2**15 - 1, -1, 0),
    INT32: (-(2**31), 2**31 - 1, -1, 0),
    INT64: (-(2**63), 2**63 - 1, -1, 0),
    UINT16: (0, 2**16 - 1),
    UINT32: (0, 2**32 - 1),
}
_INT_PLAUSIBLE = (0, 1, 2, -1, 100, 1000)


class Seeds:
    def __init__(self, rng: random.Random, edge: float = 0.0) -> None:
        self.rng = rng
        self.edge = edge

    def request(self, api: Api, version: int) -> Any:
        # A budget of "wire bytes" keeps edge values from nesting into 70 MB requests: a
        # long array or string draws on it, and once it is spent values stay small.
        self._budget = 100_000
        return self._struct(api.Request, api.spec.request, version, api.flexible(version))

    # -- values

    def _struct(self, cls: type, s: Struct, v: int, flexible: bool) -> Any:
        kwargs: dict[str, Any] = {}
        for f in s.fields:
            if not in_range(v, f.versions) or (f.tag is not None and not flexible):
                continue
            if f.tag is not None and self.rng.random() < 0.5:
                continue  # tagged fields are often absent
            kwargs[f.name] = self._field(cls, f, v, flexible)
        return cls(**kwargs)

    def _nullable(self, f: Field, v: int) -> bool:
        return in_range(v, f.nullable)

    def _wild(self) -> bool:
        return self.edge > 0 and self.rng.random() < self.edge

    def _field(self, cls: type, f: Field, v: int, flexible: bool) -> Any:
        t = f.type
        if self._wild() and self._nullable(f, v) and self.rng.random() < 0.3:
            return None
        if isinstance(t, Array):
            n = self.rng.choice((0, 1, 1, 2))
            if self._wild():
                n = self.rng.choice((0, 0, 20, 200))
                n = min(n, self._budget // 64)
                self._budget -= n * 64
            elem = t.element
            if isinstance(elem, Struct):
                ecls = getattr(cls, elem.name)
                return [self._struct(ecls, elem, v, flexible) for _ in range(n)]
            return [self._primitive(elem, f.name) for _ in range(n)]
        if isinstance(t, Struct):
            return self._struct(getattr(cls, t.name), t, v, flexible)
        return self._primitive(t, f.name)

    def _primitive(self, t: Primitive, name: str) -> Any:
        rng = self.rng
        wild = self._wild()
        if t in _INT_EDGES:
            if wild:
                return rng.choice(_INT_EDGES[t])
            if "partition" in name and "count" not in name:
                return rng.choice((0, 1, 2))
            if "timeout" in name or "wait" in name:
                return rng.choice((0, 1, 10))  # plausible, and short: a fuzzer does not wait out long polls
            lo, hi = _INT_EDGES[t][0], _INT_EDGES[t][1]
            return min(max(rng.choice(_INT_PLAUSIBLE), lo), hi)
        if t is BOOL:
            return rng.random() < 0.5
        if t is FLOAT64:
            return rng.choice((0.0, 0.5, 1.0)) if not wild else rng.choice((float("nan"), float("inf"), -1.0))
        if t is STRING:
            if wild:
                long = "x" * 32767 if self._budget > 32767 else "x" * 300
                self._budget -= len(long)
                return rng.choice(("", long, "\u00e9\u4e2d", "..", "fz t"))
            if "group" in name or "member" in name:
                return rng.choice(GROUPS)
            return rng.choice(TOPICS)
        if t is BYTES:
            return bytes(rng.getrandbits(8) for _ in range(rng.choice((0, 4, 16))))
        if t is UUID:
            return b"\x00" * 16 if rng.random() < 0.5 else bytes(rng.getrandbits(8) for _ in range(16))
        if t is RECORDS:
            return self.records(wild)
        raise TypeError(f"no value for {t}")

    def records(self, corrupt: bool = False) -> bytes:
        """A record batch in a random codec; ``corrupt``: its compressed payload or
        record bytes damaged, the CRC made right again so only the contents are wrong."""
        rng = self.rng
        codec = rng.choice(list(Compression))
        recs = [NewRecord(rng.choice((None, b"k%d" % i)), b"v" * rng.choice((1, 100)),
                          [("h", b"x")] if rng.random() < 0.3 else ())
                for i in range(rng.choice((1, 3, 10)))]
        batch = build_batch(recs, compression=codec)
        if corrupt and len(batch) > 61:
            pos = rng.randrange(61, len(batch))
            batch[pos] ^= 1 << rng.randrange(8)
            batch[17:21] = crc32c(bytes(batch[21:])).to_bytes(4, "big")  # the CRC covers attributes onward
        return bytes(batch)
