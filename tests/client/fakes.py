"""A scripted cluster for the consumer's unit tests: no broker, no sockets.

``FakeCluster`` stands in for ``ClusterClient``: Metadata is what the test sets
(``topic()``), each partition's log is a list of batches built with refka's
codec (``append``), and Fetch, ListOffsets and the group APIs are answered from
that state. A test changes the answers by setting ``fetch_error`` (per
partition, one-shot) or ``group_errors`` (per API, one-shot, in order), and
reads what was asked in ``requests``.

The group coordinator is kept as small as the member needs: one member id per
join (MEMBER_ID_REQUIRED first, KIP-394), generation + 1 per join, the leader's
assignment handed back in SyncGroup, committed offsets in a dict.
"""

from __future__ import annotations

import asyncio
from typing import Any

from refka.client.metadata import ClusterMetadata
from refka.protocol import ErrorCode
from refka.protocol.consumer_protocol import Assignment
from refka.protocol.messages.fetch import Fetch
from refka.protocol.messages.find_coordinator import FindCoordinator
from refka.protocol.messages.heartbeat import Heartbeat
from refka.protocol.messages.join_group import JoinGroup
from refka.protocol.messages.leave_group import LeaveGroup
from refka.protocol.messages.list_offsets import ListOffsets
from refka.protocol.messages.metadata import Metadata
from refka.protocol.messages.offset_commit import OffsetCommit
from refka.protocol.messages.offset_fetch import OffsetFetch
from refka.protocol.messages.sync_group import SyncGroup
from refka.protocol.records import build_batch

MR = Metadata.Response
MT = MR.MetadataResponseTopic
FR = Fetch.Response
FT = FR.FetchableTopicResponse
FP = FT.PartitionData


class FakeConnection:
    def __init__(self, cluster: FakeCluster, node_id: int) -> None:
        self.cluster, self.node_id, self.closed = cluster, node_id, False

    def version_for(self, api: Any) -> int:
        return int(self.cluster.versions.get(api.key, api.max_version))

    async def request(self, api: Any, body: Any, version: int | None = None, *,
                      expect_response: bool = True, timeout: float | None = None) -> Any:
        v = self.version_for(api) if version is None else version
        self.cluster.requests.append((self.node_id, api.name, v, body))
        handler = getattr(self.cluster, "on_" + api.name)
        return await handler(self.node_id, body, v)

    async def close(self) -> None:
        self.closed = True


