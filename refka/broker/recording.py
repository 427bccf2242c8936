"""Per-connection request recording (issue 12's KIP-526 lab half).

Every connection has a ``ConnectionRecording``: who it is (client id, the client
software name and version an ApiVersions v3+ request gave, peer address,
listener, broker id), how many requests and bytes it sent per API, and a
bounded ring of its last requests (``refka.recording.ring.size``, 256 by
default; 0 turns the per-request part off). One entry per answered request:
wall time (ms, when the frame was read), API key and version, correlation id,
for Metadata the topics named (or "all"), request and response bytes (frames
with their length prefix), latency (ms, from the frame read to the answer
written or queued) and the distinct error codes of the answer, top-level and
per partition, as ``ErrorCode`` names.

Cost: the hot path does one tuple into a ``deque(maxlen=N)`` and three
additions per request; the error codes are found by a function compiled once
per API from the response's declaration that loops over its ``error_code``
fields only (~1 us for a one-partition Produce answer). Entries become dicts
only when read (admin HTTP API, ``--record``).

A broker's ``BrokerRecordings`` holds its open connections' recordings and
the last ``refka.recording.closed.connections`` closed ones; the request
counts of closed connections are folded into per-client totals, so the
metrics count every request ever answered. ``RecordFile`` (``refka serve
--record FILE``) appends every entry of every connection as JSON lines:
entries are queued on the loop, formatted and written by a thread
(``asyncio.to_thread``) every ``flush_interval`` seconds, so the event loop
never waits for the disk.

Requests refused because refka does not serve the feature (``note_unserved``: an
API key or version it does not serve, a transactional id, KIP-848's
ConsumerGroupHeartbeat) are counted per (client id, software, reason) and logged
at warning level once per client and reason, with the error code answered, so a
user whose pipeline dies on one sees why in the broker's log and metrics.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from refka.protocol import EncodedArray, ErrorCode
from refka.protocol.messages import APIS
from refka.protocol.schema import Array, Struct

from .logging import get_logger

log = get_logger("refka.recording")

ALL_TOPICS = "all"

# Entry fields, in tuple order (the ring holds tuples; dicts are made when read).
_WALL, _KEY, _VERSION, _CORR, _TOPICS, _REQ, _RESP, _LATENCY, _ERRORS = range(9)


def _error_code_lines(s: Struct, var: str, depth: int, indent: str) -> list[str]:
    """Source that adds each non-zero ``error_code`` of the struct in ``var`` (and of the
    structs nested in it) to ``found``."""
    lines = []
    for f in s.fields:
        t = f.type.element if isinstance(f.type, Array) else f.type
        if isinstance(t, Struct):
            inner = _error_code_lines(t, f"x{depth}", depth + 1, indent + "    ")
            if not inner:
                continue
            if isinstance(f.type, Array):
                # An answer built from elements already encoded (EncodedArray, Metadata's
                # topics) says their error codes itself.
                lines += [f"{indent}if type({var}.{f.name}) is EncodedArray:",
                          f"{indent}    if {var}.{f.name}.error_codes:",
                          f"{indent}        if found is None:",
                          f"{indent}            found = set()",
                          f"{indent}        found.update({var}.{f.name}.error_codes)",
                          f"{indent}else:"]
                lines.append(f"{indent}  for x{depth} in {var}.{f.name} or ():")
                inner = ["  " + line for line in inner]
            else:
                lines += [f"{indent}x{depth} = {var}.{f.name}", f"{indent}if x{depth} is not None:"]
            lines += inner
        elif f.name == "error_code":
            lines += [f"{indent}if {var}.error_code:",
                      f"{indent}    if found is None:",
                      f"{indent}        found = set()",
                      f"{indent}    found.add({var}.error_code)"]
    return lines


def _compile_error_codes(s: Struct) -> Callable[[Any], tuple[int, ...]]:
    """A function of a response giving its distinct non-zero error codes, sorted: straight
    loops over the declaration's error_code fields, made once per API (the hot path)."""
    body = _error_code_lines(s, "r", 0, "    ")
    src = "def error_codes(r):\n    found = None\n" + "\n".join(body) + (
        "\n    return () if found is None else tuple(sorted(found))\n")
    ns: dict[str, Any] = {"EncodedArray": EncodedArray}
    exec(compile(src, f"<refka error codes {s.name}>", "exec"), ns)
    return ns["error_codes"]  # type: ignore[no-any-return]


