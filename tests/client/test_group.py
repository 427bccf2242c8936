"""The group member: what each answer makes it do (the table and the state), which
partitions the leader marks and assigns, when a metadata change makes it rejoin, and a
join, commit and heartbeat round against the scripted coordinator of fakes.py."""

from __future__ import annotations

import asyncio

import pytest

from refka.client.errors import CommitFailedError, InvalidInternalMetadataError, KafkaError, KafkaTimeoutError
from refka.client.group import (
    GroupMember,
    MemberState,
    Next,
    leader_assignments,
    marked_partitions,
    next_step,
    partition_snapshot,
)
from refka.client.structs import OffsetAndMetadata, TopicPartition
from refka.protocol import ErrorCode as E
from refka.protocol.consumer_protocol import Subscription
from refka.protocol.messages.offset_commit import OffsetCommit
from tests.client.fakes import FakeCluster

pytestmark = pytest.mark.timeout(30)


# -- the answers, as data ----------------------------------------------------------------------


@pytest.mark.parametrize("api, code, step", [
    ("JoinGroup", E.NONE, Next.DONE),
    ("JoinGroup", E.MEMBER_ID_REQUIRED, Next.REJOIN),
    ("JoinGroup", E.UNKNOWN_MEMBER_ID, Next.RESET),
    ("JoinGroup", E.REBALANCE_IN_PROGRESS, Next.REJOIN),
    ("JoinGroup", E.COORDINATOR_LOAD_IN_PROGRESS, Next.RETRY),
    ("JoinGroup", E.NOT_COORDINATOR, Next.FIND_COORDINATOR),
    ("JoinGroup", E.INCONSISTENT_GROUP_PROTOCOL, Next.FAIL),
    ("SyncGroup", E.REBALANCE_IN_PROGRESS, Next.REJOIN),
    ("SyncGroup", E.ILLEGAL_GENERATION, Next.RESET),
    ("Heartbeat", E.REBALANCE_IN_PROGRESS, Next.REJOIN),
    ("Heartbeat", E.ILLEGAL_GENERATION, Next.RESET),
    ("Heartbeat", E.UNKNOWN_MEMBER_ID, Next.RESET),
    ("Heartbeat", E.COORDINATOR_NOT_AVAILABLE, Next.FIND_COORDINATOR),
    ("Heartbeat", E.GROUP_AUTHORIZATION_FAILED, Next.FAIL),
    ("OffsetCommit", E.REBALANCE_IN_PROGRESS, Next.REJOIN),
    ("OffsetCommit", E.UNKNOWN_MEMBER_ID, Next.RESET),
    ("OffsetCommit", E.REQUEST_TIMED_OUT, Next.RETRY),
    ("OffsetCommit", E.OFFSET_METADATA_TOO_LARGE, Next.FAIL),
    ("OffsetFetch", E.UNSTABLE_OFFSET_COMMIT, Next.RETRY),
    ("OffsetFetch", E.NOT_COORDINATOR, Next.FIND_COORDINATOR),
    ("FindCoordinator", E.COORDINATOR_NOT_AVAILABLE, Next.FIND_COORDINATOR),
    ("Heartbeat", 31999, Next.FAIL),  # a code this client does not know
])
def test_each_answer_has_its_step(api, code, step):
    assert next_step(api, code) is step


def test_member_id_required_keeps_the_id_to_join_with():
    state, step = MemberState().on_answer("JoinGroup", E.MEMBER_ID_REQUIRED, "m-1")
    assert step is Next.REJOIN and state.member_id == "m-1" and state.rejoin_needed


def test_a_reset_forgets_member_id_and_generation_a_rejoin_keeps_them():
    stable = MemberState().joined("m-1", 4).synced()
    assert not stable.rejoin_needed
    rejoin, step = stable.on_answer("Heartbeat", E.REBALANCE_IN_PROGRESS)
    assert step is Next.REJOIN and (rejoin.member_id, rejoin.generation_id, rejoin.rejoin_needed) == ("m-1", 4, True)
    reset, step = stable.on_answer("Heartbeat", E.ILLEGAL_GENERATION)
    assert step is Next.RESET and reset == MemberState()
    same, step = stable.on_answer("Heartbeat", E.NONE)
    assert step is Next.DONE and same == stable


