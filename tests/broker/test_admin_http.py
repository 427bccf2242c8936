"""broker/admin_http.py: each endpoint over known recordings, its refusals (4xx with a JSON
error, never a 500), the OpenAPI document against the routes the app serves, and the
metrics page read back with prometheus-client's parser."""

from __future__ import annotations

import json

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from refka.broker.admin_http import NDJSON, OPENAPI, ServedBroker, make_app
from refka.broker.metadata_cache import MetadataCache, PartitionMeta, TopicMeta
from refka.broker.recording import ALL_TOPICS, BrokerRecordings
from refka.protocol.messages.metadata import Metadata
from refka.protocol.messages.produce import Produce


def known_traffic() -> list[BrokerRecordings]:
    """Broker 0: an open kafka-python connection (2 Metadata, 3 Produce) and a closed one
    of client "gone" (1 Metadata for all topics); broker 1: one open connection of "other"."""
    b0, b1 = BrokerRecordings(0), BrokerRecordings(1)
    gone = b0.opened("PLAINTEXT", "127.0.0.1:1000")
    gone.add(Metadata, 12, 1, "gone", ALL_TOPICS, 30, None, 100, received=0.0, now=0.0)
    b0.closed_connection(gone)
    app = b0.opened("PLAINTEXT", "127.0.0.1:1001")
    app.software_name, app.software_version = "kafka-python", "3.0.12"
    app.add(Metadata, 12, 1, "app", ["a", "b"], 40, None, 200, received=0.0, now=0.0)
    app.add(Metadata, 12, 2, "app", ["a"], 35, None, 150, received=0.0, now=0.0)
    for corr in range(3, 6):
        app.add(Produce, 9, corr, "app", None, 1000, None, 50, received=0.0, now=0.0)
    other = b1.opened("PLAINTEXT", "127.0.0.1:1002")
    other.add(Produce, 9, 1, "other", None, 10, None, 5, received=0.0, now=0.0)
    return [b0, b1]


def served() -> list[ServedBroker]:
    """known_traffic's brokers, each with a metadata cache of one topic from controller 0."""
    out = []
    for rec in known_traffic():
        cache = MetadataCache("c")
        cache.controller_id, cache.controller_epoch, cache.controller_metadata_epoch = 0, 3, 7
        cache.put_topic(TopicMeta("a", b"\x01" * 16, {0: PartitionMeta(0, 0, 1, [0], [0])}))
        out.append(ServedBroker(rec.broker_id, rec, cache))
    return out


@pytest.fixture
async def client():
    brokers = served()
    async with TestClient(TestServer(make_app(lambda: brokers))) as c:
        c.served = brokers
        yield c


async def test_the_openapi_document_describes_exactly_the_routes_served(client):
    resp = await client.get("/api/openapi.json")
    assert resp.status == 200
    doc = json.loads(await resp.text())
    assert doc == OPENAPI and doc["openapi"].startswith("3.")
    served = {(r.method.lower(), r.resource.canonical) for r in client.app.router.routes()}
    documented = {(m, p) for p, ops in doc["paths"].items() for m in ops}
    assert served == documented
    for p, ops in doc["paths"].items():
        for op in ops.values():
            assert "200" in op["responses"], p


async def test_connections_lists_the_open_ones_with_identity_and_counts_per_api(client):
    resp = await client.get("/api/connections")
    assert resp.status == 200
    conns = (await resp.json())["connections"]
    assert {c["client_id"] for c in conns} == {"app", "other"}  # "gone" is closed
    app = next(c for c in conns if c["client_id"] == "app")
    assert app["requests"] == {"Metadata": 2, "Produce": 3} and app["requests_total"] == 5
    assert (app["software_name"], app["software_version"], app["peer"], app["broker"]) == (
        "kafka-python", "3.0.12", "127.0.0.1:1001", 0)
    one = (await (await client.get("/api/connections", params={"broker": "1"})).json())["connections"]
    assert [c["client_id"] for c in one] == ["other"]


async def test_recordings_are_json_lines_newest_last_with_closed_connections(client):
    resp = await client.get("/api/recordings", params={"broker": "0"})
    assert resp.status == 200 and resp.content_type == NDJSON
    rows = [json.loads(line) for line in (await resp.text()).splitlines()]
    assert [r["client_id"] for r in rows] == ["gone"] + ["app"] * 5
    assert rows[0]["topics"] == "all" and rows[1]["topics"] == ["a", "b"]
    assert [r["time_ms"] for r in rows] == sorted(r["time_ms"] for r in rows)
    last = await client.get("/api/recordings", params={"client_id": "app", "limit": "2"})
    assert [json.loads(x)["correlation_id"] for x in (await last.text()).splitlines()] == [4, 5]
    every = await client.get("/api/recordings")
    assert {json.loads(x)["client_id"] for x in (await every.text()).splitlines()} == {"gone", "app", "other"}


