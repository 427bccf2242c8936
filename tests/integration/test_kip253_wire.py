"""KIP-253 on the broker, on the wire: PartitionLeaderEpochsForPartitions (10253) and
ConsumerGroupPosition (10254) byte for byte, and partitions marked for deletion (Produce
refused with INVALID_PARTITION_METADATA, Fetch still served).

Two brokers of this process (``InProcessCluster``, embedded store). Topic ``k253`` has
every partition on broker 0 and grows 2 -> 3 -> 4 through CreatePartitions, so the
controller writes leaderEpochAfterCreation {0: 0, 1: 0} for partition 2 and
{0: 1, 1: 1, 2: 0} for partition 3 and ships them in UpdateMetadata. Marking partitions
for deletion is the controller's shrink (another change): here the test sends broker 0
the UpdateMetadata that shrink ends with (undeleted_partition_count 2,
leaderEpochBeforeDeletion of partitions 2 and 3), as the controller would, with the
controller's id, epoch and token read from the store.

Request and answer bytes are written out here from the wire rules (big-endian
integers, unsigned varints, compact strings and arrays, empty tagged-field sections),
not produced by refka's codec; only the member ids the coordinator draws are spliced in.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from refka.protocol import ErrorCode
from refka.protocol.messages.create_partitions import CreatePartitions
from refka.protocol.messages.create_topics import CreateTopics
from refka.protocol.messages.fetch import Fetch
from refka.protocol.messages.find_coordinator import FindCoordinator
from refka.protocol.messages.join_group import JoinGroup
from refka.protocol.messages.metadata import Metadata
from refka.protocol.messages.produce import Produce
from refka.protocol.messages.sync_group import SyncGroup
from refka.protocol.messages.update_metadata import SECURITY_PROTOCOLS, UpdateMetadata
from refka.protocol.records import build_batch, iter_batches
from tests.integration.cluster_helpers import InProcessCluster, Raw
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "k253"
UNKNOWN_TOPIC_OR_PARTITION = "0003"
NOT_COORDINATOR = "0010"
ILLEGAL_GENERATION = "0016"
UNKNOWN_MEMBER_ID = "0019"


# -- the wire rules, by hand --------------------------------------------------------------


def uvarint(n: int) -> str:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | 0x80 if n else b)
        if not n:
            return out.hex()


def cstr(s: str) -> str:
    """A compact string."""
    return uvarint(len(s.encode()) + 1) + s.encode().hex()


def i32(n: int) -> str:
    return struct.pack(">i", n).hex()


def i64(n: int) -> str:
    return struct.pack(">q", n).hex()


def hexes(*parts: str) -> bytes:
    """Hex fields; anything after a '#' in a part is a comment."""
    return bytes.fromhex("".join(p.split("#")[0].replace(" ", "") for p in parts))


def request_frame(api_key: int, correlation_id: int, *body: str) -> bytes:
    """Request header v2 (flexible): key, version 0, correlation id, client id 'k253', no tags."""
    payload = hexes(struct.pack(">hhi", api_key, 0, correlation_id).hex(), "0004", b"k253".hex(), "00", *body)
    return struct.pack(">i", len(payload)) + payload


def response_frame(correlation_id: int, *body: str) -> bytes:
    """Response header v1 (flexible): correlation id, no tags."""
    return hexes(i32(correlation_id), "00", *body)


# -- the cluster ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[InProcessCluster]:
    c = InProcessCluster(tmp_path_factory.mktemp("kip253-wire"), n=2,
                         overrides={"group.initial.rebalance.delay.ms": "500",
                                    "auto.create.topics.enable": "false"})
    try:
        yield c
    finally:
        c.close()


def port(cluster: InProcessCluster, node_id: int) -> int:
    return int(cluster.bootstrap.split(",")[node_id].rsplit(":", 1)[1])


def call(cluster: InProcessCluster, node_id: int, api: Any, body: Any, version: int) -> Any:
    raw = Raw(port(cluster, node_id))
    try:
        return raw.call_raw(api, body, version)[0]
    finally:
        raw.close()


def call_bytes(cluster: InProcessCluster, node_id: int, frame: bytes) -> bytes:
    raw = Raw(port(cluster, node_id))
    try:
        return raw.call_bytes(frame)
    finally:
        raw.close()


def produce(cluster: InProcessCluster, partition: int, values: list[bytes], undeleted: int = -1) -> Any:
    P = Produce.Request
    req = P(transactional_id=None, acks=1, timeout_ms=10_000, topic_data=[P.TopicProduceData(
        name=TOPIC, undeleted_partition_count=undeleted, partition_data=[P.TopicProduceData.PartitionProduceData(
            index=partition, records=bytes(build_batch([(None, v) for v in values])))])])
    (p,) = call(cluster, 0, Produce, req, 9).responses[0].partition_responses
    return p


def fetch(cluster: InProcessCluster, partition: int, undeleted: int = -1) -> Any:
    F = Fetch.Request
    req = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, topics=[
        F.FetchTopic(topic=TOPIC, undeleted_partition_count=undeleted, partitions=[F.FetchTopic.FetchPartition(
            partition=partition, fetch_offset=0, partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[], rack_id="")
    return call(cluster, 0, Fetch, req, 12).responses[0].partitions[0]


def plefp_maps(cluster: InProcessCluster, node_id: int, partition: int) -> list[tuple[int, int, int]]:
    """Partition ``partition``'s maps as broker ``node_id`` answers them (decoded)."""
    from refka.protocol.messages.partition_leader_epochs_for_partitions import (
        PartitionLeaderEpochsForPartitions as PLEFP,
    )
    R = PLEFP.Request
    resp = call(cluster, node_id, PLEFP, R(topics=[R.PartitionLeaderEpochsForPartitionsRequestTopic(
        topic=TOPIC, partitions=[partition])]), 0)
    return [(e.partition, e.leader_epoch_after_creation, e.leader_epoch_before_deletion)
            for e in resp.topics[0].partitions[0].leader_epochs]


