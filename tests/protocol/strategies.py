"""Hypothesis strategies built from refka's own declarations.

``message(api, "request", v)`` walks the declared struct for version ``v``:
every field that exists in ``v`` gets a value of its type (null where the
version allows it, tagged fields sometimes left at their default), every
other field keeps its default, exactly as the decoder would leave it. So the
strategies cover whatever API is registered, with nothing written per API.

A ``hook(struct, field, strategy)`` may replace the strategy of any field
(the kio oracle narrows values to what kio can represent).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from refka.protocol.api import Api
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

# Examples per (API, version, request|response); the whole protocol suite
# should stay well under a minute as more APIs are declared.
EXAMPLES = int(os.environ.get("REFKA_CODEC_EXAMPLES", "25"))

SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def settings_with(**overrides: Any) -> settings:
    """SETTINGS with some values changed."""
    return settings(SETTINGS, **overrides)


Hook = Callable[[Struct, Field, st.SearchStrategy[Any]], st.SearchStrategy[Any]]

MAX_ARRAY = 3


def _int(bits: int) -> st.SearchStrategy[int]:
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


# Occasionally a RECORDS value large enough that the encoder splices it in
# as its own buffer instead of copying it (codec.SPLICE_THRESHOLD).
_BIG_RECORDS = st.builds(lambda n, b: bytes([b]) * n, st.integers(4096, 4300), st.integers(0, 255))

PRIMITIVES: dict[Primitive, st.SearchStrategy[Any]] = {
    INT8: _int(8),
    INT16: _int(16),
    INT32: _int(32),
    INT64: _int(64),
    UINT16: st.integers(0, 2**16 - 1),
    UINT32: st.integers(0, 2**32 - 1),
    FLOAT64: st.floats(allow_nan=False),
    BOOL: st.booleans(),
    STRING: st.text(max_size=12),
    BYTES: st.binary(max_size=12),
    UUID: st.binary(min_size=16, max_size=16),
    RECORDS: st.one_of(st.binary(max_size=40), _BIG_RECORDS),
}


def active_fields(s: Struct, v: int, flexible: bool) -> list[Field]:
    """The fields that are on the wire in version ``v`` (tagged ones only when flexible)."""
    return [f for f in s.fields if in_range(v, f.versions) and (f.tag is None or flexible)]


def message(api: Api, which: str, v: int, hook: Hook | None = None) -> st.SearchStrategy[Any]:
    """Instances of ``api``'s request or response class valid in version ``v``."""
    spec = api.spec.request if which == "request" else api.spec.response
    cls = api.Request if which == "request" else api.Response
    return _struct(spec, cls, v, api.flexible(v), hook)


def _struct(s: Struct, cls: type, v: int, flexible: bool, hook: Hook | None) -> st.SearchStrategy[Any]:
    kwargs = {f.name: _field(s, cls, f, v, flexible, hook) for f in active_fields(s, v, flexible)}
    return st.builds(cls, **kwargs)


def _value(
    t: Primitive | Array | Struct, cls: type, v: int, flexible: bool, hook: Hook | None
) -> st.SearchStrategy[Any]:
    if isinstance(t, Primitive):
        return PRIMITIVES[t]
    if isinstance(t, Array):
        return st.lists(_value(t.element, cls, v, flexible, hook), max_size=MAX_ARRAY)
    return _struct(t, getattr(cls, t.name), v, flexible, hook)


def _field(
    s: Struct, cls: type, f: Field, v: int, flexible: bool, hook: Hook | None
) -> st.SearchStrategy[Any]:
    strategy = _value(f.type, cls, v, flexible, hook)
    if in_range(v, f.nullable) or f.type is RECORDS:
        strategy = st.none() | strategy
    if f.tag is not None:
        strategy = st.just(f.default_value()) | strategy
    if hook is not None:
        strategy = hook(s, f, strategy)
    return strategy
