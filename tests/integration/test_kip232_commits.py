"""KIP-232 (seed 002) on OffsetCommit: a commit carrying epochs older than the
partition's last commit, or a topic epoch older than the topic's, is refused
with INVALID_INTERNAL_METADATA and nothing is written; -1 (a stock client) is
never refused. Both epochs come back from OffsetFetch. On the wire against one
broker, and with confluent-kafka's commits (which carry -1)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from refka.protocol import ErrorCode
from refka.protocol.messages.find_coordinator import FindCoordinator
from refka.protocol.messages.offset_commit import OffsetCommit
from refka.protocol.messages.offset_fetch import OffsetFetch
from tests.brokers import BrokerProcess
from tests.integration.cluster_helpers import TIMEOUT, Raw, metadata
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

GROUP = "kip232-g"
STALE = ErrorCode.INVALID_INTERNAL_METADATA


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("kip232") / "data", memory=True).start()
    yield b
    b.stop()


def _create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer: its futures need it
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)],
                        operation_timeout=TIMEOUT)[topic].result(TIMEOUT)


def _topic_epoch(port: int, topic: str) -> int:
    (t,) = metadata(port, topic).topics
    return t.topic_epoch if t.error_code == 0 else -1


def commit(port: int, topic: str, offset: int, leader_epoch: int, topic_epoch: int, version: int = 8) -> int:
    """The error code of one partition's commit from outside the group (generation -1),
    retried while the coordinator is not there yet."""
    C = OffsetCommit.Request.OffsetCommitRequestTopic
    req = OffsetCommit.Request(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", topics=[
        C(name=topic, partitions=[C.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=leader_epoch,
            committed_metadata="", topic_epoch=topic_epoch)])])
    code: list[int] = []

    def answered() -> bool:
        raw = Raw(port)
        try:
            raw.call_raw(FindCoordinator, FindCoordinator.Request(key=GROUP, key_type=0), 3)
            resp, _ = raw.call_raw(OffsetCommit, req, version)
        finally:
            raw.close()
        code[:] = [resp.topics[0].partitions[0].error_code]
        return code[0] not in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                               ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)

    wait_until(answered, timeout=TIMEOUT, interval=0.1, message="the coordinator answering")
    return code[0]


def committed(port: int, topic: str) -> tuple[int, int, int]:
    """(offset, leader epoch, topic epoch) the group has for partition 0."""
    F = OffsetFetch.Request
    raw = Raw(port)
    try:
        resp, _ = raw.call_raw(OffsetFetch, F(group_id=GROUP, topics=[
            F.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])], refka_extensions=True), 7)
    finally:
        raw.close()
    (p,) = resp.topics[0].partitions
    return p.committed_offset, p.committed_leader_epoch, p.topic_epoch


def test_older_epochs_are_refused_and_nothing_is_written(broker):
    topic = "kip232-order"
    _create(broker.bootstrap, topic)
    e = _topic_epoch(broker.port, topic)
    assert e >= 0
    assert commit(broker.port, topic, 10, leader_epoch=3, topic_epoch=e) == 0
    assert committed(broker.port, topic) == (10, 3, e)
    assert commit(broker.port, topic, 12, leader_epoch=2, topic_epoch=e) == STALE  # same topic epoch, older leader
    assert commit(broker.port, topic, 12, leader_epoch=9, topic_epoch=e - 1) == STALE  # older topic epoch
    assert committed(broker.port, topic) == (10, 3, e)
    # Not older: accepted, even at a lower offset (the epochs order commits, not offsets).
    assert commit(broker.port, topic, 5, leader_epoch=3, topic_epoch=e) == 0
    assert commit(broker.port, topic, 6, leader_epoch=4, topic_epoch=e) == 0
    assert committed(broker.port, topic) == (6, 4, e)
    # -1 in either field, or a version without the topic epoch: Kafka's behaviour, never refused.
    assert commit(broker.port, topic, 7, leader_epoch=-1, topic_epoch=e - 1) == 0
    assert commit(broker.port, topic, 8, leader_epoch=0, topic_epoch=-1) == 0
    assert commit(broker.port, topic, 9, leader_epoch=0, topic_epoch=e, version=7) == 0
    assert committed(broker.port, topic) == (9, 0, -1)


def test_after_a_re_creation_the_old_topic_epoch_is_refused_and_the_new_one_accepted_lower(broker):
    topic = "kip232-recreated"
    _create(broker.bootstrap, topic)
    old = _topic_epoch(broker.port, topic)
    assert commit(broker.port, topic, 100, leader_epoch=0, topic_epoch=old) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([topic], operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
    wait_until(lambda: _topic_epoch(broker.port, topic) == -1, timeout=TIMEOUT, message="the topic gone")
    _create(broker.bootstrap, topic)
    wait_until(lambda: _topic_epoch(broker.port, topic) > old, timeout=TIMEOUT, message="the topic re-created")
    new = _topic_epoch(broker.port, topic)
    # A consumer that still has the deleted topic's metadata commits its old position.
    assert commit(broker.port, topic, 150, leader_epoch=5, topic_epoch=old) == STALE
    assert commit(broker.port, topic, 3, leader_epoch=0, topic_epoch=new) == 0
    assert committed(broker.port, topic) == (3, 0, new)
    assert commit(broker.port, topic, 150, leader_epoch=5, topic_epoch=old) == STALE


def test_a_stock_clients_commits_carry_minus_one_and_are_never_refused(broker):
    topic = "kip232-stock"
    _create(broker.bootstrap, topic)
    e = _topic_epoch(broker.port, topic)
    assert commit(broker.port, topic, 50, leader_epoch=7, topic_epoch=e) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        (tp,) = c.commit(offsets=[TopicPartition(topic, 0, 20)], asynchronous=False)
        assert tp.error is None
    finally:
        c.close()
    offset, _leader_epoch, topic_epoch = committed(broker.port, topic)
    assert (offset, topic_epoch) == (20, -1)
