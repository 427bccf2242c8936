"""broker/admin_http.py: each endpoint over known recordings, its refusals (4xx with a JSON
error, never a 500), the OpenAPI document against the routes the app serves, and the
metrics page read back with prometheus-client's parser."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from refka.broker.admin_http import NDJSON, OPENAPI, ServedBroker, make_app
from refka.broker.group.metadata import GroupSummary, MemberSummary
from refka.broker.group.offsets import CommittedOffset
from refka.broker.metadata_cache import BrokerMeta, MetadataCache, PartitionMeta, TopicMeta
from refka.broker.recording import ALL_TOPICS, BrokerRecordings
from refka.protocol import ErrorCode
from refka.protocol.consumer_protocol import Assignment
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


class FakeCoordinator:
    """Broker 0 coordinates group g1 (Stable, one member assigned a-0, a-1; a-0 committed at 5)
    and an Empty g0; broker 1's coordinator is still loading."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id

    def list_groups(self):
        if self.node_id == 1:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        return ErrorCode.NONE, [("g1", "consumer", "Stable"), ("g0", "consumer", "Empty")]

    def describe_group(self, group_id):
        if self.node_id != 0:
            return ErrorCode.NOT_COORDINATOR, GroupSummary("Dead", "", "", [])
        if group_id != "g1":
            return ErrorCode.NONE, GroupSummary("Dead", "", "", [])
        member = MemberSummary("m-1", None, "app", "/127.0.0.1", b"", Assignment({"a": [1, 0]}).encode())
        return ErrorCode.NONE, GroupSummary("Stable", "consumer", "range", [member])

    def fetch_offsets(self, group_id, partitions):
        return ErrorCode.NONE, [(("a", 0), CommittedOffset(5, leader_epoch=1, topic_epoch=2)), (("a", 1), None)]


def served() -> list[ServedBroker]:
    """known_traffic's brokers, each with a metadata cache of one topic "a" (partition 0 led by
    broker 0, partition 1 by broker 1) from controller 0; broker 0 hosts a-0 (log 2..10, high
    watermark 8), broker 1 nothing."""
    out = []
    for rec in known_traffic():
        cache = MetadataCache("c")
        cache.set_brokers({0: BrokerMeta(0, {"PLAINTEXT": ("h0", 9092)}, "r0"),
                           1: BrokerMeta(1, {"PLAINTEXT": ("h1", 9093)}, "r1")})
        cache.controller_id, cache.controller_epoch, cache.controller_metadata_epoch = 0, 3, 7
        cache.put_topic(TopicMeta("a", b"\x01" * 16, {0: PartitionMeta(0, 0, 1, [0], [0]),
                                                       1: PartitionMeta(1, 1, 4, [1, 0], [1])},
                                  initial_partition_count=2, undeleted_partition_count=2, topic_epoch=2))
        hosted = {("a", 0): SimpleNamespace(log_start_offset=2, log_end_offset=10, high_watermark=8)} \
            if rec.broker_id == 0 else {}
        out.append(ServedBroker(rec.broker_id, rec, cache, lambda t, i, h=hosted: h.get((t, i)),
                                FakeCoordinator(rec.broker_id)))
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
            assert "200" in op["responses"] or "201" in op["responses"], p


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
    ("/api/cluster", {"broker": "7"}, 404),
    ("/api/topics", {"broker": "x"}, 400),
    ("/api/topics/nope", {}, 404),
    ("/api/groups/nope", {}, 404),
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


async def test_cluster_names_the_brokers_racks_endpoints_and_the_controller_epochs(client):
    c = await (await client.get("/api/cluster")).json()
    assert c["view_of_broker"] == 0 and c["cluster_id"] == "c"
    assert c["controller"] == {"id": 0, "epoch": 3, "metadata_epoch": 7}
    assert c["brokers"] == [
        {"id": 0, "rack": "r0", "served_here": True, "endpoints": {"PLAINTEXT": "h0:9092"}},
        {"id": 1, "rack": "r1", "served_here": True, "endpoints": {"PLAINTEXT": "h1:9093"}}]
    assert (c["topics"], c["partitions"]) == (1, 2)
    assert (await (await client.get("/api/cluster", params={"broker": "1"})).json())["view_of_broker"] == 1


async def test_topics_and_a_topics_partitions_with_offsets_from_a_hosted_replica(client):
    listed = (await (await client.get("/api/topics")).json())["topics"]
    assert listed == [{"name": "a", "topic_id": "01010101-0101-0101-0101-010101010101", "topic_epoch": 2,
                       "internal": False, "partitions": 2, "initial_partition_count": 2,
                       "undeleted_partition_count": 2}]
    t = await (await client.get("/api/topics/a")).json()
    p0, p1 = t["partitions"]
    assert (p0["leader"], p0["leader_epoch"], p0["replicas"], p0["isr"]) == (0, 1, [0], [0])
    assert (p0["log_start_offset"], p0["log_end_offset"], p0["high_watermark"], p0["offsets_from"]) == (2, 10, 8, 0)
    assert (p1["leader"], p1["leader_epoch"], p1["replicas"], p1["isr"]) == (1, 4, [1, 0], [1])
    assert (p1["high_watermark"], p1["offsets_from"], p1["marked_for_deletion"]) == (None, None, False)


async def test_groups_and_a_groups_members_assignment_offsets_and_lag(client):
    g = await (await client.get("/api/groups")).json()
    assert g["groups"] == [{"group_id": "g0", "protocol_type": "consumer", "state": "Empty", "coordinator": 0},
                           {"group_id": "g1", "protocol_type": "consumer", "state": "Stable", "coordinator": 0}]
    assert g["loading"] == [1]
    one = await (await client.get("/api/groups/g1")).json()
    assert (one["state"], one["protocol"], one["coordinator"]) == ("Stable", "range", 0)
    assert one["members"] == [{"member_id": "m-1", "group_instance_id": None, "client_id": "app",
                               "client_host": "/127.0.0.1", "assignment": {"a": [0, 1]},
                               "assignment_bytes": len(Assignment({"a": [1, 0]}).encode())}]
    assert one["offsets"] == [{"topic": "a", "partition": 0, "current_offset": 5, "leader_epoch": 1,
                               "topic_epoch": 2, "metadata": "", "log_end_offset": 8, "lag": 3}]
    assert one["lag"] == 3


async def test_with_a_token_a_call_that_changes_something_needs_it_and_reads_do_not():
    brokers = served()
    async with TestClient(TestServer(make_app(lambda: brokers, token="s3cret"))) as c:
        refused = await c.post("/api/brokers/0/metadata/freeze")
        assert refused.status == 401 and "Bearer" in (await refused.json())["error"]
        assert refused.headers["WWW-Authenticate"].startswith("Bearer")
        wrong = await c.post("/api/brokers/0/metadata/freeze", headers={"Authorization": "Bearer nope"})
        assert wrong.status == 401 and brokers[0].metadata.frozen is None  # nothing done
        ok = await c.post("/api/brokers/0/metadata/freeze", headers={"Authorization": "Bearer s3cret"})
        assert ok.status == 200 and (await ok.json())["frozen"] is True
        assert (await c.get("/api/brokers/0/metadata")).status == 200  # reads need none
        assert (await c.get("/api/cluster")).status == 200
