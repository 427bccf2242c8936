"""Replication between refka brokers, driven by unmodified confluent-kafka.

- One process, three brokers (``refka serve --brokers 3``): a replication
  factor 3 topic with min.insync.replicas=2 takes an idempotent acks=all
  producer's records; the leader serves them all, and both followers' log
  files end up byte-identical to the leader's.
- One process, three brokers run in-process (``Cluster`` on a thread's loop):
  the leader is stopped (not a controlled shutdown) mid-produce; the producer
  carries on with the new leader and every record is read back once, in order.
- Three processes over a private ZooKeeper: the leader is killed (SIGKILL)
  while an idempotent acks=all producer is sending; the controller elects a
  new leader from the ISR at a higher leader epoch, the producer carries on,
  and a consumer reads every acknowledged record exactly once, in order. The
  killed broker, restarted, truncates what it has beyond the new leader's
  log (OffsetsForLeaderEpoch to the new leader) and rejoins the ISR.
- acks=all with one live replica of three and min.insync.replicas=2 is
  refused with NOT_ENOUGH_REPLICAS.
- A follower stalled (SIGSTOP) past replica.lag.time.max.ms leaves the ISR
  (the leader's write through the controller package), acks=all completes
  without it, a record appended with ISR 3 and min.insync.replicas=3 is
  answered NOT_ENOUGH_REPLICAS_AFTER_APPEND; resumed, it rejoins the ISR.

Waits poll with generous deadlines (a broken broker fails instead of hanging);
no assertion is about time.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokers import BrokerProcess
from tests.integration.cluster_helpers import (
    FAST,
    InProcessCluster,
    ZkCluster,
    check_failover,
    check_new_leader,
    check_restarted_broker_rejoins,
    controller_id,
    create_rf3_topic,
    log_file,
    partition_metadata,
    produce_through_kill,
    stored_batches,
    wait_full_isr,
)
from tests.integration.confluent_helpers import TIMEOUT, consume_until_eof, consumer, unique_topic
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

def idempotent_producer(bootstrap: str, **conf: Any) -> Producer:
    base = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "message.timeout.ms": 120000, "retry.backoff.ms": 100, "topic.metadata.refresh.interval.ms": 1000}
    base.update(conf)
    return Producer(base)


def read_all(bootstrap: str, topic: str, partitions: int) -> dict[int, list[bytes]]:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    c = consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        msgs = consume_until_eof(c, set(range(partitions)))
    finally:
        c.close()
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    for m in msgs:
        out[m.partition()].append(m.value())
    return out


# -- one process, three brokers ----------------------------------------------------------------


def test_acks_all_records_reach_every_replica_in_a_one_process_cluster(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data, brokers=3, overrides=FAST) as cluster:
        topic = unique_topic("rf3")
        create_rf3_topic(cluster.bootstrap, topic)
        meta = wait_until(lambda: (m := partition_metadata(cluster.bootstrap, topic))
                          and len(m[0].isr_nodes) == 3 and m,
                          message="ISR of 3", ignoring=(Exception,))
        p = idempotent_producer(cluster.bootstrap)
        errors: list[KafkaError] = []
        values = [f"v{i}".encode() for i in range(2000)]
        for v in values:
            p.produce(topic, v, partition=0, on_delivery=lambda err, msg: err and errors.append(err))
            p.poll(0)
        assert p.flush(TIMEOUT) == 0
        assert errors == []
        assert read_all(cluster.bootstrap, topic, 1)[0] == values
        # The followers' logs are the leader's, byte for byte (same batches, offsets, epochs).
        leader = meta[0].leader_id
        leader_log = log_file(data, leader, topic)

        def same_logs() -> bool:
            want = stored_batches(leader_log)
            return all(stored_batches(log_file(data, b, topic)) == want for b in range(3))

        wait_until(same_logs, message="followers' logs equal the leader's", ignoring=(Exception,))
        assert stored_batches(leader_log)
        assert len(partition_metadata(cluster.bootstrap, topic)[0].isr_nodes) == 3


def test_leader_stopped_in_a_one_process_cluster_producer_continues(tmp_path):
    cluster = InProcessCluster(tmp_path / "data")
    try:
        bootstrap = cluster.bootstrap
        topic = unique_topic("stop")
        create_rf3_topic(bootstrap, topic)
        before = wait_full_isr(bootstrap, topic)
        leader = before.leader_id
        acked: list[bytes] = []
        failed: list[KafkaError] = []
        p = idempotent_producer(bootstrap)

        def on_delivery(err: KafkaError | None, msg: Any) -> None:
            (failed.append(err) if err is not None else acked.append(msg.value()))

        values = [f"r{i:06d}".encode() for i in range(3000)]
        for i, v in enumerate(values):
            p.produce(topic, v, partition=0, on_delivery=on_delivery)
            p.poll(0)
            if i == 1000:  # records in flight: the idempotent producer resends them to the new leader
                cluster.stop_broker(leader)
        assert p.flush(TIMEOUT * 2) == 0
        assert failed == []
        survivors = cluster.bootstrap
        check_new_leader(survivors, topic, leader, before)
        assert read_all(survivors, topic, 1)[0] == values == acked
    finally:
        cluster.close()


# -- three processes over ZooKeeper ------------------------------------------------------------


def test_leader_killed_during_produce_loses_and_duplicates_nothing(zookeeper, tmp_path):
    cluster = ZkCluster(zookeeper, tmp_path, FAST).start()
    try:
        topic = unique_topic("failover")
        create_rf3_topic(cluster.bootstrap, topic)
        before = wait_full_isr(cluster.bootstrap, topic)
        leader = before.leader_id

        acked: list[bytes] = []
        failed: list[KafkaError] = []
        lock = threading.Lock()

        def on_delivery(err: KafkaError | None, msg: Any) -> None:
            with lock:
                if err is None:
                    acked.append(msg.value())
                else:
                    failed.append(err)

        p = idempotent_producer(cluster.bootstrap)

        def acknowledged() -> int:
            with lock:
                return len(acked)

        produce_through_kill(cluster, leader, topic,
                             lambda v: p.produce(topic, v, partition=0, on_delivery=on_delivery),
                             acknowledged, lambda: p.poll(0.01))
        assert p.flush(TIMEOUT * 2) == 0
        assert failed == []
        got = check_failover(cluster, topic, leader, before, acked, lambda bs: read_all(bs, topic, 1)[0])
        check_restarted_broker_rejoins(cluster, tmp_path, topic, leader)
        extra = [b"after-restart-%d" % i for i in range(50)]
        for v in extra:
            p.produce(topic, v, partition=0, on_delivery=on_delivery)
        assert p.flush(TIMEOUT) == 0
        assert failed == []
        assert read_all(cluster.bootstrap, topic, 1)[0] == got + extra
    finally:
        cluster.stop()


def test_acks_all_with_one_live_replica_is_not_enough_replicas(zookeeper, tmp_path):
    cluster = ZkCluster(zookeeper, tmp_path, FAST).start()
    try:
        topic = unique_topic("minisr")
        create_rf3_topic(cluster.bootstrap, topic)
        meta = wait_full_isr(cluster.bootstrap, topic)
        keep = meta.leader_id
        for i, b in enumerate(cluster.procs):
            if i != keep:
                b.stop()  # clean shutdown: the controller moves them out of the ISR at once
        alone = cluster.procs[keep].bootstrap
        wait_until(lambda: partition_metadata(alone, topic)[0].isr_nodes == [keep],
                   message="ISR of 1", ignoring=(Exception,))
        reports: list[KafkaError | None] = []
        p = Producer({"bootstrap.servers": alone, "acks": "all", "retries": 0, "linger.ms": 0})
        p.produce(topic, b"refused", partition=0, on_delivery=lambda err, msg: reports.append(err))
        assert p.flush(TIMEOUT) == 0
        (err,) = reports
        assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS, err
        # acks=1 is not bound by min.insync.replicas.
        p1 = Producer({"bootstrap.servers": alone, "acks": "1", "linger.ms": 0})
        ok: list[KafkaError | None] = []
        p1.produce(topic, b"accepted", partition=0, on_delivery=lambda err, msg: ok.append(err))
        assert p1.flush(TIMEOUT) == 0
        assert ok == [None]
    finally:
        cluster.stop()


def test_a_stalled_follower_leaves_the_isr_and_rejoins_when_it_catches_up(zookeeper, tmp_path):
    # replica.lag.time.max.ms=2000: a follower not caught up for 2 s leaves the ISR.
    cluster = ZkCluster(zookeeper, tmp_path, {**FAST, "replica.lag.time.max.ms": "2000"}).start()
    try:
        # The stalled follower is not the controller (the controller propagates ISR changes).
        ctrl = controller_id(cluster.bootstrap)
        stalled = next(i for i in range(3) if i != ctrl)
        third = next(i for i in range(3) if i not in (ctrl, stalled))
        topic, strict = unique_topic("shrink"), unique_topic("minisr3")
        a = AdminClient({"bootstrap.servers": cluster.bootstrap})
        futs = a.create_topics([
            NewTopic(topic, num_partitions=1, replica_assignment=[[ctrl, third, stalled]], config={"min.insync.replicas": "2"}),
            NewTopic(strict, num_partitions=1, replica_assignment=[[ctrl, third, stalled]], config={"min.insync.replicas": "3"}),
        ], operation_timeout=TIMEOUT)
        for f in futs.values():
            f.result(TIMEOUT)
        for t in (topic, strict):
            wait_until(lambda t=t: len(partition_metadata(cluster.bootstrap, t)[0].isr_nodes) == 3,
                       message="ISR of 3", ignoring=(Exception,))
        others = cluster.bootstrap_without(stalled)
        p = idempotent_producer(others)
        errors: list[KafkaError] = []

        def send(n: int, tag: str) -> None:
            for i in range(n):
                p.produce(topic, f"{tag}-{i}".encode(), partition=0,
                          on_delivery=lambda err, msg: err and errors.append(err))
            assert p.flush(TIMEOUT) == 0

        once = Producer({"bootstrap.servers": others, "acks": "all", "retries": 0, "linger.ms": 0})
        strict_reports: list[KafkaError | None] = []
        cluster.procs[stalled].proc.send_signal(signal.SIGSTOP)
        try:
            # Appended while the ISR has 3 (min.insync.replicas=3 allows it), acknowledged
            # only after the ISR shrank to 2: NOT_ENOUGH_REPLICAS_AFTER_APPEND.
            once.produce(strict, b"x", partition=0, on_delivery=lambda err, msg: strict_reports.append(err))
            send(10, "while-stalled")  # acks=all waits until the ISR no longer has it
            assert once.flush(TIMEOUT) == 0
            wait_until(lambda: stalled not in partition_metadata(others, topic)[0].isr_nodes,
                       message="the stalled follower out of the ISR", ignoring=(Exception,))
            assert partition_metadata(others, topic)[0].leader_id == ctrl
        finally:
            cluster.procs[stalled].proc.send_signal(signal.SIGCONT)
        (err,) = strict_reports
        assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND, err
        send(10, "after")
        wait_until(lambda: stalled in partition_metadata(others, topic)[0].isr_nodes,
                   message="the follower back in the ISR", ignoring=(Exception,))
        assert errors == []
        assert read_all(others, topic, 1)[0] == [f"{t}-{i}".encode() for t in ("while-stalled", "after")
                                                  for i in range(10)]
    finally:
        cluster.stop()
