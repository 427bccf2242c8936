"""Fault injection (issue 13's lab control plane): faults a lab installs through the admin
API, each with a scope and a lifetime, applied by the connection to the requests they match.

Kinds:

- ``error``: answer ``error_code`` instead of handling. Produce and Fetch: per partition,
  the partitions in scope answered with the error and the others handled as usual (the
  request is split); FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
  OffsetCommit, OffsetFetch, InitProducerId: the whole answer is the error
  (``ERROR_APIS``). Any other API is refused when the fault is added (400): no fault is
  half-installed.
- ``latency``: handle at once, answer ``latency_ms`` later (the connection's later answers
  wait behind it, as Kafka answers a connection in order; handling at once keeps a Produce
  appended in the order the connection sent it).
- ``drop-before``: close the connection instead of handling; ``drop-after``: handle,
  then close the connection instead of answering (a Produce is appended, its answer lost).
- ``blackhole``: read the request and never answer it (the connection's later answers
  wait behind it, as Kafka's in-order answers would).
- ``replication-delay``: a follower's Fetch (``follower`` in scope, or any follower)
  answered ``latency_ms`` late, so the follower, and the high watermark, fall behind.
- ``throttle``: the answer is held back as long as sending it at ``bytes_per_second``
  would take (its encoded size / the rate), so a client's throughput is bounded as by a
  slow link; the connection's later answers wait behind it.

Scope (every field optional, all given must match): ``broker`` (the broker the request
reached), ``api_key`` with ``min_version``/``max_version``, ``client_id``, ``topic`` and
``partition`` (for Produce and Fetch only: a request matches when one of its partitions
does), ``follower`` (replication-delay). Lifetime: ``count`` (fires that many times, then
is removed), ``duration_ms`` (removed after), or neither (until removed). A fault's
``fired`` count, and the table's per kind, are what ``/metrics`` exports; each firing is
logged (``fault_fired``) and put in the timeline of the broker it fired on.

In-process only (refka.testing's cluster), kfake-style interception: ``intercept``, a
Python callable installed for an API (and optionally a broker and a client id) that sees
each request it matches as an ``Intercepted`` and returns what happens to it: None, the
request is handled as usual; a response object of that API (``Intercepted.answer``), it is
the answer and the request is not handled; ``Delay(seconds)``, handled at once and
answered that much later (as ``latency``). It may be a coroutine function: awaiting in it
holds the request back before it is handled, and the connection's later requests may then
be handled first (Kafka would not), so ``Delay`` is the way to slow an answer down. With
``once`` (the default) it sees one request and is removed; else it stays until removed.
It is listed with the other faults (``kind`` "intercept", ``handler`` its name) but cannot
be added over HTTP.

``FaultTable.match`` is what the hot path asks: an empty table costs one truth test.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from refka.protocol import ErrorCode
from refka.protocol.messages.fetch import Fetch
from refka.protocol.messages.produce import Produce

from .logging import get_logger
from .registry import HANDLERS

log = get_logger("refka.faults")

KINDS = ("error", "latency", "drop-before", "drop-after", "blackhole", "replication-delay", "throttle")
PARTITIONED_APIS = frozenset({Produce.key, Fetch.key})
# APIs whose whole answer can be one error code: key -> the response fields set besides error_code
_TOP_LEVEL = {10: "FindCoordinator", 11: "JoinGroup", 14: "SyncGroup", 12: "Heartbeat", 13: "LeaveGroup",
              22: "InitProducerId"}
ERROR_APIS = frozenset({*PARTITIONED_APIS, *_TOP_LEVEL, 8})  # + OffsetCommit (every partition)
MAX_FAULTS = 1000
INTERCEPT = "intercept"  # in-process only: not in KINDS, the kinds the HTTP API adds


@dataclass(frozen=True, slots=True)
class Delay:
    """What an interception returns to have the request handled now and answered later."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Intercepted:
    """A request an interception sees: where it arrived, its API and version, its client id,
    the decoded request, and the response type of that API and version (``answer``)."""

    broker: int
    api_key: int
    api_version: int
    client_id: str | None
    request: Any
    response_type: type

    def answer(self, **fields: Any) -> Any:
        """A response of the request's API (fields by their names in Kafka's message files;
        the ones not given keep their defaults)."""
        return self.response_type(**fields)


