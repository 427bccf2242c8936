"""Consumer groups of unmodified confluent-kafka (librdkafka) consumers against refka.

Each member runs in its own process (ck_group_member.py) so one can be killed
with SIGKILL: no LeaveGroup, the coordinator only notices when its session
timeout ends. Members commit synchronously after processing each batch; the
delivery check then demands every record processed (no gap) and no record
processed again once a commit covered it (duplicates only from a member's
uncommitted last batch).
"""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from refka.client.connection import connect
from refka.protocol.messages.find_coordinator import FindCoordinator
from tests.brokers import BrokerProcess
from tests.integration.confluent_helpers import create_topic, producer, unique_topic
from tests.integration.group_helpers import (
    TIMEOUT,
    MemberProcess,
    all_processed,
    check_delivery,
    ck_member,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 6
GROUP_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("refka-groups") / "data", overrides=GROUP_OVERRIDES).start()
    yield b
    b.stop()


def produce_round(bootstrap: str, topic: str, per_partition: int, tag: str, counts: dict[int, int]) -> None:
    p = producer(bootstrap, acks="all")
    for part in range(PARTITIONS):
        for i in range(per_partition):
            p.produce(topic, key=f"{tag}-{part}-{i}".encode(), value=f"{tag}-{i}".encode(), partition=part)
    assert p.flush(TIMEOUT) == 0
    for part in range(PARTITIONS):
        counts[part] = counts.get(part, 0) + per_partition


def stop_all(members: list[MemberProcess]) -> None:
    for m in members:
        m.stop()


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_three_members_share_then_survivors_take_over_a_closed_and_a_killed_member(group_broker, tmp_path,
                                                                                    assignor):
    bootstrap = group_broker.bootstrap
    topic = unique_topic("grp")
    group = f"g-{topic}"
    create_topic(bootstrap, topic, PARTITIONS)
    counts: dict[int, int] = {}
    produce_round(bootstrap, topic, 50, "a", counts)

    members = [ck_member(bootstrap, topic, group, f"m{i}", tmp_path, assignor=assignor, session_timeout_ms=6000)
               for i in range(3)]
    try:
        for m in members:
            m.start()
        # Spread over all three: two partitions each, every partition owned once.
        wait_until(lambda: sorted(len(m.assignment) for m in members) == [2, 2, 2]
                   and set().union(*(m.assignment for m in members)) == set(range(PARTITIONS)),
                   message="the partitions spread over the three members")
        wait_until(lambda: all_processed(members, counts), message="first round consumed")

        produce_round(bootstrap, topic, 50, "b", counts)
        closing, killed, survivor = members
        closing.close()  # LeaveGroup: a rebalance at once
        wait_until(lambda: killed.assignment | survivor.assignment == set(range(PARTITIONS))
                   and not killed.assignment & survivor.assignment
                   and killed.assignment and survivor.assignment,
                   message="the two others took over the closed member's partitions")
        killed.kill()  # no LeaveGroup: only its session timeout tells the coordinator
        survivor.wait_for(lambda m: m.assignment == set(range(PARTITIONS)),
                          "the survivor owns every partition after the killed member's session timeout")
        produce_round(bootstrap, topic, 50, "c", counts)
        wait_until(lambda: all_processed(members, counts), message="every round consumed")
        report = check_delivery(members, counts)
        assert report["records"] == PARTITIONS * 150
    finally:
        stop_all(members)


def test_static_member_restarts_without_a_rebalance(group_broker, tmp_path):
    bootstrap = group_broker.bootstrap
    topic = unique_topic("static")
    group = f"g-{topic}"
    create_topic(bootstrap, topic, PARTITIONS)
    counts: dict[int, int] = {}
    produce_round(bootstrap, topic, 20, "a", counts)

    def member(i: int, name: str) -> MemberProcess:
        return ck_member(bootstrap, topic, group, name, tmp_path, assignor="range", instance=f"instance-{i}",
                         session_timeout_ms=30000, max_poll_interval_ms=30000)

    members = [member(i, f"s{i}") for i in range(3)]
    restarted = None
    try:
        for m in members:
            m.start()
        wait_until(lambda: sorted(len(m.assignment) for m in members) == [2, 2, 2],
                   message="the partitions spread over the three static members")
        wait_until(lambda: all_processed(members, counts), message="first round consumed")
        before = {m.name: (m.count("assigned"), m.count("revoked")) for m in members}
        owned = members[1].assignment

        members[1].close()  # a static member's close sends no LeaveGroup (KIP-345)
        restarted = member(1, "s1-restarted").start()
        restarted.wait_for(lambda m: m.assignment == owned, "the restarted member got its partitions back")
        produce_round(bootstrap, topic, 20, "b", counts)
        wait_until(lambda: all_processed([*members, restarted], counts), message="second round consumed")

        # No rebalance: the others were neither revoked nor assigned anything.
        for m in (members[0], members[2]):
            assert (m.count("assigned"), m.count("revoked")) == before[m.name], m.snapshot()
        admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the answer
        desc = admin.describe_consumer_groups([group])[group].result(TIMEOUT)
        assert desc.state.name == "STABLE"
        assert sorted(mm.group_instance_id for mm in desc.members) == ["instance-0", "instance-1", "instance-2"]
        check_delivery([*members, restarted], counts)
    finally:
        stop_all([*members, *([restarted] if restarted else [])])


