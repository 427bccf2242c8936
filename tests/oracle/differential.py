"""Differential testing against Apache Kafka 3.9.1: the same request to both brokers over a raw
socket (refka's codec), the two decoded answers flattened to ``path -> value`` and compared.

Everything that is not compared is in this file, in two tables:

* ``MASKS``: fields that legitimately differ between two brokers (ids each broker draws,
  ports, clocks, the wording of error messages). A masked field is still required on both
  sides; ``"presence"`` keeps comparing whether it is null.
* ``DEPARTURES``: where refka answers differently from Kafka 3.9 on purpose, or as a known
  gap, each with its reason. An entry matches one path and, where given, the exact pair
  of values, so a new difference on the same field still fails.

Arrays whose elements carry a name or an index (topics, partitions, configs, API keys) are
compared as maps keyed by it: their order is a hash map's in Kafka's answers and not part
of the protocol. Any other array is compared element by element, in order.
"""

from __future__ import annotations

import re
import socket
import struct
from dataclasses import dataclass
from typing import Any

from refka.protocol import RequestHeader, decode_response_header, encode_request_header, join
from refka.protocol.api import Api
from refka.protocol.messages.metadata import Metadata
from tests.waiting import wait_until

_I32 = struct.Struct(">i")
ANY = object()  # a departure's value that matches any value

# Array elements are keyed by the first of these fields they have (see the module's docstring).
KEY_FIELDS = ("name", "topic", "resource_name", "partition_index", "partition", "index", "api_key", "node_id",
              "key", "group_id")

# (API, path pattern) -> (kind, reason). Patterns (``*`` any run of characters) match paths whose array
# keys are written "[]". kind "ignore": the values are not compared; "presence": only whether
# each is null is compared.
MASKS: dict[tuple[str, str], tuple[str, str]] = {
    ("*", "throttle_time_ms"): ("ignore", "quota throttling is a broker's clock, not its protocol"),
    ("*", "*.error_message"): ("presence", "error messages: whether there is one is compared, not its wording"),
    ("*", "error_message"): ("presence", "error messages: whether there is one is compared, not its wording"),
    ("Metadata", "cluster_id"): ("ignore", "each cluster draws its own id"),
    ("Metadata", "brokers[].port"): ("ignore", "each broker listens on a free port of its own"),
    ("Metadata", "topics[].topic_id"): ("ignore", "each broker draws its own topic ids"),
    ("CreateTopics", "topics[].topic_id"): ("ignore", "each broker draws its own topic ids"),
    ("*", "*configs[].documentation"): ("presence", "config documentation: refka's own one-line wording"),
    ("FindCoordinator", "*port"): ("ignore", "each broker listens on a free port of its own"),
    ("Fetch", "responses[].partitions[].records"): (
        "ignore", "compared record by record by the Fetch tests (batches carry each broker's timestamps)"),
    ("JoinGroup", "member_id"): ("ignore", "each coordinator draws its own member ids"),
    ("JoinGroup", "leader"): ("ignore", "the member id each coordinator drew"),
    ("JoinGroup", "members[].member_id"): ("ignore", "the member id each coordinator drew"),
    ("LeaveGroup", "members[].member_id"): ("ignore", "the member id each coordinator drew"),
}


def _match(pattern: str, text: str) -> bool:
    """``pattern`` matches all of ``text``; ``*`` is any run of characters, everything else literal."""
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), text) is not None


@dataclass(frozen=True)
class Departure:
    """A documented difference: ``path`` (a pattern, as in MASKS) of ``api``'s answer is ``refka`` in
    refka's and ``kafka`` in Kafka's (``ANY`` for any value), for ``reason``."""

    api: str
    path: str
    kafka: Any
    refka: Any
    reason: str

    def covers(self, api: str, path: str, kafka: Any, refka: Any) -> bool:
        return (_match(self.api, api) and _match(self.path, path)
                and (self.kafka is ANY or self.kafka == kafka) and (self.refka is ANY or self.refka == refka))


# Filled by the test modules through ``departure()`` so each entry sits next to the test it
# concerns; the README section "Where refka answers differently from Kafka 3.9" lists them.
DEPARTURES: dict[str, Departure] = {}


def departure(key: str, api: str, path: str, *, kafka: Any = ANY, refka: Any = ANY, reason: str) -> None:
    DEPARTURES[key] = Departure(api, path, kafka, refka, reason)


