"""Fault injection (issue 13) on a real ``refka serve --brokers 2 --admin-port``, each kind
seen by a real client: confluent-kafka meets the injected error code on the partition in
scope and recovers; a latency fault shows in its measured delivery time; a connection
dropped before or after handling makes it reconnect and deliver once (idempotence); a
black-holed request is never answered; a follower's delayed fetches hold an acks=all
answer back. Refusals (unknown error code, API, broker, kind) install nothing; each firing
is counted in /metrics and put in the timeline."""

from __future__ import annotations

import json
import socket
import struct
import time
import urllib.error
import urllib.request
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from refka.cli import main
from tests.brokers import BrokerProcess, admin_call, with_admin_api
from tests.integration.cluster_helpers import metadata
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
TIMEOUT = 60.0


def call(url: str, path: str, method: str = "GET", body: object | None = None) -> tuple[int, object]:
    return admin_call(url, path, method, body)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with with_admin_api(tmp_path_factory.mktemp("faults") / "data", brokers=2,
                        overrides={"auto.create.topics.enable": "false"}) as served:
        yield served


@pytest.fixture(autouse=True)
def no_faults_left(cluster):
    yield
    call(cluster[1], "/api/faults", "DELETE")


def create(b: BrokerProcess, assignment: list[list[int]]) -> str:
    topic = f"f-{uuid.uuid4().hex[:6]}"
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    a.create_topics([NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)])[topic].result(60)
    wait_until(lambda: all(p.leader_id >= 0 and len(p.isr_nodes) == len(assignment[p.partition_index])
                           for p in metadata(b.port, topic).topics[0].partitions), message="the topic ready",
               ignoring=(Exception,))
    return topic


def produce(b: BrokerProcess, topic: str, n: int, **config) -> list:
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, **config})
    out: list = []
    for i in range(n):
        p.produce(topic, b"%d" % i, partition=0, on_delivery=lambda err, msg: out.append((err, msg)))
        p.flush(TIMEOUT)
    return out


def fired(url: str, kind: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"{url}/metrics", timeout=TIMEOUT) as r:
        text = r.read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "refka_faults_fired_total" and s.labels["kind"] == kind)


def test_an_error_on_the_partition_in_scope_is_met_and_recovered_from(cluster, capsys):
    b, url = cluster
    topic = create(b, [[0], [0]])
    before = fired(url, "error")
    assert main(["admin", "--url", url, "fault-add", "--kind", "error", "--api", "Produce", "--topic", topic,
                 "--partition", "0", "--error-code", "NOT_LEADER_OR_FOLLOWER", "--count", "3"]) == 0
    assert "installed" in capsys.readouterr().out
    status, listed = call(url, "/api/faults")
    (f,) = listed["faults"]
    assert (f["kind"], f["api"], f["error_code"], f["count_left"], f["topic"]) == \
        ("error", "Produce", "NOT_LEADER_OR_FOLLOWER", 3, topic)
    t0 = time.monotonic()
    out = produce(b, topic, 1, **{"retry.backoff.ms": 50})
    assert [err for err, _ in out] == [None] and out[0][1].offset() == 0
    assert fired(url, "error") - before == 3  # three refusals, then the record went through
    assert call(url, "/api/faults")[1]["faults"] == []  # its count spent, it is gone
    assert time.monotonic() - t0 < 30
    # partition 1, outside the scope, was never refused
    call(url, "/api/faults", "POST", {"kind": "error", "api": "Produce", "topic": topic, "partition": 0,
                                      "error_code": "NOT_LEADER_OR_FOLLOWER"})
    p = Producer({"bootstrap.servers": b.bootstrap})
    got: list = []
    p.produce(topic, b"x", partition=1, on_delivery=lambda err, msg: got.append(err))
    p.flush(TIMEOUT)
    assert got == [None]
    with urllib.request.urlopen(f"{url}/api/timeline?limit=50", timeout=TIMEOUT) as r:
        kinds = [json.loads(x) for x in r.read().splitlines()]
    assert any(e["type"] == "fault_fired" and e["fault_kind"] == "error" for e in kinds)


def test_latency_shows_in_the_delivery_time(cluster):
    b, url = cluster
    topic = create(b, [[0]])
    produce(b, topic, 1)  # connections and metadata warm
    status, f = call(url, "/api/faults", "POST", {"kind": "latency", "api": "Produce", "latency_ms": 400,
                                                  "count": 1})
    assert status == 201
    (err, msg), = produce(b, topic, 1)
    assert err is None and msg.latency() >= 0.4


@pytest.mark.parametrize("kind", ["drop-before", "drop-after"])
def test_a_dropped_connection_is_reconnected_and_the_record_is_in_the_log_once(cluster, kind):
    b, url = cluster
    topic = create(b, [[0]])
    produce(b, topic, 1, **{"enable.idempotence": True})
    assert call(url, "/api/faults", "POST", {"kind": kind, "api": "Produce", "count": 1})[0] == 201
    out = produce(b, topic, 1, **{"enable.idempotence": True, "retry.backoff.ms": 50})
    assert [err for err, _ in out] == [None]
    assert metadata(b.port, topic).topics[0].partitions[0].leader_id == 0
    assert call(url, "/api/faults")[1]["faults"] == [] and fired(url, kind) >= 1
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=3000)
    c.assign([TopicPartition(topic, 0)])
    values = [m.value for m in c]
    c.close()
    assert values == [b"0", b"0"]  # the warm-up and the record, each once (drop-after: deduplicated)


