"""The producer's compacted-topic tombstones (refka/client/tombstones.py, seed 004 section
9)) against a scripted cluster: no broker, no sockets. A topic of initial count 2 expanded
to 4: partition 2 was split from 0 and 3 from 1 (linear hashing), the expansion recorded
leader epoch 5 for partition 0 and 7 for partition 1, which ended at offsets 10 and 20
(thresholds 9 and 19)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from refka.client.metadata import (
    BrokerEndpoint,
    ClusterMetadata,
    PartitionCounts,
    PartitionMetadata,
    TopicMetadata,
)
from refka.client.tombstones import SplitTombstones, compacted, tombstone_needed
from refka.protocol.messages.describe_configs import DescribeConfigs
from refka.protocol.messages.list_offsets import ListOffsets
from refka.protocol.messages.offsets_for_leader_epoch import OffsetForLeaderEpoch
from refka.protocol.messages.partition_leader_epochs_for_partitions import PartitionLeaderEpochsForPartitions
from refka.protocol.records import Compression, iter_records, read_header

pytestmark = pytest.mark.timeout(30)

T = "t"
COUNTS = PartitionCounts(2, 4)


class FakeConnection:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster, self.closed = cluster, False

    async def request(self, api: Any, body: Any, version: int | None = None, *,
                      expect_response: bool = True, **_: Any) -> Any:
        self.cluster.asked.append(api.name)
        return getattr(self.cluster, "on_" + api.name)(body, expect_response)


class FakeCluster:
    def __init__(self) -> None:
        self.metadata = ClusterMetadata()
        self.metadata.brokers[0] = BrokerEndpoint(0, "h", 0)
        self.metadata.topics[T] = TopicMetadata(T, {p: PartitionMetadata(0, 1) for p in range(4)}, COUNTS)
        self.configs = {"cleanup.policy": "compact", "enable.ordered.delivery": "true"}
        self.after_creation = {2: {0: 5, 1: 7}, 3: {0: 5, 1: 7}}
        self.epoch_ends = {(0, 5): 10, (1, 7): 20}
        self.earliest = {0: 10, 1: 0}
        self.asked: list[str] = []
        self.produced: list[tuple[str, int, bytes | None, bytes | None, int]] = []  # + acks

    async def connection(self, node_id: int) -> FakeConnection:
        return FakeConnection(self)

    def on_DescribeConfigs(self, req: Any, _expect: bool) -> Any:
        R = DescribeConfigs.Response
        return R(results=[R.DescribeConfigsResult(error_code=0, resource_type=2, resource_name=r.resource_name, configs=[
            R.DescribeConfigsResult.DescribeConfigsResourceResult(name=k, value=v)
            for k, v in self.configs.items()]) for r in req.resources])

    def on_PartitionLeaderEpochsForPartitions(self, req: Any, _expect: bool) -> Any:
        R = PartitionLeaderEpochsForPartitions.Response
        RT = R.PartitionLeaderEpochsForPartitionsResponseTopic
        RP = RT.PartitionLeaderEpochsForPartitionsResponseRequestedPartition
        return R(topics=[RT(topic=t.topic, partitions=[RP(partition=p, error_code=0, leader_epochs=[
            RP.PartitionLeaderEpochsForPartitionsResponsePartition(
                partition=q, leader_epoch_after_creation=e, leader_epoch_before_deletion=-1)
            for q, e in self.after_creation.get(p, {}).items()]) for p in t.partitions]) for t in req.topics])

    def on_OffsetForLeaderEpoch(self, req: Any, _expect: bool) -> Any:
        R = OffsetForLeaderEpoch.Response
        RT = R.OffsetForLeaderTopicResult
        return R(topics=[RT(topic=t.topic, partitions=[RT.EpochEndOffset(
            partition=p.partition, error_code=0, leader_epoch=p.leader_epoch,
            end_offset=self.epoch_ends.get((p.partition, p.leader_epoch), -1)) for p in t.partitions])
            for t in req.topics])

    def on_ListOffsets(self, req: Any, _expect: bool) -> Any:
        R = ListOffsets.Response
        RT = R.ListOffsetsTopicResponse
        return R(topics=[RT(name=t.name, partitions=[RT.ListOffsetsPartitionResponse(
            partition_index=p.partition_index, error_code=0, offset=self.earliest[p.partition_index])
            for p in t.partitions]) for t in req.topics])

    def on_Produce(self, req: Any, expect_response: bool) -> Any:
        assert not expect_response and req.acks == 0
        for t in req.topic_data:
            counts = self.metadata.topics[t.name].counts
            assert counts is not None and t.undeleted_partition_count == counts.undeleted
            for p in t.partition_data:
                h = read_header(p.records)
                assert h.producer_id == -1
                self.produced.extend((t.name, p.index, r.key, r.value, req.acks) for r in iter_records(p.records))
        return None


def tombstones_for(cluster: FakeCluster, recheck_after: float = 300.0) -> SplitTombstones:
    return SplitTombstones(cluster, compression=Compression.NONE, request_timeout_ms=1000,  # type: ignore[arg-type]
                           retry_backoff=0.0, recheck_after=recheck_after, on_metadata_wanted=lambda: None)


async def settled(t: SplitTombstones) -> None:
    while t._tasks:
        await asyncio.sleep(0)


def test_the_seeds_condition_and_what_counts_as_compacted():
    assert tombstone_needed(10, 9) and not tombstone_needed(9, 9) and tombstone_needed(0, -1)
    assert compacted({"cleanup.policy": "compact"}) and compacted({"cleanup.policy": "delete, compact"})
    assert not compacted({"cleanup.policy": "delete"}) and not compacted({})


async def test_a_key_moved_off_a_partition_compacted_past_its_threshold_leaves_a_tombstone_there():
    cluster = FakeCluster()
    t = tombstones_for(cluster)
    t.on_record(T, COUNTS, 2, b"k1", 1)  # split from 0, whose earliest 10 > threshold 9
    t.on_record(T, COUNTS, 3, b"k2", 2)  # split from 1, whose earliest 0 <= threshold 19
    t.on_record(T, COUNTS, 2, b"k3", 3)  # sent while the decision is asked: waits for it
    await settled(t)
    assert cluster.produced == [(T, 0, b"k1", None, 0), (T, 0, b"k3", None, 0)]
    asked = list(cluster.asked)
    for i in range(5):  # decided: no question more, one tombstone per record
        t.on_record(T, COUNTS, 2, b"k%d" % i, 4)
        t.on_record(T, COUNTS, 3, b"x%d" % i, 4)
    await settled(t)
    assert cluster.asked == asked + ["Produce"]  # the five in one request
    assert [r[2] for r in cluster.produced[2:]] == [b"k%d" % i for i in range(5)] and t.sent == 7
    assert asked.count("DescribeConfigs") == 1 and asked.count("PartitionLeaderEpochsForPartitions") == 1


@pytest.mark.parametrize("configs", [{"cleanup.policy": "delete"},
                                     {"cleanup.policy": "compact", "enable.ordered.delivery": "false"}])
async def test_a_topic_not_compacted_or_without_ordered_delivery_gets_none(configs):
    cluster = FakeCluster()
    cluster.configs = configs
    t = tombstones_for(cluster)
    t.on_record(T, COUNTS, 2, b"k1", 1)
    await settled(t)
    t.on_record(T, COUNTS, 2, b"k2", 1)
    await settled(t)
    assert cluster.produced == [] and cluster.asked == ["DescribeConfigs"]


async def test_a_partition_not_made_by_an_ordered_expansion_gets_none_and_is_not_asked_again():
    cluster = FakeCluster()
    cluster.after_creation = {}
    t = tombstones_for(cluster, recheck_after=0.0)
    for i in range(3):
        t.on_record(T, COUNTS, 2, b"k%d" % i, 1)
        await settled(t)
    assert cluster.produced == [] and cluster.asked.count("PartitionLeaderEpochsForPartitions") == 1


async def test_a_partition_not_compacted_past_its_threshold_yet_is_asked_again_later():
    cluster = FakeCluster()
    t = tombstones_for(cluster, recheck_after=0.0)  # "later" is at once here
    t.on_record(T, COUNTS, 3, b"k1", 1)
    await settled(t)
    assert cluster.produced == []
    cluster.earliest[1] = 20  # retention moved partition 1's start past 19
    t.on_record(T, COUNTS, 3, b"k2", 2)
    await settled(t)
    assert cluster.produced == [(T, 1, b"k2", None, 0)]


async def test_new_counts_drop_every_decision_of_the_topic():
    cluster = FakeCluster()
    t = tombstones_for(cluster)
    t.on_record(T, COUNTS, 2, b"k1", 1)
    await settled(t)
    grown = PartitionCounts(2, 5)
    cluster.metadata.topics[T].partitions[4] = PartitionMetadata(0, 0)
    cluster.after_creation[4] = {0: 6, 1: 7, 2: 0, 3: 0}  # 4 split from 0 under N=2, U 4 -> 5
    cluster.epoch_ends[(0, 6)] = 12
    cluster.earliest[0] = 13
    cluster.metadata.topics[T].counts = grown
    t.on_record(T, grown, 2, b"k2", 2)
    t.on_record(T, grown, 4, b"k3", 3)
    await settled(t)
    assert cluster.asked.count("PartitionLeaderEpochsForPartitions") == 2
    assert (T, 0, b"k3", None, 0) in cluster.produced and (T, 0, b"k2", None, 0) in cluster.produced


async def test_an_unanswered_question_is_asked_again_for_the_next_record():
    cluster = FakeCluster()
    cluster.epoch_ends = {}  # UNDEFINED: the leader does not know the epoch (yet)
    t = tombstones_for(cluster)
    t.on_record(T, COUNTS, 2, b"k1", 1)
    await settled(t)
    assert cluster.produced == []
    cluster.epoch_ends = {(0, 5): 10}
    t.on_record(T, COUNTS, 2, b"k2", 2)
    await settled(t)
    assert cluster.produced == [(T, 0, b"k1", None, 0), (T, 0, b"k2", None, 0)]


async def test_a_leader_that_does_not_answer_asks_for_metadata_and_the_question_is_asked_again():
    """A dead leader (its connection refused): the metadata is asked for, since another broker
    may lead now, instead of asking the same broker again at each back-off."""
    from refka.client.connection import BrokerConnectionError

    cluster = FakeCluster()
    wanted = []
    t = SplitTombstones(cluster, compression=Compression.NONE, request_timeout_ms=1000,  # type: ignore[arg-type]
                        retry_backoff=0.0, recheck_after=300.0, on_metadata_wanted=lambda: wanted.append(1))
    answer = cluster.on_DescribeConfigs

    def refused(req: Any, expect: bool) -> Any:
        raise BrokerConnectionError("cannot connect")

    cluster.on_DescribeConfigs = refused  # type: ignore[method-assign]
    t.on_record(T, COUNTS, 2, b"k1", 1)
    await settled(t)
    assert wanted and cluster.produced == []
    cluster.on_DescribeConfigs = answer  # type: ignore[method-assign]
    t.on_record(T, COUNTS, 2, b"k2", 2)
    await settled(t)
    assert cluster.produced == [(T, 0, b"k1", None, 0), (T, 0, b"k2", None, 0)]