# -- marked partitions, snapshots, the leader's assignment ------------------------------------


async def cluster_with(**topics) -> FakeCluster:
    cluster = FakeCluster()
    for name, (n, counts) in topics.items():
        cluster.topic(name, [(p % 3, 0) for p in range(n)], counts)
    await cluster.refresh(list(topics))
    return cluster


async def test_partitions_at_or_above_the_undeleted_count_are_marked_and_a_plain_topic_has_none():
    cluster = await cluster_with(shrunk=(6, (2, 4)), plain=(3, None))
    assert marked_partitions(cluster.metadata.topics["shrunk"]) == {4, 5}
    assert marked_partitions(cluster.metadata.topics["plain"]) == frozenset()
    assert partition_snapshot(cluster.metadata, ["shrunk", "plain", "absent"]) == {
        "shrunk": (frozenset(range(6)), 4), "plain": (frozenset(range(3)), 3)}


async def test_the_leader_spreads_undeleted_and_marked_partitions_separately():
    cluster = await cluster_with(t=(6, (2, 4)))
    subs = {"a": Subscription(["t"]), "b": Subscription(["t"])}
    out = leader_assignments(cluster.metadata, subs)
    assert {m: sorted(a.assigned_partitions["t"]) for m, a in out.items()} == {"a": [0, 2, 4], "b": [1, 3, 5]}


# -- against the scripted coordinator ---------------------------------------------------------


def member_of(cluster: FakeCluster, **kw) -> GroupMember:
    member = GroupMember(cluster, "g", retry_backoff_ms=1, heartbeat_interval_ms=10, **kw)  # type: ignore[arg-type]

    async def open_coordinator(node_id: int, host: str, port: int):
        return await cluster.connection(node_id)

    member._open_coordinator = open_coordinator  # type: ignore[method-assign]
    return member


async def test_a_first_join_rejoins_with_the_member_id_given_and_the_leader_assigns():
    cluster = await cluster_with(t=(3, (3, 3)))
    member = member_of(cluster)
    assigned = await member.join(["t"])
    assert assigned == {"t": [0, 1, 2]}
    joins = [body.member_id for _node, _v, body in cluster.asked("JoinGroup")]
    assert joins == ["", "m0"]
    assert member.identity.member_id == "m0" and member.identity.generation_id == 1 and member.is_leader
    await member.close()


async def test_join_answers_that_ask_again_end_in_a_join():
    cluster = await cluster_with(t=(2, None))
    cluster.group_errors = {"JoinGroup": [E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR],
                            "SyncGroup": [E.REBALANCE_IN_PROGRESS]}
    member = member_of(cluster)
    assert await member.join(["t"]) == {"t": [0, 1]}
    assert len(cluster.asked("FindCoordinator")) == 2  # the first, and after NOT_COORDINATOR
    assert len(cluster.asked("SyncGroup")) == 2
    await member.close()


async def test_a_join_refused_for_good_raises():
    cluster = await cluster_with(t=(1, None))
    cluster.group_errors = {"JoinGroup": [E.INCONSISTENT_GROUP_PROTOCOL]}
    member = member_of(cluster)
    with pytest.raises(KafkaError):
        await member.join(["t"])
    await member.close()


async def test_a_heartbeat_answered_rebalance_in_progress_asks_for_a_rejoin():
    cluster = await cluster_with(t=(1, None))
    member = member_of(cluster)
    await member.join(["t"])
    cluster.group_errors = {"Heartbeat": [E.NONE, E.REBALANCE_IN_PROGRESS]}
    await asyncio.wait_for(member.rejoin.wait(), 5)
    assert member.state.rejoin_needed and member.state.member_id == "m0"
    await member.close()


async def test_commits_carry_generation_member_and_leader_epoch_and_fail_when_membership_changed():
    cluster = await cluster_with(t=(2, None))
    member = member_of(cluster)
    await member.join(["t"])
    await member.commit({TopicPartition("t", 0): OffsetAndMetadata(5, "m", 3)}, in_group=True)
    (_node, _v, req), = cluster.asked("OffsetCommit")
    assert (req.generation_id_or_member_epoch, req.member_id) == (1, "m0")
    assert cluster.committed[("t", 0)] == (5, 3)
    got = await member.fetch_committed([TopicPartition("t", 0), TopicPartition("t", 1)])
    assert got == {TopicPartition("t", 0): OffsetAndMetadata(5, "", 3)}
    cluster.group_errors = {"OffsetCommit": [E.ILLEGAL_GENERATION]}
    with pytest.raises(CommitFailedError):
        await member.commit({TopicPartition("t", 0): OffsetAndMetadata(6, "")}, in_group=True)
    assert member.rejoin.is_set() and member.state.member_id == ""
    await member.close()


