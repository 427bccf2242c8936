"""A restarted old leader truncates its divergent tail with OffsetsForLeaderEpoch.

Two brokers in this process (``Cluster`` on a thread's loop), a topic with
replicas [0, 1]: broker 0 leads. Broker 1 catches up, then its fetcher is
stopped; broker 0 takes acks=1 records only it will ever have and is stopped
(not a controlled shutdown). Broker 1 leads at a new epoch and takes records
of its own. Broker 0, started again on the same log directory, follows broker
1: before fetching it asks where its last epoch ends on the leader
(OffsetsForLeaderEpoch), cuts its log there, then fetches until its log is the
leader's and it is back in the ISR.

Waits poll with generous deadlines; no assertion is about time.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import structlog
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.cluster_helpers import TIMEOUT, InProcessCluster
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

# Broker 1 does not fetch for a while: it must stay in the ISR meanwhile.
SLOW_SHRINK = {"replica.lag.time.max.ms": "120000"}


def produce(bootstrap: str, topic: str, values: list[bytes], acks: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                  "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 500})
    errors: list[Any] = []
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=lambda err, msg: err and errors.append(err))
        p.poll(0)
    assert p.flush(TIMEOUT) == 0
    assert errors == []


def log_bytes(p: Any) -> bytes:
    return b"".join(bytes(v) for v in p.log.read(0, 1 << 24).records)


def test_restarted_old_leader_truncates_its_divergent_tail_with_offsets_for_leader_epoch(tmp_path):
    c = InProcessCluster(tmp_path / "data", 2, SLOW_SHRINK)
    try:
        topic = f"trunc-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[0, 1]],
                                      config={"min.insync.replicas": "1"})],
                            operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
        wait_until(lambda: c.on_loop(
            lambda: (p := c.partition(0, topic)) is not None and p.is_leader and sorted(p.state.isr) == [0, 1]),
            message="broker 0 leads with ISR [0, 1]", ignoring=(Exception,))

        produce(c.bootstrap, topic, [b"common-%d" % i for i in range(30)], acks="all")
        common = c.on_loop(lambda: c.partition(0, topic).log.log_end_offset)
        wait_until(lambda: c.on_loop(
            lambda: c.partition(1, topic).log.log_end_offset == common),
            message="broker 1 caught up", ignoring=(Exception,))
        old_epoch = c.on_loop(lambda: c.partition(0, topic).state.leader_epoch)

        # Broker 1 stops fetching; broker 0 takes records only it has, then stops.
        c.on_loop(lambda: c.cluster.broker(1).replicas.fetchers.stop_fetching(topic, 0))
        produce(c.bootstrap, topic, [b"tail-%d" % i for i in range(20)], acks="1")
        tail_end = c.on_loop(lambda: c.partition(0, topic).log.log_end_offset)
        assert tail_end > common
        c.stop_broker(0)

        wait_until(lambda: c.on_loop(
            lambda: (p := c.partition(1, topic)).is_leader and p.state.leader_epoch > old_epoch),
            message="broker 1 leads at a new epoch", ignoring=(Exception,))
        produce(c.bootstrap, topic, [b"new-%d" % i for i in range(25)], acks="all")
        leader_end = c.on_loop(lambda: c.partition(1, topic).log.log_end_offset)
        assert leader_end > tail_end  # without truncation broker 0 could not just fetch on

        with structlog.testing.capture_logs() as logs:
            c.start_broker(0)
            wait_until(lambda: c.on_loop(
                lambda: (f := c.partition(0, topic)) is not None and not f.is_leader
                and f.log.log_end_offset == c.partition(1, topic).log.log_end_offset
                and 0 in c.partition(1, topic).state.isr),
                message="broker 0's log is the leader's and it is in the ISR", ignoring=(Exception,))
            truncations = [e for e in logs if e["event"] == "follower_truncated" and e.get("broker") == 0]

        # One truncation, before any fetch: to where broker 1's log left the old epoch.
        assert truncations == [{
            "event": "follower_truncated", "log_level": "info", "broker": 0, "topic": topic, "partition": 0,
            "via": "offsets_for_leader_epoch", "leader_epoch": old_epoch, "leader_end_offset": common,
            "log_end_offset_before": tail_end, "log_end_offset": common,
        }]
        follower, leader = c.on_loop(lambda: (c.partition(0, topic), c.partition(1, topic)))
        assert c.on_loop(lambda: log_bytes(follower) == log_bytes(leader))
        assert c.on_loop(lambda: follower.log.epoch_entries() == leader.log.epoch_entries())
        assert b"tail-0" not in c.on_loop(lambda: log_bytes(follower))
    finally:
        c.close()


def test_followers_fetch_in_incremental_sessions(tmp_path):
    """Each follower holds one fetch session on its leader (KIP-227): after the first full
    fetch only changed partitions are named, and the leader's session knows every
    partition the follower fetches there, at the follower's log end offset."""
    c = InProcessCluster(tmp_path / "data", 2)
    try:
        topic = f"sess-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=4, replica_assignment=[[0, 1]] * 4)],
                            operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
        produce(c.bootstrap, topic, [b"v%d" % i for i in range(50)], acks="all")

        def leader_sessions() -> list:
            b0 = c.cluster.broker(0)
            return [s for s in b0.fetch_sessions.sessions.values()
                    if {sp.topic for sp in s.partitions.values()} == {topic}]

        (session,) = wait_until(lambda: c.on_loop(lambda: (
            (s := leader_sessions()) and s[0].epoch > 2 and len(s[0].partitions) == 4 and s)),
            message="the follower's session", ignoring=(Exception,))
        ends = c.on_loop(lambda: {i: c.partition(1, topic, i).log.log_end_offset for i in range(4)})
        assert sum(ends.values()) == 50
        wait_until(lambda: c.on_loop(
            lambda: {sp.partition: sp.fetch_offset for sp in session.partitions.values()} == ends),
            message="the session at the follower's log ends", ignoring=(Exception,))
    finally:
        c.close()