Interceptor = Callable[[Intercepted], Any]


class FaultError(ValueError):
    """A fault refused: ``status`` the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Fault:
    id: int
    kind: str
    broker: int | None = None
    api_key: int | None = None
    min_version: int | None = None
    max_version: int | None = None
    client_id: str | None = None
    topic: str | None = None
    partition: int | None = None
    follower: int | None = None
    error_code: ErrorCode | None = None
    latency_ms: float = 0.0
    bytes_per_second: int = 0  # throttle
    handler: Interceptor | None = None  # intercept
    count: int | None = None  # firings left; None: unbounded
    until: float | None = None  # monotonic deadline
    fired: int = 0
    created_ms: float = field(default_factory=lambda: time.time() * 1000)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "fired": self.fired, "created_ms": self.created_ms,
                               "count_left": self.count}
        out["expires_in_ms"] = None if self.until is None else max(0.0, (self.until - time.monotonic()) * 1000)
        for name in ("broker", "api_key", "min_version", "max_version", "client_id", "topic", "partition",
                     "follower"):
            v = getattr(self, name)
            if v is not None:
                out[name] = v
        if self.api_key is not None:
            out["api"] = HANDLERS[self.api_key].api.name if self.api_key in HANDLERS else str(self.api_key)
        if self.error_code is not None:
            out["error_code"] = self.error_code.name
        if self.kind in ("latency", "replication-delay"):
            out["latency_ms"] = self.latency_ms
        if self.kind == "throttle":
            out["bytes_per_second"] = self.bytes_per_second
        if self.handler is not None:
            out["handler"] = getattr(self.handler, "__qualname__", repr(self.handler))
        return out

    def matches_request(self, broker: int, api_key: int, version: int, client_id: str | None) -> bool:
        return ((self.broker is None or self.broker == broker)
                and (self.api_key is None or self.api_key == api_key)
                and (self.min_version is None or version >= self.min_version)
                and (self.max_version is None or version <= self.max_version)
                and (self.client_id is None or self.client_id == client_id))

    def matches_partition(self, topic: str, partition: int) -> bool:
        return (self.topic is None or self.topic == topic) and (self.partition is None or self.partition == partition)


def _int(spec: dict[str, Any], key: str, lo: int, hi: int) -> int | None:
    v = spec.get(key)
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if type(v) is not int or not lo <= v <= hi:
        raise FaultError(400, f"{key!r} must be an integer from {lo} to {hi}, got {v!r}")
    return v


def _error_code(raw: Any) -> ErrorCode:
    if isinstance(raw, str) and raw.lstrip("-").isdigit():
        raw = int(raw)
    if isinstance(raw, str):
        try:
            code = ErrorCode[raw.upper()]
        except KeyError:
            raise FaultError(400, f"unknown error code {raw!r} (Kafka's names, e.g. NOT_LEADER_OR_FOLLOWER)") from None
    elif isinstance(raw, int) and not isinstance(raw, bool) and raw in ErrorCode._value2member_map_:
        code = ErrorCode(raw)
    else:
        raise FaultError(400, f"unknown error code {raw!r} (a name such as NOT_LEADER_OR_FOLLOWER or its number)")
    if code == ErrorCode.NONE:
        raise FaultError(400, "error_code NONE is not an error")
    return code


class FaultTable:
    """This process's faults (shared by its brokers; each fault's ``broker`` narrows it)."""

    def __init__(self) -> None:
        self.faults: dict[int, Fault] = {}
        self._ids = itertools.count(1)
        self.fired_by_kind: dict[str, int] = dict.fromkeys((*KINDS, INTERCEPT), 0)
        self.on_fired: list[Any] = []  # callables (fault, broker, what) -> None: the timeline

    def add(self, spec: dict[str, Any], brokers: set[int]) -> Fault:
        """A fault from its JSON ``spec``; every field checked before anything is installed."""
        known = {"kind", "broker", "api_key", "api", "min_version", "max_version", "client_id", "topic", "partition",
                 "follower", "error_code", "latency_ms", "bytes_per_second", "count", "duration_ms"}
        unknown = sorted(set(spec) - known)
        if unknown:
            raise FaultError(400, f"unknown field(s) {', '.join(unknown)}; a fault has {', '.join(sorted(known))}")
        kind = spec.get("kind")
        if kind == INTERCEPT:
            raise FaultError(400, "an interception is a Python callable: in-process only "
                                  "(refka.testing.RefkaCluster.intercept)")
        if kind not in KINDS:
            raise FaultError(400, f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        broker = _int(spec, "broker", 0, 2**31 - 1)
        if broker is not None and broker not in brokers:
            raise FaultError(404, f"broker {broker} is not served by this process (served: "
                                  f"{', '.join(map(str, sorted(brokers))) or 'none'})")
        api_key = _int(spec, "api_key", 0, 2**15 - 1)
        if spec.get("api") is not None:
            by_name = {h.api.name.lower(): k for k, h in HANDLERS.items()}
            named = by_name.get(str(spec["api"]).lower())
            if named is None:
                raise FaultError(400, f"unknown API {spec['api']!r} (refka serves {', '.join(sorted(by_name))})")
            if api_key is not None and api_key != named:
                raise FaultError(400, f"api {spec['api']!r} is key {named}, not {api_key}")
            api_key = named
        if api_key is not None and api_key not in HANDLERS:
            raise FaultError(400, f"API key {api_key} is not one refka serves")
        min_v, max_v = _int(spec, "min_version", 0, 2**15 - 1), _int(spec, "max_version", 0, 2**15 - 1)
        if min_v is not None and max_v is not None and min_v > max_v:
            raise FaultError(400, f"min_version {min_v} is above max_version {max_v}")
        topic, partition = spec.get("topic"), _int(spec, "partition", 0, 2**31 - 1)
        if topic is not None and not isinstance(topic, str):
            raise FaultError(400, f"topic must be a string, got {topic!r}")
        if (topic is not None or partition is not None) and api_key not in PARTITIONED_APIS:
            raise FaultError(400, "a topic or partition scope needs api Produce or Fetch (the APIs whose "
                                  "requests name partitions here)")
        client_id = spec.get("client_id")
        if client_id is not None and not isinstance(client_id, str):
            raise FaultError(400, f"client_id must be a string, got {client_id!r}")
        follower = _int(spec, "follower", 0, 2**31 - 1)
        if follower is not None and kind != "replication-delay":
            raise FaultError(400, "follower is a replication-delay's scope")
        error_code = None
        if kind == "error":
            if "error_code" not in spec:
                raise FaultError(400, "an error fault needs error_code")
            error_code = _error_code(spec["error_code"])
            if api_key not in ERROR_APIS:
                raise FaultError(400, "an error fault needs api one of " + ", ".join(
                    sorted(HANDLERS[k].api.name for k in ERROR_APIS)) + " (answers refka can build for any request)")
        elif "error_code" in spec:
            raise FaultError(400, f"error_code is for kind error, not {kind}")
        latency = spec.get("latency_ms", 0)
        if kind in ("latency", "replication-delay"):
            if isinstance(latency, bool) or not isinstance(latency, (int, float)) or not 0 < latency <= 600_000:
                raise FaultError(400, f"latency_ms must be a number above 0 and at most 600000, got {latency!r}")
        elif "latency_ms" in spec:
            raise FaultError(400, f"latency_ms is for kinds latency and replication-delay, not {kind}")
        rate = _int(spec, "bytes_per_second", 1, 2**40)
        if kind == "throttle" and rate is None:
            raise FaultError(400, "a throttle fault needs bytes_per_second")
        if kind != "throttle" and rate is not None:
            raise FaultError(400, f"bytes_per_second is for kind throttle, not {kind}")
        if kind == "replication-delay" and api_key not in (None, Fetch.key):
            raise FaultError(400, "a replication-delay is on Fetch")
        count = _int(spec, "count", 1, 2**31 - 1)
        duration = spec.get("duration_ms")
        if duration is not None and (isinstance(duration, bool) or not isinstance(duration, (int, float))
                                     or not 0 < duration <= 86_400_000):
            raise FaultError(400, f"duration_ms must be a number above 0, at most a day, got {duration!r}")
        if len(self.faults) >= MAX_FAULTS:
            raise FaultError(409, f"{MAX_FAULTS} faults are installed already: remove some first")
        f = Fault(next(self._ids), kind, broker=broker, api_key=Fetch.key if kind == "replication-delay" else api_key,
                  min_version=min_v, max_version=max_v, client_id=client_id, topic=topic, partition=partition,
                  follower=follower, error_code=error_code, latency_ms=float(latency), bytes_per_second=rate or 0,
                  count=count,
                  until=None if duration is None else time.monotonic() + duration / 1000)
        self.faults[f.id] = f
        log.info("fault_added", **f.describe())
        return f

    def intercept(self, handler: Interceptor, api_key: int, *, broker: int | None = None,
                  client_id: str | None = None, once: bool = True) -> Fault:
        """Installs ``handler`` for requests of ``api_key`` (the module docstring)."""
        if not callable(handler):
            raise FaultError(400, f"an interception needs a callable, got {handler!r}")
        if api_key not in HANDLERS:
            raise FaultError(400, f"API key {api_key} is not one refka serves")
        if len(self.faults) >= MAX_FAULTS:
            raise FaultError(409, f"{MAX_FAULTS} faults are installed already: remove some first")
        f = Fault(next(self._ids), INTERCEPT, broker=broker, api_key=api_key, client_id=client_id,
                  count=1 if once else None, handler=handler)
        self.faults[f.id] = f
        log.info("fault_added", **f.describe())
        return f

    def remove(self, fault_id: int) -> Fault | None:
        f = self.faults.pop(fault_id, None)
        if f is not None:
            log.info("fault_removed", id=fault_id, kind=f.kind, fired=f.fired)
        return f

    def clear(self) -> int:
        n = len(self.faults)
        self.faults.clear()
        return n

    def live(self) -> list[Fault]:
        now = time.monotonic()
        for f in [f for f in self.faults.values() if f.until is not None and f.until <= now]:
            self.faults.pop(f.id, None)
        return list(self.faults.values())

    def match(self, broker: int, api_key: int, version: int, client_id: str | None, request: Any,
              follower: int = -1) -> Fault | None:
        """The first live fault this request matches (None mostly: an empty table is one test)."""
        if not self.faults:
            return None
        for f in self.live():
            if not f.matches_request(broker, api_key, version, client_id):
                continue
            if f.kind == "replication-delay":
                if follower < 0 or (f.follower is not None and f.follower != follower):
                    continue
            elif api_key == Fetch.key and follower >= 0 and f.api_key is None:
                continue  # a fault without an API does not hit replication unless it says Fetch
            if (f.topic is not None or f.partition is not None) and not any(
                    f.matches_partition(t, p) for t, p in partitions_of(api_key, request)):
                continue
            return f
        return None

    def fired(self, f: Fault, broker: int, what: str) -> None:
        f.fired += 1
        self.fired_by_kind[f.kind] += 1
        if f.count is not None:
            f.count -= 1
            if f.count <= 0:
                self.faults.pop(f.id, None)
        log.info("fault_fired", id=f.id, kind=f.kind, broker=broker, request=what,
                 error_code=f.error_code.name if f.error_code is not None else None)
        for hook in self.on_fired:
            hook(f, broker, what)


def partitions_of(api_key: int, request: Any) -> list[tuple[str, int]]:
    """(topic, partition) of a Produce or Fetch request (topic names; Fetch v13+ by ID has them
    resolved only by the handler, so those match no topic scope)."""
    if api_key == Produce.key:
        return [(t.name, p.index) for t in request.topic_data for p in t.partition_data]
    if api_key == Fetch.key:
        return [(t.topic or "", p.partition) for t in request.topics for p in t.partitions]
    return []


# -- error answers: built from the request, as Kafka's getErrorResponse would


def split(api_key: int, request: Any, f: Fault) -> tuple[Any | None, list[tuple[Any, int]]]:
    """(the request without the partitions ``f`` scopes, or None when none is left;
    [(topic entry, partition)] of those it scopes). Without a topic or partition scope
    every partition is the fault's."""
    every = f.topic is None and f.partition is None
    hit: list[tuple[Any, int]] = []
    kept_topics = []
    if api_key == Produce.key:
        for t in request.topic_data:
            keep = []
            for p in t.partition_data:
                if every or f.matches_partition(t.name, p.index):
                    hit.append((t, p.index))
                else:
                    keep.append(p)
            if keep:
                kept_topics.append(_copy(t, partition_data=keep))
        return (_copy(request, topic_data=kept_topics) if kept_topics else None), hit
    for t in request.topics:  # Fetch
        keep = []
        for p in t.partitions:
            if every or f.matches_partition(t.topic or "", p.partition):
                hit.append((t, p.partition))
            else:
                keep.append(p)
        if keep:
            kept_topics.append(_copy(t, partitions=keep))
    return (_copy(request, topics=kept_topics) if kept_topics else None), hit


