"""Compiled APIs: the registry every encoder and decoder is reached through.

``Api`` wraps one declaration (:class:`refka.protocol.schema.ApiSpec`) and
compiles its per-version codecs lazily (start-up stays fast), caching each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .codec import Compiler, DecodeError
from .schema import ApiSpec, in_range


class UnsupportedVersion(DecodeError):
    """The peer asked for a version this declaration does not have."""


class Api:
    def __init__(self, spec: ApiSpec) -> None:
        self.spec = spec
        self.key = spec.key
        self.name = spec.name
        self.min_version, self.max_version = spec.versions
        self._compiler = Compiler(spec)
        self.Request: Any = self._compiler.class_of(spec.request)
        self.Response: Any = self._compiler.class_of(spec.response)
        self._dec_req: dict[int, Callable[[Any, int], tuple[Any, int]]] = {}
        self._enc_req: dict[int, Callable[[Any], list[Any]]] = {}
        self._dec_resp: dict[int, Callable[[Any, int], tuple[Any, int]]] = {}
        self._enc_resp: dict[int, Callable[[Any], list[Any]]] = {}
        self._enc_struct: dict[tuple[int, int], Callable[[Any], list[Any]]] = {}

    def __repr__(self) -> str:
        return f"Api({self.name}, key={self.key}, v{self.min_version}-{self.max_version})"

    def has_version(self, v: int) -> bool:
        return self.min_version <= v <= self.max_version

    def _check(self, v: int) -> None:
        if not self.has_version(v):
            raise UnsupportedVersion(f"{self.name} has no version {v}")

    def flexible(self, v: int) -> bool:
        return in_range(v, self.spec.flexible)

    def request_header_version(self, v: int) -> int:
        if in_range(v, self.spec.request_header_v0):
            return 0
        return 2 if self.flexible(v) else 1

    def response_header_version(self, v: int) -> int:
        # ApiVersions answers with header v0 always, so a client that sent a
        # version we do not know can still read the error (KIP-511).
        if self.key == 18:
            return 0
        return 1 if self.flexible(v) else 0

    def decode_request(self, data: Any, v: int, pos: int = 0) -> tuple[Any, int]:
        fn = self._dec_req.get(v)
        if fn is None:
            self._check(v)
            fn = self._dec_req[v] = self._compiler.decoder(self.spec.request, v)
        return fn(data, pos)

    def encode_request(self, obj: Any, v: int) -> list[Any]:
        fn = self._enc_req.get(v)
        if fn is None:
            self._check(v)
            fn = self._enc_req[v] = self._compiler.encoder(self.spec.request, v)
        return fn(obj)

    def decode_response(self, data: Any, v: int, pos: int = 0) -> tuple[Any, int]:
        fn = self._dec_resp.get(v)
        if fn is None:
            self._check(v)
            fn = self._dec_resp[v] = self._compiler.decoder(self.spec.response, v)
        return fn(data, pos)

    def encode_response(self, obj: Any, v: int) -> list[Any]:
        fn = self._enc_resp.get(v)
        if fn is None:
            self._check(v)
            fn = self._enc_resp[v] = self._compiler.encoder(self.spec.response, v)
        return fn(obj)

    def struct_encoder(self, cls: type, v: int) -> Callable[[Any], list[Any]]:
        """The encoder of one of this API's nested structs (its generated class, e.g.
        ``Metadata.Response.MetadataResponseTopic``) at version ``v``: the bytes an element
        of an array of it takes in the message, for an ``EncodedArray``."""
        key = (id(cls), v)
        fn = self._enc_struct.get(key)
        if fn is None:
            self._check(v)
            fn = self._enc_struct[key] = self._compiler.encoder(cls._spec, v)  # type: ignore[attr-defined]
        return fn

    def precompile(self) -> None:
        """Compile every version now (tests; a broker compiles on first use)."""
        for v in range(self.min_version, self.max_version + 1):
            self._dec_req.setdefault(v, self._compiler.decoder(self.spec.request, v))
            self._enc_req.setdefault(v, self._compiler.encoder(self.spec.request, v))
            self._dec_resp.setdefault(v, self._compiler.decoder(self.spec.response, v))
            self._enc_resp.setdefault(v, self._compiler.encoder(self.spec.response, v))


def join(chunks: list[Any]) -> bytes:
    """Encoded chunks as one bytes object (tests, small messages)."""
    return b"".join(bytes(c) if isinstance(c, memoryview) else c for c in chunks)
