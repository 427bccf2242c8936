"""Znode payloads: exact key names (Kafka's and the seeds') and round trips."""

from __future__ import annotations

import json

import pytest

from refka.controller import znodes as z


def keys(data: bytes) -> dict:
    return json.loads(data)


def test_paths() -> None:
    assert z.broker_path(3) == "/brokers/ids/3"
    assert z.topic_path("t") == "/brokers/topics/t"
    assert z.partition_path("t", 2) == "/brokers/topics/t/partitions/2"
    assert z.partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert z.topic_config_path("t") == "/config/topics/t"
    assert z.delete_topic_path("t") == "/admin/delete_topics/t"
    assert (z.CONTROLLER, z.CONTROLLER_EPOCH, z.CLUSTER_ID) == (
        "/controller",
        "/controller_epoch",
        "/cluster/id",
    )


def test_broker_registration_is_kafkas_version_5() -> None:
    info = z.BrokerInfo(
        broker_id=1,
        endpoints=(z.Endpoint("PLAINTEXT", "127.0.0.1", 9092), z.Endpoint("INTERNAL", "::1", 9093, "SSL")),
        rack="zone-a",
        timestamp="1700000000000",
    )
    doc = keys(info.to_json())
    assert doc == {
        "features": {},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "SSL"},
        "endpoints": ["PLAINTEXT://127.0.0.1:9092", "INTERNAL://[::1]:9093"],
        "jmx_port": -1,
        "port": 9092,
        "host": "127.0.0.1",
        "version": 5,
        "timestamp": "1700000000000",
        "rack": "zone-a",
    }
    back = z.BrokerInfo.from_json(1, info.to_json())
    assert back == info
    assert back.endpoint("INTERNAL").security_protocol == "SSL"
    assert back.endpoint(None).port == 9092


def test_broker_without_plaintext_listener_has_null_host() -> None:
    info = z.BrokerInfo(2, (z.Endpoint("SSL", "h", 1, "SSL"),))
    doc = keys(info.to_json())
    assert (doc["host"], doc["port"], doc["rack"]) == (None, -1, None)


def test_controller_and_epochs() -> None:
    c = z.ControllerZnode(broker_id=2, timestamp="1")
    assert keys(c.to_json()) == {"version": 2, "brokerid": 2, "timestamp": "1"}
    assert z.ControllerZnode.from_json(c.to_json()) == c
    # refka's controller_token, as text (63 bits do not fit a JavaScript number).
    t = z.ControllerZnode(broker_id=2, timestamp="1", controller_token=2**62 + 5)
    assert keys(t.to_json()) == {"version": 2, "brokerid": 2, "timestamp": "1", "controller_token": str(2**62 + 5)}
    assert z.ControllerZnode.from_json(t.to_json()) == t
    assert z.encode_int(7) == b"7" and z.decode_int(b"7") == 7
    cid = z.ClusterId("abc")
    assert keys(cid.to_json()) == {"version": "1", "id": "abc"}
    assert z.ClusterId.from_json(cid.to_json()) == cid


def test_topic_ids_use_kafkas_text_form() -> None:
    tid = bytes(range(16))
    text = z.topic_id_to_str(tid)
    assert text == "AAECAwQFBgcICQoLDA0ODw" and len(text) == 22 and "=" not in text
    assert z.topic_id_from_str(text) == tid
    assert z.new_topic_id() not in (b"\x00" * 16, b"\x00" * 15 + b"\x01")
    with pytest.raises(ValueError):
        z.topic_id_from_str("AAEC")


def test_topic_znode() -> None:
    t = z.TopicAssignment(
        topic="orders",
        topic_id=bytes(range(16)),
        partitions={1: [2, 3], 0: [1, 2]},
        initial_partition_count=2,
        undeleted_partition_count=2,
        topic_epoch=7,
    )
    doc = keys(t.to_json())
    assert doc == {
        "version": 3,
        "topic_id": "AAECAwQFBgcICQoLDA0ODw",
        "partitions": {"0": [1, 2], "1": [2, 3]},
        "adding_replicas": {},
        "removing_replicas": {},
        "initial_partition_count": 2,
        "undeleted_partition_count": 2,
        "topic_epoch": 7,
    }
    assert z.TopicAssignment.from_json("orders", t.to_json()) == t


def test_topic_znode_written_by_kafka_has_no_counts_yet() -> None:
    kafka = b'{"version":3,"topic_id":"AAECAwQFBgcICQoLDA0ODw","partitions":{"0":[1]},"adding_replicas":{},"removing_replicas":{}}'
    t = z.TopicAssignment.from_json("k", kafka)
    assert (t.initial_partition_count, t.undeleted_partition_count, t.topic_epoch) == (-1, -1, -1)
    assert "initial_partition_count" not in keys(t.to_json())


def test_partition_znode_has_the_seeds_keys() -> None:
    p = z.PartitionZnode(partition_epoch=12, leader_epoch_after_creation={0: 4, 1: 2})
    assert keys(p.to_json()) == {
        "version": 1,
        "partition_epoch": 12,
        "leaderEpochAfterCreation": {"0": 4, "1": 2},
        "leaderEpochBeforeDeletion": {},
    }
    assert z.PartitionZnode.from_json(p.to_json()) == p
    assert not p.marked_for_deletion
    assert z.PartitionZnode.from_json(b"") == z.PartitionZnode(-1)


def test_partition_state_is_kafkas_leader_and_isr_znode() -> None:
    s = z.PartitionStateZnode(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=3)
    assert keys(s.to_json()) == {
        "controller_epoch": 3,
        "leader": 1,
        "version": 1,
        "leader_epoch": 0,
        "isr": [1, 2],
    }
    assert z.PartitionStateZnode.from_json(s.to_json()) == s
    r = z.PartitionStateZnode(leader=2, leader_epoch=5, isr=(2,), controller_epoch=3, leader_recovery_state=1)
    assert keys(r.to_json())["leader_recovery_state"] == 1
    assert z.PartitionStateZnode.from_json(r.to_json()) == r


def test_configs_and_notifications() -> None:
    c = z.TopicConfig({"retention.ms": "1000"})
    assert keys(c.to_json()) == {"version": 1, "config": {"retention.ms": "1000"}}
    assert z.TopicConfig.from_json(c.to_json()) == c
    assert keys(z.config_change_notification("topics/t")) == {"version": 2, "entity_path": "topics/t"}
    assert z.decode_config_change(z.config_change_notification("topics/t")) == "topics/t"
    n = z.isr_change_notification([("t", 0), ("u", 3)])
    assert keys(n) == {
        "version": 1,
        "partitions": [{"topic": "t", "partition": 0}, {"topic": "u", "partition": 3}],
    }
    assert z.decode_isr_change(n) == [("t", 0), ("u", 3)]