def _copy(struct: Any, **changes: Any) -> Any:
    return type(struct)(**{**{k: getattr(struct, k) for k in struct.__slots__}, **changes})


def merge_errors(api_key: int, response: Any, hit: list[tuple[Any, int]], code: ErrorCode) -> Any:
    """``response`` (the handled rest's, or a new empty one) with the error entries added."""
    if api_key == Produce.key:
        R = Produce.Response
        if response is None:
            response = R(responses=[])
        for t, index in hit:
            entry = next((x for x in response.responses if x.name == t.name), None)
            if entry is None:
                entry = R.TopicProduceResponse(name=t.name, partition_responses=[])
                response.responses.append(entry)
            entry.partition_responses.append(R.TopicProduceResponse.PartitionProduceResponse(
                index=index, error_code=code, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
                error_message=f"injected by a refka fault ({code.name})"))
        return response
    F = Fetch.Response
    if response is None:
        response = F(error_code=0, session_id=0, responses=[])
    for t, index in hit:
        entry = next((x for x in response.responses if x.topic == t.topic and x.topic_id == t.topic_id), None)
        if entry is None:
            entry = F.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=[])
            response.responses.append(entry)
        entry.partitions.append(F.FetchableTopicResponse.PartitionData(
            partition_index=index, error_code=code, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
            preferred_read_replica=-1, records=None))
    return response


def whole_error(api: Any, version: int, request: Any, code: ErrorCode) -> Any:
    """The answer of a top-level-error API, or of OffsetCommit (every partition), as the error."""
    R = api.Response
    if api.key == 10 and version >= 4:  # FindCoordinator v4: one coordinator per key
        return R(coordinators=[R.Coordinator(key=k, node_id=-1, host="", port=-1, error_code=code)
                               for k in request.coordinator_keys])
    if api.key == 8:  # OffsetCommit
        T = R.OffsetCommitResponseTopic
        return R(topics=[T(name=t.name, partitions=[T.OffsetCommitResponsePartition(
            partition_index=p.partition_index, error_code=code) for p in t.partitions]) for t in request.topics])
    return R(error_code=code)
