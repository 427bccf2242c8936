"""Admin APIs of real admin clients against refka: confluent-kafka's AdminClient
and kafka-python's KafkaAdminClient.

DeleteRecords, CreatePartitions, ListGroups, DescribeGroups, OffsetFetch,
OffsetCommit (alter offsets), OffsetDelete and DeleteGroups, each checked by
what a user sees afterwards (watermarks, where a consumer starts, what the
next listing shows), not only by the admin answer. Groups are made the way a
user makes them: a real consumer subscribes, commits and closes.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import NewPartitions
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import GroupSubscribedToTopicError, InvalidPartitionsError, NoError, OffsetOutOfRangeError

from tests.brokers import BrokerProcess
from tests.integration.confluent_helpers import (
    TIMEOUT,
    admin,
    consumer,
    create_topic,
    producer,
    read_partition,
    unique_topic,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

GROUP_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def admin_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("refka-admin") / "data", overrides=GROUP_OVERRIDES).start()
    yield b
    b.stop()


def unique_group(prefix: str) -> str:
    return f"adm-{prefix}-{uuid.uuid4().hex[:8]}"


def fill(bootstrap: str, topic: str, per_partition: int, partitions: int = 1) -> None:
    p = producer(bootstrap, acks="all")
    for part in range(partitions):
        for i in range(per_partition):
            p.produce(topic, value=f"{part}-{i}".encode(), partition=part)
    assert p.flush(TIMEOUT) == 0


class LiveMember:
    """A confluent-kafka consumer subscribed to ``topic`` in ``group``, polled until assigned.

    librdkafka heartbeats from its own thread, so the member stays in the
    group between polls until ``close()`` (which sends LeaveGroup).
    """

    def __init__(self, bootstrap: str, topic: str, group: str, **conf: object) -> None:
        self.assigned: list[TopicPartition] = []
        self.consumer = consumer(bootstrap, **{"group.id": group, "auto.offset.reset": "earliest",
                                               "enable.partition.eof": False, "enable.auto.offset.store": True,
                                               **conf})
        self.consumer.subscribe([topic], on_assign=lambda _c, parts: self.assigned.extend(parts))

    def poll_until_assigned(self) -> None:
        def assigned() -> bool:
            self.consumer.poll(0.2)
            return bool(self.assigned)
        wait_until(assigned, message="partition assignment", interval=0)

    def consume(self, n: int) -> list:
        out: list = []

        def enough() -> bool:
            m = self.consumer.poll(0.2)
            if m is not None:
                if m.error() is not None:
                    raise KafkaException(m.error())
                out.append(m)
            return len(out) >= n
        wait_until(enough, message=f"{n} messages", interval=0)
        return out

    def close(self) -> None:
        self.consumer.close()


def make_group(bootstrap: str, topic: str, group: str, per_partition: int, partitions: int = 1) -> None:
    """A group that committed ``per_partition`` on every partition and is Empty again."""
    m = LiveMember(bootstrap, topic, group)
    try:
        m.consume(per_partition * partitions)
        m.consumer.commit(asynchronous=False)
    finally:
        m.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    a = admin(bootstrap)
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    res = a.list_consumer_group_offsets([req], request_timeout=TIMEOUT)[group].result(TIMEOUT)
    assert res.group_id == group
    out = {}
    for tp in res.topic_partitions:
        assert tp.error is None, tp.error
        out[tp.partition] = tp.offset
    return out


def listed_groups(bootstrap: str, states: set[ConsumerGroupState] | None = None) -> dict[str, ConsumerGroupState]:
    a = admin(bootstrap)
    kwargs = {"states": states} if states is not None else {}
    res = a.list_consumer_groups(request_timeout=TIMEOUT, **kwargs).result(TIMEOUT)
    assert res.errors == []
    return {g.group_id: g.state for g in res.valid}


# -- confluent-kafka AdminClient


def test_ck_delete_records_moves_low_watermark(admin_broker):
    bs = admin_broker.bootstrap
    topic = unique_topic("delrec")
    create_topic(bs, topic)
    fill(bs, topic, 10)

    a = admin(bs)
    res = a.delete_records([TopicPartition(topic, 0, 4)], request_timeout=TIMEOUT)
    deleted = res[TopicPartition(topic, 0)].result(TIMEOUT)
    assert deleted.low_watermark == 4

    c = consumer(bs)
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT) == (4, 10)
    finally:
        c.close()
    msgs = read_partition(bs, topic, 0, OFFSET_BEGINNING)
    assert [m.offset() for m in msgs] == list(range(4, 10))
    assert msgs[0].value() == b"0-4"


def test_ck_delete_records_beyond_high_watermark_is_offset_out_of_range(admin_broker):
    bs = admin_broker.bootstrap
    topic = unique_topic("delrec-oor")
    create_topic(bs, topic)
    fill(bs, topic, 3)

    a = admin(bs)
    fut = a.delete_records([TopicPartition(topic, 0, 4)], request_timeout=TIMEOUT)[TopicPartition(topic, 0)]
    with pytest.raises(KafkaException) as exc:
        fut.result(TIMEOUT)
    assert exc.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE

    c = consumer(bs)
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT) == (0, 3)
    finally:
        c.close()


def test_ck_create_partitions_grows_and_refuses_shrinking_or_same_count(admin_broker):
    bs = admin_broker.bootstrap
    topic = unique_topic("parts")
    # Kafka's rules: without KIP-253's ordered delivery a topic only grows (the shrink is below).
    create_topic(bs, topic, partitions=2, config={"enable.ordered.delivery": "false"})
    a = admin(bs)

    a.create_partitions([NewPartitions(topic, 4)], operation_timeout=TIMEOUT,
                        request_timeout=TIMEOUT)[topic].result(TIMEOUT)
    md = a.list_topics(topic, timeout=TIMEOUT)
    assert sorted(md.topics[topic].partitions) == [0, 1, 2, 3]
    fill(bs, topic, 2, partitions=4)
    assert [m.value() for m in read_partition(bs, topic, 3)] == [b"3-0", b"3-1"]

    for count in (3, 4):
        fut = a.create_partitions([NewPartitions(topic, count)], request_timeout=TIMEOUT)[topic]
        with pytest.raises(KafkaException) as exc:
            fut.result(TIMEOUT)
        assert exc.value.args[0].code() == KafkaError.INVALID_PARTITIONS, count
    assert len(a.list_topics(topic, timeout=TIMEOUT).topics[topic].partitions) == 4


def test_stock_admin_clients_shrink_a_topic_with_kip_253(admin_broker, kp_admin):
    """A count below the current one (and not below the topic's initial count) marks the
    partitions above it for deletion: they stay listed, readable, until drained."""
    bs = admin_broker.bootstrap
    topic = unique_topic("shrink")
    create_topic(bs, topic, partitions=2)
    a = admin(bs)
    a.create_partitions([NewPartitions(topic, 5)], operation_timeout=TIMEOUT,
                        request_timeout=TIMEOUT)[topic].result(TIMEOUT)
    fill(bs, topic, 2, partitions=5)

    a.create_partitions([NewPartitions(topic, 4)], operation_timeout=TIMEOUT,
                        request_timeout=TIMEOUT)[topic].result(TIMEOUT)
    kp_admin.create_partitions({topic: 3})
    assert sorted(a.list_topics(topic, timeout=TIMEOUT).topics[topic].partitions) == [0, 1, 2, 3, 4]
    assert [m.value() for m in read_partition(bs, topic, 4)] == [b"4-0", b"4-1"]
    for count, why in ((1, "initial_partition_count"), (6, "marked for deletion")):
        fut = a.create_partitions([NewPartitions(topic, count)], request_timeout=TIMEOUT)[topic]
        with pytest.raises(KafkaException) as exc:
            fut.result(TIMEOUT)
        assert exc.value.args[0].code() == KafkaError.INVALID_PARTITIONS, count
        assert why in exc.value.args[0].str(), exc.value.args[0].str()
    with pytest.raises(InvalidPartitionsError):
        kp_admin.create_partitions({topic: 3})  # the same count


def test_ck_list_consumer_groups_filters_by_state(admin_broker):
    bs = admin_broker.bootstrap
    topic = unique_topic("list")
    create_topic(bs, topic)
    fill(bs, topic, 3)
    empty = unique_group("empty")
    make_group(bs, topic, empty, 3)
    live = unique_group("live")
    member = LiveMember(bs, topic, live)
    try:
        member.poll_until_assigned()
        everything = listed_groups(bs)
        assert everything[empty] == ConsumerGroupState.EMPTY
        assert everything[live] == ConsumerGroupState.STABLE

        only_empty = listed_groups(bs, {ConsumerGroupState.EMPTY})
        assert empty in only_empty and live not in only_empty
        only_stable = listed_groups(bs, {ConsumerGroupState.STABLE})
        assert live in only_stable and empty not in only_stable
    finally:
        member.close()


def test_ck_describe_consumer_groups_shows_members_state_and_protocol(admin_broker):
    bs = admin_broker.bootstrap
    topic = unique_topic("describe")
    create_topic(bs, topic, partitions=2)
    group = unique_group("describe")
    member = LiveMember(bs, topic, group, **{"client.id": "describe-me", "partition.assignment.strategy": "range"})
    try:
        member.poll_until_assigned()
        a = admin(bs)
        d = a.describe_consumer_groups([group], request_timeout=TIMEOUT)[group].result(TIMEOUT)
        assert d.group_id == group
        assert d.state == ConsumerGroupState.STABLE
        assert d.partition_assignor == "range"
        assert d.is_simple_consumer_group is False
        assert len(d.members) == 1
        m = d.members[0]
        assert m.client_id == "describe-me"
        assert m.member_id.startswith("describe-me")
        assert {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions} == {(topic, 0), (topic, 1)}
        assert d.coordinator.port == int(bs.rsplit(":", 1)[1])
    finally:
        member.close()

    a = admin(bs)  # kept alive until the answer: a dropped client never completes its futures
    d = a.describe_consumer_groups([group], request_timeout=TIMEOUT)[group].result(TIMEOUT)
    assert d.state == ConsumerGroupState.EMPTY
    assert d.members == []


def test_ck_list_consumer_group_offsets_shows_commits(admin_broker):
    bs = admin_broker.bootstrap
    topic = unique_topic("offsets")
    create_topic(bs, topic, partitions=2)
    fill(bs, topic, 3, partitions=2)
    group = unique_group("offsets")
    make_group(bs, topic, group, 3, partitions=2)
    assert committed(bs, group, topic, 2) == {0: 3, 1: 3}

    # No partitions named: every partition the group committed.
    a = admin(bs)
    res = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                        request_timeout=TIMEOUT)[group].result(TIMEOUT)
    assert {(tp.topic, tp.partition, tp.offset) for tp in res.topic_partitions} == {(topic, 0, 3), (topic, 1, 3)}


def test_ck_alter_consumer_group_offsets_moves_where_the_group_resumes(admin_broker):
    bs = admin_broker.bootstrap
    topic = unique_topic("alter")
    create_topic(bs, topic)
    fill(bs, topic, 10)
    group = unique_group("alter")
    make_group(bs, topic, group, 10)
    assert committed(bs, group, topic, 1) == {0: 10}

    a = admin(bs)
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 2)])
    res = a.alter_consumer_group_offsets([req], request_timeout=TIMEOUT)[group].result(TIMEOUT)
    assert [(tp.partition, tp.offset, tp.error) for tp in res.topic_partitions] == [(0, 2, None)]
    assert committed(bs, group, topic, 1) == {0: 2}

    m = LiveMember(bs, topic, group)
    try:
        msgs = m.consume(8)
    finally:
        m.close()
    assert [x.offset() for x in msgs] == list(range(2, 10))


def test_ck_delete_consumer_groups_deletes_empty_and_refuses_live(admin_broker):
    bs = admin_broker.bootstrap
    topic = unique_topic("delgrp")
    create_topic(bs, topic)
    fill(bs, topic, 2)
    empty = unique_group("empty")
    make_group(bs, topic, empty, 2)
    live = unique_group("live")
    member = LiveMember(bs, topic, live)
    try:
        member.poll_until_assigned()
        a = admin(bs)
        futs = a.delete_consumer_groups([empty, live], request_timeout=TIMEOUT)
        futs[empty].result(TIMEOUT)
        with pytest.raises(KafkaException) as exc:
            futs[live].result(TIMEOUT)
        assert exc.value.args[0].code() == KafkaError.NON_EMPTY_GROUP

        groups = listed_groups(bs)
        assert empty not in groups
        assert groups[live] == ConsumerGroupState.STABLE
        # Its committed offsets went with it.
        assert committed(bs, empty, topic, 1) == {0: -1001}
    finally:
        member.close()


# -- kafka-python KafkaAdminClient (3.x names: list_groups, describe_groups, ...)


@pytest.fixture
def kp_admin(admin_broker):
    a = KafkaAdminClient(bootstrap_servers=admin_broker.bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    yield a
    a.close()


def test_kp_list_and_describe_groups(admin_broker, kp_admin):
    bs = admin_broker.bootstrap
    topic = unique_topic("kp-list")
    create_topic(bs, topic)
    fill(bs, topic, 2)
    empty = unique_group("kp-empty")
    make_group(bs, topic, empty, 2)
    live = unique_group("kp-live")
    member = LiveMember(bs, topic, live, **{"client.id": "kp-describe"})
    try:
        member.poll_until_assigned()
        listed = {g["group_id"]: g for g in kp_admin.list_groups()}
        assert listed[empty]["group_state"] == "Empty"
        assert listed[live]["group_state"] == "Stable"
        assert listed[live]["protocol_type"] == "consumer"
        stable = {g["group_id"] for g in kp_admin.list_groups(states_filter=["Stable"])}
        assert live in stable and empty not in stable

        described = kp_admin.describe_groups([empty, live])
        assert described[live]["protocol_data"] == "range"
        assert described[live]["members"][0]["member_assignment"]["assigned_partitions"] == [
            {"topic": topic, "partitions": [0]}]
        assert described[live]["members"][0]["member_metadata"]["topics"] == [topic]
        assert described[live]["group_state"] == "Stable"
        assert described[live]["protocol_type"] == "consumer"
        assert [m["client_id"] for m in described[live]["members"]] == ["kp-describe"]
        assert described[empty]["group_state"] == "Empty"
        assert described[empty]["members"] == []
    finally:
        member.close()


def test_kp_list_group_offsets_and_delete_groups(admin_broker, kp_admin):
    bs = admin_broker.bootstrap
    topic = unique_topic("kp-offsets")
    create_topic(bs, topic, partitions=2)
    fill(bs, topic, 3, partitions=2)
    group = unique_group("kp-offsets")
    make_group(bs, topic, group, 3, partitions=2)

    offsets = kp_admin.list_group_offsets({group: None})[group]
    assert {(tp.topic, tp.partition): om.offset for tp, om in offsets.items()} == {(topic, 0): 3, (topic, 1): 3}

    assert kp_admin.delete_groups([group]) == {group: "OK"}
    assert group not in listed_groups(bs)


def test_kp_delete_group_offsets_removes_only_the_named_partitions(admin_broker, kp_admin):
    # OffsetDelete through kafka-python: confluent-kafka 2.16's Python AdminClient
    # has no delete_consumer_group_offsets (librdkafka's is not bound).
    bs = admin_broker.bootstrap
    topic = unique_topic("offdel")
    create_topic(bs, topic, partitions=2)
    fill(bs, topic, 2, partitions=2)
    group = unique_group("offdel")
    make_group(bs, topic, group, 2, partitions=2)

    res = kp_admin.delete_group_offsets(group, [KpTopicPartition(topic, 1)])
    assert res == {KpTopicPartition(topic, 1): NoError}
    # -1001 (OFFSET_INVALID): nothing committed.
    assert committed(bs, group, topic, 2) == {0: 2, 1: -1001}
    assert listed_groups(bs)[group] == ConsumerGroupState.EMPTY

    # The group's last offset gone: an Empty group without offsets is deleted.
    assert kp_admin.delete_group_offsets(group, [KpTopicPartition(topic, 0)]) == {KpTopicPartition(topic, 0): NoError}
    assert group not in listed_groups(bs)


def test_kp_delete_groups_refuses_a_group_with_a_live_member(admin_broker, kp_admin):
    bs = admin_broker.bootstrap
    topic = unique_topic("kp-live")
    create_topic(bs, topic)
    group = unique_group("kp-live")
    member = LiveMember(bs, topic, group)
    try:
        member.poll_until_assigned()
        assert kp_admin.delete_groups([group]) == {group: "NonEmptyGroupError"}
    finally:
        member.close()
    assert kp_admin.delete_groups([group]) == {group: "OK"}


def test_kp_delete_records_and_create_partitions(admin_broker, kp_admin):
    bs = admin_broker.bootstrap
    topic = unique_topic("kp-admin")
    create_topic(bs, topic, partitions=2)
    fill(bs, topic, 5)

    res = kp_admin.delete_records({KpTopicPartition(topic, 0): 3})
    assert res[KpTopicPartition(topic, 0)]["low_watermark"] == 3
    c = consumer(bs)
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT) == (3, 5)
    finally:
        c.close()
    with pytest.raises(OffsetOutOfRangeError):
        kp_admin.delete_records({KpTopicPartition(topic, 0): 6})

    kp_admin.create_partitions({topic: 3})
    assert len(admin(bs).list_topics(topic, timeout=TIMEOUT).topics[topic].partitions) == 3
    with pytest.raises(InvalidPartitionsError):
        kp_admin.create_partitions({topic: 3})


# -- edges, both clients


def test_ck_delete_records_to_high_watermark_and_a_new_group_starts_there(admin_broker):
    bs = admin_broker.bootstrap
    topic = unique_topic("delrec-end")
    create_topic(bs, topic)
    fill(bs, topic, 5)

    a = admin(bs)
    # OFFSET_END (-1): everything below the high watermark.
    res = a.delete_records([TopicPartition(topic, 0, -1)], request_timeout=TIMEOUT)
    assert res[TopicPartition(topic, 0)].result(TIMEOUT).low_watermark == 5
    fill(bs, topic, 2)

    m = LiveMember(bs, topic, unique_group("from-start"))
    try:
        msgs = m.consume(2)
    finally:
        m.close()
    assert [x.offset() for x in msgs] == [5, 6]


def test_ck_alter_offsets_of_a_group_with_a_live_member_is_refused(admin_broker):
    bs = admin_broker.bootstrap
    topic = unique_topic("alter-live")
    create_topic(bs, topic)
    group = unique_group("alter-live")
    member = LiveMember(bs, topic, group)
    try:
        member.poll_until_assigned()
        a = admin(bs)
        req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 1)])
        fut = a.alter_consumer_group_offsets([req], request_timeout=TIMEOUT)[group]
        res = fut.result(TIMEOUT)
        # OffsetCommit has no group-level error: librdkafka reports it per partition.
        [tp] = res.topic_partitions
        assert tp.error is not None and tp.error.code() == KafkaError.UNKNOWN_MEMBER_ID
        assert committed(bs, group, topic, 1) == {0: -1001}
    finally:
        member.close()


def test_ck_describe_an_unknown_group(admin_broker):
    bs = admin_broker.bootstrap
    group = unique_group("nobody")
    a = admin(bs)
    fut = a.describe_consumer_groups([group], request_timeout=TIMEOUT)[group]
    d = fut.result(TIMEOUT)
    assert d.state == ConsumerGroupState.DEAD
    assert d.members == []


def test_admin_changes_survive_a_restart(tmp_path):
    """The low watermark, a deleted group and altered offsets after a clean restart."""
    b = BrokerProcess(tmp_path / "data", overrides=GROUP_OVERRIDES).start()
    try:
        bs = b.bootstrap
        topic = unique_topic("restart")
        create_topic(bs, topic)
        fill(bs, topic, 6)
        gone, kept = unique_group("gone"), unique_group("kept")
        make_group(bs, topic, gone, 6)
        make_group(bs, topic, kept, 6)
        a = admin(bs)
        a.delete_records([TopicPartition(topic, 0, 2)], request_timeout=TIMEOUT)[TopicPartition(topic, 0)].result(TIMEOUT)
        a.delete_consumer_groups([gone], request_timeout=TIMEOUT)[gone].result(TIMEOUT)
        req = ConsumerGroupTopicPartitions(kept, [TopicPartition(topic, 0, 3)])
        a.alter_consumer_group_offsets([req], request_timeout=TIMEOUT)[kept].result(TIMEOUT)
        del a
    finally:
        code = b.stop()
    assert code == 0, b.log_tail()
    b.start()
    try:
        bs = b.bootstrap
        c = consumer(bs)
        try:
            assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT) == (2, 6)
        finally:
            c.close()
        groups = listed_groups(bs)
        assert gone not in groups
        assert groups[kept] == ConsumerGroupState.EMPTY
        assert committed(bs, kept, topic, 1) == {0: 3}
    finally:
        b.stop()


def test_kp_delete_group_offsets_of_a_subscribed_topic_is_refused(admin_broker, kp_admin):
    bs = admin_broker.bootstrap
    topic = unique_topic("offdel-live")
    create_topic(bs, topic)
    fill(bs, topic, 2)
    group = unique_group("offdel-live")
    member = LiveMember(bs, topic, group)
    try:
        member.consume(2)
        member.consumer.commit(asynchronous=False)
        res = kp_admin.delete_group_offsets(group, [KpTopicPartition(topic, 0)])
        assert res == {KpTopicPartition(topic, 0): GroupSubscribedToTopicError}
        assert committed(bs, group, topic, 1) == {0: 2}
    finally:
        member.close()


def test_kp_list_group_offsets_of_several_groups_at_once(admin_broker, kp_admin):
    bs = admin_broker.bootstrap
    topic = unique_topic("kp-multi")
    create_topic(bs, topic)
    fill(bs, topic, 4)
    g1, g2 = unique_group("kp-m1"), unique_group("kp-m2")
    make_group(bs, topic, g1, 4)
    a = admin(bs)
    req = ConsumerGroupTopicPartitions(g2, [TopicPartition(topic, 0, 1)])
    a.alter_consumer_group_offsets([req], request_timeout=TIMEOUT)[g2].result(TIMEOUT)

    res = kp_admin.list_group_offsets({g1: None, g2: [KpTopicPartition(topic, 0)]})
    assert {g: {tp.partition: om.offset for tp, om in offs.items()} for g, offs in res.items()} == {
        g1: {0: 4}, g2: {0: 1}}


def test_kp_create_partitions_validate_only_changes_nothing(admin_broker, kp_admin):
    bs = admin_broker.bootstrap
    topic = unique_topic("kp-validate")
    create_topic(bs, topic, partitions=1)
    kp_admin.create_partitions({topic: 3}, validate_only=True)
    a = admin(bs)
    assert len(a.list_topics(topic, timeout=TIMEOUT).topics[topic].partitions) == 1


def test_ck_list_consumer_groups_by_type(admin_broker):
    bs = admin_broker.bootstrap
    topic = unique_topic("types")
    create_topic(bs, topic)
    fill(bs, topic, 1)
    group = unique_group("types")
    make_group(bs, topic, group, 1)
    a = admin(bs)
    classic = a.list_consumer_groups(types={ConsumerGroupType.CLASSIC}, request_timeout=TIMEOUT).result(TIMEOUT)
    assert group in {g.group_id for g in classic.valid}
    assert {g.type for g in classic.valid if g.group_id == group} == {ConsumerGroupType.CLASSIC}
    consumer_type = a.list_consumer_groups(types={ConsumerGroupType.CONSUMER}, request_timeout=TIMEOUT).result(TIMEOUT)
    assert group not in {g.group_id for g in consumer_type.valid}


def test_ck_authorized_operations_are_every_operation_without_an_authorizer(admin_broker):
    """KIP-430: asked for, Kafka 3.9 with no authorizer answers every operation the resource
    type supports (refka/broker/acl_operations.py); refka has no ACLs either."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation

    bs = admin_broker.bootstrap
    topic = unique_topic("authz")
    create_topic(bs, topic, partitions=1)
    fill(bs, topic, per_partition=1)
    group = unique_group("authz")
    make_group(bs, topic, group, per_partition=1)
    a = admin(bs)
    op = AclOperation
    cluster = a.describe_cluster(include_authorized_operations=True, request_timeout=TIMEOUT).result(TIMEOUT)
    assert set(cluster.authorized_operations) == {op.CREATE, op.CLUSTER_ACTION, op.DESCRIBE_CONFIGS, op.ALTER_CONFIGS,
                                                  op.IDEMPOTENT_WRITE, op.ALTER, op.DESCRIBE}
    described = a.describe_topics(TopicCollection([topic]), include_authorized_operations=True,
                                  request_timeout=TIMEOUT)[topic].result(TIMEOUT)
    assert set(described.authorized_operations) == {op.READ, op.WRITE, op.CREATE, op.DESCRIBE, op.DELETE, op.ALTER,
                                                    op.DESCRIBE_CONFIGS, op.ALTER_CONFIGS}
    g = a.describe_consumer_groups([group], include_authorized_operations=True, request_timeout=TIMEOUT)[group]
    assert set(g.result(TIMEOUT).authorized_operations) == {op.READ, op.DESCRIBE, op.DELETE}
    # not asked: none reported (the field's "not asked" value)
    assert a.describe_cluster(request_timeout=TIMEOUT).result(TIMEOUT).authorized_operations is None
