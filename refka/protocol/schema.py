"""Our compact declaration language for Kafka messages.

A message is declared once for all its versions::

    PRODUCE = api(0, "Produce", "3-11", flexible="9+",
        request=struct("ProduceRequest",
            field("transactional_id", STRING, "3+", nullable="3+", default=None),
            field("acks", INT16),
            field("topic_data", array(struct("TopicProduceData",
                field("name", STRING),
                ...
            ))),
        ),
        response=struct("ProduceResponse", ...),
    )

Versions are written ``"3+"`` (3 and later), ``"3-7"`` (inclusive) or
``"none"``. Every field exists in ``"0+"`` unless told otherwise; the codec
clips that to the versions the API declares. A tagged field gives ``tag=N``;
it exists only in flexible versions. Kafka's JSON message definitions are the
reference for the facts (field order, types, versions); this file is the form.

No I/O here: declarations are data, compiled by :mod:`refka.protocol.codec`.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as _dc_field
from typing import Any

MAX_VERSION = 0x7FFF


def parse_versions(spec: str | tuple[int, int] | None) -> tuple[int, int] | None:
    """``"3+"`` -> (3, MAX), ``"3-7"`` -> (3, 7), ``"5"`` -> (5, 5), ``"none"`` -> None."""
    if spec is None or spec == "none":
        return None
    if isinstance(spec, tuple):
        return spec
    s = spec.strip()
    if s.endswith("+"):
        return int(s[:-1]), MAX_VERSION
    if "-" in s:
        lo, hi = s.split("-", 1)
        return int(lo), int(hi)
    return int(s), int(s)


def in_range(v: int, r: tuple[int, int] | None) -> bool:
    return r is not None and r[0] <= v <= r[1]


class Primitive:
    """A scalar wire type. ``default`` is the value of an absent field."""

    __slots__ = ("name", "default", "fixed_size")

    def __init__(self, name: str, default: Any, fixed_size: int | None) -> None:
        self.name = name
        self.default = default
        self.fixed_size = fixed_size

    def __repr__(self) -> str:
        return self.name


INT8 = Primitive("int8", 0, 1)
INT16 = Primitive("int16", 0, 2)
INT32 = Primitive("int32", 0, 4)
INT64 = Primitive("int64", 0, 8)
UINT16 = Primitive("uint16", 0, 2)
UINT32 = Primitive("uint32", 0, 4)
FLOAT64 = Primitive("float64", 0.0, 8)
BOOL = Primitive("bool", False, 1)
STRING = Primitive("string", "", None)
BYTES = Primitive("bytes", b"", None)
UUID = Primitive("uuid", b"\x00" * 16, 16)
# A RecordBatch blob: decoded as a zero-copy memoryview, encoded from bytes,
# a memoryview, or a list of buffers (Fetch serves several segment slices).
RECORDS = Primitive("records", None, None)

ZERO_UUID = b"\x00" * 16


@dataclass
class Array:
    element: Primitive | Struct


def array(element: Primitive | Struct) -> Array:
    return Array(element)


@dataclass
class Field:
    name: str
    type: Primitive | Array | Struct
    versions: tuple[int, int] | None
    nullable: tuple[int, int] | None = None
    default: Any = None
    has_default: bool = False
    tag: int | None = None
    about: str = ""

    def default_value(self) -> Any:
        if self.has_default:
            return self.default
        if isinstance(self.type, Array):
            return None if self.nullable else []
        if isinstance(self.type, Struct):
            return None
        return self.type.default


@dataclass
class Struct:
    name: str
    fields: list[Field] = _dc_field(default_factory=list)

    def iter_structs(self):
        """This struct and every struct nested in it, depth first."""
        yield self
        for f in self.fields:
            t = f.type.element if isinstance(f.type, Array) else f.type
            if isinstance(t, Struct):
                yield from t.iter_structs()


def struct(name: str, *fields: Field) -> Struct:
    return Struct(name, list(fields))


_NO_DEFAULT = object()


def field(
    name: str,
    type: Primitive | Array | Struct,
    versions: str = "0+",
    *,
    nullable: str | None = None,
    default: Any = _NO_DEFAULT,
    tag: int | None = None,
    about: str = "",
) -> Field:
    return Field(
        name=name,
        type=type,
        versions=parse_versions(versions),
        nullable=parse_versions(nullable),
        default=None if default is _NO_DEFAULT else default,
        has_default=default is not _NO_DEFAULT,
        tag=tag,
        about=about,
    )


@dataclass
class ApiSpec:
    key: int
    name: str
    versions: tuple[int, int]
    flexible: tuple[int, int] | None
    request: Struct
    response: Struct
    # Request header v0 (no client id) for these versions: ControlledShutdown v0 only.
    request_header_v0: tuple[int, int] | None = None
    about: str = ""


def api(
    key: int,
    name: str,
    versions: str,
    *,
    flexible: str = "none",
    request: Struct,
    response: Struct,
    request_header_v0: str = "none",
    about: str = "",
) -> ApiSpec:
    vr = parse_versions(versions)
    if vr is None:
        raise ValueError(f"{name}: an API needs versions")
    return ApiSpec(
        key=key,
        name=name,
        versions=vr,
        flexible=parse_versions(flexible),
        request=request,
        response=response,
        request_header_v0=parse_versions(request_header_v0),
        about=about,
    )