# -- flattening -------------------------------------------------------------------------------------


def _as_data(v: Any) -> Any:
    return v.to_dict() if hasattr(v, "to_dict") else v


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """``obj`` (a decoded message or its dict) as ``path -> scalar``."""
    out: dict[str, Any] = {}
    obj = _as_data(obj)
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else k))
    elif isinstance(obj, list):
        out[f"{prefix}#len"] = len(obj)
        for i, e in enumerate(obj):
            e = _as_data(e)
            key = next((f for f in KEY_FIELDS if isinstance(e, dict) and f in e), None)
            label = f"{key}={e[key]!r}" if key is not None else str(i)
            out.update(flatten(e, f"{prefix}[{label}]"))
    elif isinstance(obj, memoryview):
        out[prefix] = bytes(obj)
    else:
        out[prefix] = obj
    return out


def pattern_path(path: str) -> str:
    return re.sub(r"\[[^\]]*\]", "[]", path)


def _mask(api: str, path: str) -> tuple[str, str] | None:
    p = pattern_path(path)
    for (mapi, mpath), kind in MASKS.items():
        if _match(mapi, api) and _match(mpath, p):
            return kind
    return None


@dataclass
class Difference:
    api: str
    path: str
    kafka: Any
    refka: Any

    def __str__(self) -> str:
        return f"{self.api} {self.path}: Kafka {self.kafka!r}, refka {self.refka!r}"


_ABSENT = "<absent>"


def differences(api: str, kafka: Any, refka: Any) -> list[Difference]:
    """Every field where the two answers differ, masks applied."""
    fk, fr = flatten(kafka), flatten(refka)
    out = []
    for path in sorted(set(fk) | set(fr), key=lambda p: (p.count("."), p)):
        a, b = fk.get(path, _ABSENT), fr.get(path, _ABSENT)
        m = _mask(api, path)
        if m is not None and a is not _ABSENT and b is not _ABSENT:
            if m[0] == "ignore":
                continue
            a, b = a is None, b is None
        if a != b:
            out.append(Difference(api, pattern_path(path), a, b))
    return out


def undocumented(diffs: list[Difference]) -> list[Difference]:
    return [d for d in diffs
            if not any(dep.covers(d.api, d.path, d.kafka, d.refka) for dep in DEPARTURES.values())]


def assert_same(api: str, kafka: Any, refka: Any, context: str = "") -> None:
    """Fails on every difference that neither a mask nor a departure covers."""
    left = undocumented(differences(api, kafka, refka))
    assert not left, (f"{api} {context}: refka answers differently from Kafka 3.9.1 "
                      f"({len(left)} field(s)):\n  " + "\n  ".join(map(str, left)))


# -- the two brokers --------------------------------------------------------------------------------


class Side:
    """One broker over one raw connection, requests encoded and answers decoded by refka's codec."""

    def __init__(self, name: str, port: int) -> None:
        self.name = name
        self.port = port
        self.cid = 0
        self._sock: socket.socket | None = None

    def _recv(self, n: int) -> bytes:
        assert self._sock is not None
        out = bytearray()
        while len(out) < n:
            chunk = self._sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError(f"{self.name} closed the connection")
            out += chunk
        return bytes(out)

    def call(self, api: Api, body: Any, version: int) -> Any:
        if self._sock is None:
            self._sock = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        self.cid += 1
        header = encode_request_header(RequestHeader(api.key, version, self.cid, "refka-oracle"),
                                       api.request_header_version(version))
        try:
            payload = header + join(api.encode_request(body, version))
            self._sock.sendall(_I32.pack(len(payload)) + payload)
            (n,) = _I32.unpack(self._recv(4))
            frame = self._recv(n)
        except (OSError, ConnectionError):
            self.close()
            raise
        cid, pos = decode_response_header(frame, api.response_header_version(version))
        assert cid == self.cid, f"{self.name}: correlation id {cid}, expected {self.cid}"
        resp, end = api.decode_response(frame, version, pos)
        assert end == len(frame), f"{self.name} {api.name} v{version}: {len(frame) - end} bytes left"
        return resp

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class Pair:
    def __init__(self, kafka: Side, refka: Side) -> None:
        self.kafka = kafka
        self.refka = refka

    def call(self, api: Api, body: Any, version: int) -> tuple[Any, Any]:
        """The answers of Kafka and refka, in that order, to the same request."""
        return self.kafka.call(api, body, version), self.refka.call(api, body, version)

    def same(self, api: Api, body: Any, version: int, context: str = "") -> tuple[Any, Any]:
        """Sends ``body`` to both and fails on any undocumented difference; the two answers."""
        k, r = self.call(api, body, version)
        assert_same(api.name, k, r, context or f"v{version}")
        return k, r

    def wait_ready(self) -> None:
        """Both list broker 0 and a controller in Metadata (the controller's first UpdateMetadata)."""
        for side in (self.kafka, self.refka):
            def ready(side: Side = side) -> bool:
                md = side.call(Metadata, Metadata.Request(topics=[], allow_auto_topic_creation=False), 12)
                return md.controller_id == 0 and [b.node_id for b in md.brokers] == [0]
            wait_until(ready, timeout=60, message=f"{side.name} lists broker 0 and its controller",
                       ignoring=(OSError, ConnectionError))

    def close(self) -> None:
        self.kafka.close()
        self.refka.close()