_ERROR_CODES: dict[int, Callable[[Any], tuple[int, ...]]] = {}


def error_codes(api: Any, response: Any) -> tuple[int, ...]:
    """The distinct non-zero error codes of ``response`` (an answer of ``api``), sorted."""
    fn = _ERROR_CODES.get(api.key)
    if fn is None:
        fn = _ERROR_CODES[api.key] = _compile_error_codes(api.spec.response)
    return fn(response)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def api_name(key: int) -> str:
    api = APIS.get(key)
    return api.name if api is not None else str(key)


class ConnectionRecording:
    """One connection's identity, its per-API counts and its ring of requests."""

    __slots__ = ("broker_id", "listener", "peer", "client_id", "software_name", "software_version",
                 "opened_ms", "closed_ms", "ring", "counts", "metadata_topics_named",
                 "metadata_all_topics", "sink", "active")

    def __init__(self, broker_id: int, listener: str, peer: str, ring_size: int,
                 sink: RecordFile | None = None) -> None:
        self.broker_id = broker_id
        self.listener = listener
        self.peer = peer
        self.client_id: str | None = None
        self.software_name: str | None = None
        self.software_version: str | None = None
        self.opened_ms = time.time() * 1000
        self.closed_ms: float | None = None
        self.ring: deque[tuple[Any, ...]] | None = deque(maxlen=ring_size) if ring_size > 0 else None
        # api key -> [requests, request bytes, response bytes]
        self.counts: dict[int, list[int]] = {}
        self.metadata_topics_named = 0
        self.metadata_all_topics = 0
        self.sink = sink
        # Whether requests are recorded at all (a ring or a --record file).
        self.active = self.ring is not None or sink is not None

    def add(self, api: Any, version: int, correlation_id: int, client_id: str | None, topics: Any,
            request_bytes: int, response: Any, response_bytes: int, received: float, now: float) -> None:
        """One answered request (``received``, ``now``: monotonic seconds)."""
        key = api.key
        self.client_id = client_id
        c = self.counts.get(key)
        if c is None:
            c = self.counts[key] = [0, 0, 0]
        c[0] += 1
        c[1] += request_bytes
        c[2] += response_bytes
        if topics is not None:
            if topics is ALL_TOPICS:
                self.metadata_all_topics += 1
            else:
                self.metadata_topics_named += len(topics)
        latency = now - received
        entry = (time.time() * 1000 - latency * 1000, key, version, correlation_id, topics, request_bytes,
                 response_bytes, latency * 1000, error_codes(api, response) if response is not None else ())
        if self.ring is not None:
            self.ring.append(entry)
        if self.sink is not None:
            self.sink.append(self, entry)

    def identity(self) -> dict[str, Any]:
        return {"broker": self.broker_id, "listener": self.listener, "peer": self.peer,
                "client_id": self.client_id, "software_name": self.software_name,
                "software_version": self.software_version}

    def describe(self) -> dict[str, Any]:
        """Identity, open/close times and request counts per API (the admin API's connection)."""
        return {**self.identity(), "opened_ms": round(self.opened_ms, 3),
                "closed_ms": None if self.closed_ms is None else round(self.closed_ms, 3),
                "requests": {api_name(k): c[0] for k, c in sorted(self.counts.items())},
                "requests_total": sum(c[0] for c in self.counts.values())}

    def entries(self) -> list[dict[str, Any]]:
        """The ring as dicts, oldest first, each with the connection's identity."""
        ident = self.identity()
        return [entry_dict(ident, e) for e in list(self.ring or ())]