@pytest.fixture(scope="module")
def topic(cluster: InProcessCluster) -> str:
    """k253 on broker 0, grown 2 -> 3 -> 4; records in partition 3; both brokers know the maps."""
    R = CreateTopics.Request
    resp = call(cluster, 0, CreateTopics, R(topics=[R.CreatableTopic(
        name=TOPIC, num_partitions=-1, replication_factor=-1, configs=[],
        assignments=[R.CreatableTopic.CreatableReplicaAssignment(partition_index=p, broker_ids=[0])
                     for p in range(2)])], timeout_ms=15_000, validate_only=False), 7)
    assert resp.topics[0].error_code == ErrorCode.NONE
    C = CreatePartitions.Request
    for count, expected in ((3, [(0, 0, -1), (1, 0, -1)]), (4, [(0, 1, -1), (1, 1, -1), (2, 0, -1)])):
        resp = call(cluster, 0, CreatePartitions, C(topics=[C.CreatePartitionsTopic(
            name=TOPIC, count=count, assignments=[C.CreatePartitionsTopic.CreatePartitionsAssignment(
                broker_ids=[0])])], timeout_ms=15_000, validate_only=False), 3)
        assert resp.results[0].error_code == ErrorCode.NONE, resp
        for node in (0, 1):
            wait_until(lambda node=node, count=count, expected=expected: plefp_maps(cluster, node, count - 1)
                       == expected, message=f"partition {count - 1}'s leaderEpochAfterCreation on {node}")
    assert produce(cluster, 3, [b"before-1", b"before-2"]).error_code == ErrorCode.NONE
    return TOPIC


# -- PartitionLeaderEpochsForPartitions ---------------------------------------------------------


PLEFP_REQUEST = (
    "03                     # topics: 2",
    cstr(TOPIC), "04 00000003 00000000 00000009  # k253: partitions 3, 0, 9",
    "00                     #   no tags",
    cstr("nope"), "02 00000000 00  # nope: partition 0, no tags",
    "00                     # no tags",
)


