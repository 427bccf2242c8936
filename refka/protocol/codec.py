"""The codec compiler: declarations in, one encoder and one decoder per
(message, version) out.

Each (struct, version) becomes straight-line Python source (nested loops for
arrays, no per-field dispatch at run time), compiled once with ``exec`` and
cached. Decoded messages are instances of a generated class per struct with
``__slots__``; absent fields hold their defaults.

Decoders take ``bytes`` or a ``memoryview`` and a start position; RECORDS
fields come back as zero-copy memoryview slices when given a memoryview.
Encoders return a list of buffers: one bytearray per run of small fields,
with large RECORDS values spliced in as-is (no copy), ready for
``transport.writelines``.

Unknown tagged fields are skipped by length, never an error.

An array field may also be given as an ``EncodedArray``: its elements already
encoded for the same version (``Api.struct_encoder``), spliced in as they are.
A broker that keeps encoded parts (Metadata's topics, KIP-526) answers with
them without building the elements again; the bytes are the same as the
elements' own encoding inside the array.
"""

from __future__ import annotations

import struct as _struct
from collections.abc import Callable
from typing import Any

from .schema import (
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
    ApiSpec,
    Array,
    Field,
    Primitive,
    Struct,
    in_range,
)


class DecodeError(ValueError):
    """The peer sent bytes that do not parse as the declared message."""


class EncodeError(ValueError):
    """We tried to encode a value that does not fit the declaration (our bug)."""


# -- helpers shared by generated code -------------------------------------------------

_S8 = _struct.Struct(">b")
_S16 = _struct.Struct(">h")
_S32 = _struct.Struct(">i")
_S64 = _struct.Struct(">q")
_SU16 = _struct.Struct(">H")
_SU32 = _struct.Struct(">I")
_SF64 = _struct.Struct(">d")

# Spliced in without copying when a RECORDS value is at least this large.
SPLICE_THRESHOLD = 4096


def read_uvarint(d: Any, p: int) -> tuple[int, int]:
    b = d[p]
    if b < 0x80:
        return b, p + 1
    result = b & 0x7F
    shift = 7
    p += 1
    while True:
        b = d[p]
        p += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, p
        shift += 7
        if shift > 28:
            raise DecodeError("unsigned varint longer than 5 bytes")


