"""The group APIs at the versions the stock clients of these tests do not send,
over the wire with refka's own connection: FindCoordinator v4 (batched keys),
JoinGroup v9 / SyncGroup v5 / Heartbeat v4 / LeaveGroup v5 (batch leave),
OffsetCommit v9 and OffsetFetch v9 (several groups) with refka's KIP-232
topic_epoch tag, OffsetFetch v1 and v7, ListGroups v5 filters, DescribeGroups
v5, OffsetDelete, DeleteGroups v2.
"""

from __future__ import annotations

import asyncio
import struct
import uuid

import pytest

from refka.client.connection import BrokerConnection, connect
from refka.protocol import ErrorCode as E
from refka.protocol.messages.delete_groups import DeleteGroups
from refka.protocol.messages.describe_groups import DescribeGroups
from refka.protocol.messages.find_coordinator import FindCoordinator
from refka.protocol.messages.heartbeat import Heartbeat
from refka.protocol.messages.join_group import JoinGroup
from refka.protocol.messages.leave_group import LeaveGroup
from refka.protocol.messages.list_groups import ListGroups
from refka.protocol.messages.offset_commit import OffsetCommit
from refka.protocol.messages.offset_delete import OffsetDelete
from refka.protocol.messages.offset_fetch import OffsetFetch
from refka.protocol.messages.sync_group import SyncGroup
from tests.brokers import BrokerProcess
from tests.integration.confluent_helpers import create_topic

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("refka-wire-groups") / "data", memory=True,
                      overrides={"group.initial.rebalance.delay.ms": "0"}).start()
    yield b
    b.stop()


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


async def coordinator(conn: BrokerConnection, *groups: str) -> list:
    """FindCoordinator v4 until every key has one (the first lookup creates __consumer_offsets)."""
    R = FindCoordinator.Request
    for _ in range(200):
        resp = await conn.request(FindCoordinator, R(key_type=0, coordinator_keys=list(groups)), version=4)
        if all(c.error_code == E.NONE for c in resp.coordinators):
            return resp.coordinators
        assert {c.error_code for c in resp.coordinators} <= {E.NONE, E.COORDINATOR_NOT_AVAILABLE}
        await asyncio.sleep(0.05)
    raise AssertionError("no coordinator")


async def join(conn, group: str, member_id: str = "", instance: str | None = None, version: int = 9):
    R = JoinGroup.Request
    return await conn.request(JoinGroup, R(
        group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id=member_id,
        group_instance_id=instance, protocol_type="consumer",
        protocols=[R.JoinGroupRequestProtocol(name="range", metadata=subscription("t"))], reason="test",
    ), version=version)


