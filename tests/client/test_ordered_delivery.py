"""The ordered-delivery gate (refka/client/ordered_delivery.py) against a scripted cluster:
no broker, no sockets. ``FakeCluster`` stands in for ``ClusterClient``: each request is
answered from what the test set (configs, the KIP-253 maps, committed, earliest and latest
offsets, epoch end offsets), and ConsumerGroupPosition by the broker's own bookkeeping
(``GroupPositions``) over the members' assignments, so two gates of one group talk to each
other through it as they would through a coordinator. ``fail`` queues a one-shot error
(an error code, or an exception such as a lost connection) for an API."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from refka.broker.group.positions import GroupPositions, PositionReport
from refka.client.connection import BrokerConnectionError
from refka.client.group import MemberIdentity
from refka.client.metadata import (
    BrokerEndpoint,
    ClusterMetadata,
    PartitionCounts,
    PartitionMetadata,
    TopicMetadata,
)
from refka.client.ordered_delivery import Hold, OrderedDelivery
from refka.client.structs import TopicPartition
from refka.protocol import ErrorCode
from refka.protocol.consumer_protocol import Assignment
from refka.protocol.messages.consumer_group_position import ConsumerGroupPosition
from refka.protocol.messages.describe_configs import DescribeConfigs
from refka.protocol.messages.find_coordinator import FindCoordinator
from refka.protocol.messages.list_offsets import EARLIEST_TIMESTAMP, ListOffsets
from refka.protocol.messages.offset_fetch import OffsetFetch
from refka.protocol.messages.offsets_for_leader_epoch import OffsetForLeaderEpoch
from refka.protocol.messages.partition_leader_epochs_for_partitions import PartitionLeaderEpochsForPartitions

pytestmark = pytest.mark.timeout(30)

GROUP = "g"
T = "t"


def tp(p: int, topic: str = T) -> TopicPartition:
    return TopicPartition(topic, p)


class FakeConnection:
    def __init__(self, cluster: FakeCluster, node_id: int) -> None:
        self.cluster, self.node_id, self.closed = cluster, node_id, False

    async def request(self, api: Any, body: Any, version: int | None = None, **_: Any) -> Any:
        return self.cluster.answer(self.node_id, api, body)


class FakeCluster:
    def __init__(self) -> None:
        self.metadata = ClusterMetadata()
        for n in range(3):
            self.metadata.brokers[n] = BrokerEndpoint(n, "h", n)
        self.coordinator = 1
        self.configs: dict[str, str] = {}
        self.maps: dict[TopicPartition, tuple[dict[int, int], dict[int, int]]] = {}  # after, before
        self.committed: dict[TopicPartition, int] = {}
        self.earliest: dict[TopicPartition, int] = {}
        self.latest: dict[TopicPartition, int] = {}
        self.epoch_ends: dict[tuple[TopicPartition, int], int] = {}
        self.generation = 1
        self.assignments: dict[str, bytes] = {}
        self.positions = GroupPositions()
        self.fail: dict[str, list[ErrorCode | Exception]] = {}
        self.requests: list[tuple[int, str]] = []
        self.refreshed: list[set[str]] = []

    # -- what the test sets

    def topic(self, name: str, partitions: int, counts: tuple[int, int] | None, *, leader: int = 0) -> None:
        self.metadata.topics[name] = TopicMetadata(
            name, {p: PartitionMetadata(leader, 0) for p in range(partitions)},
            PartitionCounts(*counts) if counts is not None else None)

    def assign(self, member: str, *tps: TopicPartition) -> MemberIdentity:
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        self.assignments[member] = Assignment(by_topic).encode()
        return MemberIdentity(GROUP, member, self.generation)

    def count(self, api: Any) -> int:
        return sum(1 for _, name in self.requests if name == api.name)

    # -- ClusterClient's surface

    async def connection(self, node_id: int) -> FakeConnection:
        return FakeConnection(self, node_id)

    async def refresh(self, topics: Iterable[str]) -> None:
        self.refreshed.append(set(topics))

    # -- the brokers

    def answer(self, node_id: int, api: Any, body: Any) -> Any:
        self.requests.append((node_id, api.name))
        queued = self.fail.get(api.name)
        error = queued.pop(0) if queued else ErrorCode.NONE
        if isinstance(error, Exception):
            raise error
        return getattr(self, "_" + api.name)(node_id, body, error)

    def _FindCoordinator(self, node_id: int, req: Any, error: ErrorCode) -> Any:
        return FindCoordinator.Response(error_code=error, node_id=self.coordinator, host="h", port=self.coordinator)

    def _DescribeConfigs(self, node_id: int, req: Any, error: ErrorCode) -> Any:
        R = DescribeConfigs.Response
        RR = R.DescribeConfigsResult
        return R(throttle_time_ms=0, results=[
            RR(error_code=error, resource_type=2, resource_name=r.resource_name, configs=[
                RR.DescribeConfigsResourceResult(name="enable.ordered.delivery", value=self.configs.get(
                    r.resource_name, "true"), read_only=False)])
            for r in req.resources])

    def _PartitionLeaderEpochsForPartitions(self, node_id: int, req: Any, error: ErrorCode) -> Any:
        assert node_id == self.coordinator
        R = PartitionLeaderEpochsForPartitions.Response
        RT = R.PartitionLeaderEpochsForPartitionsResponseTopic
        RP = RT.PartitionLeaderEpochsForPartitionsResponseRequestedPartition
        RE = RP.PartitionLeaderEpochsForPartitionsResponsePartition
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                if error or tp(p, t.topic) not in self.maps:
                    parts.append(RP(partition=p, error_code=error or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                after, before = self.maps[tp(p, t.topic)]
                parts.append(RP(partition=p, error_code=0, leader_epochs=[
                    RE(partition=k, leader_epoch_after_creation=after.get(k, -1),
                       leader_epoch_before_deletion=before.get(k, -1)) for k in sorted(after.keys() | before.keys())]))
            topics.append(RT(topic=t.topic, partitions=parts))
        return R(throttle_time_ms=0, topics=topics)

    def _OffsetFetch(self, node_id: int, req: Any, error: ErrorCode) -> Any:
        R = OffsetFetch.Response
        RT = R.OffsetFetchResponseTopic
        return R(error_code=error, topics=[RT(name=t.name, partitions=[
            RT.OffsetFetchResponsePartition(partition_index=p, committed_offset=self.committed.get(tp(p, t.name), -1),
                                            metadata="", error_code=0)
            for p in t.partition_indexes]) for t in req.topics])

    def _ListOffsets(self, node_id: int, req: Any, error: ErrorCode) -> Any:
        R = ListOffsets.Response
        RT = R.ListOffsetsTopicResponse
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                table = self.earliest if p.timestamp == EARLIEST_TIMESTAMP else self.latest
                parts.append(RT.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=error,
                                                             offset=table.get(tp(p.partition_index, t.name), 0)))
            topics.append(RT(name=t.name, partitions=parts))
        return R(topics=topics)

    def _OffsetForLeaderEpoch(self, node_id: int, req: Any, error: ErrorCode) -> Any:
        R = OffsetForLeaderEpoch.Response
        RT = R.OffsetForLeaderTopicResult
        return R(topics=[RT(topic=t.topic, partitions=[RT.EpochEndOffset(
            error_code=error, partition=p.partition, leader_epoch=p.leader_epoch,
            end_offset=self.epoch_ends.get((tp(p.partition, t.topic), p.leader_epoch), -1))
            for p in t.partitions]) for t in req.topics])

    def _ConsumerGroupPosition(self, node_id: int, req: Any, error: ErrorCode) -> Any:
        R = ConsumerGroupPosition.Response
        if node_id != self.coordinator:
            error = ErrorCode.NOT_COORDINATOR
        if req.generation_id != self.generation:
            error = ErrorCode.ILLEGAL_GENERATION
        if error:
            return R(throttle_time_ms=0, topics=[], error_code=error)
        reports = [PositionReport((t.topic, p.partition), p.need_position, p.position)
                   for t in req.topics for p in t.partitions]
        answers = self.positions.exchange(self.generation, self.assignments, req.member_id, reports)
        RT = R.ConsumerGroupPositionResponseTopic
        by_topic: dict[str, list[Any]] = {}
        for a in answers:
            by_topic.setdefault(a.tp[0], []).append(RT.ConsumerGroupPositionResponsePartition(
                partition=a.tp[1], need_position=a.need_position, position=a.position))
        return R(throttle_time_ms=0, topics=[RT(topic=t, partitions=ps) for t, ps in by_topic.items()], error_code=0)


class Listener:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[TopicPartition]]] = []

    def on_partition_key_maybe_revoked(self, partitions: Any) -> None:
        self.calls.append(("maybe_revoked", list(partitions)))

    def on_partition_key_assigned(self, partitions: Any) -> None:
        self.calls.append(("assigned", list(partitions)))


def gate(cluster: FakeCluster) -> tuple[OrderedDelivery, Listener]:
    listener = Listener()
    return OrderedDelivery(cluster, GROUP, listener), listener  # type: ignore[arg-type]


def expanded() -> FakeCluster:
    """Topic t grew 2 -> 3: partition 2's leaderEpochAfterCreation is {0: 0, 1: 0}, so its
    blocker is partition 0, whose epoch 0 ended at offset 10 (lowerOffsetThreshold 9)."""
    c = FakeCluster()
    c.topic(T, 3, (2, 3))
    c.maps[tp(2)] = ({0: 0, 1: 0}, {})
    c.epoch_ends[(tp(0), 0)] = 10
    c.latest[tp(0)] = 10
    return c


# -- the creation hold (seed 8) step 4) ---------------------------------------------------------


async def test_a_new_partition_is_held_until_the_group_position_of_its_blocker_passes_the_lower_threshold():
    c = expanded()
    a, a_heard = gate(c)
    b, b_heard = gate(c)
    member_a, member_b = c.assign("a", tp(1), tp(2)), c.assign("b", tp(0))
    await a.on_assigned(member_a, [tp(1), tp(2)], c.metadata)
    await b.on_assigned(member_b, [tp(0)], c.metadata)
    assert a.limit(tp(2)) == 0 and a.limit(tp(1)) is None and b.limit(tp(0)) is None
    assert a.holds(tp(2)) == (Hold("creation", 0, 9, -1),)

    async def round_(position: int, epoch: int, hw: int) -> None:
        await a.poll({tp(1): (0, 0), tp(2): (0, 0)}, {})
        await b.poll({tp(0): (position, epoch)}, {tp(0): hw})

    # on_assigned told the coordinator that a needs partition 0, and b that it is needed.
    await round_(5, 0, 20)  # b reports 5 (its first report)
    assert b_heard.calls == [("maybe_revoked", [tp(0)])]
    await round_(9, 0, 20)  # a sees 5; 9 is not reported: below the high watermark, same epoch
    assert a.limit(tp(2)) == 0 and a.holds(tp(2)) == (Hold("creation", 0, 9, 5),)
    await round_(10, 0, 10)  # caught up with the high watermark: reported
    assert a.limit(tp(2)) == 0 and a_heard.calls == []  # a has not asked since
    await a.poll({}, {})
    assert a.limit(tp(2)) is None and a.holds(tp(2)) == ()
    assert a_heard.calls == [("assigned", [tp(2)])]
    assert b_heard.calls == [("maybe_revoked", [tp(0)]), ("maybe_revoked", [tp(0)])]
    await round_(10, 0, 10)
    await round_(10, 0, 10)
    assert a_heard.calls == [("assigned", [tp(2)])]


async def test_a_new_partition_the_group_already_consumed_from_is_not_held():
    c = expanded()
    c.committed[tp(2)] = 4
    c.earliest[tp(2)] = 0
    a, heard = gate(c)
    await a.on_assigned(c.assign("a", tp(2)), [tp(2)], c.metadata)
    assert a.limit(tp(2)) is None
    await a.poll({tp(2): (4, 1)}, {})
    assert heard.calls == [] and c.count(OffsetForLeaderEpoch) == 0


async def test_a_partition_an_expansion_recorded_no_epochs_for_is_not_held():
    c = expanded()
    c.maps[tp(2)] = ({}, {})  # e.g. grown while enable.ordered.delivery was false
    a, _ = gate(c)
    await a.on_assigned(c.assign("a", tp(2)), [tp(2)], c.metadata)
    assert a.limit(tp(2)) is None and c.count(OffsetFetch) == 0


async def test_a_creation_hold_ends_when_the_blocker_is_removed_from_the_topic():
    c = expanded()
    a, heard = gate(c)
    await a.on_assigned(c.assign("a", tp(2)), [tp(2)], c.metadata)
    await a.poll({}, {})
    assert a.limit(tp(2)) == 0
    del c.metadata.topics[T].partitions[0]
    await a.poll({}, {})
    assert a.limit(tp(2)) is None and heard.calls == [("assigned", [tp(2)])]


async def test_a_blocker_without_records_before_the_expansion_releases_at_the_first_answer():
    c = expanded()
    c.epoch_ends[(tp(0), 0)] = 0  # lowerOffsetThreshold -1
    c.fail[ConsumerGroupPosition.name] = [ErrorCode.REBALANCE_IN_PROGRESS]
    a, heard = gate(c)
    await a.on_assigned(c.assign("a", tp(2)), [tp(2)], c.metadata)
    assert a.limit(tp(2)) == 0 and heard.calls == []
    await a.poll({}, {})
    assert a.limit(tp(2)) is None and heard.calls == [("assigned", [tp(2)])]


# -- deletion holds (seed 8) step 5) ------------------------------------------------------------


def shrunk() -> FakeCluster:
    """Topic t (N = 2) shrunk 4 -> 2: partitions 2 and 3 are marked, with
    leaderEpochBeforeDeletion {0: 1, 1: 1}; partition 0's epoch 1 ended at offset 50
    (upperOffsetThreshold 49). Partition 2 blocks 0, partition 3 blocks 1."""
    c = FakeCluster()
    c.topic(T, 4, (2, 2))
    c.maps[tp(2)] = ({}, {0: 1, 1: 1})
    c.maps[tp(3)] = ({}, {0: 1, 1: 1})
    c.epoch_ends[(tp(0), 1)] = 50
    c.epoch_ends[(tp(1), 1)] = 70
    c.latest[tp(2)] = 30
    c.latest[tp(3)] = 0
    return c


async def test_a_partition_a_shrink_moved_keys_to_delivers_up_to_its_threshold_until_the_marked_one_is_drained():
    c = shrunk()
    a, a_heard = gate(c)
    b, b_heard = gate(c)
    member_a, member_b = c.assign("a", tp(0)), c.assign("b", tp(2))
    await a.on_assigned(member_a, [tp(0)], c.metadata)
    await b.on_assigned(member_b, [tp(2)], c.metadata)
    assert a.limit(tp(0)) == 50  # offsets 0..49 were produced before the shrink
    assert a.holds(tp(0)) == (Hold("deletion", 2, 49, -1),)
    assert b.limit(tp(2)) is None  # a marked partition is drained freely

    async def round_(position: int, hw: int) -> None:
        await a.poll({tp(0): (60, 1)}, {tp(0): 80})
        await b.poll({tp(2): (position, 0)}, {tp(2): hw})

    await round_(12, 30)  # b reports 12 (it learned in on_assigned that it is needed)
    await round_(29, 30)  # a sees 12; 29 is not reported
    assert a.limit(tp(0)) == 50 and a.holds(tp(0)) == (Hold("deletion", 2, 49, 12),)
    await round_(30, 30)  # drained: b reports its high watermark
    await a.poll({tp(0): (60, 1)}, {})
    assert a.limit(tp(0)) is None
    assert a_heard.calls == [("assigned", [tp(0)])]
    assert [name for name, _ in b_heard.calls] == ["maybe_revoked", "maybe_revoked"]
    await round_(30, 30)
    assert a_heard.calls == [("assigned", [tp(0)])]


async def test_a_deletion_hold_lifted_stays_lifted_across_a_new_generation():
    c = shrunk()
    a, heard = gate(c)
    await a.on_assigned(c.assign("a", tp(0), tp(2)), [tp(0), tp(2)], c.metadata)
    for position in (30, 30, 30):  # a drains 2 itself
        await a.poll({tp(2): (position, 0)}, {tp(2): 30})
    assert a.limit(tp(0)) is None and heard.calls[-1] == ("assigned", [tp(0)])
    c.generation = 2
    await a.on_assigned(c.assign("a", tp(0), tp(2)), [tp(0), tp(2)], c.metadata)
    assert a.limit(tp(0)) is None and a.holds(tp(0)) == ()


async def test_a_marked_partition_gone_from_the_metadata_lifts_its_hold():
    c = shrunk()
    a, heard = gate(c)
    await a.on_assigned(c.assign("a", tp(1)), [tp(1)], c.metadata)
    assert a.limit(tp(1)) == 70
    del c.metadata.topics[T].partitions[3]
    await a.poll({}, {})
    assert a.limit(tp(1)) is None and heard.calls == [("assigned", [tp(1)])]


async def test_until_the_coordinator_knows_the_marked_partition_map_nothing_is_delivered():
    c = shrunk()
    c.maps[tp(2)] = ({}, {})  # the coordinator's metadata has not heard of the shrink yet
    a, _ = gate(c)
    await a.on_assigned(c.assign("a", tp(0)), [tp(0)], c.metadata)
    assert a.limit(tp(0)) == 0
    await a.poll({}, {})
    assert a.limit(tp(0)) == 0
    c.maps[tp(2)] = ({}, {0: 1, 1: 1})
    await a.poll({}, {})
    assert a.limit(tp(0)) == 50


# -- errors never release -----------------------------------------------------------------------


@pytest.mark.parametrize("api, error", [
    (ConsumerGroupPosition, ErrorCode.REBALANCE_IN_PROGRESS),
    (ConsumerGroupPosition, ErrorCode.NOT_COORDINATOR),
    (ConsumerGroupPosition, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ConsumerGroupPosition, BrokerConnectionError("lost")),
    (OffsetForLeaderEpoch, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (OffsetForLeaderEpoch, BrokerConnectionError("lost")),
    (PartitionLeaderEpochsForPartitions, BrokerConnectionError("lost")),
    (OffsetFetch, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
    (ListOffsets, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (DescribeConfigs, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (FindCoordinator, ErrorCode.COORDINATOR_NOT_AVAILABLE),
])
async def test_an_error_keeps_the_hold_and_the_next_poll_asks_again(api, error):
    c = expanded()
    c.fail[api.name] = [error] * 2
    a, heard = gate(c)
    member = c.assign("a", tp(0), tp(2))
    await a.on_assigned(member, [tp(0), tp(2)], c.metadata)
    polls = 0
    while a.limit(tp(2)) == 0:
        await a.poll({tp(0): (10, 0)}, {tp(0): 10})
        polls += 1
        assert polls < 8, "never released"
        if c.fail[api.name]:
            assert a.limit(tp(2)) == 0, "released while the error was answered"
    assert a.limit(tp(2)) is None and heard.calls[-1] == ("assigned", [tp(2)])
    assert [name for name, _ in heard.calls].count("assigned") == 1
    if error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE) or isinstance(error, Exception):
        if api is ConsumerGroupPosition:
            assert c.count(FindCoordinator) >= 2  # the coordinator is looked up again
    if api is OffsetForLeaderEpoch and error == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        assert {T} in c.refreshed


async def test_an_undefined_epoch_end_offset_keeps_the_hold_and_is_asked_again():
    c = expanded()
    del c.epoch_ends[(tp(0), 0)]
    a, _ = gate(c)
    await a.on_assigned(c.assign("a", tp(2)), [tp(2)], c.metadata)
    await a.poll({}, {})
    assert a.limit(tp(2)) == 0 and a.holds(tp(2)) == (Hold("creation", 0, None, -1),)
    c.epoch_ends[(tp(0), 0)] = 10
    await a.poll({}, {})
    assert a.holds(tp(2))[0].threshold == 9


async def test_a_failed_position_report_is_sent_again_without_a_second_maybe_revoked():
    c = expanded()
    a, _ = gate(c)
    b, b_heard = gate(c)
    await a.on_assigned(c.assign("a", tp(2)), [tp(2)], c.metadata)
    await b.on_assigned(c.assign("b", tp(0)), [tp(0)], c.metadata)
    c.fail[ConsumerGroupPosition.name] = [ErrorCode.REBALANCE_IN_PROGRESS]
    await b.poll({tp(0): (3, 0)}, {tp(0): 10})  # needed (b learned it in on_assigned): reported, refused
    assert b_heard.calls == [("maybe_revoked", [tp(0)])] and (T, 0) not in c.positions.positions
    await b.poll({tp(0): (3, 0)}, {tp(0): 10})  # reported again
    assert b_heard.calls == [("maybe_revoked", [tp(0)])]
    assert c.positions.positions[(T, 0)][0] == 3


async def test_a_new_generation_reports_positions_again():
    """The coordinator forgets positions with a generation: a member whose position of an idle
    partition has not moved reports it again, or whoever waits on it would wait forever."""
    c = expanded()
    b, _ = gate(c)
    await b.on_assigned(c.assign("b", tp(0)), [tp(0)], c.metadata)
    c.positions.exchange(1, c.assignments, "other", [PositionReport((T, 0), True, -1)])
    c.assignments["other"] = b""
    for _ in range(2):
        await b.poll({tp(0): (10, 0)}, {tp(0): 10})
    assert c.positions.positions[(T, 0)][0] == 10
    c.generation = 2
    await b.on_assigned(c.assign("b", tp(0)), [tp(0)], c.metadata)
    c.positions.exchange(2, c.assignments, "other", [PositionReport((T, 0), True, -1)])
    for _ in range(2):
        await b.poll({tp(0): (10, 0)}, {tp(0): 10})
    assert c.positions.positions[(T, 0)][0] == 10


# -- what is never held ---------------------------------------------------------------------------


async def test_a_topic_without_the_kip253_counts_gets_no_holds_and_no_requests():
    c = FakeCluster()
    c.topic("stock", 3, None)
    a, heard = gate(c)
    await a.on_assigned(c.assign("a", tp(2, "stock")), [tp(2, "stock")], c.metadata)
    await a.poll({tp(2, "stock"): (0, 0)}, {})
    assert a.limit(tp(2, "stock")) is None and c.requests == [] and heard.calls == []


async def test_a_topic_with_ordered_delivery_off_gets_no_holds_and_reports_nothing():
    c = expanded()
    c.configs[T] = "false"
    a, heard = gate(c)
    await a.on_assigned(c.assign("a", tp(0), tp(2)), [tp(0), tp(2)], c.metadata)
    assert a.limit(tp(2)) is None and a.limit(tp(0)) is None
    await a.poll({tp(0): (0, 0)}, {})
    assert c.count(ConsumerGroupPosition) == 0 and heard.calls == []


async def test_nothing_is_delivered_before_the_topic_config_is_known():
    c = expanded()
    c.fail[DescribeConfigs.name] = [BrokerConnectionError("lost")]
    a, _ = gate(c)
    await a.on_assigned(c.assign("a", tp(0)), [tp(0)], c.metadata)
    assert a.limit(tp(0)) == 0
    await a.poll({}, {})
    assert a.limit(tp(0)) is None


async def test_revoked_partitions_are_forgotten():
    c = expanded()
    a, heard = gate(c)
    await a.on_assigned(c.assign("a", tp(2)), [tp(2)], c.metadata)
    a.on_revoked([tp(2)])
    assert a.limit(tp(2)) is None and a.holds(tp(2)) == ()
    asked = c.count(ConsumerGroupPosition)
    await a.poll({}, {})
    assert c.count(ConsumerGroupPosition) == asked and heard.calls == []


async def test_a_listener_that_raises_does_not_stop_the_gate():
    class Raising(Listener):
        def on_partition_key_assigned(self, partitions: Any) -> None:
            raise RuntimeError("user code")

    c = expanded()
    c.epoch_ends[(tp(0), 0)] = 0
    a = OrderedDelivery(c, GROUP, Raising())  # type: ignore[arg-type]
    await a.on_assigned(c.assign("a", tp(2)), [tp(2)], c.metadata)
    await a.poll({}, {})
    assert a.limit(tp(2)) is None


def test_a_deletion_hold_limits_until_it_is_lifted_even_once_the_numbers_say_drained():
    """The group's position of P3 reaching a log end offset known from an earlier poll does not
    let P1's records above the threshold through: only the lift does, which the listener's
    on_partition_key_assigned follows at once (the long chaos run delivered 52 records 190 ms
    before the call)."""
    from refka.client.ordered_delivery import _DeletionHold, _Gate

    gate = _Gate(TopicPartition("t", 4), initial=4, creation_checked=True)
    gate.deletions[12] = _DeletionHold(blocker=12, leader_epoch=3, upper_offset_threshold=100,
                                       group_position=268, log_end_offset=268)
    assert gate.limit() == 101
    gate.deletions.clear()
    assert gate.limit() is None