def entry_dict(identity: dict[str, Any], e: tuple[Any, ...]) -> dict[str, Any]:
    out = {"time_ms": round(e[_WALL], 3), **identity, "api_key": e[_KEY], "api": api_name(e[_KEY]),
           "api_version": e[_VERSION], "correlation_id": e[_CORR]}
    topics = e[_TOPICS]
    if topics is not None:
        out["topics"] = topics if topics is ALL_TOPICS else list(topics)
    out.update(request_bytes=e[_REQ], response_bytes=e[_RESP], latency_ms=round(e[_LATENCY], 3),
               error_codes=[_error_name(c) for c in e[_ERRORS]])
    return out


class BrokerRecordings:
    """A broker's connection recordings: the open ones, the last closed ones, and the
    request counts of every closed connection folded per client."""

    def __init__(self, broker_id: int, ring_size: int = 256, closed_kept: int = 64,
                 sink: RecordFile | None = None) -> None:
        self.broker_id = broker_id
        self.ring_size = ring_size
        self.sink = sink
        self.open: set[ConnectionRecording] = set()
        self.closed: deque[ConnectionRecording] = deque(maxlen=max(closed_kept, 0))
        # (client_id, software_name, api key) -> [requests, request bytes, response bytes]
        self.totals: dict[tuple[str, str, int], list[int]] = {}
        # (client_id, software_name) -> [topics named, all-topics requests]
        self.metadata_totals: dict[tuple[str, str], list[int]] = {}
        # (client_id, software_name, reason) -> requests refused as not served (note_unserved)
        self.unserved: dict[tuple[str, str, str], int] = {}

    @classmethod
    def from_config(cls, broker_id: int, cfg: Any, sink: RecordFile | None = None) -> BrokerRecordings:
        return cls(broker_id, cfg["refka.recording.ring.size"], cfg["refka.recording.closed.connections"], sink)

    def opened(self, listener: str, peer: str) -> ConnectionRecording:
        rec = ConnectionRecording(self.broker_id, listener, peer, self.ring_size, self.sink)
        self.open.add(rec)
        return rec

    def closed_connection(self, rec: ConnectionRecording) -> None:
        if rec not in self.open:
            return
        self.open.discard(rec)
        rec.closed_ms = time.time() * 1000
        if self.closed.maxlen:
            self.closed.append(rec)
        who = (rec.client_id or "", rec.software_name or "")
        for key, c in rec.counts.items():
            t = self.totals.setdefault((*who, key), [0, 0, 0])
            t[0] += c[0]
            t[1] += c[1]
            t[2] += c[2]
        if rec.metadata_topics_named or rec.metadata_all_topics:
            m = self.metadata_totals.setdefault(who, [0, 0])
            m[0] += rec.metadata_topics_named
            m[1] += rec.metadata_all_topics

    def recordings(self) -> list[ConnectionRecording]:
        """The recently closed connections, then the open ones, each oldest first."""
        return [*self.closed, *sorted(self.open, key=lambda r: r.opened_ms)]

    def note_unserved(self, client_id: str | None, software: str | None, reason: str, answer: str,
                      **fields: Any) -> None:
        """A request refused because refka does not serve what it asks (module docstring):
        counted; logged at warning level the first time for this client and reason."""
        key = (client_id or "", software or "", reason)
        n = self.unserved.get(key, 0)
        self.unserved[key] = n + 1
        if not n:
            log.warning("request_not_served", broker=self.broker_id, client_id=client_id, software=software,
                        reason=reason, answer=answer, **fields)

    def request_counts(self) -> dict[tuple[str, str, int], list[int]]:
        """Requests, request bytes, response bytes per (client id, software name, api key),
        over every connection this broker ever had."""
        out = {k: list(v) for k, v in self.totals.items()}
        for rec in self.open:
            who = (rec.client_id or "", rec.software_name or "")
            for key, c in rec.counts.items():
                t = out.setdefault((*who, key), [0, 0, 0])
                t[0] += c[0]
                t[1] += c[1]
                t[2] += c[2]
        return out

    def metadata_counts(self) -> dict[tuple[str, str], list[int]]:
        """Topics named and all-topics requests in Metadata per (client id, software name)."""
        out = {k: list(v) for k, v in self.metadata_totals.items()}
        for rec in self.open:
            if rec.metadata_topics_named or rec.metadata_all_topics:
                m = out.setdefault((rec.client_id or "", rec.software_name or ""), [0, 0])
                m[0] += rec.metadata_topics_named
                m[1] += rec.metadata_all_topics
        return out