async def test_group_lifecycle_at_the_newest_versions(group_broker):
    topic = f"wire-{uuid.uuid4().hex[:8]}"
    create_topic(group_broker.bootstrap, topic, 2)
    group = f"g-{topic}"
    conn = await connect(group_broker.bootstrap, "wire-test")
    try:
        coords = await coordinator(conn, group, f"{group}-other")
        assert [c.key for c in coords] == [group, f"{group}-other"]
        assert all(c.port == int(group_broker.bootstrap.rsplit(":", 1)[1]) for c in coords)
        txn = await conn.request(FindCoordinator, FindCoordinator.Request(key="tx", key_type=1), version=3)
        assert txn.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

        first = await join(conn, group)
        assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id
        joined = await join(conn, group, first.member_id)
        assert joined.error_code == E.NONE and joined.leader == joined.member_id == first.member_id
        assert (joined.protocol_type, joined.protocol_name, joined.generation_id) == ("consumer", "range", 1)
        assert [m.metadata for m in joined.members] == [subscription("t")]
        member, gen = joined.member_id, joined.generation_id

        SR = SyncGroup.Request
        synced = await conn.request(SyncGroup, SR(
            group_id=group, generation_id=gen, member_id=member, protocol_type="consumer", protocol_name="range",
            assignments=[SR.SyncGroupRequestAssignment(member_id=member, assignment=b"mine")]), version=5)
        assert (synced.error_code, synced.assignment, synced.protocol_name) == (E.NONE, b"mine", "range")
        wrong = await conn.request(SyncGroup, SR(group_id=group, generation_id=gen, member_id=member,
                                                 protocol_name="roundrobin"), version=5)
        assert wrong.error_code == E.INCONSISTENT_GROUP_PROTOCOL

        hb = await conn.request(Heartbeat, Heartbeat.Request(group_id=group, generation_id=gen, member_id=member),
                                version=4)
        assert hb.error_code == E.NONE
        stale = await conn.request(Heartbeat, Heartbeat.Request(group_id=group, generation_id=gen + 5,
                                                                member_id=member), version=4)
        assert stale.error_code == E.ILLEGAL_GENERATION

        # OffsetCommit v9 with a leader epoch, metadata and refka's KIP-232 topic_epoch.
        CR = OffsetCommit.Request
        CT = CR.OffsetCommitRequestTopic
        CP = CT.OffsetCommitRequestPartition
        commit = await conn.request(OffsetCommit, CR(
            group_id=group, generation_id_or_member_epoch=gen, member_id=member, topics=[
                CT(name=topic, partitions=[
                    CP(partition_index=0, committed_offset=5, committed_leader_epoch=3, committed_metadata="meta",
                       topic_epoch=11),
                    CP(partition_index=9, committed_offset=1, committed_metadata=None)]),
                CT(name="no-such-topic", partitions=[CP(partition_index=0, committed_offset=1)])]), version=9)
        errs = {(t.name, p.partition_index): p.error_code for t in commit.topics for p in t.partitions}
        assert errs == {(topic, 0): E.NONE, (topic, 9): E.UNKNOWN_TOPIC_OR_PARTITION,
                        ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION}

        # OffsetFetch v9: two groups in one request, the tag comes back.
        FR = OffsetFetch.Request
        FG = FR.OffsetFetchRequestGroup
        fetched = await conn.request(OffsetFetch, FR(groups=[
            FG(group_id=group, topics=[FG.OffsetFetchRequestTopics(name=topic, partition_indexes=[0, 1])]),
            FG(group_id=f"{group}-other", topics=None)], refka_extensions=True), version=9)
        g1, g2 = fetched.groups
        assert g1.error_code == E.NONE and g2.error_code == E.NONE and g2.topics == []
        p0, p1 = g1.topics[0].partitions
        assert (p0.committed_offset, p0.committed_leader_epoch, p0.metadata, p0.topic_epoch) == (5, 3, "meta", 11)
        assert (p1.committed_offset, p1.metadata) == (-1, "")
        # The same at v7 (top-level error, all topics with null) and v1 (no leader epoch, no tag);
        # without refka_extensions the tag stays out, as a stock client expects.
        v7 = await conn.request(OffsetFetch, FR(group_id=group, topics=None, require_stable=True,
                                                refka_extensions=True), version=7)
        assert v7.error_code == E.NONE
        assert [(t.name, [(p.partition_index, p.committed_offset, p.topic_epoch) for p in t.partitions])
                for t in v7.topics] == [(topic, [(0, 5, 11)])]
        stock = await conn.request(OffsetFetch, FR(group_id=group, topics=None, require_stable=True), version=7)
        assert stock.topics[0].partitions[0].topic_epoch == -1
        v1 = await conn.request(OffsetFetch, FR(group_id=group, topics=[
            FR.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]), version=1)
        assert v1.topics[0].partitions[0].committed_offset == 5

        listed = await conn.request(ListGroups, ListGroups.Request(states_filter=["stable"]), version=5)
        assert (group, "consumer", "Stable", "classic") in {
            (g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups}
        none = await conn.request(ListGroups, ListGroups.Request(states_filter=["Empty"],
                                                                 types_filter=["consumer"]), version=5)
        assert none.groups == []

        desc = await conn.request(DescribeGroups, DescribeGroups.Request(groups=[group, "nobody"]), version=5)
        d, nobody = desc.groups
        assert (d.group_state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
        assert [(m.member_id, m.member_assignment, m.client_id) for m in d.members] == [(member, b"mine",
                                                                                         "wire-test")]
        assert (nobody.error_code, nobody.group_state) == (E.NONE, "Dead")

        busy = await conn.request(DeleteGroups, DeleteGroups.Request(groups_names=[group]), version=2)
        assert busy.results[0].error_code == E.NON_EMPTY_GROUP

        # LeaveGroup v5: a batch with a stranger in it.
        LR = LeaveGroup.Request
        left = await conn.request(LeaveGroup, LR(group_id=group, members=[
            LR.MemberIdentity(member_id=member, reason="done"),
            LR.MemberIdentity(member_id="stranger")]), version=5)
        assert [(m.member_id, m.error_code) for m in left.members] == [(member, E.NONE),
                                                                        ("stranger", E.UNKNOWN_MEMBER_ID)]

        OR = OffsetDelete.Request
        OT = OR.OffsetDeleteRequestTopic
        deleted = await conn.request(OffsetDelete, OR(group_id=group, topics=[
            OT(name=topic, partitions=[OT.OffsetDeleteRequestPartition(partition_index=0)])]), version=0)
        assert deleted.error_code == E.NONE and deleted.topics[0].partitions[0].error_code == E.NONE
        # An Empty group without offsets is gone.
        gone = await conn.request(DeleteGroups, DeleteGroups.Request(groups_names=[group]), version=2)
        assert gone.results[0].error_code == E.GROUP_ID_NOT_FOUND
    finally:
        await conn.close()


async def test_static_members_at_join_group_v5(group_broker):
    group = f"static-{uuid.uuid4().hex[:8]}"
    conn = await connect(group_broker.bootstrap, "wire-static")
    try:
        await coordinator(conn, group)
        a = await join(conn, group, instance="inst-a", version=5)  # no MEMBER_ID_REQUIRED for static members
        assert a.error_code == E.NONE and a.generation_id == 1
        SR = SyncGroup.Request
        await conn.request(SyncGroup, SR(group_id=group, generation_id=1, member_id=a.member_id,
                                         group_instance_id="inst-a", assignments=[
                                             SR.SyncGroupRequestAssignment(member_id=a.member_id, assignment=b"A")]),
                           version=3)
        again = await join(conn, group, instance="inst-a", version=5)  # a restart
        assert again.error_code == E.NONE and again.generation_id == 1 and again.member_id != a.member_id
        fenced = await conn.request(Heartbeat, Heartbeat.Request(group_id=group, generation_id=1,
                                                                 member_id=a.member_id, group_instance_id="inst-a"),
                                    version=3)
        assert fenced.error_code == E.FENCED_INSTANCE_ID
        back = await conn.request(SyncGroup, SR(group_id=group, generation_id=1, member_id=again.member_id,
                                                group_instance_id="inst-a"), version=3)
        assert (back.error_code, back.assignment) == (E.NONE, b"A")
        bad = await join(conn, group, instance="inst-a", version=4)
        assert bad.error_code == E.MEMBER_ID_REQUIRED  # v4 has no instance id: a new dynamic member
    finally:
        await conn.close()
