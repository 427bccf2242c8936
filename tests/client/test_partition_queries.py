"""The KIP-253 partition questions (refka/client/partition_queries.py) against a scripted
cluster: each goes to the partition's leader, several epochs of one partition take one
request each, a leader error or an unknown leader marks the topic stale, and what is not
answered is left out."""

from __future__ import annotations

from typing import Any

import pytest

from refka.client import partition_queries as queries
from refka.client.connection import BrokerConnectionError
from refka.client.metadata import BrokerEndpoint, ClusterMetadata, PartitionMetadata, TopicMetadata
from refka.client.structs import TopicPartition
from refka.protocol import ErrorCode
from refka.protocol.messages.list_offsets import EARLIEST_TIMESTAMP, ListOffsets
from refka.protocol.messages.offsets_for_leader_epoch import OffsetForLeaderEpoch

pytestmark = pytest.mark.timeout(30)


def tp(p: int) -> TopicPartition:
    return TopicPartition("t", p)


class FakeConnection:
    def __init__(self, cluster: FakeCluster, node_id: int) -> None:
        self.cluster, self.node_id, self.closed = cluster, node_id, False

    async def request(self, api: Any, body: Any, version: int | None = None, **_: Any) -> Any:
        self.cluster.requests.append((self.node_id, api.name, body))
        if self.node_id in self.cluster.down:
            raise BrokerConnectionError("down")
        return getattr(self.cluster, "on_" + api.name)(self.node_id, body)


class FakeCluster:
    """Partitions 0-2 of topic t led by brokers 0, 1, 1; partition 3 has no leader."""

    def __init__(self) -> None:
        self.metadata = ClusterMetadata()
        for n in range(2):
            self.metadata.brokers[n] = BrokerEndpoint(n, "h", n)
        self.metadata.topics["t"] = TopicMetadata("t", {0: PartitionMetadata(0, 3), 1: PartitionMetadata(1, 3),
                                                        2: PartitionMetadata(1, 3), 3: PartitionMetadata(-1, 3)})
        self.requests: list[tuple[int, str, Any]] = []
        self.down: set[int] = set()
        self.not_leader: set[int] = set()

    async def connection(self, node_id: int) -> FakeConnection:
        return FakeConnection(self, node_id)

    def _code(self, p: int) -> int:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER if p in self.not_leader else 0

    def on_OffsetForLeaderEpoch(self, node_id: int, req: Any) -> Any:
        R = OffsetForLeaderEpoch.Response
        RT = R.OffsetForLeaderTopicResult
        return R(topics=[RT(topic=t.topic, partitions=[RT.EpochEndOffset(
            partition=p.partition, error_code=self._code(p.partition), leader_epoch=p.leader_epoch,
            end_offset=-1 if p.leader_epoch == 9 else 100 * p.partition + p.leader_epoch)
            for p in t.partitions]) for t in req.topics])

    def on_ListOffsets(self, node_id: int, req: Any) -> Any:
        R = ListOffsets.Response
        RT = R.ListOffsetsTopicResponse
        return R(topics=[RT(name=t.name, partitions=[RT.ListOffsetsPartitionResponse(
            partition_index=p.partition_index, error_code=self._code(p.partition_index), offset=10 + p.partition_index)
            for p in t.partitions]) for t in req.topics])


async def test_epoch_end_offsets_one_epoch_per_partition_and_request_each_to_its_leader():
    cluster = FakeCluster()
    stale: set[str] = set()
    got = await queries.epoch_end_offsets(cluster, [(tp(0), 1), (tp(0), 2), (tp(1), 1), (tp(2), 9)], stale)  # type: ignore[arg-type]
    assert got == {(tp(0), 1): 1, (tp(0), 2): 2, (tp(1), 1): 101}  # epoch 9 is UNDEFINED: left out
    asked = [(node, sorted((p.partition, p.leader_epoch) for t in body.topics for p in t.partitions))
             for node, _api, body in cluster.requests]
    assert sorted(asked) == [(0, [(0, 1)]), (0, [(0, 2)]), (1, [(1, 1), (2, 9)])]
    assert not stale


async def test_an_unknown_leader_or_a_leader_error_marks_the_topic_stale_and_a_lost_broker_answers_nothing():
    cluster = FakeCluster()
    stale: set[str] = set()
    assert await queries.list_offsets(cluster, [tp(3)], EARLIEST_TIMESTAMP, stale) == {}  # type: ignore[arg-type]
    assert stale == {"t"} and not cluster.requests
    stale.clear()
    cluster.not_leader = {1}
    cluster.down = {0}
    got = await queries.list_offsets(cluster, [tp(0), tp(1), tp(2)], EARLIEST_TIMESTAMP, stale)  # type: ignore[arg-type]
    assert got == {tp(2): 12} and stale == {"t"}
