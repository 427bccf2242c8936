"""The admin HTTP API (``refka serve --admin-port P``): an aiohttp app over this
process's brokers. A lab tool: it binds 127.0.0.1 unless ``--admin-host`` says
otherwise; with ``--admin-token`` (or ``REFKA_ADMIN_TOKEN``) every call but a GET
needs ``Authorization: Bearer <token>`` (401 with a JSON error otherwise); reads
stay open.

Endpoints (described by the OpenAPI 3 document the app serves itself, ``OPENAPI``):

- ``GET /``: the lab dashboard (dashboard.html: one static page over the endpoints below).
- ``GET /api/openapi.json``: that document.
- ``GET /api/connections[?broker=N]``: the open connections, with their identity
  (client id, client software name and version, peer, listener, broker) and
  request counts per API.
- ``GET /api/recordings[?broker=N][&client_id=X][&limit=K]``: the recorded
  requests of open and recently closed connections as JSON lines
  (``application/x-ndjson``), newest last; ``limit`` keeps the newest K.
  ``GET /api/recordings/stream[?broker=N][&client_id=X]``: the requests recorded
  from then on, as server-sent events (recording.RecordingCursor).
- ``GET /api/cluster[?broker=N]``: brokers (racks, endpoints), the controller and
  its epochs, as broker N (default: the lowest id served here) knows them.
- ``GET /api/topics[?broker=N]``, ``GET /api/topics/{topic}[?broker=N]``: topics,
  and one topic's partitions (leader, epochs, replicas, ISR, KIP-253 counts and
  maps, marked for deletion, log start/end offset and high watermark from a
  replica hosted here); admin_views.py builds them.
- ``GET /api/groups``, ``GET /api/groups/{group}``: the groups this process's
  brokers coordinate; one group's state, members, assignments, committed
  offsets and lag.
- ``POST /api/topics/{topic}/partitions/{partition}/leader`` {"broker": N},
  ``POST /api/topics/{topic}/elect-preferred`` [{"partitions": [...]}],
  ``POST /api/topics/{topic}/reassign`` {"assignments": {"0": [1, 2]}},
  ``POST /api/topics/{topic}/partition-count`` {"count": N}: sent to the
  controller over the Kafka protocol (admin_ops.py); a Kafka error is a 400 (409
  for a conflict, 404 for what does not exist) naming the error code.
- ``POST /api/brokers/{broker}/stop``, ``.../kill``, ``.../start``,
  ``.../expire-session``: a broker of this process stopped with a controlled
  shutdown, stopped at once, started again, or its store session expired
  (``BrokerControl``: server.Cluster); 409 when it is in that state already.
- ``GET /api/faults``, ``POST /api/faults``, ``DELETE /api/faults[/{id}]``: the
  process's fault table (faults.py): listed (with each kind's firings),
  installed (checked whole first: 400/404, nothing half-installed), removed.
- ``GET /api/timeline[?broker=N][&since=SEQ][&limit=K]``: the cluster's changes as
  broker N saw them (topics and partitions created and removed, leader and ISR
  changes with old and new, controller changes; metadata_cache.py), JSON lines,
  oldest first; ``GET /api/timeline/stream[?broker=N][&since=SEQ]``: the same as
  server-sent events, each as it happens.
- ``GET /api/brokers/{broker}/metadata``: whether the broker's Metadata answers
  are frozen (stale-metadata mode, metadata_cache.py), with the controller
  epochs it answers and the ones it has.
- ``POST /api/brokers/{broker}/metadata/freeze`` and ``.../thaw``: the broker
  answers Metadata from its cache as it is now (epochs included) until thawed,
  while the cluster moves on; both answer the state as the GET does. Freezing a
  frozen broker keeps the first copy.
- ``GET /metrics``: Prometheus text (prometheus-client), Kafka's JMX-exporter
  names where Kafka has the metric.

The app sees the brokers only as ``ServedBroker``: a node id, its
``BrokerRecordings`` (recording.py) and its ``MetadataCache``, through a
callable, so brokers stopped and started in an in-process cluster are seen as
they are. A broker of another process (one process per broker) is a 404 that
says which brokers this process serves. Bad input is a 4xx with a JSON ``{"error": ...}`` body; so is
a path the app does not serve.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import Callable, Iterator
from importlib import resources
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from . import admin_ops, admin_views, recording
from .admin_views import ServedBroker, ViewError, lookups
from .broker_metrics import LATENCY_BUCKETS_MS
from .faults import INTERCEPT, KINDS, FaultError, FaultTable
from .recording import BrokerRecordings, api_name

BrokersSource = Callable[[], list[ServedBroker]]


class BrokerControl(Protocol):
    """Stopping and starting this process's brokers (server.Cluster): the state of a broker
    id ("running", "stopped", None if not this process's), and the operations."""

    def control_state(self, node_id: int) -> str | None: ...

    async def control_stop(self, node_id: int, *, kill: bool) -> None: ...

    async def control_start(self, node_id: int) -> None: ...

    async def control_expire_session(self, node_id: int) -> None: ...

MAX_LIMIT = 1_000_000
NDJSON = "application/x-ndjson"

_ERROR = {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]}
_BROKER_PARAM = {"name": "broker", "in": "query", "required": False,
                 "description": "only this broker's (a broker id served by this process)",
                 "schema": {"type": "integer"}}
_BROKER_PATH = {"name": "broker", "in": "path", "required": True,
                "description": "a broker id served by this process", "schema": {"type": "integer"}}
_METADATA_STATE = {"description": "the broker's Metadata serving state", "content": {"application/json": {
    "schema": {"type": "object", "required": ["broker", "frozen", "answering", "current"], "properties": {
        "broker": {"type": "integer"},
        "frozen": {"type": "boolean"},
        "frozen_at_ms": {"type": ["number", "null"], "description": "wall time of the freeze (ms)"},
        **{k: {"type": "object", "description": d, "properties": {
            "controller_id": {"type": "integer"}, "controller_epoch": {"type": "integer"},
            "controller_metadata_epoch": {"type": "integer"}, "topics": {"type": "integer"}}}
           for k, d in (("answering", "what Metadata answers (the frozen copy while frozen)"),
                        ("current", "what the broker's cache has from the controller"))}}}}}}