def entries(brokers: list[BrokerRecordings], client_id: str | None = None) -> Iterator[dict[str, Any]]:
    """Every recorded request of ``brokers`` (of ``client_id`` if given), oldest first."""
    rows = []
    for b in brokers:
        for rec in b.recordings():
            if client_id is not None and rec.client_id != client_id:
                continue
            rows.extend(rec.entries())
    rows.sort(key=lambda d: d["time_ms"])
    return iter(rows)


class RecordingCursor:
    """Where a reader of the recordings stands (``GET /api/recordings/stream``): per connection,
    how many of its requests it has seen; ``new`` gives the entries recorded since, oldest
    first. Nothing on the hot path: a connection's answered requests are its counts' sum.
    A reader slower than a ring's turn-over loses the overwritten entries, and says so."""

    def __init__(self, brokers: list[BrokerRecordings], client_id: str | None = None) -> None:
        self.client_id = client_id
        self.seen: dict[ConnectionRecording, int] = {}
        self.missed = 0
        self.new(brokers)  # from now on

    def new(self, brokers: list[BrokerRecordings]) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        live: dict[ConnectionRecording, int] = {}
        for b in brokers:
            for rec in b.recordings():
                total = sum(c[0] for c in rec.counts.values())
                live[rec] = total
                before = self.seen.get(rec, 0)
                if total == before or rec.ring is None or (self.client_id is not None
                                                           and rec.client_id != self.client_id):
                    continue
                fresh = total - before
                ring = list(rec.ring)
                if fresh > len(ring):
                    self.missed += fresh - len(ring)
                ident = rec.identity()
                rows.extend(entry_dict(ident, e) for e in ring[-fresh:])
        self.seen = live
        rows.sort(key=lambda d: d["time_ms"])
        return rows


class RecordFile:
    """``--record FILE``: every entry of every connection appended as JSON lines, off the
    event loop. Entries wait in a list (at most ``max_pending``; beyond that they are
    dropped and counted, so a stalled disk costs memory only up to a bound) and a thread
    formats and appends them every ``flush_interval`` seconds."""

    def __init__(self, path: str, flush_interval: float = 0.5, max_pending: int = 1_000_000) -> None:
        self.path = path
        self.flush_interval = flush_interval
        self.max_pending = max_pending
        self.pending: list[tuple[dict[str, Any], tuple[Any, ...]]] = []
        self.dropped = 0
        self.written = 0
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())
        self._task: asyncio.Task[None] | None = None

    def append(self, rec: ConnectionRecording, entry: tuple[Any, ...]) -> None:
        if len(self.pending) >= self.max_pending:
            self.dropped += 1
            return
        # The identity as it is now (a later ApiVersions may name the software).
        self.pending.append((rec.identity(), entry))

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.flush_interval)
            try:
                await self.flush()
            except OSError as e:  # a full or failing disk: the entries are lost, the broker serves on
                log.error("record_file_write_failed", path=self.path, error=str(e))

    async def flush(self) -> None:
        batch, self.pending = self.pending, []
        if batch:
            await asyncio.to_thread(self._write, batch)
        if self.dropped:
            log.warning("record_file_entries_dropped", path=self.path, dropped=self.dropped)
            self.dropped = 0

    def _write(self, batch: list[tuple[dict[str, Any], tuple[Any, ...]]]) -> None:
        lines = [json.dumps(entry_dict(ident, e), separators=(",", ":")) + "\n" for ident, e in batch]
        self._file.write("".join(lines))
        self._file.flush()
        self.written += len(lines)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await self.flush()
        self._file.close()
