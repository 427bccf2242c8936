"""Per-client recording and the admin API on a real ``refka serve`` (issue 12's recording,
issue 13's first endpoints), driven by kafka-python.

One broker (``--admin-port``, ``--record FILE``, auto-creation off) sees a known sequence:
kafka-python's admin client creates a topic, its producer sends to it and then to a topic
that does not exist (Metadata answers UNKNOWN_TOPIC_OR_PARTITION until the producer gives
up), and a raw Produce to that missing topic fails per partition. The ring, the record
file, the metrics and ``refka admin`` must each tell that story. Then the other serve
forms: ``--brokers 2`` in one process, and one process per broker over ZooKeeper, each
serving its own brokers only.
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
import uuid

import kafka
import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import KafkaTimeoutError
from prometheus_client.parser import text_string_to_metric_families

from refka.cli import main
from refka.client.connection import BrokerConnection
from refka.protocol.messages.metadata import Metadata
from refka.protocol.messages.produce import Produce
from refka.protocol.records import build_batch
from tests.brokers import BrokerProcess, free_port_block
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

KNOWN, MISSING = "rec-known", "rec-missing"


def get(url: str) -> tuple[int, str, str]:
    """Status, content type and body of a GET, 4xx included."""
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.headers.get_content_type(), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get_content_type(), e.read().decode()


def recordings(url: str, **params: str) -> list[dict]:
    q = "&".join(f"{k}={v}" for k, v in params.items())
    status, ctype, body = get(f"{url}/api/recordings?{q}")
    assert status == 200 and ctype == "application/x-ndjson", body
    return [json.loads(line) for line in body.splitlines()]


async def raw_produce(port: int, topic: str) -> None:
    conn = await BrokerConnection("127.0.0.1", port, client_id="rec-raw").connect()
    try:
        P = Produce.Request
        req = P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            P.TopicProduceData(name=topic, partition_data=[
                P.TopicProduceData.PartitionProduceData(index=0, records=bytes(build_batch([(None, b"v")])))])])
        await conn.request(Produce, req, version=9)
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The broker, its admin URL and record file, after the known traffic."""
    tmp = tmp_path_factory.mktemp("rec")
    admin_port = free_port_block()
    record = tmp / "requests.jsonl"
    b = BrokerProcess(tmp / "data", memory=True, overrides={"auto.create.topics.enable": "false"},
                      extra_args=["--admin-port", str(admin_port), "--record", str(record)]).start()
    try:
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap, client_id="rec-admin")
        a.create_topics([NewTopic(KNOWN, 1, 1)])
        a.close()
        p = KafkaProducer(bootstrap_servers=b.bootstrap, client_id="rec-kp", max_block_ms=1500)
        p.send(KNOWN, b"hello").get(30)
        with pytest.raises(KafkaTimeoutError):
            p.send(MISSING, b"lost").get(30)
        p.close()
        asyncio.run(raw_produce(b.port, MISSING))
        yield b, f"http://127.0.0.1:{admin_port}", record
    finally:
        b.stop()


def test_the_ring_tells_what_kafka_python_asked_and_was_answered(served):
    _b, url, _record = served
    rows = recordings(url, client_id="rec-kp")
    assert rows, "nothing recorded for rec-kp"
    assert {(r["software_name"], r["software_version"]) for r in rows} == {("kafka-python", kafka.__version__)}
    assert all(r["broker"] == 0 and r["listener"] == "PLAINTEXT" and r["peer"].startswith("127.0.0.1:")
               for r in rows)
    apis = [r["api"] for r in rows]
    assert apis[0] == "ApiVersions" and "Produce" in apis
    metadata = [r for r in rows if r["api"] == "Metadata"]
    named = [tuple(r["topics"]) for r in metadata if r["topics"] != "all"]
    assert (KNOWN,) in named and any(MISSING in t for t in named)
    missing = [r for r in metadata if r["topics"] != "all" and MISSING in r["topics"]]
    assert all("UNKNOWN_TOPIC_OR_PARTITION" in r["error_codes"] for r in missing)
    produce = [r for r in rows if r["api"] == "Produce"]
    assert len(produce) == 1 and produce[0]["error_codes"] == []
    for r in rows:
        assert r["request_bytes"] > 0 and r["response_bytes"] > 0 and r["latency_ms"] >= 0
    assert [r["time_ms"] for r in rows] == sorted(r["time_ms"] for r in rows)


def test_a_produce_to_a_missing_topic_is_recorded_with_its_partition_error(served):
    _b, url, _record = served
    (produce,) = [r for r in recordings(url, client_id="rec-raw") if r["api"] == "Produce"]
    assert produce["error_codes"] == ["UNKNOWN_TOPIC_OR_PARTITION"]
    assert produce["software_name"] == "refka" and produce["api_version"] == 9