def test_a_blackholed_request_is_never_answered(cluster):
    b, url = cluster
    assert call(url, "/api/faults", "POST", {"kind": "blackhole", "api": "ApiVersions", "count": 1,
                                             "client_id": "hole"})[0] == 201
    cid = b"hole"
    frame = struct.pack(">hhih", 18, 0, 1, len(cid)) + cid
    with socket.create_connection(("127.0.0.1", b.port), timeout=1.5) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        with pytest.raises(socket.timeout):
            s.recv(4)
    with socket.create_connection(("127.0.0.1", b.port), timeout=5) as s:  # the next one is answered
        s.sendall(struct.pack(">i", len(frame)) + frame)
        assert len(s.recv(4)) == 4


def test_a_delayed_follower_holds_an_acks_all_answer_back(cluster):
    b, url = cluster
    topic = create(b, [[0, 1]])
    produce(b, topic, 1, acks="all")
    assert call(url, "/api/faults", "POST", {"kind": "replication-delay", "follower": 1, "latency_ms": 700,
                                             "duration_ms": 5000})[0] == 201
    time.sleep(1.0)  # the follower's fetch in flight now is a delayed one
    (err, msg), = produce(b, topic, 1, acks="all")
    assert err is None and msg.latency() >= 0.3


@pytest.mark.parametrize(("spec", "status", "words"), [
    ({"kind": "error", "api": "Produce", "error_code": "NO_SUCH_ERROR"}, 400, "unknown error code"),
    ({"kind": "error", "api": "Nope", "error_code": 6}, 400, "unknown API"),
    ({"kind": "error", "api": "Metadata", "error_code": 6}, 400, "an error fault needs api one of"),
    ({"kind": "latency", "broker": 7, "latency_ms": 10}, 404, "broker 7 is not served"),
    ({"kind": "explode"}, 400, "kind must be one of"),
    ({"kind": "latency", "latency_ms": -1}, 400, "latency_ms"),
    ({"kind": "latency", "latency_ms": 5, "topic": "t"}, 400, "needs api Produce or Fetch"),
    ({"kind": "latency", "latency_ms": 5, "colour": "red"}, 400, "unknown field"),
])
def test_refusals_say_why_and_install_nothing(cluster, spec, status, words):
    _b, url = cluster
    got, answer = call(url, "/api/faults", "POST", spec)
    assert got == status and words in answer["error"], answer
    assert call(url, "/api/faults")[1]["faults"] == []
    assert call(url, "/api/faults/99", "DELETE")[0] == 404


def test_a_throttled_reader_takes_as_long_as_its_bytes_at_the_rate(cluster, capsys):
    b, url = cluster
    topic = create(b, [[0]])
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for i in range(300):
        p.produce(topic, b"%04d" % i + b"x" * 996, partition=0)
    assert p.flush(TIMEOUT) == 0
    assert main(["admin", "--url", url, "fault-add", "--kind", "throttle", "--api", "Fetch", "--client-id",
                 "slow-reader", "--bytes-per-second", "100000"]) == 0
    capsys.readouterr()
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=b.bootstrap, client_id="slow-reader", auto_offset_reset="earliest",
                      consumer_timeout_ms=15000)
    c.assign([TopicPartition(topic, 0)])
    t0 = time.monotonic()
    got = 0
    for _m in c:
        got += 1
        if got == 300:
            break
    elapsed = time.monotonic() - t0
    c.close()
    assert got == 300
    assert elapsed >= 2.5  # 300 KB of records at 100 KB/s: at least ~3 s, however fast the machine
    (f,) = call(url, "/api/faults")[1]["faults"]
    assert f["kind"] == "throttle" and f["bytes_per_second"] == 100000 and f["fired"] >= 1


def test_a_delayed_produce_appends_its_own_records_though_later_frames_reuse_the_buffer(cluster):
    """A latency fault holds the answer, not the handling: a Produce it delays is appended before
    the connection's later ones (Kafka handles a connection's requests in order), with its own
    records though the connection's receive buffer is reused by the later frames meanwhile."""
    from refka.protocol import RequestHeader, encode_request_header, join
    from refka.protocol.messages.produce import Produce as ProduceApi
    from refka.protocol.records import build_batch

    b, url = cluster
    topic = create(b, [[0]])
    assert call(url, "/api/faults", "POST", {"kind": "latency", "api": "Produce", "latency_ms": 500, "count": 1,
                                             "client_id": "pipe"})[0] == 201
    P = ProduceApi.Request

    def frame(cid: int, value: bytes) -> bytes:
        req = P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
            name=topic, partition_data=[P.TopicProduceData.PartitionProduceData(
                index=0, records=bytes(build_batch([(None, value)])))])])
        payload = encode_request_header(RequestHeader(ProduceApi.key, 8, cid, "pipe"),
                                        ProduceApi.request_header_version(8)) + join(ProduceApi.encode_request(req, 8))
        return struct.pack(">i", len(payload)) + payload

    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as s:
        s.sendall(frame(1, b"first-" + b"a" * 200))
        time.sleep(0.2)  # handled (delayed): the buffer is free for the next frames
        s.sendall(b"".join(frame(i, f"later-{i}-".encode() + b"b" * 200) for i in range(2, 6)))
        t0 = time.monotonic()
        answers = b""
        while len(answers) < 4:
            answers += s.recv(65536)
        (first_cid,) = struct.unpack_from(">i", answers, 4)
        assert first_cid == 1 and time.monotonic() - t0 >= 0.2  # in order, the first held back
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=3000)
    c.assign([TopicPartition(topic, 0)])
    values = [m.value for m in c]
    c.close()
    assert values == [b"first-" + b"a" * 200] + [f"later-{i}-".encode() + b"b" * 200 for i in range(2, 6)]
