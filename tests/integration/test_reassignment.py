"""AlterPartitionReassignments (45) and ListPartitionReassignments (46).

confluent-kafka's Python AdminClient (2.16) does not have these APIs:
kafka-python's KafkaAdminClient (which finds the controller itself) drives a
move of a partition with data, and the error cases go over a raw connection
to the controller of a one-process, three-broker cluster. Completion of a reassignment that adds a replica needs that replica
to catch up and join the ISR (replication); the checks read Metadata
(replicas, leader, leader epoch) and ListPartitionReassignments, not data.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from refka.protocol import ErrorCode
from refka.protocol.messages.alter_partition_reassignments import AlterPartitionReassignments
from refka.protocol.messages.list_partition_reassignments import ListPartitionReassignments
from tests.brokers import BrokerProcess
from tests.integration.cluster_helpers import TIMEOUT, Raw, metadata
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

AReq = AlterPartitionReassignments.Request
LReq = ListPartitionReassignments.Request


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("reassign") / "data", brokers=3, memory=True).start()
    yield b
    b.stop()


def ports(three) -> tuple[int, int]:
    """(the controller's port, another broker's port)."""
    md = metadata(three.port)
    by_id = {b.node_id: b.port for b in md.brokers}
    return by_id[md.controller_id], next(p for n, p in by_id.items() if n != md.controller_id)


def create(three, assignment: list[list[int]]) -> str:
    topic = f"re-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": three.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)],
                        operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
    return topic


def alter(port: int, topic: str, targets: dict[int, list[int] | None], version: int = 1, allow: bool = True):
    req = AReq(timeout_ms=10_000, allow_replication_factor_change=allow, topics=[AReq.ReassignableTopic(
        name=topic, partitions=[AReq.ReassignableTopic.ReassignablePartition(partition_index=p, replicas=r)
                                for p, r in targets.items()])])
    raw = Raw(port)
    try:
        resp, _ = raw.call_raw(AlterPartitionReassignments, req, version)
    finally:
        raw.close()
    return resp


def codes(resp) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in resp.responses for p in t.partitions}


def ongoing(port: int, topic: str | None = None) -> dict[tuple[str, int], tuple[list, list, list]]:
    topics = None if topic is None else [LReq.ListPartitionReassignmentsTopics(name=topic, partition_indexes=[0, 1])]
    raw = Raw(port)
    try:
        resp, _ = raw.call_raw(ListPartitionReassignments, LReq(timeout_ms=10_000, topics=topics), 0)
    finally:
        raw.close()
    assert resp.error_code == ErrorCode.NONE
    return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for t in resp.topics for p in t.partitions}


def partition(port: int, topic: str, p: int = 0):
    (t,) = metadata(port, topic).topics
    return next(x for x in t.partitions if x.partition_index == p)


def test_errors(three):
    controller, _ = ports(three)
    topic = create(three, [[0, 1]])
    resp = alter(controller, topic, {0: [], 1: [0]})
    assert resp.error_code == ErrorCode.NONE
    assert codes(resp) == {(topic, 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           (topic, 1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert codes(alter(controller, topic, {0: [1, 1]})) == {(topic, 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert codes(alter(controller, topic, {0: [0, 9]})) == {(topic, 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert codes(alter(controller, topic, {0: None})) == {(topic, 0): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
    assert codes(alter(controller, topic, {0: [0, 1, 2]}, allow=False)) == {
        (topic, 0): ErrorCode.INVALID_REPLICATION_FACTOR}
    assert codes(alter(controller, "no-such-" + topic, {0: [0]})) == {
        ("no-such-" + topic, 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    # The same target as now: nothing to do, nothing listed.
    assert codes(alter(controller, topic, {0: [0, 1]}, version=0)) == {(topic, 0): ErrorCode.NONE}
    assert ongoing(controller, topic) == {}
    assert partition(controller, topic).leader_epoch == 0


def test_not_controller(three):
    _, other = ports(three)
    topic = create(three, [[0, 1]])
    resp = alter(other, topic, {0: [1, 0]})
    assert resp.error_code == ErrorCode.NOT_CONTROLLER and resp.responses == []
    raw = Raw(other)
    try:
        lresp, _ = raw.call_raw(ListPartitionReassignments, LReq(timeout_ms=1000, topics=None), 0)
    finally:
        raw.close()
    assert lresp.error_code == ErrorCode.NOT_CONTROLLER


def test_shrinking_to_replicas_in_the_isr_completes_at_once(three):
    controller, _ = ports(three)
    topic = create(three, [[2, 0, 1]])
    before = partition(controller, topic)
    assert before.leader_id == 2
    assert codes(alter(controller, topic, {0: [0, 1]})) == {(topic, 0): ErrorCode.NONE}
    p = wait_until(lambda: (x := partition(controller, topic)).replica_nodes == [0, 1] and x,
                   message="replicas [0, 1]")
    # The leader was removed: the first target replica in the ISR leads, with a newer epoch.
    assert p.leader_id == 0 and p.leader_epoch > before.leader_epoch
    assert sorted(p.isr_nodes) == [0, 1]
    assert ongoing(controller) == {} or (topic, 0) not in ongoing(controller)


def test_moving_a_replica_to_another_broker(three):
    """[0] -> [1]: listed as ongoing (replicas [1, 0], adding [1], removing [0]) until broker 1
    joined the ISR, then done: replicas [1], led by 1 with a newer epoch."""
    controller, _ = ports(three)
    topic = create(three, [[0]])
    before = partition(controller, topic)
    assert codes(alter(controller, topic, {0: [1]})) == {(topic, 0): ErrorCode.NONE}
    now = ongoing(controller, topic)
    assert now in ({(topic, 0): ([1, 0], [1], [0])}, {})  # {} if it already completed
    p = wait_until(lambda: (x := partition(controller, topic)).replica_nodes == [1] and x,
                   message="replicas [1]")
    assert p.leader_id == 1 and p.leader_epoch > before.leader_epoch and list(p.isr_nodes) == [1]
    assert (topic, 0) not in ongoing(controller)


def test_kafka_python_admin_moves_a_partition_with_its_records(three):
    """kafka-python's alter/list_partition_reassignments: [0] -> [1, 2] for a partition
    holding records; when done, 1 leads at a newer epoch, 2 follows, and a kafka-python
    consumer reads every record from the new replicas."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import NoReassignmentInProgressError

    controller, _ = ports(three)
    topic = create(three, [[0]])
    tp = TopicPartition(topic, 0)
    values = [b"r%04d" % i for i in range(2000)]
    producer = KafkaProducer(bootstrap_servers=three.bootstrap, acks="all", linger_ms=5)
    try:
        for v in values:
            producer.send(topic, value=v, partition=0)
        producer.flush(TIMEOUT)
    finally:
        producer.close(10)
    before = partition(controller, topic)
    admin = KafkaAdminClient(bootstrap_servers=three.bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    try:
        assert admin.alter_partition_reassignments({tp: [1, 2]}) == {tp: None}
        listed = admin.list_partition_reassignments([tp])
        # Listed while the new replicas catch up ({} if they already had).
        assert listed in ({tp: {"replicas": [1, 2, 0], "adding_replicas": [1, 2], "removing_replicas": [0]}}, {})
        p = wait_until(lambda: (x := partition(controller, topic)).replica_nodes == [1, 2] and x,
                       message="replicas [1, 2]")
        assert p.leader_id == 1 and p.leader_epoch > before.leader_epoch and sorted(p.isr_nodes) == [1, 2]
        assert admin.list_partition_reassignments([tp]) == {}
        # Nothing in progress any more: a cancellation says so.
        assert admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=three.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < len(values) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
    finally:
        consumer.close()
    assert got == values


def test_a_leader_that_loses_an_epoch_it_wrote_nothing_in_follows_on(three):
    """Reassignment [0, 1, 2] -> [1, 2, 0] bumps the epoch with 0 still leading (0 records
    the new epoch's start); ElectLeaders then moves leadership to 1 before any record of that
    epoch. 0, now a follower, must drop that empty epoch and fetch on: acks=all records are
    acknowledged by the whole ISR, 0 included (before the fix its fetches were answered with
    the same diverging epoch forever, until replica.lag.time.max.ms took it out of the ISR)."""
    from confluent_kafka import ElectionType, Producer
    from confluent_kafka import TopicPartition as CTP

    controller, _ = ports(three)
    topic = create(three, [[0, 1, 2]])
    wait_until(lambda: sorted(partition(controller, topic).isr_nodes) == [0, 1, 2], message="ISR [0, 1, 2]")
    p = Producer({"bootstrap.servers": three.bootstrap, "acks": "all", "linger.ms": 0})
    reports: list = []
    for i in range(20):
        p.produce(topic, b"before-%d" % i, partition=0, on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(TIMEOUT) == 0
    before = partition(controller, topic)
    assert codes(alter(controller, topic, {0: [1, 2, 0]})) == {(topic, 0): ErrorCode.NONE}
    admin = AdminClient({"bootstrap.servers": three.bootstrap})
    admin.elect_leaders(ElectionType.PREFERRED, [CTP(topic, 0)]).result(TIMEOUT)
    moved = wait_until(lambda: (x := partition(controller, topic)).leader_id == 1 and x, message="leader 1")
    assert moved.leader_epoch >= before.leader_epoch + 2  # the reassignment's bump, then the election's
    for i in range(20):
        p.produce(topic, b"after-%d" % i, partition=0, on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(TIMEOUT) == 0
    assert reports == [None] * 40
    assert sorted(partition(controller, topic).isr_nodes) == [0, 1, 2]
