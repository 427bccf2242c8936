"""The consumer against the scripted cluster of fakes.py: records delivered in offset
order, positions and seeks, the reset policies, the fetch errors (KIP-951 hints,
KIP-253 counts), commits, KIP-232's offset epochs, and the ordered-delivery gate's four
calls."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping
from typing import Any

import pytest

from refka.client.consumer import Consumer
from refka.client.errors import (
    ConsumerStoppedError,
    IllegalStateError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
)
from refka.client.fetcher import ISOLATION_READ_UNCOMMITTED
from refka.client.group import MemberIdentity
from refka.client.structs import ConsumerRecord, OffsetAndMetadata, OffsetEpoch, TopicPartition
from refka.protocol import ErrorCode as E
from refka.protocol.messages.fetch import Fetch
from tests.client.fakes import FakeCluster

pytestmark = pytest.mark.timeout(30)

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def consumer_on(cluster: FakeCluster, *topics: str, **config: Any) -> Consumer:
    c = Consumer(*topics, bootstrap_servers="fake:1", **{"retry_backoff_ms": 5, "fetch_max_wait_ms": 50, **config})
    c._cluster = c._fetcher._cluster = cluster  # type: ignore[assignment]
    if c._group is not None:
        c._group._cluster = cluster  # type: ignore[assignment]

        async def open_coordinator(node_id: int, host: str, port: int) -> Any:
            return await cluster.connection(node_id)

        c._group._open_coordinator = open_coordinator  # type: ignore[method-assign]
    return c


async def collect(c: Consumer, n: int, *partitions: TopicPartition) -> dict[TopicPartition, list[ConsumerRecord]]:
    out: dict[TopicPartition, list[ConsumerRecord]] = {}
    while sum(len(v) for v in out.values()) < n:
        got = await c.getmany(*partitions, timeout_ms=5000)
        assert got, f"only {sum(len(v) for v in out.values())} of {n} records"
        for tp, records in got.items():
            out.setdefault(tp, []).extend(records)
    return out


def two_partitions() -> FakeCluster:
    cluster = FakeCluster()
    cluster.topic("t", [(0, 0), (1, 0)])
    for p in (0, 1):
        for b in range(3):
            cluster.append("t", p, [b"p%d-%d" % (p, b * 4 + i) for i in range(4)])
    return cluster


async def test_assigned_partitions_are_delivered_in_offset_order_from_the_earliest():
    cluster = two_partitions()
    c = consumer_on(cluster, auto_offset_reset="earliest")
    await c.start()
    c.assign([T0, T1])
    got = await collect(c, 24)
    for p, tp in enumerate((T0, T1)):
        assert [r.offset for r in got[tp]] == list(range(12))
        assert [r.value for r in got[tp]] == [b"p%d-%d" % (p, i) for i in range(12)]
        assert await c.position(tp) == 12 and c.highwater(tp) == 12
    assert c.assignment() == {T0, T1}
    await c.stop()


async def test_latest_starts_at_the_end_and_delivers_only_later_records():
    cluster = two_partitions()
    c = consumer_on(cluster, auto_offset_reset="latest")
    await c.start()
    c.assign([T0])
    assert await c.position(T0) == 12
    cluster.append("t", 0, [b"late"])
    got = await collect(c, 1)
    assert [(r.offset, r.value) for r in got[T0]] == [(12, b"late")]
    await c.stop()


async def test_seek_inside_a_batch_delivers_from_that_offset_and_seek_to_ends_move_the_position():
    cluster = two_partitions()
    c = consumer_on(cluster)
    await c.start()
    c.assign([T0])
    c.seek(T0, 6)  # at once after assign: the position is the seek's
    got = await collect(c, 6)
    assert [r.offset for r in got[T0]] == list(range(6, 12))
    assert await c.seek_to_beginning(T0)
    assert await c.position(T0) == 0
    assert await c.seek_to_end()
    assert await c.position(T0) == 12
    with pytest.raises(IllegalStateError):
        c.seek(T1, 0)
    with pytest.raises(ValueError):
        c.seek(T0, -1)
    await c.stop()


async def test_getmany_of_one_partition_and_max_records():
    cluster = two_partitions()
    c = consumer_on(cluster, auto_offset_reset="earliest")
    await c.start()
    c.assign([T0, T1])
    first = await collect(c, 3, T1)
    assert list(first) == [T1]
    some = await c.getmany(timeout_ms=5000, max_records=5)
    assert 0 < sum(len(v) for v in some.values()) <= 5
    for records in some.values():
        assert [r.offset for r in records] == list(range(records[0].offset, records[0].offset + len(records)))
    await c.stop()


async def test_offset_out_of_range_resets_by_the_policy():
    cluster = two_partitions()
    cluster.log_start[("t", 0)] = 4
    cluster.logs[("t", 0)] = cluster.logs[("t", 0)][1:]  # the first batch went (retention)
    c = consumer_on(cluster, auto_offset_reset="earliest")
    await c.start()
    c.assign([T0])
    c.seek(T0, 1)
    got = await collect(c, 8)
    assert [r.offset for r in got[T0]] == list(range(4, 12))
    await c.stop()

    strict = consumer_on(cluster, auto_offset_reset="none")
    await strict.start()
    strict.assign([T0])
    with pytest.raises(NoOffsetForPartitionError):
        await strict.getmany(timeout_ms=5000)
    strict.seek(T0, 1)
    with pytest.raises(OffsetOutOfRangeError):
        await strict.getmany(timeout_ms=5000)
    await strict.stop()


async def test_fetch_carries_the_leader_epoch_and_the_undeleted_count_and_a_hint_moves_the_partition_at_once():
    cluster = FakeCluster()
    cluster.topic("t", [(0, 3)], (1, 1))
    cluster.append("t", 0, [b"a"])
    c = consumer_on(cluster, auto_offset_reset="earliest", retry_backoff_ms=600_000)  # no retry can wait it out
    await c.start()
    c.assign([T0])
    await collect(c, 1)
    (_node, v, req) = cluster.asked("Fetch")[0]
    assert v == Fetch.max_version and req.topics[0].topic_id == b"t".ljust(16, b"-")
    assert req.topics[0].undeleted_partition_count == 1
    assert req.topics[0].partitions[0].current_leader_epoch == 3
    # the leader moves to broker 2 (epoch 4); broker 0 answers with the hint
    cluster.topic("t", [(2, 4)], (1, 1))
    CL = Fetch.Response.FetchableTopicResponse.PartitionData.LeaderIdAndEpoch
    cluster.fetch_error[("t", 0)] = (E.NOT_LEADER_OR_FOLLOWER, CL(leader_id=2, leader_epoch=4))
    cluster.append("t", 0, [b"b"])
    got = await collect(c, 1)
    assert [r.value for r in got[T0]] == [b"b"]
    assert c._fetcher.hinted_moves == 1
    assert cluster.asked("Fetch")[-1][0] == 2
    await c.stop()


async def test_invalid_partition_metadata_asks_for_metadata():
    cluster = FakeCluster()
    cluster.topic("t", [(0, 0)], (1, 1))
    cluster.append("t", 0, [b"a"])
    c = consumer_on(cluster, auto_offset_reset="earliest")
    await c.start()
    c.assign([T0])
    await collect(c, 1)
    refreshes = cluster.refreshes
    cluster.fetch_error[("t", 0)] = (E.INVALID_PARTITION_METADATA, None)
    cluster.append("t", 0, [b"b"])
    await collect(c, 1)
    assert cluster.refreshes > refreshes
    await c.stop()


async def test_a_group_consumer_starts_at_the_committed_offsets_and_commits_its_positions():
    cluster = two_partitions()
    cluster.committed[("t", 0)] = (10, 0)
    c = consumer_on(cluster, "t", group_id="g", auto_offset_reset="earliest", enable_auto_commit=False)
    await c.start()
    got = await collect(c, 14)
    assert [r.offset for r in got[T0]] == [10, 11]
    assert [r.offset for r in got[T1]] == list(range(12))
    assert await c.committed(T0) == 10
    await c.commit()
    assert cluster.committed == {("t", 0): (12, 0), ("t", 1): (12, 0)}
    await c.commit({T0: 11})
    assert cluster.committed[("t", 0)] == (11, -1)
    await c.stop()
    assert cluster.asked("LeaveGroup")


async def test_auto_commit_commits_on_stop():
    cluster = two_partitions()
    c = consumer_on(cluster, "t", group_id="g", auto_offset_reset="earliest", auto_commit_interval_ms=600_000)
    await c.start()
    await collect(c, 24)
    await c.stop()
    assert cluster.committed == {("t", 0): (12, 0), ("t", 1): (12, 0)}


async def test_a_seek_with_an_offset_epoch_waits_for_metadata_as_new_and_a_commit_carries_its_epoch():
    cluster = two_partitions()  # leader epochs 0
    cluster.topic_epochs["t"] = 5
    c = consumer_on(cluster, group_id="g", enable_auto_commit=False)
    await c.start()
    c.assign([T0])
    c.seek(T0, 4, OffsetEpoch(5, 2).encode())
    refreshes = cluster.refreshes
    while cluster.refreshes < refreshes + 3:  # it keeps asking: the cache's leader epoch 0 is behind 2
        await asyncio.sleep(0.005)
    assert not cluster.asked("Fetch")
    await c.commit()  # nothing delivered yet: the seek's leader epoch, the latest metadata's topic epoch
    assert cluster.committed[("t", 0)] == (4, 2) and cluster.committed_topic_epochs[("t", 0)] == 5
    cluster.topic("t", [(0, 2), (1, 0)])  # the brokers' metadata catches up
    got = await collect(c, 8)
    assert [r.offset for r in got[T0]] == list(range(4, 12))
    with pytest.raises(ValueError):
        c.seek(T0, 0, b"not an offset epoch")
    await c.stop()


async def test_position_with_offset_epoch_hands_a_position_to_another_consumer():
    cluster = FakeCluster()
    cluster.topic("t", [(0, 3)])
    cluster.topic_epochs["t"] = 9
    cluster.append("t", 0, [b"a", b"b"], epoch=1)
    cluster.append("t", 0, [b"c"], epoch=3)
    c = consumer_on(cluster, auto_offset_reset="earliest")
    await c.start()
    c.assign([T0])
    await collect(c, 3)
    om = await c.position_with_offset_epoch(T0)
    assert om == OffsetAndMetadata(3, "", 3, 9) and om.offset_epoch == OffsetEpoch(9, 3)
    await c.stop()
    other = consumer_on(cluster)
    await other.start()
    other.assign([T0])
    other.seek(T0, 1, om.offset_epoch)  # the metadata is as new: delivered at once
    got = await collect(other, 2)
    assert [r.value for r in got[T0]] == [b"b", b"c"]
    assert await other.position_with_offset_epoch(T0) == om
    await other.stop()


class RecordingGate:
    """A gate that holds each partition below a limit the test sets."""

    def __init__(self) -> None:
        self.limits: dict[TopicPartition, int] = {}
        self.calls: list[tuple[str, Any]] = []
        self.polled = asyncio.Event()

    async def on_assigned(self, member: MemberIdentity, assigned: Collection[TopicPartition], metadata: Any) -> None:
        self.calls.append(("assigned", (member, sorted(assigned))))

    def on_revoked(self, revoked: Collection[TopicPartition]) -> None:
        self.calls.append(("revoked", sorted(revoked)))

    def limit(self, tp: TopicPartition) -> int | None:
        return self.limits.get(tp)

    async def poll(self, positions: Mapping[TopicPartition, tuple[int, int]],
                   high_watermarks: Mapping[TopicPartition, int]) -> None:
        self.calls.append(("poll", (dict(positions), dict(high_watermarks))))
        self.polled.set()


async def test_the_gate_is_told_of_assignments_and_revocations_and_holds_records_at_its_limit():
    cluster = two_partitions()
    gate = RecordingGate()
    gate.limits = {T0: 5, T1: 0}
    c = consumer_on(cluster, "t", group_id="g", auto_offset_reset="earliest", heartbeat_interval_ms=20,
                    enable_auto_commit=False, _gate_factory=lambda cluster, group_id, listener: gate)
    await c.start()
    got = await collect(c, 5)
    assert list(got) == [T0] and [r.offset for r in got[T0]] == [0, 1, 2, 3, 4]
    assert await c.getmany(timeout_ms=100) == {}
    assert await c.position(T0) == 5 and await c.position(T1) == 0
    (kind, (member, assigned)), = [call for call in gate.calls if call[0] == "assigned"]
    assert member == MemberIdentity("g", "m0", 1) and assigned == [T0, T1]
    gate.polled.clear()
    await asyncio.wait_for(gate.polled.wait(), 5)
    positions, hws = gate.calls[-1][1]
    assert positions == {T0: (5, 0), T1: (0, -1)} and hws == {T0: 12, T1: 12}
    gate.limits = {}  # released: the next poll wakes getmany
    got = await collect(c, 19)
    assert [r.offset for r in got[T0]] == list(range(5, 12)) and [r.offset for r in got[T1]] == list(range(12))
    c._group.request_rejoin()  # type: ignore[union-attr]
    await asyncio.wait_for(_until(lambda: len([k for k, _ in gate.calls if k == "assigned"]) == 2), 5)
    assert ("revoked", [T0, T1]) in gate.calls
    await c.stop()


async def test_manual_assignment_gets_no_holds():
    cluster = two_partitions()
    gate = RecordingGate()
    gate.limits = {T0: 0}
    c = consumer_on(cluster, group_id="g", auto_offset_reset="earliest",
                    _gate_factory=lambda cluster, group_id, listener: gate)
    await c.start()
    c.assign([T0])
    assert len((await collect(c, 12))[T0]) == 12
    assert c._fetcher.isolation_level == ISOLATION_READ_UNCOMMITTED
    await c.stop()


async def _until(condition: Any) -> None:
    while not condition():
        await asyncio.sleep(0.01)


async def test_iteration_and_what_the_consumer_knows_of_a_partition():
    cluster = two_partitions()
    c = consumer_on(cluster, auto_offset_reset="earliest")
    await c.start()
    c.assign([T1])
    seen = []
    async for record in c:
        seen.append(record.offset)
        if len(seen) == 12:
            break
    assert seen == list(range(12))
    assert c.partitions_for_topic("t") == {0, 1} and c.partitions_for_topic("nope") is None
    assert (c.highwater(T1), c.last_stable_offset(T1)) == (12, 12)
    with pytest.raises(IllegalStateError):
        c.highwater(T0)
    await c.stop()
    with pytest.raises(ConsumerStoppedError):  # as aiokafka's
        [r async for r in c]


async def test_unsubscribing_gives_the_partitions_up_and_leaves_the_group():
    cluster = two_partitions()
    c = consumer_on(cluster, "t", group_id="g", auto_offset_reset="earliest", enable_auto_commit=False)
    await c.start()
    await collect(c, 24)
    assert c.subscription() == {"t"}
    c.unsubscribe()
    await asyncio.wait_for(_until(lambda: bool(cluster.asked("LeaveGroup"))), 5)
    assert c.assignment() == frozenset() and c.subscription() == frozenset()
    await c.stop()
