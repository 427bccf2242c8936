"""The admin API's reads (issue 13) on a real ``refka serve --brokers 2 --admin-port``: the
cluster, a topic's partitions with their offsets, and a kafka-python consumer group's
members, assignments, committed offsets and lag, through the API and ``refka admin``."""

from __future__ import annotations

import json
import urllib.request
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from refka.cli import main
from tests.brokers import BrokerProcess, admin_call, free_port_block, with_admin_api
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def api(url: str, path: str) -> tuple[int, dict]:
    return admin_call(url, path)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with with_admin_api(tmp_path_factory.mktemp("reads") / "data", brokers=2,
                        overrides={"group.initial.rebalance.delay.ms": "0"}) as served:
        yield served


def test_cluster_topic_and_group_reads_tell_what_the_clients_did(cluster, capsys):
    b, url = cluster
    topic, group = f"reads-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    a = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    a.create_topics([NewTopic(topic, num_partitions=-1, replication_factor=-1,
                              replica_assignments={0: [0], 1: [1]})])
    a.close()
    p = KafkaProducer(bootstrap_servers=b.bootstrap)
    for i in range(10):
        p.send(topic, b"v%d" % i, partition=i % 2)  # 5 records a partition
    p.flush()
    p.close()

    status, c = api(url, "/api/cluster")
    assert status == 200
    assert [x["id"] for x in c["brokers"]] == [0, 1] and all(x["served_here"] for x in c["brokers"])
    assert c["controller"]["id"] in (0, 1) and c["controller"]["epoch"] >= 1

    def partitions() -> list[dict]:
        return api(url, f"/api/topics/{topic}")[1]["partitions"]

    wait_until(lambda: [x["high_watermark"] for x in partitions()] == [5, 5], message="both high watermarks at 5")
    p0, p1 = partitions()
    assert (p0["leader"], p0["replicas"], p0["isr"], p0["offsets_from"]) == (0, [0], [0], 0)
    assert (p1["leader"], p1["replicas"], p1["offsets_from"], p1["log_start_offset"]) == (1, [1], 1, 0)
    assert any(t["name"] == topic and t["partitions"] == 2 for t in api(url, "/api/topics")[1]["topics"])

    consumer = KafkaConsumer(topic, bootstrap_servers=b.bootstrap, group_id=group, client_id="reader",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        got = 0
        while got < 10:
            got += sum(len(v) for v in consumer.poll(timeout_ms=1000).values())
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(5, "", -1),
                         TopicPartition(topic, 1): OffsetAndMetadata(2, "", -1)})
        listed = api(url, "/api/groups")[1]["groups"]
        assert {"group_id": group, "protocol_type": "consumer", "state": "Stable"}.items() <= \
            next(g for g in listed if g["group_id"] == group).items()
        status, g = api(url, f"/api/groups/{group}")
        assert status == 200 and g["state"] == "Stable"
        (member,) = g["members"]
        assert member["client_id"] == "reader" and member["assignment"] == {topic: [0, 1]}
        assert [(o["partition"], o["current_offset"], o["log_end_offset"], o["lag"]) for o in g["offsets"]] == \
            [(0, 5, 5, 0), (1, 2, 5, 3)]
        assert g["lag"] == 3
        assert main(["admin", "groups", group, "--url", url]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].startswith(f"{group}: Stable") and "lag 3" in out[0]
        assert out[1].split() == ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER"]
        assert out[3].split() == [topic, "1", "2", "5", "3", "reader"]
    finally:
        consumer.close()
    assert main(["admin", "--url", url, "topics", topic]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[1].split()[:6] == ["PARTITION", "LEADER", "EPOCH", "P_EPOCH", "REPLICAS", "ISR"]
    assert rows[2].split()[:2] == ["0", "0"] and rows[2].split()[-1] == "5"
    assert main(["admin", "cluster", "--json", "--url", url]) == 0
    assert json.loads(capsys.readouterr().out)["brokers"][1]["id"] == 1
    assert api(url, "/api/groups/no-such-group")[0] == 404
    assert api(url, "/api/topics/no-such-topic")[0] == 404


def test_admin_token_from_the_environment_guards_changes_and_refka_admin_sends_it(tmp_path, capsys, monkeypatch):
    admin_port = free_port_block()
    with BrokerProcess(tmp_path / "data", memory=True, extra_args=["--admin-port", str(admin_port)],
                       env={"REFKA_ADMIN_TOKEN": "t0k"}):
        url = f"http://127.0.0.1:{admin_port}"
        monkeypatch.delenv("REFKA_ADMIN_TOKEN", raising=False)
        assert main(["admin", "stale-metadata", "--broker", "0", "--freeze", "--url", url]) == 1
        assert "401" in capsys.readouterr().err
        assert main(["admin", "stale-metadata", "--broker", "0", "--url", url]) == 0  # a read needs none
        assert "current" in capsys.readouterr().out
        monkeypatch.setenv("REFKA_ADMIN_TOKEN", "t0k")
        assert main(["admin", "stale-metadata", "--broker", "0", "--freeze", "--url", url]) == 0
        assert "FROZEN" in capsys.readouterr().out


def broker_metrics(url: str) -> dict[tuple[str, tuple], float]:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as r:
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def total(m: dict, name: str, **labels: str) -> float:
    return sum(v for (n, lab), v in m.items() if n == name and all(dict(lab).get(k) == x for k, x in labels.items()))


def test_broker_metrics_count_known_traffic_and_an_isr_shrink(tmp_path):
    admin_port = free_port_block()
    with BrokerProcess(tmp_path / "data", brokers=2, memory=True, extra_args=["--admin-port", str(admin_port)],
                       overrides={"replica.lag.time.max.ms": "1000", "group.initial.rebalance.delay.ms": "0"}) as b:
        url = f"http://127.0.0.1:{admin_port}"
        topic = "metered"
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        a.create_topics([NewTopic(topic, num_partitions=-1, replication_factor=-1, replica_assignments={0: [0, 1]})])
        a.close()
        p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all")
        for _ in range(20):
            p.send(topic, b"x" * 100, partition=0).get(30)
        p.close()
        c = KafkaConsumer(topic, bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
                          consumer_timeout_ms=5000)
        assert len([m for m in c]) == 20
        c.close()
        m = broker_metrics(url)
        assert total(m, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 20
        assert total(m, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) > 2000
        assert total(m, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) > 2000
        assert total(m, "kafka_server_brokertopicmetrics_replicationbytesout_total", topic=topic) > 2000
        assert total(m, "kafka_controller_kafkacontroller_activecontrollercount") == 1
        assert total(m, "kafka_server_replicamanager_leadercount", broker="0") >= 1
        assert total(m, "kafka_server_replicamanager_underreplicatedpartitions") == 0
        assert total(m, "kafka_network_requestmetrics_totaltimems_count", api="Produce") >= 20
        assert total(m, "kafka_network_requestmetrics_totaltimems_bucket", api="Produce", le="+Inf") >= 20
        # the follower stops: the controller takes it out of the ISR (a shrink the leader did not
        # write, so IsrShrinks does not count it, as in Kafka), the partition is under-replicated
        assert main(["admin", "--url", url, "kill-broker", "1"]) == 0
        wait_until(lambda: total(broker_metrics(url), "kafka_server_replicamanager_underreplicatedpartitions") == 1,
                   message="the partition under-replicated")
        m = broker_metrics(url)
        assert total(m, "kafka_cluster_partition_underreplicated", topic=topic, partition="0") == 1
        assert main(["admin", "--url", url, "start-broker", "1"]) == 0
        wait_until(lambda: total(broker_metrics(url), "kafka_server_replicamanager_isrexpands_total") >= 1,
                   message="the ISR expanded again (the leader writes it)")
        wait_until(lambda: total(broker_metrics(url), "kafka_server_replicamanager_underreplicatedpartitions") == 0,
                   message="fully replicated again")
