"""The admin API's operations (issue 13) on a real ``refka serve --brokers 3 --admin-port``,
sent to the controller over the Kafka protocol: a leader moved to a named broker while a
confluent-kafka producer sends (every record acknowledged, the new leader in every broker's
Metadata), a preferred election, a reassignment, an expansion, and the refusals (a broker
that is not a replica, an unknown topic or partition, a bad body), through the API and
``refka admin``."""

from __future__ import annotations

import json
import threading
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


def post(url: str, path: str, body: object | None = None) -> tuple[int, dict]:
    return admin_call(url, path, "POST", body)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with with_admin_api(tmp_path_factory.mktemp("ops") / "data", brokers=3,
                        overrides={"auto.create.topics.enable": "false"}) as served:
        yield served


def create(b: BrokerProcess, assignment: list[list[int]]) -> str:
    topic = f"ops-{uuid.uuid4().hex[:6]}"
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    a.create_topics([NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)])[topic].result(TIMEOUT)
    wait_until(lambda: all(len(metadata(b.port + i, topic).topics[0].partitions) == len(assignment)
                           and all(p.leader_id >= 0 for p in metadata(b.port + i, topic).topics[0].partitions)
                           for i in range(3)), message="the topic everywhere", ignoring=(Exception,))
    return topic


def leaders_everywhere(b: BrokerProcess, topic: str) -> set[tuple[int, ...]]:
    return {tuple(p.leader_id for p in metadata(b.port + i, topic).topics[0].partitions) for i in range(3)}


def test_a_leader_moved_while_a_producer_sends_loses_nothing(cluster, capsys):
    b, url = cluster
    topic = create(b, [[0, 1, 2]])
    wait_until(lambda: metadata(b.port, topic).topics[0].partitions[0].isr_nodes == [0, 1, 2],
               message="the full ISR", ignoring=(Exception,))
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "acks": "all"})
    acked, failed, stop = [], [], threading.Event()

    def cb(err, msg):
        (failed if err is not None else acked).append(msg)

    def pump():
        i = 0
        while not stop.is_set():
            p.produce(topic, b"%d" % i, callback=cb)
            p.poll(0.01)
            i += 1

    t = threading.Thread(target=pump)
    t.start()
    try:
        wait_until(lambda: len(acked) > 20, message="records before the move")
        assert main(["admin", "move-leader", topic, "0", "--to", "2", "--url", url]) == 0
        moved = json.loads(capsys.readouterr().out)
        assert (moved["leader"], moved["replicas"][0]) == (2, 2) and moved["leader_epoch"] >= 1
        wait_until(lambda: leaders_everywhere(b, topic) == {(2,)}, message="broker 2 leads on every broker")
        before = len(acked)
        wait_until(lambda: len(acked) > before + 20, message="records after the move")
    finally:
        stop.set()
        t.join()
        assert p.flush(TIMEOUT) == 0
    assert failed == [] and {m.partition() for m in acked} == {0}
    assert sorted(m.offset() for m in acked) == list(range(len(acked)))  # each once, none lost
    # already leading: nothing to do, still an answer
    status, again = post(url, f"/api/topics/{topic}/partitions/0/leader", {"broker": 2})
    assert status == 200 and again["leader"] == 2