_OBJECT = {"type": "object"}
_INT32 = {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
_SINCE_PARAM = {"name": "since", "in": "query", "required": False,
                "schema": {"type": "integer", "minimum": 0, "maximum": 2**62},
                "description": "only events with a larger seq"}
_TIMELINE_EVENT = {"type": "object", "required": ["seq", "time_ms", "type"], "properties": {
    "seq": {"type": "integer"}, "time_ms": {"type": "number"},
    "type": {"enum": ["topic_created", "topic_deleted", "partition_created", "partition_removed",
                      "leader_changed", "isr_changed", "replicas_changed", "controller_changed", "fault_fired"]},
    "broker": {"type": "integer"}}}
_FAULT_SPEC = {
    "kind": {"enum": list(KINDS)},
    "broker": _INT32, "api": {"type": "string", "description": "an API name, e.g. Produce"},
    "api_key": {"type": "integer", "minimum": 0, "maximum": 32767},
    "min_version": {"type": "integer", "minimum": 0, "maximum": 32767},
    "max_version": {"type": "integer", "minimum": 0, "maximum": 32767},
    "client_id": {"type": "string"}, "topic": {"type": "string"}, "partition": {**_INT32, "minimum": 0},
    "follower": {**_INT32, "minimum": 0},
    "error_code": {"type": ["string", "integer"], "description": "a Kafka error name or number (kind error)"},
    "latency_ms": {"type": "number", "exclusiveMinimum": 0, "maximum": 600000},
    "bytes_per_second": {"type": "integer", "minimum": 1, "maximum": 2**40, "description": "kind throttle"},
    "count": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
    "duration_ms": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400000}}
_FAULT = {"type": "object", "required": ["id", "kind", "fired"], "properties": {
    "id": {"type": "integer"}, "kind": {"enum": [*KINDS, INTERCEPT]}, "fired": {"type": "integer"},
    "handler": {"type": "string", "description": "an in-process interception's callable (refka.testing)"},
    "count_left": {"type": ["integer", "null"]}, "expires_in_ms": {"type": ["number", "null"]},
    "created_ms": {"type": "number"}, "api": {"type": "string"}, "error_code": {"type": "string"}}}
_TOPIC_PATH = {"name": "topic", "in": "path", "required": True, "schema": {"type": "string"}}


def _body(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "properties": properties, "required": required}}}}

# A call that changes something: open, or a bearer token when refka serve --admin-token set one.
_MUTATING: list[dict[str, list[str]]] = [{}, {"bearer": []}]
_VIEW_PARAM = {"name": "broker", "in": "query", "required": False, "schema": {"type": "integer"},
               "description": "whose view (a broker id served by this process; default the lowest)"}


def _json_ok(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_TOPIC_SUMMARY: dict[str, Any] = {"type": "object", "required": ["name", "partitions"], "properties": {
    "name": {"type": "string"}, "topic_id": {"type": ["string", "null"]}, "topic_epoch": {"type": "integer"},
    "internal": {"type": "boolean"}, "initial_partition_count": {"type": "integer"},
    "undeleted_partition_count": {"type": "integer"}}}
_NULLABLE_INT = {"type": ["integer", "null"]}
_PARTITION = {"type": "object", "required": ["partition", "leader", "replicas", "isr"], "properties": {
    "partition": {"type": "integer"}, "leader": {"type": "integer"}, "leader_epoch": {"type": "integer"},
    "partition_epoch": {"type": "integer"},
    "replicas": {"type": "array", "items": {"type": "integer"}},
    "isr": {"type": "array", "items": {"type": "integer"}},
    "offline_replicas": {"type": "array", "items": {"type": "integer"}},
    "marked_for_deletion": {"type": "boolean"},
    "leader_epoch_after_creation": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}},
                                    "description": "KIP-253: [partition, leader epoch] pairs"},
    "leader_epoch_before_deletion": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
    "log_start_offset": _NULLABLE_INT, "log_end_offset": _NULLABLE_INT, "high_watermark": _NULLABLE_INT,
    "offsets_from": {"type": ["integer", "null"], "description": "the broker the offsets are from"}}}
_IDENTITY = {
    "broker": {"type": "integer"},
    "listener": {"type": "string"},
    "peer": {"type": "string", "description": "host:port of the client"},
    "client_id": {"type": ["string", "null"]},
    "software_name": {"type": ["string", "null"], "description": "from ApiVersions v3+ (KIP-511)"},
    "software_version": {"type": ["string", "null"]},
}


# (path action, the state it needs, the state after): POST /api/brokers/{broker}/<action>
BROKER_OPS = [("stop", "running", "stopped"), ("kill", "running", "stopped"), ("start", "stopped", "running"),
              ("expire-session", "running", "running")]
_BROKER_OP_SUMMARY = {
    "stop": "A controlled shutdown of a broker of this process (its leadership moved away first).",
    "kill": "A broker of this process stopped at once: connections cut, no controlled shutdown.",
    "start": "A stopped broker of this process started again (same id, ports and log dirs).",
    "expire-session": "The broker's metadata-store session expires: its registration goes, the "
                      "controller sees it fail, and it registers again on a new session.",
}


def _errors(*codes: int) -> dict[str, Any]:
    return {str(c): {"description": "refused", "content": {"application/json": {"schema": _ERROR}}}
            for c in codes}


OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "refka admin API", "version": "1",
             "description": "A lab tool: the connections and request recordings of the brokers of "
                            "one refka process, their Prometheus metrics, and stale metadata."},
    "components": {"securitySchemes": {"bearer": {
        "type": "http", "scheme": "bearer",
        "description": "refka serve --admin-token TOKEN (or REFKA_ADMIN_TOKEN): every call but a GET needs it"}}},
    "paths": {
        "/": {"get": {
            "operationId": "dashboard",
            "summary": "The lab dashboard: brokers, partitions live, the timeline, rates per topic, faults.",
            "responses": {"200": {"description": "one static page (dashboard.html)",
                                  "content": {"text/html": {"schema": {"type": "string"}}}}}}},
        "/api/openapi.json": {"get": {
            "operationId": "openapi", "summary": "This document.",
            "responses": {"200": {"description": "the OpenAPI document",
                                  "content": {"application/json": {"schema": {"type": "object"}}}}}}},
        "/api/connections": {"get": {
            "operationId": "connections",
            "summary": "Open connections: identity and request counts per API.",
            "parameters": [_BROKER_PARAM],
            "responses": {"200": {"description": "the open connections", "content": {"application/json": {
                "schema": {"type": "object", "required": ["connections"], "properties": {
                    "connections": {"type": "array", "items": {"type": "object", "properties": {
                        **_IDENTITY,
                        "opened_ms": {"type": "number"},
                        "closed_ms": {"type": ["number", "null"]},
                        "requests": {"type": "object", "additionalProperties": {"type": "integer"},
                                     "description": "requests answered per API name"},
                        "requests_total": {"type": "integer"}}}}}}}}},
                **_errors(400, 404)}}},
        "/api/recordings": {"get": {
            "operationId": "recordings",
            "summary": "Recorded requests of open and recently closed connections, newest last.",
            "parameters": [
                _BROKER_PARAM,
                {"name": "client_id", "in": "query", "required": False, "schema": {"type": "string"},
                 "description": "only this client id's connections"},
                {"name": "limit", "in": "query", "required": False,
                 "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                 "description": "only the newest LIMIT requests"}],
            "responses": {"200": {"description": "one JSON object per line", "content": {NDJSON: {
                "schema": {"type": "object", "properties": {
                    "time_ms": {"type": "number", "description": "wall time the request was read (ms)"},
                    **_IDENTITY,
                    "api_key": {"type": "integer"}, "api": {"type": "string"},
                    "api_version": {"type": "integer"}, "correlation_id": {"type": "integer"},
                    "topics": {"oneOf": [{"type": "array", "items": {"type": "string"}},
                                         {"const": "all"}],
                               "description": "Metadata only: the topics named, or all"},
                    "request_bytes": {"type": "integer"}, "response_bytes": {"type": "integer"},
                    "latency_ms": {"type": "number"},
                    "error_codes": {"type": "array", "items": {"type": "string"},
                                    "description": "distinct error codes of the answer (ErrorCode names)"}}}}}},
                **_errors(400, 404)}}},
        "/api/cluster": {"get": {
            "operationId": "cluster", "summary": "Brokers, racks, endpoints, the controller and its epochs.",
            "parameters": [_VIEW_PARAM],
            "responses": {"200": _json_ok("the cluster", {
                "type": "object", "required": ["brokers", "controller"], "properties": {
                    "cluster_id": {"type": ["string", "null"]}, "view_of_broker": {"type": "integer"},
                    "controller": {"type": "object", "properties": {
                        "id": {"type": "integer"}, "epoch": {"type": "integer"},
                        "metadata_epoch": {"type": "integer"}}},
                    "brokers": {"type": "array", "items": {"type": "object", "properties": {
                        "id": {"type": "integer"}, "rack": {"type": ["string", "null"]},
                        "served_here": {"type": "boolean"},
                        "endpoints": {"type": "object", "additionalProperties": {"type": "string"}}}}},
                    "topics": {"type": "integer"}, "partitions": {"type": "integer"}}}),
                **_errors(400, 404)}}},
        "/api/topics": {"get": {
            "operationId": "topics", "summary": "Every topic the broker knows, with its counts and epochs.",
            "parameters": [_VIEW_PARAM],
            "responses": {"200": _json_ok("the topics", {
                "type": "object", "required": ["topics"],
                "properties": {"topics": {"type": "array", "items": _TOPIC_SUMMARY}}}), **_errors(400, 404)}}},
        "/api/topics/{topic}": {"get": {
            "operationId": "topic", "summary": "One topic and each of its partitions.",
            "parameters": [{"name": "topic", "in": "path", "required": True, "schema": {"type": "string"}},
                           _VIEW_PARAM],
            "responses": {"200": _json_ok("the topic", {**_TOPIC_SUMMARY, "properties": {
                **_TOPIC_SUMMARY["properties"], "partitions": {"type": "array", "items": _PARTITION}}}),
                **_errors(400, 404)}}},
        "/api/topics/{topic}/partitions/{partition}/leader": {"post": {
            "operationId": "moveLeader", "security": _MUTATING,
            "summary": "Leadership of a partition to a named broker, one of its replicas in the ISR: the "
                       "replicas reordered with it first, then a preferred election.",
            "parameters": [_TOPIC_PATH, {"name": "partition", "in": "path", "required": True,
                                         "schema": {**_INT32, "minimum": 0}}],
            "requestBody": _body({"broker": _INT32}, ["broker"]),
            "responses": {"200": _json_ok("the partition after the move", {"type": "object", "properties": {
                "leader": {"type": "integer"}, "leader_epoch": {"type": "integer"},
                "replicas": {"type": "array", "items": {"type": "integer"}}, "seconds": {"type": "number"}}}),
                **_errors(400, 401, 404, 409, 503, 504)}}},
        "/api/topics/{topic}/elect-preferred": {"post": {
            "operationId": "electPreferred", "security": _MUTATING,
            "summary": "Preferred leader elections for some or every partition of a topic.",
            "parameters": [_TOPIC_PATH],
            "requestBody": {**_body({"partitions": {"type": "array", "items": _INT32}}, []),
                            "required": False},
            "responses": {"200": _json_ok("per partition: elected, or why not needed", {
                "type": "object", "properties": {"results": {"type": "object",
                                                             "additionalProperties": {"type": "string"}}}}),
                **_errors(400, 401, 404, 409, 503)}}},
        "/api/topics/{topic}/reassign": {"post": {
            "operationId": "reassign", "security": _MUTATING,
            "summary": "AlterPartitionReassignments: each partition's new replicas, preferred leader first.",
            "parameters": [_TOPIC_PATH],
            "requestBody": _body({"assignments": {
                "type": "object", "minProperties": 1, "propertyNames": {"pattern": "^[0-9]{1,9}$"},
                "additionalProperties": {"type": "array", "items": _INT32, "minItems": 1}}},
                ["assignments"]),
            "responses": {"200": _json_ok("started (replicas that must catch up join later)", _OBJECT),
                          **_errors(400, 401, 404, 409, 503)}}},
        "/api/topics/{topic}/partition-count": {"post": {
            "operationId": "setPartitionCount", "security": _MUTATING,
            "summary": "CreatePartitions: expand, or with KIP-253 (enable.ordered.delivery) shrink a topic.",
            "parameters": [_TOPIC_PATH],
            "requestBody": _body({"count": {**_INT32, "minimum": 1}}, ["count"]),
            "responses": {"200": _json_ok("accepted by the controller", _OBJECT),
                          **_errors(400, 401, 404, 409, 503)}}},
        "/api/faults": {
            "get": {"operationId": "faults", "summary": "The faults installed, and how often each kind fired.",
                    "responses": {"200": _json_ok("the faults", {"type": "object", "required": ["faults"],
                                                                  "properties": {
                        "faults": {"type": "array", "items": _FAULT},
                        "fired_by_kind": {"type": "object", "additionalProperties": {"type": "integer"}}}}),
                        **_errors(404)}},
            "post": {"operationId": "addFault", "security": _MUTATING,
                     "summary": "Install a fault (faults.py): every field checked first, nothing half-installed.",
                     "requestBody": _body(_FAULT_SPEC, ["kind"]),
                     "responses": {"201": _json_ok("the fault installed", _FAULT), **_errors(400, 401, 404, 409)}},
            "delete": {"operationId": "clearFaults", "security": _MUTATING, "summary": "Remove every fault.",
                       "responses": {"200": _json_ok("how many were removed", {
                           "type": "object", "properties": {"removed": {"type": "integer"}}}), **_errors(401, 404)}}},
        "/api/faults/{fault}": {"delete": {
            "operationId": "removeFault", "security": _MUTATING, "summary": "Remove one fault.",
            "parameters": [{"name": "fault", "in": "path", "required": True, "schema": {"type": "integer"}}],
            "responses": {"200": _json_ok("the fault removed", _FAULT), **_errors(400, 401, 404)}}},
        "/api/timeline": {"get": {
            "operationId": "timeline",
            "summary": "The cluster's changes as a broker saw them: topics and partitions created and removed, "
                       "leader, ISR and replica changes (old and new), controller changes.",
            "parameters": [_VIEW_PARAM, _SINCE_PARAM,
                           {"name": "limit", "in": "query", "required": False,
                            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                            "description": "only the newest LIMIT events"}],
            "responses": {"200": {"description": "one JSON object per line, oldest first", "content": {NDJSON: {
                "schema": _TIMELINE_EVENT}}}, **_errors(400, 404)}}},
        "/api/recordings/stream": {"get": {
            "operationId": "recordingsStream",
            "summary": "Requests recorded from now on as server-sent events (text/event-stream), each "
                       "as GET /api/recordings gives it; an event {\"type\": \"missed\", \"entries\": N} "
                       "says the reader fell behind a connection's ring and N entries were overwritten.",
            "parameters": [_BROKER_PARAM,
                           {"name": "client_id", "in": "query", "required": False, "schema": {"type": "string"},
                            "description": "only this client id's connections"}],
            "responses": {"200": {"description": "`data: <request JSON>` per request",
                                  "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                          **_errors(400, 404)}}},
        "/api/timeline/stream": {"get": {
            "operationId": "timelineStream",
            "summary": "The timeline as server-sent events (text/event-stream), each as it happens; the "
                       "events after SINCE first.",
            "parameters": [_VIEW_PARAM, _SINCE_PARAM],
            "responses": {"200": {"description": "`data: <event JSON>` per event",
                                  "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                          **_errors(400, 404)}}},
        "/api/groups": {"get": {
            "operationId": "groups", "summary": "The groups the brokers of this process coordinate.",
            "responses": {"200": _json_ok("the groups", {
                "type": "object", "required": ["groups"], "properties": {
                    "groups": {"type": "array", "items": {"type": "object", "properties": {
                        "group_id": {"type": "string"}, "protocol_type": {"type": "string"},
                        "state": {"type": "string"}, "coordinator": {"type": "integer"}}}},
                    "loading": {"type": "array", "items": {"type": "integer"},
                                "description": "brokers still loading some of their groups"}}})}}},
        "/api/groups/{group}": {"get": {
            "operationId": "group", "summary": "One group: state, members, assignments, committed offsets, lag.",
            "parameters": [{"name": "group", "in": "path", "required": True, "schema": {"type": "string"}}],
            "responses": {"200": _json_ok("the group", {
                "type": "object", "required": ["group_id", "state", "members", "offsets"], "properties": {
                    "group_id": {"type": "string"}, "coordinator": {"type": "integer"},
                    "state": {"type": "string"}, "protocol_type": {"type": "string"},
                    "protocol": {"type": "string"}, "lag": {"type": "integer"},
                    "members": {"type": "array", "items": _OBJECT},
                    "offsets": {"type": "array", "items": {"type": "object", "properties": {
                        "topic": {"type": "string"}, "partition": {"type": "integer"},
                        "current_offset": {"type": "integer"}, "log_end_offset": _NULLABLE_INT,
                        "lag": _NULLABLE_INT}}}}}),
                **_errors(404, 503)}}},
        "/api/brokers/{broker}/metadata": {"get": {
            "operationId": "brokerMetadata",
            "summary": "Whether the broker answers Metadata from a frozen copy, and the epochs it answers.",
            "parameters": [_BROKER_PATH],
            "responses": {"200": _METADATA_STATE, **_errors(400, 404)}}},
        "/api/brokers/{broker}/metadata/freeze": {"post": {
            "operationId": "freezeMetadata", "security": _MUTATING,
            "summary": "Stale metadata: the broker answers Metadata from its cache as it is now, "
                       "epochs included, until thawed, while the cluster moves on.",
            "parameters": [_BROKER_PATH],
            "responses": {"200": _METADATA_STATE, **_errors(400, 401, 404)}}},
        "/api/brokers/{broker}/metadata/thaw": {"post": {
            "operationId": "thawMetadata", "security": _MUTATING,
            "summary": "The broker answers Metadata from its current cache again.",
            "parameters": [_BROKER_PATH],
            "responses": {"200": _METADATA_STATE, **_errors(400, 401, 404)}}},
        **{f"/api/brokers/{{broker}}/{action}": {"post": {
            "operationId": "broker" + action.title().replace("-", ""), "security": _MUTATING,
            "summary": _BROKER_OP_SUMMARY[action], "parameters": [_BROKER_PATH],
            "responses": {"200": _json_ok(f"the broker is {then}", {"type": "object", "properties": {
                "broker": {"type": "integer"}, "action": {"type": "string"}, "state": {"type": "string"},
                "seconds": {"type": "number"}}}), **_errors(400, 401, 404, 409)}}}
            for action, _want, then in BROKER_OPS},
        "/metrics": {"get": {
            "operationId": "metrics", "summary": "Prometheus text format.",
            "responses": {"200": {"description": "the metrics",
                                  "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
    },
}


class RecordingsCollector:
    """prometheus-client collector over the brokers' recordings, read at each scrape."""

    def __init__(self, source: BrokersSource, faults: FaultTable | None = None) -> None:
        self.source = source
        self.faults = faults

    def collect(self) -> Iterator[CounterMetricFamily]:
        labels = ["broker", "client_id", "software_name", "api"]
        # Kafka's kafka.network:type=RequestMetrics,name=RequestsPerSec,request=X as the JMX
        # exporter's common rules name it, with refka's per-client labels.
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "Requests answered, per client and API.", labels=labels)
        req_bytes = CounterMetricFamily("kafka_network_requestmetrics_request_bytes",
                                        "Request bytes (frames), per client and API.", labels=labels)
        resp_bytes = CounterMetricFamily("kafka_network_requestmetrics_response_bytes",
                                         "Response bytes (frames), per client and API.", labels=labels)
        mlabels = ["broker", "client_id", "software_name"]
        named = CounterMetricFamily("refka_metadata_topics_named",
                                    "Topics named in Metadata requests (KIP-526), per client.", labels=mlabels)
        every = CounterMetricFamily("refka_metadata_all_topics_requests",
                                    "Metadata requests for all topics, per client.", labels=mlabels)
        for served in self.source():
            b = served.recordings
            bid = str(b.broker_id)
            for (client_id, software, key), (n, rq, rs) in sorted(b.request_counts().items()):
                lv = [bid, client_id, software, api_name(key)]
                requests.add_metric(lv, n)
                req_bytes.add_metric(lv, rq)
                resp_bytes.add_metric(lv, rs)
            for (client_id, software), (topics, alls) in sorted(b.metadata_counts().items()):
                named.add_metric([bid, client_id, software], topics)
                every.add_metric([bid, client_id, software], alls)
        unserved = CounterMetricFamily(
            "refka_unserved_requests", "Requests refused because refka does not serve the feature "
            "(an API or version, a transactional id), per client and reason.",
            labels=["broker", "client_id", "software_name", "reason"])
        for served in self.source():
            for (client_id, software, reason), n in sorted(served.recordings.unserved.items()):
                unserved.add_metric([str(served.node_id), client_id, software, reason], n)
        yield from (requests, req_bytes, resp_bytes, named, every, unserved)
        yield from self.broker_metrics()

    def broker_metrics(self) -> Iterator[Any]:
        """Kafka's broker metrics under the JMX exporter's names (broker_metrics.py)."""
        def counter(name: str, doc: str, labels: list[str]) -> CounterMetricFamily:
            return CounterMetricFamily(name, doc, labels=labels)

        def gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=labels)

        bt = ["broker", "topic"]
        messages_in = counter("kafka_server_brokertopicmetrics_messagesin", "Records appended (Produce).", bt)
        bytes_in = counter("kafka_server_brokertopicmetrics_bytesin", "Record batch bytes appended (Produce).", bt)
        bytes_out = counter("kafka_server_brokertopicmetrics_bytesout", "Record bytes read by consumers (Fetch).", bt)
        repl_out = counter("kafka_server_brokertopicmetrics_replicationbytesout",
                           "Record bytes read by followers (Fetch).", bt)
        shrinks = counter("kafka_server_replicamanager_isrshrinks", "ISR shrinks written by this leader.",
                          ["broker"])
        expands = counter("kafka_server_replicamanager_isrexpands", "ISR expansions written by this leader.",
                          ["broker"])
        leaders = gauge("kafka_server_replicamanager_leadercount", "Partitions this broker leads.", ["broker"])
        parts = gauge("kafka_server_replicamanager_partitioncount", "Partitions hosted here.", ["broker"])
        urp = gauge("kafka_server_replicamanager_underreplicatedpartitions",
                    "Partitions led here whose ISR is smaller than their replicas.", ["broker"])
        urp_each = gauge("kafka_cluster_partition_underreplicated",
                         "1 for each partition led here whose ISR is smaller than its replicas (only those).",
                         ["broker", "topic", "partition"])
        active = gauge("kafka_controller_kafkacontroller_activecontrollercount",
                       "1 on the broker that is the active controller.", ["broker"])
        offline = gauge("kafka_controller_kafkacontroller_offlinepartitionscount",
                        "Partitions without a leader (reported by the active controller).", ["broker"])
        latency = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems",
                                        "Request time (ms) from the frame read to the answer written or queued.",
                                        labels=["broker", "api"])
        for served in self.source():
            if served.metrics is None:
                continue
            m = served.metrics()
            b = str(served.node_id)
            for topic, (n_in, b_in, b_out, r_out) in sorted(m.topics.items()):
                messages_in.add_metric([b, topic], n_in)
                bytes_in.add_metric([b, topic], b_in)
                bytes_out.add_metric([b, topic], b_out)
                repl_out.add_metric([b, topic], r_out)
            shrinks.add_metric([b], m.isr_shrinks)
            expands.add_metric([b], m.isr_expands)
            leaders.add_metric([b], m.leader_count)
            parts.add_metric([b], m.partition_count)
            urp.add_metric([b], len(m.under_replicated))
            for topic, index in m.under_replicated:
                urp_each.add_metric([b, topic, str(index)], 1)
            active.add_metric([b], m.active_controller)
            offline.add_metric([b], m.offline_partitions)
            for key, h in sorted(m.latency.items()):
                cumulative, buckets = 0.0, []
                for bound, n in zip((*LATENCY_BUCKETS_MS, float("inf")), h[:-2], strict=True):
                    cumulative += n
                    buckets.append(("+Inf" if bound == float("inf") else str(bound), cumulative))
                latency.add_metric([b, api_name(key)], buckets, h[-2])
        yield from (messages_in, bytes_in, bytes_out, repl_out, shrinks, expands, leaders, parts, urp, urp_each,
                    active, offline, latency)
        if self.faults is not None:
            fired = CounterMetricFamily("refka_faults_fired", "Injected faults fired, per kind.", labels=["kind"])
            for kind, n in self.faults.fired_by_kind.items():
                fired.add_metric([kind], n)
            installed = GaugeMetricFamily("refka_faults_installed", "Faults installed now.")
            installed.add_metric([], len(self.faults.live()))
            yield from (fired, installed)


def _refuse(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _broker(raw: str, brokers: list[ServedBroker]) -> ServedBroker:
    try:
        wanted = int(raw)
    except ValueError:
        raise _Refused(400, f"broker must be a broker id (an integer), got {raw!r}") from None
    for b in brokers:
        if b.node_id == wanted:
            return b
    served = ", ".join(str(b.node_id) for b in brokers) or "none"
    raise _Refused(404, f"broker {wanted} is not served by this process (served: {served})")


def _recordings(request: web.Request, source: BrokersSource) -> list[BrokerRecordings]:
    brokers = source()
    raw = request.query.get("broker")
    if raw is None:
        return [b.recordings for b in brokers]
    return [_broker(raw, brokers).recordings]


def metadata_state(b: ServedBroker) -> dict[str, Any]:
    """The GET /api/brokers/{broker}/metadata answer."""
    cache = b.metadata

    def epochs(view: Any) -> dict[str, int]:
        return {"controller_id": view.controller_id, "controller_epoch": view.controller_epoch,
                "controller_metadata_epoch": view.controller_metadata_epoch, "topics": len(view.topics)}

    frozen = cache.frozen
    return {"broker": b.node_id, "frozen": frozen is not None,
            "frozen_at_ms": frozen.frozen_at_ms if frozen is not None else None,
            "answering": epochs(cache.answering()), "current": epochs(cache)}


def _limit(request: web.Request) -> int | None:
    raw = request.query.get("limit")
    if raw is None:
        return None
    try:
        n = int(raw)
    except ValueError:
        raise _Refused(400, f"limit must be an integer, got {raw!r}") from None
    if not 1 <= n <= MAX_LIMIT:
        raise _Refused(400, f"limit must be between 1 and {MAX_LIMIT}, got {n}")
    return n


def _token_check(token: str | None) -> Any:
    """A middleware refusing a call that changes something (any method but GET) without
    ``Authorization: Bearer <token>``, when a token is set (``--admin-token``)."""

    @web.middleware
    async def check(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
        if token is not None and request.method not in ("GET", "HEAD", "OPTIONS"):
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                resp = _refuse(401, "this call changes the cluster: it needs 'Authorization: Bearer <token>' "
                                    "(refka serve --admin-token)")
                resp.headers["WWW-Authenticate"] = 'Bearer realm="refka admin"'
                return resp
        return await handler(request)  # type: ignore[no-any-return]

    return check


@web.middleware
async def _json_errors(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    """Refusals and aiohttp's own 4xx (unknown path, wrong method) as JSON errors."""
    try:
        return await handler(request)
    except _Refused as e:
        return _refuse(e.status, e.message)
    except ViewError as e:
        return _refuse(e.status, str(e))
    except web.HTTPException as e:
        if e.status < 400:
            raise
        resp = _refuse(e.status, e.reason)
        for name, value in e.headers.items():  # Allow, on a 405 (RFC 9110)
            if name.lower() not in ("content-type", "content-length"):
                resp.headers[name] = value
        return resp


async def _event_stream(request: web.Request,
                        rows: Callable[[], list[tuple[str | None, dict[str, Any]]]]) -> web.StreamResponse:
    """Server-sent events of what ``rows()`` gives (an optional event id and a JSON object each),
    asked every 100 ms, until the client goes: its connection closing ends the loop at once (a
    stream left open would hold the server's shutdown back), and a comment every 15 s of quiet
    finds a client that went without closing (the write fails)."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    idle = 0.0
    while request.transport is not None and not request.transport.is_closing():
        batch = rows()
        if batch:
            await resp.write("".join((f"id: {i}\n" if i is not None else "")
                                     + f"data: {json.dumps(r, separators=(',', ':'))}\n\n"
                                     for i, r in batch).encode())
            idle = 0.0
        elif idle >= 15.0:
            await resp.write(b": keep-alive\n\n")
            idle = 0.0
        await asyncio.sleep(0.1)
        idle += 0.1
    return resp


def make_app(source: BrokersSource, token: str | None = None, control: BrokerControl | None = None,
             faults: FaultTable | None = None) -> web.Application:
    """The admin app over the brokers ``source()`` returns (this process's); with ``token``
    every call but a GET needs it as a bearer token; ``control`` stops and starts them (no
    broker operations without it)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RecordingsCollector(source, faults))
    dashboard_page = resources.files(__package__).joinpath("dashboard.html").read_text(encoding="utf-8")

    async def dashboard(request: web.Request) -> web.Response:
        return web.Response(text=dashboard_page, content_type="text/html")

    async def openapi(request: web.Request) -> web.Response:
        return web.json_response(OPENAPI)

    async def connections(request: web.Request) -> web.Response:
        out: list[dict[str, Any]] = []
        for b in _recordings(request, source):
            out.extend(r.describe() for r in sorted(b.open, key=lambda r: r.opened_ms))
        return web.json_response({"connections": out})

    async def recordings(request: web.Request) -> web.Response:
        brokers = _recordings(request, source)
        limit = _limit(request)
        rows = list(recording.entries(brokers, request.query.get("client_id")))
        if limit is not None:
            rows = rows[-limit:]
        body = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows)
        return web.Response(text=body, content_type=NDJSON)

    def view_broker(request: web.Request) -> tuple[ServedBroker, list[ServedBroker]]:
        brokers = source()
        raw = request.query.get("broker")
        if raw is not None:
            return _broker(raw, brokers), brokers
        if not brokers:
            raise _Refused(404, "this process serves no broker right now")
        return min(brokers, key=lambda b: b.node_id), brokers

    async def cluster(request: web.Request) -> web.Response:
        b, brokers = view_broker(request)
        return web.json_response(admin_views.cluster_view(b.node_id, b.metadata, (x.node_id for x in brokers)))

    async def topics(request: web.Request) -> web.Response:
        b, _ = view_broker(request)
        return web.json_response({"topics": admin_views.topics_view(b.metadata)})

    async def topic(request: web.Request) -> web.Response:
        b, brokers = view_broker(request)
        name = request.match_info["topic"]
        view = admin_views.topic_view(b.metadata, name, lookups(brokers))
        if view is None:
            raise _Refused(404, f"broker {b.node_id} does not know topic {name!r}")
        return web.json_response(view)

    async def groups(request: web.Request) -> web.Response:
        return web.json_response(admin_views.groups_view(source()))

    async def group(request: web.Request) -> web.Response:
        return web.json_response(admin_views.find_group(request.match_info["group"], source()))

    async def body(request: web.Request, required: bool = True) -> dict[str, Any]:
        if not request.can_read_body:
            if required:
                raise _Refused(400, "a JSON object body is needed")
            return {}
        try:
            data = await request.json()
        except ValueError:
            raise _Refused(400, "the body is not JSON") from None
        if not isinstance(data, dict):
            raise _Refused(400, "the body must be a JSON object")
        return data

    def as_int32(v: Any) -> int | None:
        """``v`` as Kafka's INT32 (JSON's 3.0 is an integer too), or None."""
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        return v if type(v) is int and -(2**31) <= v < 2**31 else None

    def int_of(data: dict[str, Any], key: str) -> int:
        v = as_int32(data.get(key))
        if v is None:
            raise _Refused(400, f"{key!r} must be an integer (INT32), got {data.get(key)!r}")
        return v

    async def operation(coro: Any) -> web.Response:
        try:
            return web.json_response(await coro)
        except admin_ops.OperationError as e:
            out = {"error": str(e)}
            if e.code is not None:
                out["code"] = e.code.name
            return web.json_response(out, status=e.status)

    async def move_leader(request: web.Request) -> web.Response:
        b, _ = view_broker(request)
        try:
            partition = int(request.match_info["partition"])
        except ValueError:
            raise _Refused(400, f"partition must be an integer, got {request.match_info['partition']!r}") from None
        broker = int_of(await body(request), "broker")
        return await operation(admin_ops.move_leader(b.metadata, request.match_info["topic"], partition, broker))

    async def elect_preferred(request: web.Request) -> web.Response:
        b, _ = view_broker(request)
        data = await body(request, required=False)
        raw = data.get("partitions")
        parts: list[int] | None = None
        if raw is not None:
            ints = [as_int32(p) for p in raw] if isinstance(raw, list) else [None]
            parts = [p for p in ints if p is not None]
            if len(parts) != len(ints):
                raise _Refused(400, f"'partitions' must be a list of integers, got {raw!r}")

        async def go() -> dict[str, Any]:
            results = await admin_ops.elect_preferred(b.metadata, request.match_info["topic"], parts)
            return {"results": {str(p): r for p, r in sorted(results.items())}}
        return await operation(go())

    async def reassign(request: web.Request) -> web.Response:
        b, _ = view_broker(request)
        raw = (await body(request)).get("assignments")
        if not isinstance(raw, dict) or not raw:
            raise _Refused(400, "'assignments' must be an object of partition -> replica ids")
        assignment: dict[int, list[int]] = {}
        for k, v in raw.items():
            ints = [as_int32(r) for r in v] if isinstance(v, list) else []
            ids = [r for r in ints if r is not None]
            if not (str(k).isascii() and str(k).isdigit()) or len(str(k)) > 9 or not ids or len(ids) != len(ints):
                raise _Refused(400, f"assignment {k!r}: {v!r} is not a partition and a list of broker ids")
            assignment[int(k)] = ids

        async def go() -> dict[str, Any]:
            await admin_ops.reassign(b.metadata, request.match_info["topic"], assignment)
            return {"topic": request.match_info["topic"], "assignments": {str(p): r for p, r in assignment.items()}}
        return await operation(go())

    async def partition_count(request: web.Request) -> web.Response:
        b, _ = view_broker(request)
        count = int_of(await body(request), "count")
        return await operation(admin_ops.set_partition_count(b.metadata, request.match_info["topic"], count))

    def controlled(request: web.Request, want: str) -> int:
        """The broker id of the path, this process's and in state ``want`` (else 404 / 409)."""
        raw = request.match_info["broker"]
        try:
            node_id = int(raw)
        except ValueError:
            raise _Refused(400, f"broker must be a broker id (an integer), got {raw!r}") from None
        state = control.control_state(node_id) if control is not None else None
        if state is None:
            served = ", ".join(str(b.node_id) for b in source()) or "none"
            raise _Refused(404, f"broker {node_id} is not one of this process's (running: {served})")
        if state != want:
            raise _Refused(409, f"broker {node_id} is {state}")
        return node_id

    def broker_op(action: str, want: str, then: str) -> Callable[[web.Request], Any]:
        async def op(request: web.Request) -> web.Response:
            node_id = controlled(request, want)
            assert control is not None
            t0 = time.monotonic()
            if action == "stop":
                await control.control_stop(node_id, kill=False)
            elif action == "kill":
                await control.control_stop(node_id, kill=True)
            elif action == "start":
                await control.control_start(node_id)
            else:
                await control.control_expire_session(node_id)
            return web.json_response({"broker": node_id, "action": action, "state": then,
                                      "seconds": round(time.monotonic() - t0, 3)})
        return op

    def since_of(request: web.Request) -> int:
        raw = request.query.get("since", "0")
        try:
            since = int(raw)
        except ValueError:
            raise _Refused(400, f"since must be an integer, got {raw!r}") from None
        if since < 0:
            raise _Refused(400, f"since must be >= 0, got {since}")
        return since

    def events_after(b: ServedBroker, since: int) -> list[dict[str, Any]]:
        tl = b.metadata.timeline
        if not tl or tl[-1]["seq"] <= since:
            return []
        return [{**e, "broker": b.node_id} for e in tl if e["seq"] > since]

    async def timeline(request: web.Request) -> web.Response:
        b, _ = view_broker(request)
        since, limit = since_of(request), _limit(request)
        rows = events_after(b, since)
        if limit is not None:
            rows = rows[-limit:]
        body = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows)
        return web.Response(text=body, content_type=NDJSON)

    async def timeline_stream(request: web.Request) -> web.StreamResponse:
        b, _ = view_broker(request)
        since = since_of(request)

        def rows() -> list[tuple[str | None, dict[str, Any]]]:
            nonlocal since
            out = events_after(b, since)
            if out:
                since = out[-1]["seq"]
            return [(str(r["seq"]), r) for r in out]
        return await _event_stream(request, rows)

    async def recordings_stream(request: web.Request) -> web.StreamResponse:
        cursor = recording.RecordingCursor(_recordings(request, source), request.query.get("client_id"))
        missed = 0

        def rows() -> list[tuple[str | None, dict[str, Any]]]:
            nonlocal missed
            out: list[tuple[str | None, dict[str, Any]]] = [
                (None, r) for r in cursor.new(_recordings(request, source))]
            if cursor.missed > missed:  # the reader fell a ring's length behind: said, not hidden
                out.append((None, {"type": "missed", "entries": cursor.missed - missed}))
                missed = cursor.missed
            return out
        return await _event_stream(request, rows)

    def fault_table() -> FaultTable:
        if faults is None:
            raise _Refused(404, "fault injection is not available here")
        return faults

    async def list_faults(request: web.Request) -> web.Response:
        table = fault_table()
        return web.json_response({"faults": [f.describe() for f in table.live()],
                                  "fired_by_kind": dict(table.fired_by_kind)})

    async def add_fault(request: web.Request) -> web.Response:
        table = fault_table()
        spec = await body(request)
        try:
            f = table.add(spec, {b.node_id for b in source()})
        except FaultError as e:
            raise _Refused(e.status, str(e)) from None
        return web.json_response(f.describe(), status=201)

    async def remove_fault(request: web.Request) -> web.Response:
        table = fault_table()
        raw = request.match_info["fault"]
        try:
            fault_id = int(raw)
        except ValueError:
            raise _Refused(400, f"a fault id is an integer, got {raw!r}") from None
        f = table.remove(fault_id)
        if f is None:
            raise _Refused(404, f"no fault {fault_id} (it may have expired or fired its count)")
        return web.json_response(f.describe())

    async def clear_faults(request: web.Request) -> web.Response:
        return web.json_response({"removed": fault_table().clear()})

    async def broker_metadata(request: web.Request) -> web.Response:
        return web.json_response(metadata_state(_broker(request.match_info["broker"], source())))

    async def freeze_metadata(request: web.Request) -> web.Response:
        b = _broker(request.match_info["broker"], source())
        b.metadata.freeze(time.time() * 1000)
        return web.json_response(metadata_state(b))

    async def thaw_metadata(request: web.Request) -> web.Response:
        b = _broker(request.match_info["broker"], source())
        b.metadata.thaw()
        return web.json_response(metadata_state(b))

    async def metrics(request: web.Request) -> web.Response:
        resp = web.Response(body=generate_latest(registry))
        resp.content_type = "text/plain"
        resp.charset = "utf-8"
        return resp

    app = web.Application(middlewares=[_json_errors, _token_check(token)])
    app.router.add_get("/", dashboard, allow_head=False)
    app.router.add_get("/api/openapi.json", openapi, allow_head=False)
    app.router.add_get("/api/connections", connections, allow_head=False)
    app.router.add_get("/api/recordings", recordings, allow_head=False)
    app.router.add_get("/api/recordings/stream", recordings_stream, allow_head=False)
    app.router.add_get("/api/cluster", cluster, allow_head=False)
    app.router.add_get("/api/topics", topics, allow_head=False)
    app.router.add_get("/api/topics/{topic}", topic, allow_head=False)
    app.router.add_post("/api/topics/{topic}/partitions/{partition}/leader", move_leader)
    app.router.add_post("/api/topics/{topic}/elect-preferred", elect_preferred)
    app.router.add_post("/api/topics/{topic}/reassign", reassign)
    app.router.add_post("/api/topics/{topic}/partition-count", partition_count)
    app.router.add_get("/api/faults", list_faults, allow_head=False)
    app.router.add_post("/api/faults", add_fault)
    app.router.add_delete("/api/faults", clear_faults)
    app.router.add_delete("/api/faults/{fault}", remove_fault)
    app.router.add_get("/api/timeline", timeline, allow_head=False)
    app.router.add_get("/api/timeline/stream", timeline_stream, allow_head=False)
    app.router.add_get("/api/groups", groups, allow_head=False)
    app.router.add_get("/api/groups/{group}", group, allow_head=False)
    app.router.add_get("/api/brokers/{broker}/metadata", broker_metadata, allow_head=False)
    for action, want, then in BROKER_OPS:
        app.router.add_post(f"/api/brokers/{{broker}}/{action}", broker_op(action, want, then))
    app.router.add_post("/api/brokers/{broker}/metadata/freeze", freeze_metadata)
    app.router.add_post("/api/brokers/{broker}/metadata/thaw", thaw_metadata)
    app.router.add_get("/metrics", metrics, allow_head=False)
    return app


async def start(source: BrokersSource, host: str, port: int, *, token: str | None = None,
                control: BrokerControl | None = None, faults: FaultTable | None = None) -> web.AppRunner:
    """Serves the admin app on host:port until the runner's ``cleanup()``."""
    runner = web.AppRunner(make_app(source, token, control, faults), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