@pytest.mark.parametrize(("path", "params", "status"), [
    ("/api/recordings", {"broker": "9"}, 404),
    ("/api/recordings", {"broker": "zero"}, 400),
    ("/api/recordings", {"limit": "0"}, 400),
    ("/api/recordings", {"limit": "-3"}, 400),
    ("/api/recordings", {"limit": "many"}, 400),
    ("/api/recordings", {"limit": str(10**12)}, 400),
    ("/api/connections", {"broker": "9"}, 404),
    ("/api/connections", {"broker": "1.5"}, 400),
    ("/api/nothing-here", {}, 404),
    ("/api/brokers/9/metadata", {}, 404),
    ("/api/brokers/x/metadata", {}, 400),
])
async def test_bad_input_is_a_4xx_with_a_json_error(client, path, params, status):
    resp = await client.get(path, params=params)
    assert resp.status == status
    body = await resp.json()
    assert set(body) == {"error"} and body["error"]


async def test_freeze_keeps_what_metadata_answers_until_thaw_and_the_state_says_so(client):
    state = await (await client.get("/api/brokers/1/metadata")).json()
    assert state["frozen"] is False and state["frozen_at_ms"] is None
    assert state["answering"] == state["current"] == {
        "controller_id": 0, "controller_epoch": 3, "controller_metadata_epoch": 7, "topics": 1}
    resp = await client.post("/api/brokers/1/metadata/freeze")
    assert resp.status == 200
    frozen = await resp.json()
    assert frozen["frozen"] is True and frozen["frozen_at_ms"] > 0
    cache = next(b.metadata for b in client.served if b.node_id == 1)
    cache.controller_id, cache.controller_epoch, cache.controller_metadata_epoch = 2, 4, 1  # the cluster moves on
    cache.remove_topic("a")
    again = await (await client.post("/api/brokers/1/metadata/freeze")).json()
    assert again["frozen_at_ms"] == frozen["frozen_at_ms"]  # the first copy stays
    assert again["answering"]["controller_epoch"] == 3 and again["answering"]["topics"] == 1
    assert again["current"] == {"controller_id": 2, "controller_epoch": 4, "controller_metadata_epoch": 1,
                                "topics": 0}
    other = await (await client.get("/api/brokers/0/metadata")).json()
    assert other["frozen"] is False  # only broker 1
    thawed = await (await client.post("/api/brokers/1/metadata/thaw")).json()
    assert thawed["frozen"] is False and thawed["answering"] == thawed["current"]
    missing = await client.post("/api/brokers/5/metadata/freeze")
    assert missing.status == 404 and "served: 0, 1" in (await missing.json())["error"]


async def test_a_wrong_method_is_a_405_with_a_json_error_and_the_allowed_methods(client):
    resp = await client.post("/api/recordings")
    assert resp.status == 405 and "error" in await resp.json()
    assert resp.headers["Allow"] == "GET"


async def test_metrics_count_the_known_traffic_per_client_and_api(client):
    resp = await client.get("/metrics")
    assert resp.status == 200
    samples = {}
    for family in text_string_to_metric_families(await resp.text()):
        for s in family.samples:
            if s.name.endswith("_total"):
                samples[(s.name, tuple(sorted(s.labels.items())))] = s.value

    def get(name, broker, client_id, software, api=None):
        labels = {"broker": str(broker), "client_id": client_id, "software_name": software}
        if api is not None:
            labels["api"] = api
        return samples.get((name, tuple(sorted(labels.items()))))

    req = "kafka_network_requestmetrics_requests_total"
    assert get(req, 0, "app", "kafka-python", "Produce") == 3
    assert get(req, 0, "app", "kafka-python", "Metadata") == 2
    assert get(req, 0, "gone", "", "Metadata") == 1  # a closed connection still counts
    assert get(req, 1, "other", "", "Produce") == 1
    assert get("kafka_network_requestmetrics_request_bytes_total", 0, "app", "kafka-python", "Produce") == 3000
    assert get("kafka_network_requestmetrics_response_bytes_total", 0, "app", "kafka-python", "Metadata") == 350
    assert get("refka_metadata_topics_named_total", 0, "app", "kafka-python") == 3
    assert get("refka_metadata_all_topics_requests_total", 0, "gone", "") == 1