async def test_commits_carry_the_topic_epoch_given_or_else_the_latest_metadatas_on_the_wire():
    """KIP-232 (seed 002): OffsetEpoch = the leader epoch given (KIP-320's field) and refka's
    tagged topic_epoch, which OffsetFetch gives back."""
    cluster = FakeCluster()
    cluster.topic("t", [(0, 4), (1, 4)])
    cluster.topic_epochs["t"] = 7
    await cluster.refresh(["t"])
    member = member_of(cluster)
    await member.join(["t"])
    await member.commit({TopicPartition("t", 0): OffsetAndMetadata(5, "", 3),
                         TopicPartition("t", 1): OffsetAndMetadata(6, "", 4, 9)}, in_group=True)
    (_node, v, req), = cluster.asked("OffsetCommit")
    wire, _ = OffsetCommit.decode_request(b"".join(bytes(b) for b in OffsetCommit.encode_request(req, v)), v)
    assert [(p.partition_index, p.committed_leader_epoch, p.topic_epoch) for p in wire.topics[0].partitions] == [
        (0, 3, 7), (1, 4, 9)]
    assert v >= 8  # the tag rides on flexible versions only
    got = await member.fetch_committed([TopicPartition("t", 0), TopicPartition("t", 1)])
    assert got == {TopicPartition("t", 0): OffsetAndMetadata(5, "", 3, 7),
                   TopicPartition("t", 1): OffsetAndMetadata(6, "", 4, 9)}
    assert got[TopicPartition("t", 1)].offset_epoch == (9, 4)
    await member.close()


async def test_invalid_internal_metadata_fails_the_commit_for_good():
    cluster = await cluster_with(t=(1, None))
    member = member_of(cluster)
    await member.join(["t"])
    cluster.group_errors = {"OffsetCommit": [E.INVALID_INTERNAL_METADATA]}
    with pytest.raises(InvalidInternalMetadataError) as e:
        await member.commit({TopicPartition("t", 0): OffsetAndMetadata(5, "", 3, 6)}, in_group=True)
    assert e.value.partitions == [TopicPartition("t", 0)] and not e.value.retriable
    assert len(cluster.asked("OffsetCommit")) == 1 and not member.rejoin.is_set()
    assert ("t", 0) not in cluster.committed
    await member.close()


async def test_a_change_of_partitions_or_undeleted_count_makes_the_member_rejoin():
    cluster = await cluster_with(t=(4, (2, 4)), other=(1, None))
    member = member_of(cluster)
    await member.join(["t"])
    member.joined_metadata()
    await cluster.refresh(["t", "other"])
    assert not member.metadata_changed()
    cluster.topic("other", [(0, 0), (1, 0)])  # not subscribed: no rejoin
    await cluster.refresh(["other"])
    assert not member.metadata_changed() and not member.rejoin.is_set()
    cluster.topic("t", [(p % 3, 1) for p in range(4)], (2, 3))  # a shrink: 3 is marked
    await cluster.refresh(["t"])
    assert member.metadata_changed() and member.rejoin.is_set()
    await member.close()


async def test_a_commit_without_a_coordinator_gives_up_after_the_request_timeout():
    cluster = await cluster_with(t=(1, None))
    cluster.group_errors = {"FindCoordinator": [E.COORDINATOR_NOT_AVAILABLE] * 10_000}
    member = member_of(cluster, request_timeout_ms=200)
    with pytest.raises(KafkaTimeoutError):
        await member.commit({TopicPartition("t", 0): OffsetAndMetadata(1, "")}, in_group=False)
    assert len(cluster.asked("FindCoordinator")) > 1 and not cluster.asked("OffsetCommit")
    await member.leave()  # no member id: nothing to send
    await member.close()