def test_the_record_file_has_every_request_with_the_connection_identity(served):
    _b, url, record = served

    def lines() -> list[dict]:
        return [json.loads(x) for x in record.read_text().splitlines()]

    ring = recordings(url, client_id="rec-kp")
    wait_until(lambda: len([d for d in lines() if d["client_id"] == "rec-kp"]) >= len(ring),
               timeout=10, message="rec-kp's requests in the record file")
    mine = [d for d in lines() if d["client_id"] == "rec-kp"]
    assert [(d["api"], d["correlation_id"]) for d in mine] == [(r["api"], r["correlation_id"]) for r in ring]
    assert all(d["software_name"] == "kafka-python" and d["peer"] for d in mine)


def test_the_metrics_count_the_known_traffic(served):
    _b, url, _record = served
    status, _ctype, text = get(f"{url}/metrics")
    assert status == 200
    counts: dict[tuple[str, str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "kafka_network_requestmetrics_requests_total":
                counts[(s.labels["client_id"], s.labels["software_name"], s.labels["api"])] = s.value
    rows = recordings(url, client_id="rec-kp")
    for api in ("ApiVersions", "Metadata", "Produce"):
        assert counts[("rec-kp", "kafka-python", api)] == sum(r["api"] == api for r in rows)
    assert counts[("rec-raw", "refka", "Produce")] == 1
    assert counts[("rec-admin", "kafka-python", "CreateTopics")] == 1


def test_the_recordings_stream_sends_each_request_as_it_is_answered(served):
    b, url, _record = served
    events: list[dict] = []
    opened = threading.Event()

    def read() -> None:
        with urllib.request.urlopen(f"{url}/api/recordings/stream?client_id=rec-stream", timeout=30) as r:
            assert r.headers.get_content_type() == "text/event-stream"
            opened.set()
            for line in r:
                if line.startswith(b"data: "):
                    events.append(json.loads(line[6:]))
                    if sum(e["api"] == "Metadata" for e in events) == 3:
                        return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert opened.wait(30)

    async def three_metadata() -> None:
        conn = await BrokerConnection("127.0.0.1", b.port, client_id="rec-stream").connect()
        try:
            for _ in range(3):
                await conn.request(Metadata, Metadata.Request(topics=[Metadata.Request.MetadataRequestTopic(
                    name=KNOWN)], allow_auto_topic_creation=False), version=9)
        finally:
            await conn.close()

    asyncio.run(three_metadata())
    reader.join(30)
    assert not reader.is_alive(), events
    assert [e["api"] for e in events] == ["ApiVersions", "Metadata", "Metadata", "Metadata"]  # the client's first
    assert {e["client_id"] for e in events} == {"rec-stream"}
    assert [e["topics"] for e in events[1:]] == [[KNOWN]] * 3
    assert [e["correlation_id"] for e in events] == sorted(e["correlation_id"] for e in events)


def test_recordings_limit_keeps_the_newest(served):
    _b, url, _record = served
    every = recordings(url, client_id="rec-kp")  # a closed connection: nothing new meanwhile
    last3 = recordings(url, client_id="rec-kp", limit="3")
    assert len(every) > 3 and last3 == every[-3:]


def test_connections_lists_the_open_ones(served):
    b, url, _record = served
    p = KafkaProducer(bootstrap_servers=b.bootstrap, client_id="rec-open")
    try:
        p.partitions_for(KNOWN)
        status, _ctype, body = get(f"{url}/api/connections")
        assert status == 200
        mine = [c for c in json.loads(body)["connections"] if c["client_id"] == "rec-open"]
        assert mine and mine[0]["software_name"] == "kafka-python"
        assert sum(c["requests"].get("Metadata", 0) for c in mine) >= 1
        assert not [c for c in json.loads(body)["connections"] if c["client_id"] == "rec-kp"]  # closed
    finally:
        p.close()


@pytest.mark.parametrize(("query", "status"), [("broker=3", 404), ("broker=x", 400), ("limit=0", 400)])
def test_the_running_api_refuses_bad_input_with_a_json_error(served, query, status):
    _b, url, _record = served
    got, ctype, body = get(f"{url}/api/recordings?{query}")
    assert (got, ctype) == (status, "application/json") and json.loads(body)["error"]


def test_refka_admin_recordings_as_a_table_and_as_json_lines(served, capsys):
    _b, url, _record = served
    assert main(["admin", "--url", url, "recordings", "--client-id", "rec-raw"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["TIME", "BROKER", "CLIENT_ID", "API", "CORR", "TOPICS", "REQ_B", "RESP_B",
                                "MS", "ERRORS"]
    produce = [line for line in table if "Produce v9" in line]
    assert len(produce) == 1 and produce[0].rstrip().endswith("UNKNOWN_TOPIC_OR_PARTITION")
    assert main(["admin", "recordings", "--json", "--client-id", "rec-raw", "--url", url]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines == recordings(url, client_id="rec-raw")


def test_refka_admin_connections_table_json_and_the_env_default(served, capsys, monkeypatch):
    b, url, _record = served
    p = KafkaProducer(bootstrap_servers=b.bootstrap, client_id="rec-cli")
    try:
        p.partitions_for(KNOWN)
        monkeypatch.setenv("REFKA_ADMIN_URL", url)
        assert main(["admin", "connections"]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].split()[:4] == ["BROKER", "PEER", "LISTENER", "CLIENT_ID"]
        row = next(line for line in out if "rec-cli" in line)
        assert f"kafka-python {kafka.__version__}" in row and "Metadata=" in row
        assert main(["admin", "connections", "--json"]) == 0
        conns = json.loads(capsys.readouterr().out)
        assert any(c["client_id"] == "rec-cli" for c in conns)
    finally:
        p.close()


def test_refka_admin_exits_1_when_refused_or_unreachable(served, capsys):
    _b, url, _record = served
    assert main(["admin", "--url", url, "connections", "--broker", "7"]) == 1
    assert "404: broker 7 is not served" in capsys.readouterr().err
    dead = f"http://127.0.0.1:{free_port_block()}"
    assert main(["admin", "--url", dead, "recordings"]) == 1
    assert "cannot reach" in capsys.readouterr().err


@pytest.mark.parametrize("ring", [3, 0])
def test_the_ring_size_property_bounds_each_connections_ring_and_zero_turns_it_off(tmp_path, ring):
    admin_port = free_port_block()
    with BrokerProcess(tmp_path / "data", memory=True, overrides={"refka.recording.ring.size": str(ring)},
                       extra_args=["--admin-port", str(admin_port)]) as b:
        url = f"http://127.0.0.1:{admin_port}"
        p = KafkaProducer(bootstrap_servers=b.bootstrap, client_id="rec-ring")
        for _ in range(3):
            p.send("ring-topic", b"x").get(30)
        p.flush()
        status, _ctype, body = get(f"{url}/api/connections")
        conns = [c for c in json.loads(body)["connections"] if c["client_id"] == "rec-ring"]
        p.close()
        rows = recordings(url, client_id="rec-ring")
        assert status == 200 and conns  # identities are kept either way
        if ring:
            per_peer: dict[str, int] = {}
            for r in rows:
                per_peer[r["peer"]] = per_peer.get(r["peer"], 0) + 1
            assert per_peer and max(per_peer.values()) == ring
            assert sum(c["requests_total"] for c in conns) > len(rows)  # counted beyond the ring
        else:
            assert rows == [] and all(c["requests_total"] == 0 for c in conns)


def test_brokers_n_in_one_process_serve_every_brokers_recordings(tmp_path):
    admin_port = free_port_block()
    with BrokerProcess(tmp_path / "data", brokers=2, memory=True,
                       extra_args=["--admin-port", str(admin_port)]) as b:
        url = f"http://127.0.0.1:{admin_port}"
        p = KafkaProducer(bootstrap_servers=b.bootstrap, client_id="rec-two")
        p.partitions_for("anything")
        p.close()
        assert {r["broker"] for r in recordings(url)} == {0, 1}  # the controller talks to both
        assert {r["broker"] for r in recordings(url, broker="1")} == {1}
        assert get(f"{url}/api/connections?broker=2")[0] == 404


def test_each_zookeeper_process_serves_its_own_brokers(zookeeper, tmp_path):
    connect = f"{zookeeper.connect}/rec{uuid.uuid4().hex[:8]}"
    ports = [free_port_block(), free_port_block()]
    procs = [BrokerProcess(tmp_path / f"data{i}", memory=True, extra_args=[
        "--zookeeper", connect, "--broker-id", str(i), "--admin-port", str(ports[i])]) for i in range(2)]
    try:
        for proc in procs:
            proc.start()
        for i, port in enumerate(ports):
            url = f"http://127.0.0.1:{port}"
            assert get(f"{url}/api/connections?broker={i}")[0] == 200
            assert get(f"{url}/api/connections?broker={1 - i}")[0] == 404
            wait_until(lambda url=url: recordings(url), timeout=30, message="the controller's requests recorded")
            assert {r["broker"] for r in recordings(url)} == {i}
    finally:
        for proc in procs:
            proc.stop()