def test_every_broker_answers_each_requested_partitions_leader_epoch_after_creation(cluster, topic):
    expected = response_frame(
        7,
        "00000000               # throttle_time_ms",
        "03                     # topics: 2",
        cstr(TOPIC), "04        # k253, partitions: 3",
        "00000003 0000          #   partition 3, NONE",
        "04                     #   leader_epochs: 3, ascending, each without tags",
        "00000000 00000001 ffffffff 00  # partition 0: after creation 1, before deletion -1",
        "00000001 00000001 ffffffff 00  # partition 1: 1, -1",
        "00000002 00000000 ffffffff 00  # partition 2: 0, -1",
        "00                     #   no tags",
        "00000000 0000 01 00    #   partition 0, NONE, no entries (created with the topic)",
        "00000009", UNKNOWN_TOPIC_OR_PARTITION, "01 00  # partition 9: unknown",
        "00                     # k253: no tags",
        cstr("nope"), "02 00000000", UNKNOWN_TOPIC_OR_PARTITION, "01 00 00  # nope: unknown",
        "00                     # no tags",
    )
    for node in (0, 1):  # not only the group coordinator: every broker has the maps
        assert call_bytes(cluster, node, request_frame(10253, 7, *PLEFP_REQUEST)) == expected


def test_an_empty_request_gets_an_empty_answer(cluster, topic):
    assert call_bytes(cluster, 1, request_frame(10253, 8, "01 00")) == response_frame(8, "00000000 01 00")


# -- partitions marked for deletion ---------------------------------------------------------


@pytest.fixture(scope="module")
def marked(cluster: InProcessCluster, topic: str) -> str:
    """Broker 0 told, as the controller's shrink to 2 would tell it: undeleted_partition_count 2,
    partitions 2 and 3 with leaderEpochBeforeDeletion {0: 2, 1: 2} (partitions 0 and 1 are at
    leader epoch 2 after the two expansions)."""
    broker = cluster.cluster.broker(0)
    registration = cluster.call(broker.controller_side.controller_registration())
    epoch = registration.controller_epoch
    U = UpdateMetadata.Request
    TS = U.UpdateMetadataTopicState
    PS = TS.UpdateMetadataPartitionState
    M = PS.LeaderEpochMaps
    E = M.PartitionLeaderEpoch

    def build() -> Any:
        meta = broker.metadata.topic(TOPIC)
        states = [PS(partition_index=p.partition, controller_epoch=epoch, leader=p.leader,
                     leader_epoch=p.leader_epoch, isr=p.isr, zk_version=0, replicas=p.replicas,
                     offline_replicas=p.offline_replicas, partition_epoch=p.partition_epoch,
                     leader_epoch_maps=M(
                         leader_epoch_after_creation=[E(partition=k, leader_epoch=v)
                                                      for k, v in p.leader_epoch_after_creation],
                         leader_epoch_before_deletion=[E(partition=0, leader_epoch=2), E(partition=1, leader_epoch=2)])
                     if p.partition >= 2 else None)
                  for p in sorted(meta.partitions.values(), key=lambda p: p.partition)]
        brokers = [U.UpdateMetadataBroker(id=b.node_id, rack=b.rack, endpoints=[
            U.UpdateMetadataBroker.UpdateMetadataEndpoint(port=port_, host=host, listener=listener,
                                                          security_protocol=SECURITY_PROTOCOLS["PLAINTEXT"])
            for listener, (host, port_) in b.endpoints.items()]) for b in broker.metadata.brokers.values()]
        return U(controller_id=registration.controller_id, controller_epoch=epoch, broker_epoch=-1,
                 controller_token=registration.controller_token, live_brokers=brokers, topic_states=[TS(
                     topic_name=TOPIC, topic_id=meta.topic_id, topic_epoch=meta.topic_epoch, partition_states=states,
                     partition_counts=TS.PartitionCounts(initial_partition_count=2, undeleted_partition_count=2))])

    assert call(cluster, 0, UpdateMetadata, cluster.on_loop(build), 8).error_code == ErrorCode.NONE
    return TOPIC


def test_a_marked_partition_answers_its_leader_epoch_before_deletion_too(cluster, marked):
    request = request_frame(10253, 9, "02", cstr(TOPIC), "02 00000003 00 00")
    assert call_bytes(cluster, 0, request) == response_frame(
        9,
        "00000000 02", cstr(TOPIC), "02",
        "00000003 0000 04       # partition 3, NONE, 3 entries",
        "00000000 00000001 00000002 00  # partition 0: after creation 1, before deletion 2",
        "00000001 00000001 00000002 00  # partition 1: 1, 2",
        "00000002 00000000 ffffffff 00  # partition 2: 0, -1 (marked itself: not a key of the map)",
        "00 00 00",
    )