class FakeCluster:
    def __init__(self) -> None:
        self.metadata = ClusterMetadata()
        self.client_id = "fake"
        self.topics: dict[str, tuple[list[tuple[int, int]], tuple[int, int] | None]] = {}
        self.logs: dict[tuple[str, int], list[bytearray]] = {}
        self.log_start: dict[tuple[str, int], int] = {}
        self.requests: list[tuple[int, str, int, Any]] = []
        self.versions: dict[int, int] = {}
        self.refreshes = 0
        self.fetch_error: dict[tuple[str, int], tuple[ErrorCode, Any]] = {}  # one-shot, with current_leader
        self.group_errors: dict[str, list[ErrorCode]] = {}
        self.committed: dict[tuple[str, int], tuple[int, int]] = {}  # (offset, leader epoch)
        self.committed_topic_epochs: dict[tuple[str, int], int] = {}  # KIP-232
        self.topic_epochs: dict[str, int] = {}  # KIP-232, in Metadata (-1 when not set)
        self.generation = 0
        self.coordinator = 0  # the broker FindCoordinator names
        self.members: list[str] = []
        self.assignments: dict[str, bytes] = {}
        self.data = asyncio.Event()  # a long-polling Fetch waits for an append

    # -- set-up -------------------------------------------------------------------------

    def topic(self, name: str, leaders: list[tuple[int, int]], counts: tuple[int, int] | None = None) -> None:
        """The topic's (leader, leader epoch) per partition and (initial, undeleted), for the next Metadata."""
        self.topics[name] = (leaders, counts)
        for p in range(len(leaders)):
            self.logs.setdefault((name, p), [])

    def append(self, topic: str, partition: int, values: list[bytes], *, epoch: int = 0, **kw: Any) -> None:
        log = self.logs[(topic, partition)]
        base = self.end(topic, partition)
        log.append(build_batch([(None, v) for v in values], base_offset=base, partition_leader_epoch=epoch, **kw))
        self.data.set()

    def end(self, topic: str, partition: int) -> int:
        log = self.logs[(topic, partition)]
        if not log:
            return self.log_start.get((topic, partition), 0)
        last = log[-1]
        return int.from_bytes(last[0:8], "big") + int.from_bytes(last[23:27], "big") + 1

    def asked(self, api: str) -> list[tuple[int, int, Any]]:
        return [(node, v, body) for node, name, v, body in self.requests if name == api]

    # -- ClusterClient ------------------------------------------------------------------

    async def refresh(self, topics: Any) -> bool:
        self.refreshes += 1
        out = []
        for name in topics:
            if name not in self.topics:
                out.append(MT(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name))
                continue
            leaders, counts = self.topics[name]
            out.append(MT(error_code=0, name=name, topic_id=name.encode().ljust(16, b"-"),
                          topic_epoch=self.topic_epochs.get(name, -1), partitions=[
                MT.MetadataResponsePartition(error_code=0, partition_index=i, leader_id=leader, leader_epoch=epoch)
                for i, (leader, epoch) in enumerate(leaders)],
                partition_counts=None if counts is None else MT.PartitionCounts(
                    initial_partition_count=counts[0], undeleted_partition_count=counts[1])))
        return self.metadata.apply(MR(brokers=[MR.MetadataResponseBroker(node_id=i, host="h", port=i)
                                               for i in range(3)], topics=out))

    async def connection(self, node_id: int) -> FakeConnection:
        return FakeConnection(self, node_id)

    async def close(self) -> None:
        pass

    # -- the data APIs ------------------------------------------------------------------

    async def on_Fetch(self, node_id: int, req: Any, v: int) -> Any:
        if req.max_wait_ms and not self._fetchable(node_id, req):
            self.data.clear()
            try:
                async with asyncio.timeout(req.max_wait_ms / 1000):
                    await self.data.wait()
            except TimeoutError:
                pass
        by_id = {name.encode().ljust(16, b"-"): name for name in self.topics}
        out = []
        for t in req.topics:
            name = t.topic if v < 13 else by_id[t.topic_id]
            parts = []
            for p in t.partitions:
                err = self.fetch_error.pop((name, p.partition), None)
                if err is not None:
                    parts.append(FP(partition_index=p.partition, error_code=err[0], high_watermark=-1,
                                    current_leader=err[1], records=b""))
                    continue
                leader = self.topics[name][0][p.partition][0]
                if leader != node_id:
                    parts.append(FP(partition_index=p.partition, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                    high_watermark=-1, records=b""))
                    continue
                start, end = self.log_start.get((name, p.partition), 0), self.end(name, p.partition)
                if not start <= p.fetch_offset <= end:
                    parts.append(FP(partition_index=p.partition, error_code=ErrorCode.OFFSET_OUT_OF_RANGE,
                                    high_watermark=end, records=b""))
                    continue
                batches = [b for b in self.logs[(name, p.partition)]
                           if int.from_bytes(b[0:8], "big") + int.from_bytes(b[23:27], "big") >= p.fetch_offset]
                parts.append(FP(partition_index=p.partition, error_code=0, high_watermark=end,
                                last_stable_offset=end, log_start_offset=start, records=b"".join(batches)))
            out.append(FT(topic=name, topic_id=t.topic_id, partitions=parts))
        return FR(error_code=0, responses=out)

    def _fetchable(self, node_id: int, req: Any) -> bool:
        by_id = {name.encode().ljust(16, b"-"): name for name in self.topics}
        for t in req.topics:
            name = t.topic or by_id.get(t.topic_id, "")
            for p in t.partitions:
                if (name, p.partition) in self.fetch_error or p.fetch_offset < self.end(name, p.partition):
                    return True
        return False

    async def on_ListOffsets(self, node_id: int, req: Any, v: int) -> Any:
        R = ListOffsets.Response
        T = R.ListOffsetsTopicResponse
        return R(topics=[T(name=t.name, partitions=[T.ListOffsetsPartitionResponse(
            partition_index=p.partition_index, error_code=0,
            offset=self.log_start.get((t.name, p.partition_index), 0) if p.timestamp == -2
            else self.end(t.name, p.partition_index)) for p in t.partitions]) for t in req.topics])

    # -- the group APIs -------------------------------------------------------------------

    def _error(self, api: str) -> ErrorCode:
        errors = self.group_errors.get(api)
        return errors.pop(0) if errors else ErrorCode.NONE

    async def on_FindCoordinator(self, node_id: int, req: Any, v: int) -> Any:
        R = FindCoordinator.Response
        err = self._error("FindCoordinator")
        return R(coordinators=[R.Coordinator(key=k, node_id=self.coordinator, host="h", port=self.coordinator,
                                             error_code=err) for k in req.coordinator_keys])

    async def on_JoinGroup(self, node_id: int, req: Any, v: int) -> Any:
        R = JoinGroup.Response
        err = self._error("JoinGroup")
        if err:
            return R(error_code=err, member_id=req.member_id)
        if not req.member_id:
            member = f"m{len(self.members)}"
            self.members.append(member)
            return R(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id=member)
        self.generation += 1
        return R(error_code=0, generation_id=self.generation, protocol_name=req.protocols[0].name,
                 leader=req.member_id, member_id=req.member_id,
                 members=[R.JoinGroupResponseMember(member_id=req.member_id, metadata=req.protocols[0].metadata)])

    async def on_SyncGroup(self, node_id: int, req: Any, v: int) -> Any:
        err = self._error("SyncGroup")
        if err:
            return SyncGroup.Response(error_code=err, assignment=b"")
        for a in req.assignments:
            self.assignments[a.member_id] = bytes(a.assignment)
        return SyncGroup.Response(error_code=0, assignment=self.assignments.get(req.member_id, b""))

    async def on_Heartbeat(self, node_id: int, req: Any, v: int) -> Any:
        return Heartbeat.Response(error_code=self._error("Heartbeat"))

    async def on_LeaveGroup(self, node_id: int, req: Any, v: int) -> Any:
        return LeaveGroup.Response(error_code=0)

    async def on_OffsetFetch(self, node_id: int, req: Any, v: int) -> Any:
        R = OffsetFetch.Response
        G = R.OffsetFetchResponseGroup
        T = G.OffsetFetchResponseTopics
        topics = req.groups[0].topics if v >= 8 else req.topics
        return R(groups=[G(group_id="g", error_code=self._error("OffsetFetch"), topics=[T(name=t.name, partitions=[
            T.OffsetFetchResponsePartitions(
                partition_index=p, committed_offset=self.committed.get((t.name, p), (-1, -1))[0],
                committed_leader_epoch=self.committed.get((t.name, p), (-1, -1))[1], metadata="", error_code=0,
                topic_epoch=self.committed_topic_epochs.get((t.name, p), -1))
            for p in t.partition_indexes]) for t in topics])])

    async def on_OffsetCommit(self, node_id: int, req: Any, v: int) -> Any:
        R = OffsetCommit.Response
        T = R.OffsetCommitResponseTopic
        err = self._error("OffsetCommit")
        if not err:
            for t in req.topics:
                for p in t.partitions:
                    self.committed[(t.name, p.partition_index)] = (p.committed_offset, p.committed_leader_epoch)
                    self.committed_topic_epochs[(t.name, p.partition_index)] = p.topic_epoch
        return R(topics=[T(name=t.name, partitions=[T.OffsetCommitResponsePartition(
            partition_index=p.partition_index, error_code=err) for p in t.partitions]) for t in req.topics])


def assignment_of(cluster: FakeCluster, member: str) -> dict[str, list[int]]:
    return {t: list(ps) for t, ps in Assignment.decode(cluster.assignments[member]).assigned_partitions.items()}