# -- set-up both brokers share ------------------------------------------------------------------------


_CREATED: set[tuple[int, str]] = set()


def create_topic(pair: Pair, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    """``name`` created on both (CreateTopics v7, which must succeed on both), and led on both; once per
    pair (parametrized tests share it)."""
    if (id(pair), name) in _CREATED:
        return
    _CREATED.add((id(pair), name))
    from refka.protocol.messages.create_topics import CreateTopics

    R = CreateTopics.Request
    body = R(topics=[R.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=[],
                                      configs=[R.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                                               for k, v in (configs or {}).items()])],
             timeout_ms=30_000, validate_only=False)
    for side in (pair.kafka, pair.refka):
        resp = side.call(CreateTopics, body, 7)
        assert resp.topics[0].error_code == 0, f"{side.name}: {resp}"
    wait_for_leaders(pair, name, partitions)


def wait_for_leaders(pair: Pair, name: str, partitions: int) -> None:
    for side in (pair.kafka, pair.refka):
        def led(side: Side = side) -> bool:
            md = side.call(Metadata, Metadata.Request(
                topics=[Metadata.Request.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False), 12)
            t = md.topics[0]
            return t.error_code == 0 and len(t.partitions) == partitions and all(
                p.leader_id == 0 and p.error_code == 0 for p in t.partitions)
        wait_until(led, timeout=30, message=f"{side.name} leads every partition of {name}")


# -- topic configs ------------------------------------------------------------------------------------

# Topic configs one broker reports and the other does not (name -> reason); the rest are compared
# config by config (value, source, read-only, sensitive, type, synonyms).
_LEVEL = "compression levels (KIP-390, Kafka 3.8) are not configurable: refka compresses at each codec's default"
KAFKA_ONLY_TOPIC_CONFIGS: dict[str, str] = {
    "compression.gzip.level": _LEVEL,
    "compression.lz4.level": _LEVEL,
    "compression.zstd.level": _LEVEL,
    "remote.log.copy.disable": "tiered storage (KIP-405, KIP-950) is not served; refka has one tier",
    "remote.log.delete.on.disable": "tiered storage (KIP-405, KIP-950) is not served; refka has one tier",
}
REFKA_ONLY_TOPIC_CONFIGS: dict[str, str] = {
    "enable.ordered.delivery": "refka's KIP-253 topic config (issue 11): no Kafka counterpart",
}


def split_configs(kafka_configs: list[Any], refka_configs: list[Any]) -> tuple[list[Any], list[Any]]:
    """The configs both report (in name order), after checking that the ones only one reports are
    the documented ones."""
    k = {c.name: c for c in kafka_configs}
    r = {c.name: c for c in refka_configs}
    assert {n: KAFKA_ONLY_TOPIC_CONFIGS.get(n) for n in k.keys() - r.keys()} == {
        n: KAFKA_ONLY_TOPIC_CONFIGS[n] for n in KAFKA_ONLY_TOPIC_CONFIGS if n in k}, "topic configs only Kafka reports"
    assert {n: REFKA_ONLY_TOPIC_CONFIGS.get(n) for n in r.keys() - k.keys()} == {
        n: REFKA_ONLY_TOPIC_CONFIGS[n] for n in REFKA_ONLY_TOPIC_CONFIGS if n in r}, "topic configs only refka reports"
    both = sorted(k.keys() & r.keys())
    return [k[n] for n in both], [r[n] for n in both]