def uvarint(n: int) -> bytes:
    if n < 0x80:
        return _BYTE[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_BYTE = [bytes([i]) for i in range(256)]


class EncodedArray:
    """An array field's value as its ``count`` elements already encoded, in ``chunks``
    (bytes-like, concatenated in order) for the version the message is encoded in;
    ``error_codes``: the distinct non-zero error codes inside those elements, for whoever
    reads the answer without decoding it (the broker's request recording)."""

    __slots__ = ("count", "chunks", "error_codes")

    def __init__(self, count: int, chunks: list[Any], error_codes: tuple[int, ...] = ()) -> None:
        self.count = count
        self.chunks = chunks
        self.error_codes = error_codes

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"EncodedArray(count={self.count}, bytes={sum(len(c) for c in self.chunks)})"


def _records_len(v: Any) -> int:
    if isinstance(v, list):
        return sum(len(x) for x in v)
    return len(v)


_HELPERS: dict[str, Any] = {
    "_u8": _S8.unpack_from,
    "_u16": _S16.unpack_from,
    "_u32": _S32.unpack_from,
    "_u64": _S64.unpack_from,
    "_uu16": _SU16.unpack_from,
    "_uu32": _SU32.unpack_from,
    "_uf64": _SF64.unpack_from,
    "_p8": _S8.pack,
    "_p16": _S16.pack,
    "_p32": _S32.pack,
    "_p64": _S64.pack,
    "_pu16": _SU16.pack,
    "_pu32": _SU32.pack,
    "_pf64": _SF64.pack,
    "_ruv": read_uvarint,
    "_uv": uvarint,
    "_rlen": _records_len,
    "DecodeError": DecodeError,
    "EncodeError": EncodeError,
    "SPLICE": SPLICE_THRESHOLD,
    "_N16": _S16.pack(-1),
    "_N32": _S32.pack(-1),
    "_Z8": b"\x00",
    "_EA": EncodedArray,
}

_FIXED_DECODE = {
    INT8: ("_u8", 1),
    INT16: ("_u16", 2),
    INT32: ("_u32", 4),
    INT64: ("_u64", 8),
    UINT16: ("_uu16", 2),
    UINT32: ("_uu32", 4),
    FLOAT64: ("_uf64", 8),
}
_FIXED_ENCODE = {
    INT8: "_p8",
    INT16: "_p16",
    INT32: "_p32",
    INT64: "_p64",
    UINT16: "_pu16",
    UINT32: "_pu32",
    FLOAT64: "_pf64",
}


# -- generated struct classes -----------------------------------------------------------


class Message:
    """Base of every generated struct class."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._fields)

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in self._fields:
            v = getattr(self, f)
            if isinstance(v, Message):
                v = v.to_dict()
            elif isinstance(v, list):
                v = [x.to_dict() if isinstance(x, Message) else x for x in v]
            elif isinstance(v, memoryview):
                v = bytes(v)
            out[f] = v
        return out


def _struct_field_default_expr(f: Field, consts: dict[str, Any]) -> str:
    """Source for a fresh default value of ``f`` (a new list for arrays)."""
    d = f.default_value()
    if isinstance(d, list):
        if d:
            raise ValueError(f"{f.name}: non-empty list default")
        return "[]"
    if d is None or isinstance(d, (bool, int, float, str, bytes)):
        return repr(d)
    key = f"_D{len(consts)}"
    consts[key] = d
    return key


def make_class(s: Struct, nested: dict[str, type]) -> type:
    """One class per declared struct with every field of every version."""
    names = [f.name for f in s.fields]
    if len(set(names)) != len(names):
        raise ValueError(f"{s.name}: duplicate field names")
    consts: dict[str, Any] = {"_MISSING": _MISSING}
    params = ", ".join(f"{n}=_MISSING" for n in names)
    body = []
    for f in s.fields:
        body.append(
            f"    self.{f.name} = {_struct_field_default_expr(f, consts)} "
            f"if {f.name} is _MISSING else {f.name}"
        )
    src = f"def __init__(self, {params}):\n" + ("\n".join(body) or "    pass") + "\n"
    ns: dict[str, Any] = dict(consts)
    exec(compile(src, f"<refka struct {s.name}>", "exec"), ns)
    attrs: dict[str, Any] = {
        "__slots__": tuple(names),
        "_fields": tuple(names),
        "__init__": ns["__init__"],
        "_spec": s,
    }
    attrs.update(nested)
    return type(s.name, (Message,), attrs)


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


_MISSING = _Missing()


# -- code generation ------------------------------------------------------------------


class _Gen:
    """Accumulates source lines and unique variable names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.n = 0
        self.ns: dict[str, Any] = dict(_HELPERS)

    def var(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def const(self, value: Any, prefix: str = "_K") -> str:
        name = self.var(prefix)
        self.ns[name] = value
        return name


def _active_fields(s: Struct, v: int) -> tuple[list[Field], list[Field]]:
    regular = [f for f in s.fields if f.tag is None and in_range(v, f.versions)]
    tagged = sorted(
        (f for f in s.fields if f.tag is not None and in_range(v, f.versions)),
        key=lambda f: f.tag,  # type: ignore[arg-type,return-value]
    )
    return regular, tagged


class Compiler:
    """Compiles one API's request and response for each of its versions."""

    def __init__(self, spec: ApiSpec) -> None:
        self.spec = spec
        self.classes: dict[int, type] = {}  # id(Struct) -> class
        self._build_classes(spec.request)
        self._build_classes(spec.response)

    def _build_classes(self, top: Struct) -> None:
        def build(s: Struct) -> type:
            # A struct used in several places (Kafka's common structs) is one class.
            if id(s) in self.classes:
                return self.classes[id(s)]
            nested: dict[str, type] = {}
            for f in s.fields:
                t = f.type.element if isinstance(f.type, Array) else f.type
                if isinstance(t, Struct):
                    nested[t.name] = build(t)
            cls = make_class(s, nested)
            self.classes[id(s)] = cls
            return cls

        build(top)

    def class_of(self, s: Struct) -> type:
        return self.classes[id(s)]

    def flexible(self, v: int) -> bool:
        return in_range(v, self.spec.flexible)

    # ---- decoding

    def decoder(self, s: Struct, v: int) -> Callable[[Any, int], tuple[Any, int]]:
        g = _Gen()
        flex = self.flexible(v)
        g.emit(0, "def decode(d, p):")
        g.emit(1, "end = len(d)")
        g.emit(1, "try:")
        g.emit(2, "pass")
        out = self._dec_struct(g, s, v, flex, 2)
        g.emit(1, "except (IndexError, _struct_error, UnicodeDecodeError) as e:")
        g.emit(2, f"raise DecodeError(f'{s.name} v{v}: {{type(e).__name__}}: {{e}}') from None")
        g.emit(1, f"return {out}, p")
        g.ns["_struct_error"] = _struct.error
        src = "\n".join(g.lines) + "\n"
        exec(compile(src, f"<refka decode {s.name} v{v}>", "exec"), g.ns)
        return g.ns["decode"]  # type: ignore[no-any-return]

    def _dec_struct(self, g: _Gen, s: Struct, v: int, flex: bool, ind: int) -> str:
        regular, tagged = _active_fields(s, v)
        cls = g.const(self.class_of(s), "_C")
        vals: dict[str, str] = {}
        for f in regular:
            vals[f.name] = self._dec_field(g, f, v, flex, ind)
        tag_vars: dict[str, str] = {}
        if flex:
            for f in tagged:
                tv = g.var("t")
                g.emit(ind, f"{tv} = _MISSING")
                tag_vars[f.name] = tv
            g.ns["_MISSING"] = _MISSING
            nt = g.var("nt")
            g.emit(ind, f"{nt}, p = _ruv(d, p)")
            i = g.var("i")
            g.emit(ind, f"for {i} in range({nt}):")
            tg, sz = g.var("tg"), g.var("sz")
            g.emit(ind + 1, f"{tg}, p = _ruv(d, p)")
            g.emit(ind + 1, f"{sz}, p = _ruv(d, p)")
            g.emit(ind + 1, f"if {sz} > end - p: raise DecodeError('tagged field overruns')")
            first = True
            for f in tagged:
                kw = "if" if first else "elif"
                first = False
                g.emit(ind + 1, f"{kw} {tg} == {f.tag}:")
                sub = self._tagged_decoder(f, v)
                fn = g.const(sub, "_TD")
                g.emit(ind + 2, f"{tag_vars[f.name]} = {fn}(d[p:p + {sz}])")
            g.emit(ind + 1, f"p += {sz}")
            vals.update(tag_vars)
        args = []
        for f in s.fields:
            if f.name in vals:
                args.append(vals[f.name])
            else:
                args.append(_struct_field_default_expr(f, g.ns))
        res = g.var("s")
        g.emit(ind, f"{res} = {cls}({', '.join(args)})")
        return res

    def _tagged_decoder(self, f: Field, v: int) -> Callable[[Any], Any]:
        # A tagged field's payload is decoded as if it were a lone flexible field.
        g = _Gen()
        g.emit(0, "def decode(d):")
        g.emit(1, "p = 0")
        g.emit(1, "end = len(d)")
        g.emit(1, "try:")
        plain = Field(f.name, f.type, f.versions, f.nullable, f.default, f.has_default)
        out = self._dec_field(g, plain, v, True, 2)
        g.emit(1, "except (IndexError, _struct_error, UnicodeDecodeError) as e:")
        g.emit(2, f"raise DecodeError(f'tagged field {f.name}: {{type(e).__name__}}: {{e}}') from None")
        g.emit(1, f"return {out}")
        g.ns["_struct_error"] = _struct.error
        exec(compile("\n".join(g.lines) + "\n", f"<refka tagged {f.name}>", "exec"), g.ns)
        return g.ns["decode"]  # type: ignore[no-any-return]

    def _dec_len(self, g: _Gen, flex: bool, wide: bool, ind: int) -> str:
        """Reads a length; returns the variable, -1 meaning null."""
        n = g.var("n")
        if flex:
            g.emit(ind, f"{n}, p = _ruv(d, p)")
            g.emit(ind, f"{n} -= 1")
        elif wide:
            g.emit(ind, f"{n} = _u32(d, p)[0]")
            g.emit(ind, "p += 4")
        else:
            g.emit(ind, f"{n} = _u16(d, p)[0]")
            g.emit(ind, "p += 2")
        return n

    def _dec_field(self, g: _Gen, f: Field, v: int, flex: bool, ind: int) -> str:
        t = f.type
        nullable = in_range(v, f.nullable)
        x = g.var("x")
        if isinstance(t, Primitive) and t in _FIXED_DECODE:
            fn, size = _FIXED_DECODE[t]
            g.emit(ind, f"{x} = {fn}(d, p)[0]")
            g.emit(ind, f"p += {size}")
        elif t is BOOL:
            g.emit(ind, f"{x} = d[p] != 0")
            g.emit(ind, "p += 1")
        elif t is UUID:
            g.emit(ind, "if end - p < 16: raise DecodeError('truncated uuid')")
            g.emit(ind, f"{x} = bytes(d[p:p + 16])")
            g.emit(ind, "p += 16")
        elif t in (STRING, BYTES, RECORDS):
            n = self._dec_len(g, flex, t is not STRING, ind)
            g.emit(ind, f"if {n} < 0:")
            if nullable or t is RECORDS:
                g.emit(ind + 1, f"{x} = None")
            else:
                g.emit(ind + 1, f"raise DecodeError('null {f.name} is not nullable')")
            g.emit(ind, "else:")
            g.emit(ind + 1, f"if {n} > end - p: raise DecodeError('{f.name} overruns the frame')")
            if t is STRING:
                g.emit(ind + 1, f"{x} = str(d[p:p + {n}], 'utf-8')")
            elif t is BYTES:
                g.emit(ind + 1, f"{x} = bytes(d[p:p + {n}])")
            else:
                g.emit(ind + 1, f"{x} = d[p:p + {n}]")
            g.emit(ind + 1, f"p += {n}")
        elif isinstance(t, Array):
            n = self._dec_len(g, flex, True, ind)
            g.emit(ind, f"if {n} < 0:")
            if nullable:
                g.emit(ind + 1, f"{x} = None")
            else:
                g.emit(ind + 1, f"raise DecodeError('null array {f.name} is not nullable')")
            g.emit(ind, "else:")
            g.emit(ind + 1, f"if {n} > end - p: raise DecodeError('{f.name} count overruns the frame')")
            g.emit(ind + 1, f"{x} = []")
            ap = g.var("ap")
            g.emit(ind + 1, f"{ap} = {x}.append")
            i = g.var("i")
            g.emit(ind + 1, f"for {i} in range({n}):")
            el = t.element
            if isinstance(el, Struct):
                r = self._dec_struct(g, el, v, flex, ind + 2)
            else:
                r = self._dec_field(g, Field("element", el, (0, 0x7FFF)), v, flex, ind + 2)
            g.emit(ind + 2, f"{ap}({r})")
        elif isinstance(t, Struct):
            if nullable:
                g.emit(ind, "if d[p] == 255:")
                g.emit(ind + 1, f"{x} = None")
                g.emit(ind + 1, "p += 1")
                g.emit(ind, "else:")
                g.emit(ind + 1, "p += 1")
                r = self._dec_struct(g, t, v, flex, ind + 1)
                g.emit(ind + 1, f"{x} = {r}")
            else:
                r = self._dec_struct(g, t, v, flex, ind)
                g.emit(ind, f"{x} = {r}")
        else:
            raise ValueError(f"cannot decode {t!r}")
        return x

    # ---- encoding

    def encoder(self, s: Struct, v: int) -> Callable[[Any], list[Any]]:
        g = _Gen()
        flex = self.flexible(v)
        g.emit(0, "def encode(o):")
        g.emit(1, "out = []")
        g.emit(1, "b = bytearray()")
        g.emit(1, "try:")
        g.emit(2, "pass")
        self._enc_struct(g, s, "o", v, flex, 2)
        g.emit(1, "except (TypeError, AttributeError, _struct_error, UnicodeError) as e:")
        g.emit(2, f"raise EncodeError(f'{s.name} v{v}: {{e}}') from e")
        g.emit(1, "if b or not out:")
        g.emit(2, "out.append(b)")
        g.emit(1, "return out")
        g.ns["_struct_error"] = _struct.error
        src = "\n".join(g.lines) + "\n"
        exec(compile(src, f"<refka encode {s.name} v{v}>", "exec"), g.ns)
        return g.ns["encode"]  # type: ignore[no-any-return]

    def _enc_struct(self, g: _Gen, s: Struct, o: str, v: int, flex: bool, ind: int) -> None:
        regular, tagged = _active_fields(s, v)
        for f in regular:
            self._enc_field(g, f, f"{o}.{f.name}", v, flex, ind)
        if flex:
            if not tagged:
                g.emit(ind, "b += _Z8")
                return
            tl = g.var("tl")
            g.emit(ind, f"{tl} = []")
            for f in tagged:
                fn = g.const(self._tagged_encoder(f, v), "_TE")
                dflt = g.const(f.default_value(), "_TD")
                val = g.var("tv")
                g.emit(ind, f"{val} = {o}.{f.name}")
                g.emit(ind, f"if {val} != {dflt}:")
                g.emit(ind + 1, f"{tl}.append({fn}({val}))")
            g.emit(ind, f"b += _uv(len({tl}))")
            g.emit(ind, f"for {val} in {tl}:")
            g.emit(ind + 1, f"b += {val}")

    def _tagged_encoder(self, f: Field, v: int) -> Callable[[Any], bytes]:
        g = _Gen()
        g.emit(0, "def encode(val):")
        g.emit(1, "out = []")
        g.emit(1, "b = bytearray()")
        plain = Field(f.name, f.type, f.versions, f.nullable, f.default, f.has_default)
        self._enc_field(g, plain, "val", v, True, 1)
        g.emit(1, f"return _uv({f.tag}) + _uv(len(b)) + b")
        exec(compile("\n".join(g.lines) + "\n", f"<refka tagged {f.name}>", "exec"), g.ns)
        return g.ns["encode"]  # type: ignore[no-any-return]

    def _enc_len(self, g: _Gen, n: str, flex: bool, wide: bool, ind: int) -> None:
        if flex:
            g.emit(ind, f"b += _uv({n} + 1)")
        elif wide:
            g.emit(ind, f"b += _p32({n})")
        else:
            g.emit(ind, f"b += _p16({n})")

    def _enc_null(self, g: _Gen, flex: bool, wide: bool, ind: int) -> None:
        if flex:
            g.emit(ind, "b += _Z8")
        else:
            g.emit(ind, f"b += {'_N32' if wide else '_N16'}")

    def _enc_field(self, g: _Gen, f: Field, expr: str, v: int, flex: bool, ind: int) -> None:
        t = f.type
        nullable = in_range(v, f.nullable)
        if isinstance(t, Primitive) and t in _FIXED_ENCODE:
            g.emit(ind, f"b += {_FIXED_ENCODE[t]}({expr})")
            return
        if t is BOOL:
            g.emit(ind, f"b += b'\\x01' if {expr} else _Z8")
            return
        if t is UUID:
            x = g.var("u")
            g.emit(ind, f"{x} = {expr}")
            g.emit(ind, f"if len({x}) != 16: raise EncodeError('uuid {f.name} must be 16 bytes')")
            g.emit(ind, f"b += {x}")
            return
        x = g.var("x")
        g.emit(ind, f"{x} = {expr}")
        if t in (STRING, BYTES, RECORDS):
            wide = t is not STRING
            g.emit(ind, f"if {x} is None:")
            if nullable or t is RECORDS:
                self._enc_null(g, flex, wide, ind + 1)
            else:
                g.emit(ind + 1, f"raise EncodeError('{f.name} is not nullable')")
            g.emit(ind, "else:")
            if t is STRING:
                e = g.var("e")
                g.emit(ind + 1, f"{e} = {x}.encode('utf-8')")
                self._enc_len(g, f"len({e})", flex, False, ind + 1)
                g.emit(ind + 1, f"b += {e}")
            elif t is BYTES:
                self._enc_len(g, f"len({x})", flex, True, ind + 1)
                g.emit(ind + 1, f"b += {x}")
            else:
                n = g.var("n")
                g.emit(ind + 1, f"{n} = _rlen({x})")
                self._enc_len(g, n, flex, True, ind + 1)
                g.emit(ind + 1, f"if {n} >= SPLICE or type({x}) is list:")
                g.emit(ind + 2, "out.append(b)")
                g.emit(ind + 2, f"if type({x}) is list: out.extend({x})")
                g.emit(ind + 2, f"else: out.append({x})")
                g.emit(ind + 2, "b = bytearray()")
                g.emit(ind + 1, "else:")
                g.emit(ind + 2, f"b += {x}")
            return
        if isinstance(t, Array):
            g.emit(ind, f"if {x} is None:")
            if nullable:
                self._enc_null(g, flex, True, ind + 1)
            else:
                g.emit(ind + 1, f"raise EncodeError('{f.name} is not nullable')")
            g.emit(ind, f"elif type({x}) is _EA:")  # elements encoded already: spliced in
            self._enc_len(g, f"{x}.count", flex, True, ind + 1)
            g.emit(ind + 1, "out.append(b)")
            g.emit(ind + 1, f"out.extend({x}.chunks)")
            g.emit(ind + 1, "b = bytearray()")
            g.emit(ind, "else:")
            self._enc_len(g, f"len({x})", flex, True, ind + 1)
            el = g.var("el")
            g.emit(ind + 1, f"for {el} in {x}:")
            if isinstance(t.element, Struct):
                self._enc_struct(g, t.element, el, v, flex, ind + 2)
            else:
                self._enc_field(g, Field("element", t.element, (0, 0x7FFF)), el, v, flex, ind + 2)
            return
        if isinstance(t, Struct):
            if nullable:
                g.emit(ind, f"if {x} is None:")
                g.emit(ind + 1, "b += b'\\xff'")
                g.emit(ind, "else:")
                g.emit(ind + 1, "b += b'\\x01'")
                self._enc_struct(g, t, x, v, flex, ind + 1)
            else:
                self._enc_struct(g, t, x, v, flex, ind)
            return
        raise ValueError(f"cannot encode {t!r}")