def test_a_produce_to_a_marked_partition_is_refused_whether_or_not_it_names_a_count(cluster, marked):
    # A KIP-253 producer (it sent the count) gets 10253; a stock one the retriable code it knows.
    for undeleted, code in ((2, ErrorCode.INVALID_PARTITION_METADATA), (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)):
        p = produce(cluster, 3, [b"after"], undeleted)
        assert (p.error_code, p.base_offset) == (code, -1)
        assert "marked for deletion" in p.error_message
    assert produce(cluster, 1, [b"kept"], 2).error_code == ErrorCode.NONE
    stale = produce(cluster, 1, [b"stale"], 4)
    assert stale.error_code == ErrorCode.INVALID_PARTITION_METADATA and "is not the broker's 2" in stale.error_message


def test_a_marked_partition_is_still_listed_and_fetched_to_its_end(cluster, marked):
    md = call(cluster, 0, Metadata, Metadata.Request(
        topics=[Metadata.Request.MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False,
        refka_extensions=True), 12)
    (t,) = md.topics
    assert sorted(p.partition_index for p in t.partitions) == [0, 1, 2, 3]
    counts = t.partition_counts
    assert (counts.initial_partition_count, counts.undeleted_partition_count) == (2, 2)
    for undeleted in (-1, 2):
        p = fetch(cluster, 3, undeleted)
        assert (p.error_code, p.high_watermark) == (ErrorCode.NONE, 2)
        assert [(h.base_offset, h.last_offset_delta + 1) for h in iter_batches(p.records)] == [(0, 2)]
    assert fetch(cluster, 3, 4).error_code == ErrorCode.INVALID_PARTITION_METADATA


# -- ConsumerGroupPosition -------------------------------------------------------------------------


def consumer_assignment(partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0 of ``partitions`` of k253, no user data."""
    return (struct.pack(">hih", 0, 1, len(TOPIC)) + TOPIC.encode()
            + struct.pack(f">i{len(partitions)}i", len(partitions), *partitions) + struct.pack(">i", -1))


def group_on(cluster: InProcessCluster, node_id: int) -> str:
    """A new group id whose coordinator is broker ``node_id``."""
    def found() -> str | None:
        gid = f"k253-{uuid.uuid4().hex[:8]}"
        c = call(cluster, 0, FindCoordinator, FindCoordinator.Request(key=gid), 2)
        return gid if c.error_code == ErrorCode.NONE and c.node_id == node_id else None
    return wait_until(found, message=f"a group coordinated by broker {node_id}")


async def stable_group(cluster: InProcessCluster, group: str) -> tuple[str, str, int]:
    """Members a (partitions 0, 1) and b (2, 3) of ``group`` (on broker 0), Stable."""
    import asyncio

    from refka.client.connection import BrokerConnection

    conns = [await BrokerConnection("127.0.0.1", port(cluster, 0), f"m{i}").connect() for i in range(2)]
    try:
        J = JoinGroup.Request
        subscription = struct.pack(">hih", 0, 1, len(TOPIC)) + TOPIC.encode() + struct.pack(">i", -1)

        async def joined(conn: BrokerConnection) -> Any:
            req = J(group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id="",
                    group_instance_id=None, protocol_type="consumer",
                    protocols=[J.JoinGroupRequestProtocol(name="range", metadata=subscription)])
            first = await conn.request(JoinGroup, req, 5)
            assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
            req.member_id = first.member_id
            return await conn.request(JoinGroup, req, 5)

        ja, jb = await asyncio.gather(*(joined(c) for c in conns))
        assert ja.error_code == jb.error_code == ErrorCode.NONE and ja.generation_id == jb.generation_id
        a, b, gen = ja.member_id, jb.member_id, ja.generation_id
        plan = {a: consumer_assignment([0, 1]), b: consumer_assignment([2, 3])}
        S = SyncGroup.Request

        async def synced(conn: BrokerConnection, member: str) -> Any:
            leader = member == ja.leader
            return await conn.request(SyncGroup, S(
                group_id=group, generation_id=gen, member_id=member, group_instance_id=None,
                assignments=[S.SyncGroupRequestAssignment(member_id=m, assignment=x) for m, x in plan.items()]
                if leader else []), 3)

        sa, sb = await asyncio.gather(synced(conns[0], a), synced(conns[1], b))
        assert (sa.error_code, sa.assignment, sb.error_code, sb.assignment) == (
            ErrorCode.NONE, plan[a], ErrorCode.NONE, plan[b])
        return a, b, gen
    finally:
        for c in conns:
            await c.close()


def cgp_request(group: str, generation: int, member: str, *partitions: tuple[int, bool, int]) -> tuple[str, ...]:
    """ConsumerGroupPosition v0 body: (partition, need_position, position) of k253."""
    topics = "01" if not partitions else "02" + cstr(TOPIC) + uvarint(len(partitions) + 1) + "".join(
        i32(p) + ("01" if need else "00") + i64(pos) + "00" for p, need, pos in partitions) + "00"
    return cstr(group), i32(generation), cstr(member), topics, "00"


def cgp_answer(*partitions: tuple[int, bool, int], error: str = "0000") -> tuple[str, ...]:
    topics = "01" if not partitions else "02" + cstr(TOPIC) + uvarint(len(partitions) + 1) + "".join(
        i32(p) + ("01" if need else "00") + i64(pos) + "00" for p, need, pos in partitions) + "00"
    return "00000000", topics, error, "00"


async def test_members_share_positions_through_the_coordinator_byte_for_byte(cluster, topic):
    group = group_on(cluster, 0)
    a, b, gen = await stable_group(cluster, group)

    def exchange(cid: int, member: str, *partitions: tuple[int, bool, int]) -> bytes:
        return call_bytes(cluster, 0, request_frame(10254, cid, *cgp_request(group, gen, member, *partitions)))

    # b needs partition 0 (a's): unknown so far.
    assert exchange(20, b, (0, True, -1)) == response_frame(20, *cgp_answer((0, False, -1)))
    # a is asked to report partition 0, and does.
    assert exchange(21, a) == response_frame(21, *cgp_answer((0, True, -1)))
    assert exchange(22, a, (0, False, 5), (1, False, 9)) == response_frame(22, *cgp_answer((0, True, 5)))
    # b gets it; a position b reports for a partition it does not consume is ignored.
    assert exchange(23, b, (0, True, 77)) == response_frame(23, *cgp_answer((0, False, 5)))
    assert exchange(24, b, (0, True, -1)) == response_frame(24, *cgp_answer((0, False, 5)))
    # b needs it no longer: a is not asked any more.
    assert exchange(25, b) == response_frame(25, *cgp_answer())
    assert exchange(26, a) == response_frame(26, *cgp_answer())

    assert call_bytes(cluster, 0, request_frame(10254, 27, *cgp_request(group, gen + 1, a))) == response_frame(
        27, *cgp_answer(error=ILLEGAL_GENERATION))
    assert call_bytes(cluster, 0, request_frame(10254, 28, *cgp_request(group, gen, "nobody", (0, True, -1)))) == (
        response_frame(28, *cgp_answer(error=UNKNOWN_MEMBER_ID)))
    unknown_group = group_on(cluster, 0)  # coordinated here, never joined
    assert call_bytes(cluster, 0, request_frame(10254, 29, *cgp_request(unknown_group, gen, a))) == (
        response_frame(29, *cgp_answer(error=UNKNOWN_MEMBER_ID)))


def test_another_brokers_group_is_not_coordinated_here(cluster, topic):
    elsewhere = group_on(cluster, 1)
    frame = request_frame(10254, 30, *cgp_request(elsewhere, 1, "m-1", (0, True, -1)))
    assert frame == hexes(
        "0000003c 280e 0000 0000001e 0004", b"k253".hex(), "00  # size 60, key 10254 v0, correlation 30, client",
        cstr(elsewhere), "00000001 04", b"m-1".hex(), "  # group, generation 1, member 'm-1'",
        "02", cstr(TOPIC), "02 00000000 01 ffffffffffffffff 00 00 00  # k253 partition 0: need, no position",
    )
    assert call_bytes(cluster, 0, frame) == response_frame(30, "00000000 01", NOT_COORDINATOR, "00")