def test_preferred_election_reassignment_and_expansion(cluster, capsys):
    b, url = cluster
    topic = create(b, [[0, 1], [1, 2]])
    status, r = post(url, f"/api/topics/{topic}/reassign", {"assignments": {"0": [1, 0]}})
    assert status == 200, r
    wait_until(lambda: metadata(b.port, topic).topics[0].partitions[0].replica_nodes == [1, 0],
               message="the new replica order")
    assert main(["admin", "elect-preferred", topic, "--partitions", "0,1", "--url", url]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert results["0"] == "elected" and results["1"].startswith("not needed")
    wait_until(lambda: leaders_everywhere(b, topic) == {(1, 1)}, message="broker 1 leads both")
    assert main(["admin", "partition-count", topic, "--count", "4", "--url", url]) == 0
    wait_until(lambda: len(metadata(b.port, topic).topics[0].partitions) == 4, message="4 partitions")
    assert main(["admin", "reassign", topic, "--replicas", "3=0,2", "--url", url]) == 0
    wait_until(lambda: metadata(b.port, topic).topics[0].partitions[3].replica_nodes == [0, 2],
               message="partition 3 on brokers 0 and 2", ignoring=(Exception,))


@pytest.mark.parametrize(("path", "body", "status", "words"), [
    ("/partitions/0/leader", {"broker": 2}, 409, "not a replica"),
    ("/partitions/7/leader", {"broker": 0}, 404, "no partition 7"),
    ("/partitions/0/leader", {"broker": "two"}, 400, "'broker' must be an integer"),
    ("/partitions/0/leader", None, 400, "JSON object body"),
    ("/reassign", {"assignments": {"0": [9]}}, 400, "INVALID_REPLICA_ASSIGNMENT"),
    ("/reassign", {"assignments": []}, 400, "'assignments'"),
    ("/partition-count", {"count": 1}, 400, "INVALID_PARTITIONS"),
    ("/elect-preferred", {"partitions": ["a"]}, 400, "list of integers"),
])
def test_refusals_say_why_and_change_nothing(cluster, path, body, status, words):
    b, url = cluster
    topic = create(b, [[0, 1]])
    got, answer = post(url, f"/api/topics/{topic}{path}", body)
    assert got == status and words in answer["error"], answer
    md = metadata(b.port, topic).topics[0]
    assert [p.replica_nodes for p in md.partitions] == [[0, 1]] and md.partitions[0].leader_id == 0


def test_an_unknown_topic_is_a_404(cluster, capsys):
    _b, url = cluster
    assert post(url, "/api/topics/nope/elect-preferred")[0] == 404
    assert main(["admin", "move-leader", "nope", "0", "--to", "1", "--url", url]) == 1
    assert "404: unknown topic 'nope'" in capsys.readouterr().err


def listed_brokers(b: BrokerProcess, via: int) -> list[int]:
    return sorted(x.node_id for x in metadata(b.port + via, "__none__").brokers)


def test_stop_kill_start_and_expire_a_brokers_session(cluster, capsys):
    b, url = cluster
    topic = create(b, [[1, 0]])
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "acks": "all"})
    failed: list = []
    try:
        p.produce(topic, b"before", callback=lambda err, _m: err and failed.append(err))
        assert p.flush(TIMEOUT) == 0
        # a controlled shutdown of the leader: its leadership moves first, the producer goes on
        assert main(["admin", "--url", url, "stop-broker", "1"]) == 0
        assert json.loads(capsys.readouterr().out)["state"] == "stopped"
        assert listed_brokers(b, 0) == [0, 2]
        assert metadata(b.port, topic).topics[0].partitions[0].leader_id == 0
        p.produce(topic, b"after stop", callback=lambda err, _m: err and failed.append(err))
        assert p.flush(TIMEOUT) == 0 and failed == []
        assert post(url, "/api/brokers/1/stop")[0] == 409  # stopped already
        assert post(url, "/api/brokers/1/expire-session")[0] == 409
        assert post(url, "/api/brokers/1/start")[0] == 200
        wait_until(lambda: listed_brokers(b, 0) == [0, 1, 2], message="broker 1 back")
        assert post(url, "/api/brokers/1/start")[0] == 409  # running already
        # a kill: no controlled shutdown, the broker is gone from the cluster at once
        assert post(url, "/api/brokers/2/kill") == (200, {"broker": 2, "action": "kill", "state": "stopped",
                                                           "seconds": pytest.approx(0, abs=30)})
        wait_until(lambda: listed_brokers(b, 0) == [0, 1], message="broker 2 gone")
        assert post(url, "/api/brokers/2/start")[0] == 200
        wait_until(lambda: listed_brokers(b, 0) == [0, 1, 2], message="broker 2 back")
        # an expired session: the registration goes and comes back on a new session
        assert post(url, "/api/brokers/0/expire-session")[0] == 200
        wait_until(lambda: listed_brokers(b, 1) == [0, 1, 2], message="broker 0 registered again",
                   ignoring=(Exception,))
        assert post(url, "/api/brokers/7/stop")[0] == 404
    finally:
        for n in (1, 2):
            post(url, f"/api/brokers/{n}/start")
        wait_until(lambda: listed_brokers(b, 0) == [0, 1, 2], message="every broker back", ignoring=(Exception,))
        p.flush(TIMEOUT)


def test_the_timeline_and_its_stream_show_a_leader_move(cluster):
    b, url = cluster
    topic = create(b, [[0, 1]])
    with urllib.request.urlopen(f"{url}/api/timeline?limit=1", timeout=TIMEOUT) as r:
        since = json.loads(r.read())["seq"]
    events: list[dict] = []

    def stream() -> None:
        with urllib.request.urlopen(f"{url}/api/timeline/stream?since={since}", timeout=TIMEOUT) as r:
            assert r.headers.get_content_type() == "text/event-stream"
            for line in r:
                if line.startswith(b"data: "):
                    events.append(json.loads(line[6:]))
                    e = events[-1]
                    if e["type"] == "leader_changed" and e["topic"] == topic and e["new_leader"] == 1:
                        return

    reader = threading.Thread(target=stream, daemon=True)
    reader.start()
    wait_until(lambda: metadata(b.port, topic).topics[0].partitions[0].isr_nodes == [0, 1],
               message="the full ISR", ignoring=(Exception,))
    status, moved = post(url, f"/api/topics/{topic}/partitions/0/leader", {"broker": 1})
    assert status == 200, moved
    reader.join(TIMEOUT)
    assert not reader.is_alive(), events
    change = events[-1]
    assert (change["old_leader"], change["new_leader"], change["new_epoch"]) == (0, 1, moved["leader_epoch"])
    assert change["new_epoch"] > change["old_epoch"] and change["broker"] == 0
    with urllib.request.urlopen(f"{url}/api/timeline?since={since}", timeout=TIMEOUT) as r:
        lines = [json.loads(x) for x in r.read().splitlines()]
    mine = [e for e in lines if e.get("topic") == topic]
    kinds = [e["type"] for e in mine]
    assert kinds.index("replicas_changed") < len(kinds) - 1 - kinds[::-1].index(
        "leader_changed")  # the reorder, then the move (the reassignment may bump the epoch in between)
    assert [e for e in mine if e["type"] == "leader_changed"][-1]["new_leader"] == 1
    assert [e["seq"] for e in lines] == sorted(e["seq"] for e in lines) and all(e["seq"] > since for e in lines)