def test_committed_offsets_survive_a_broker_restart(tmp_path):
    broker = BrokerProcess(tmp_path / "data", overrides=GROUP_OVERRIDES).start()
    try:
        bootstrap = broker.bootstrap
        topic = unique_topic("restart")
        group = f"g-{topic}"
        create_topic(bootstrap, topic, 2)
        p = producer(bootstrap, acks="all")
        for i in range(40):
            p.produce(topic, value=f"v{i}".encode(), partition=i % 2)
        assert p.flush(TIMEOUT) == 0

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "session.timeout.ms": 10000})
        c.subscribe([topic])
        got: list[int] = []
        wait_until(lambda: got.extend(m.offset() for m in c.consume(40, 0.5) if not m.error()) or len(got) == 40,
                   message="the first 40 records consumed", interval=0)
        commits = [TopicPartition(topic, 0, 7, metadata="zero", leader_epoch=0),
                   TopicPartition(topic, 1, 13, metadata="one", leader_epoch=0)]
        result = c.commit(offsets=commits, asynchronous=False)
        assert all(tp.error is None for tp in result)

        broker.kill()  # SIGKILL: the commits must already be in the __consumer_offsets log
        broker.start()

        # The live member carries on: its membership and generation were reloaded.
        for i in range(4):
            p.produce(topic, value=f"late{i}".encode(), partition=i % 2)
        assert p.flush(TIMEOUT) == 0
        late = []
        wait_until(lambda: late.extend(m.value() for m in c.consume(10, 0.5) if not m.error()) or len(late) >= 4,
                   message="records produced after the restart consumed", interval=0)
        assert sorted(late) == [b"late0", b"late1", b"late2", b"late3"]
        c.close()

        fresh = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        committed = fresh.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=TIMEOUT)
        assert [(tp.offset, tp.metadata, tp.leader_epoch) for tp in committed] == [(7, "zero", 0), (13, "one", 0)]
        fresh.subscribe([topic])
        first: dict[int, int] = {}

        def resumed() -> bool:
            for m in fresh.consume(10, 0.5):
                if not m.error():
                    first.setdefault(m.partition(), m.offset())
            return len(first) == 2

        wait_until(resumed, message="the new member resumed on both partitions", interval=0)
        assert first == {0: 7, 1: 13}
        fresh.close()
    finally:
        broker.stop()


def test_groups_of_a_three_broker_cluster_spread_over_their_coordinators(tmp_path):
    """Each group's coordinator is the leader of its __consumer_offsets partition:
    with three brokers the groups land on all three, and each works end to end."""
    cluster = BrokerProcess(tmp_path / "data", brokers=3, memory=True, overrides=GROUP_OVERRIDES).start()
    try:
        bootstrap = cluster.bootstrap
        topic = unique_topic("three")
        create_topic(bootstrap, topic, 3)
        p = producer(bootstrap, acks="all")
        for i in range(30):
            p.produce(topic, value=f"v{i}".encode(), partition=i % 3)
        assert p.flush(TIMEOUT) == 0
        # Names that differ in their last digits hash to neighbouring partitions,
        # whose leaders the controller places round-robin over the brokers.
        groups = [f"{topic}-g{i}" for i in range(30)]

        async def coordinators() -> dict[str, int]:
            conn = await connect(bootstrap)
            try:
                for _ in range(200):
                    r = await conn.request(FindCoordinator, FindCoordinator.Request(coordinator_keys=groups),
                                           version=4)
                    if all(c.error_code == 0 for c in r.coordinators):
                        return {c.key: c.node_id for c in r.coordinators}
                    await asyncio.sleep(0.05)
                raise AssertionError("no coordinators")
            finally:
                await conn.close()

        by_node = {node: group for group, node in asyncio.run(coordinators()).items()}
        assert set(by_node) == {0, 1, 2}
        for group in by_node.values():
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                          "enable.auto.commit": False})
            c.subscribe([topic])
            got: list[bytes] = []
            wait_until(lambda c=c, got=got: got.extend(m.value() for m in c.consume(30, 0.5) if not m.error())
                       or len(got) == 30, message=f"{group} consumed everything", interval=0)
            c.commit(asynchronous=False)
            committed = c.committed([TopicPartition(topic, i) for i in range(3)], timeout=TIMEOUT)
            assert [tp.offset for tp in committed] == [10, 10, 10]
            c.close()
    finally:
        cluster.stop()
