"""Consumer groups of unmodified kafka-python consumers against refka.

Two KafkaConsumers (each in its own thread, as an application would run
them) share a 6-partition topic, process, commit, and close (LeaveGroup).
Two new ones in the same group then resume exactly where the commits left
off: they see only the records produced afterwards.
"""

from __future__ import annotations

import threading
import uuid
from collections import defaultdict

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from tests.brokers import BrokerProcess
from tests.integration.group_helpers import TIMEOUT
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 6


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("refka-kp-groups") / "data", memory=True,
                      overrides={"group.initial.rebalance.delay.ms": "0"}).start()
    yield b
    b.stop()


def produce(bootstrap: str, topic: str, n: int, tag: str) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False)
    for i in range(n):
        p.send(topic, value=f"{tag}-{i}".encode(), partition=i % PARTITIONS)
    p.flush(TIMEOUT)
    p.close()


class Member:
    """A KafkaConsumer polled by its own thread; records kept per partition."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
            enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=1000,
        )
        # The topic's metadata before the first JoinGroup: kafka-python joins without it, and
        # a group leader that has none assigns nothing ("No partition metadata for topic",
        # kafka/coordinator/assignors/range.py) until a later refresh makes it rejoin
        # (seen once in CI, with the 60 s wait below running out).
        assert self.consumer.partitions_for_topic(topic) == set(range(PARTITIONS))
        self.consumer.subscribe([topic])
        self.records: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                batch = self.consumer.poll(timeout_ms=200)
                with self.lock:
                    for tp, msgs in batch.items():
                        self.records[tp.partition].extend((m.offset, m.value) for m in msgs)
                if batch:
                    self.consumer.commit()  # after processing
        except BaseException as e:  # surfaced by the test
            self.error = e
        finally:
            self.consumer.close()  # LeaveGroup

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def values(self) -> list[bytes]:
        with self.lock:
            return [v for recs in self.records.values() for _o, v in recs]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(TIMEOUT)
        assert self.error is None, self.error


def test_two_members_commit_close_and_new_members_resume(group_broker):
    bootstrap = group_broker.bootstrap
    topic = f"kp-grp-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    produce(bootstrap, topic, 60, "first")

    a, b = Member(bootstrap, topic, group), Member(bootstrap, topic, group)
    try:
        wait_until(lambda: len(a.assignment()) == 3 and len(b.assignment()) == 3
                   and a.assignment() | b.assignment() == set(range(PARTITIONS)),
                   message="three partitions each")
        wait_until(lambda: len(a.values()) + len(b.values()) >= 60, message="the first 60 records consumed")
    finally:
        a.close()
        b.close()
    first = sorted(a.values() + b.values())
    assert first == sorted(f"first-{i}".encode() for i in range(60))

    # The commits are the group's: every partition at its log end.
    check = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    committed = {p: check.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    check.close()
    assert committed == dict.fromkeys(range(PARTITIONS), 10)

    produce(bootstrap, topic, 30, "second")
    c, d = Member(bootstrap, topic, group), Member(bootstrap, topic, group)
    try:
        wait_until(lambda: len(c.values()) + len(d.values()) >= 30, message="the 30 new records consumed")
        wait_until(lambda: c.assignment() and d.assignment(), message="both restarted members own partitions")
    finally:
        c.close()
        d.close()
    second = c.values() + d.values()
    assert sorted(second) == sorted(f"second-{i}".encode() for i in range(30)), "resumed from the commits"
    for m in (c, d):
        for p, recs in m.records.items():
            assert recs[0][0] >= 10, (p, recs[:3])  # nothing below the committed offset
