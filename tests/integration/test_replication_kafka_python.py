"""Leader failover with unmodified kafka-python: its idempotent acks=all
producer, its consumer and its admin client, in both cluster forms.

- One process, three brokers (``Cluster`` on a thread's loop): the topic is
  created with KafkaAdminClient (replication factor 3, min.insync.replicas=2);
  the leader is stopped (not a controlled shutdown) while the producer has
  records in flight; the producer moves to the new leader by itself and a
  KafkaConsumer reads every record once, in the order sent.
- Three processes over a private ZooKeeper: the leader is killed (SIGKILL)
  after taking acks=1 records its followers never fetched; the controller
  elects a new leader from the ISR at a higher epoch; every record the
  producer was told was written is read back exactly once and in order, the
  dead leader's own tail is gone, and the restarted broker truncates it and
  rejoins the ISR.

The confluent-kafka forms of the same scenarios are in test_replication.py.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from tests.integration.cluster_helpers import (
    FAST,
    TIMEOUT,
    InProcessCluster,
    ZkCluster,
    check_failover,
    check_new_leader,
    check_restarted_broker_rejoins,
    produce_through_kill,
    wait_full_isr,
)
from tests.integration.confluent_helpers import unique_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def servers(bootstrap: str) -> list[str]:
    return bootstrap.split(",")


def create_rf3_topic(bootstrap: str, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=servers(bootstrap), request_timeout_ms=int(TIMEOUT * 1000),
                             client_id="failover-admin")
    try:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3,
                                      topic_configs={"min.insync.replicas": "2"})],
                            timeout_ms=int(TIMEOUT * 1000))
    finally:
        admin.close()


def idempotent_producer(bootstrap: str) -> KafkaProducer:
    return KafkaProducer(
        bootstrap_servers=servers(bootstrap),
        enable_idempotence=True,
        acks="all",
        linger_ms=5,
        retry_backoff_ms=100,
        metadata_max_age_ms=1000,
        request_timeout_ms=int(TIMEOUT * 1000),
        delivery_timeout_ms=int(TIMEOUT * 4000),
        client_id="failover-producer",
    )


def read_all(bootstrap: str, topic: str) -> list[bytes]:
    """Partition 0 from its start to its high watermark, with a KafkaConsumer."""
    tp = TopicPartition(topic, 0)
    c = KafkaConsumer(bootstrap_servers=servers(bootstrap), group_id=None, enable_auto_commit=False,
                      fetch_max_wait_ms=200, client_id="failover-consumer")
    try:
        c.assign([tp])
        c.seek_to_beginning(tp)
        end = c.end_offsets([tp])[tp]
        out: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT * 2
        while c.position(tp) < end:
            assert time.monotonic() < deadline, f"read {len(out)} of {end} records"
            for records in c.poll(timeout_ms=500).values():
                out.extend(r.value for r in records)
        return out
    finally:
        c.close()


def outcome(futures: list[tuple[bytes, Any]]) -> tuple[list[bytes], list[Exception]]:
    """(acknowledged values in send order, errors) of a producer's futures, all resolved."""
    acked: list[bytes] = []
    errors: list[Exception] = []
    for value, fut in futures:
        try:
            fut.get(TIMEOUT)
            acked.append(value)
        except Exception as e:  # noqa: BLE001 - the test reports every failure
            errors.append(e)
    return acked, errors


def test_leader_stopped_in_a_one_process_cluster_kafka_python_continues(tmp_path):
    cluster = InProcessCluster(tmp_path / "data")
    try:
        bootstrap = cluster.bootstrap
        topic = unique_topic("kp-stop")
        create_rf3_topic(bootstrap, topic)
        before = wait_full_isr(bootstrap, topic)
        leader = before.leader_id
        p = idempotent_producer(bootstrap)
        values = [f"r{i:06d}".encode() for i in range(3000)]
        futures = []
        try:
            for i, v in enumerate(values):
                futures.append((v, p.send(topic, value=v, partition=0)))
                if i == 1000:  # records in flight: the idempotent producer resends them to the new leader
                    cluster.stop_broker(leader)
            p.flush(TIMEOUT * 2)
            acked, errors = outcome(futures)
        finally:
            p.close(10)
        assert errors == []
        survivors = cluster.bootstrap
        check_new_leader(survivors, topic, leader, before)
        assert read_all(survivors, topic) == values == acked
    finally:
        cluster.close()


def test_leader_killed_during_produce_kafka_python_loses_and_duplicates_nothing(zookeeper, tmp_path):
    cluster = ZkCluster(zookeeper, tmp_path, FAST).start()
    try:
        topic = unique_topic("kp-failover")
        create_rf3_topic(cluster.bootstrap, topic)
        before = wait_full_isr(cluster.bootstrap, topic)
        leader = before.leader_id

        p = idempotent_producer(cluster.bootstrap)
        futures: list[tuple[bytes, Any]] = []
        try:
            def send(v: bytes) -> None:
                futures.append((v, p.send(topic, value=v, partition=0)))

            produce_through_kill(cluster, leader, topic, send,
                                 lambda: sum(1 for _, f in futures if f.is_done), lambda: time.sleep(0.01))
            p.flush(TIMEOUT * 2)
            acked, errors = outcome(futures)
        finally:
            p.close(10)
        assert errors == []
        got = check_failover(cluster, topic, leader, before, acked, lambda bs: read_all(bs, topic))
        check_restarted_broker_rejoins(cluster, tmp_path, topic, leader)
        assert read_all(cluster.bootstrap, topic) == got
    finally:
        cluster.stop()
