"""The ordered-delivery gate (refka/client/ordered_delivery.py) against three brokers of
this process: the KIP-253 maps the controller really wrote, OffsetForLeaderEpoch on the
real leader-epoch caches, and ConsumerGroupPosition through the real group coordinator.
The group is one member the test forms with raw JoinGroup/SyncGroup (refka's own
connection), assigned every partition; the test plays the consumer, passing the gate the
positions a consumer would.

- Expansion 2 -> 3 after keyed records: partition 2 is held (limit 0) with its blocker 0
  and lowerOffsetThreshold = partition 0's last offset before the expansion; a reported
  position of partition 0 at that offset keeps it held, one past it releases it, with one
  on_partition_key_assigned([2]).
- Then a shrink 3 -> 2 marks partition 2, which blocks partition 0: partition 0 is limited
  to the offsets it had before the shrink until the group's position of partition 2 reaches
  its log end offset.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from refka.client.cluster import ClusterClient
from refka.client.group import MemberIdentity
from refka.client.ordered_delivery import Hold, OrderedDelivery
from refka.client.producer import Producer
from refka.client.structs import TopicPartition
from refka.protocol import ErrorCode
from refka.protocol.consumer_protocol import Assignment, Subscription
from refka.protocol.messages.create_partitions import CreatePartitions
from refka.protocol.messages.find_coordinator import FindCoordinator
from refka.protocol.messages.join_group import JoinGroup
from refka.protocol.messages.sync_group import SyncGroup
from tests.integration.cluster_helpers import InProcessCluster, Raw
from tests.integration.confluent_helpers import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TIMEOUT = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = InProcessCluster(tmp_path_factory.mktemp("ordered-gate"), n=3, overrides={
        "auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0"})
    try:
        yield c
    finally:
        c.close()


class Listener:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[int]]] = []

    def on_partition_key_maybe_revoked(self, partitions: Any) -> None:
        self.calls.append(("maybe_revoked", [p.partition for p in partitions]))

    def on_partition_key_assigned(self, partitions: Any) -> None:
        self.calls.append(("assigned", [p.partition for p in partitions]))


def create_partitions(cluster: InProcessCluster, topic: str, count: int) -> None:
    C = CreatePartitions.Request
    raw = Raw(int(cluster.bootstrap.split(",")[0].rsplit(":", 1)[1]))
    try:
        resp, _ = raw.call_raw(CreatePartitions, C(topics=[C.CreatePartitionsTopic(
            name=topic, count=count, assignments=None)], timeout_ms=15_000, validate_only=False), 3)
    finally:
        raw.close()
    assert resp.results[0].error_code == ErrorCode.NONE, resp


async def produce(bootstrap: str, topic: str, n: int) -> dict[int, int]:
    """``n`` keyed records; how many went to each partition."""
    p = Producer(bootstrap_servers=bootstrap, acks="all")
    await p.start()
    try:
        futs = [await p.send(topic, b"v%d" % i, key=b"key-%d" % i) for i in range(n)]
        await p.flush()
        out: dict[int, int] = {}
        for f in futs:
            meta = f.result()
            out[meta.partition] = out.get(meta.partition, 0) + 1
        return out
    finally:
        await p.stop()


async def wait_counts(cc: ClusterClient, topic: str, partitions: int, counts: tuple[int, int]) -> None:
    async def seen() -> bool:
        await cc.refresh([topic])
        tm = cc.metadata.topics.get(topic)
        return tm is not None and tm.partition_count == partitions and tm.counts is not None \
            and (tm.counts.initial, tm.counts.undeleted) == counts

    for _ in range(300):
        if await seen():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{topic}: {partitions} partitions with counts {counts} never seen")


async def form_group(cc: ClusterClient, group: str, topic: str, partitions: int,
                     member_id: str = "") -> MemberIdentity:
    """One member, the leader, assigned every partition of ``topic`` (``member_id``: it rejoins)."""
    any_node = next(iter(cc.metadata.brokers))
    conn = await cc.connection(any_node)
    for _ in range(200):
        fc = await conn.request(FindCoordinator, FindCoordinator.Request(key=group, key_type=0), 3)
        if fc.error_code == ErrorCode.NONE:
            break
        await asyncio.sleep(0.05)
    coordinator = await cc.connection(fc.node_id)
    J = JoinGroup.Request
    for _ in range(2):  # MEMBER_ID_REQUIRED first (KIP-394)
        joined = await coordinator.request(JoinGroup, J(
            group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id=member_id,
            protocol_type="consumer", protocols=[J.JoinGroupRequestProtocol(
                name="refka-ordered-roundrobin", metadata=Subscription([topic]).encode())]), 9)
        member_id = joined.member_id
        if joined.error_code == ErrorCode.NONE:
            break
        assert joined.error_code == ErrorCode.MEMBER_ID_REQUIRED, joined
    assert joined.error_code == ErrorCode.NONE and joined.leader == member_id, joined
    S = SyncGroup.Request
    synced = await coordinator.request(SyncGroup, S(
        group_id=group, generation_id=joined.generation_id, member_id=member_id,
        protocol_type="consumer", protocol_name="refka-ordered-roundrobin",
        assignments=[S.SyncGroupRequestAssignment(member_id=member_id, assignment=Assignment(
            {topic: list(range(partitions))}).encode())]), 5)
    assert synced.error_code == ErrorCode.NONE, synced
    return MemberIdentity(group, member_id, joined.generation_id)


async def polled_until(gate: OrderedDelivery, positions: dict[TopicPartition, tuple[int, int]],
                       high_watermarks: dict[TopicPartition, int], done: Any, polls: int = 6) -> None:
    """Polls (a heartbeat interval each, shortened) until ``done()``; at most ``polls`` times."""
    for _ in range(polls):
        await gate.poll(positions, high_watermarks)
        if done():
            return
    raise AssertionError("the gate never got there")


def test_expansion_holds_the_new_partition_until_the_group_passes_the_threshold_then_a_shrink_limits(cluster):
    topic = f"gate-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, topic, 2)

    async def go() -> None:
        before = await produce(cluster.bootstrap, topic, 40)
        n0 = before.get(0, 0)
        assert n0 > 0 and before.get(1, 0) > 0
        await asyncio.to_thread(create_partitions, cluster, topic, 3)
        cc = ClusterClient(cluster.bootstrap, "gate-test", request_timeout=10.0)
        try:
            await wait_counts(cc, topic, 3, (2, 3))
            member = await form_group(cc, f"g-{topic}", topic, 3)
            listener = Listener()
            gate = OrderedDelivery(cc, member.group_id, listener)
            tps = [TopicPartition(topic, p) for p in range(3)]
            await gate.on_assigned(member, tps, cc.metadata)
            # Partition 2 was split from partition 0 (N = 2): it waits for offset n0 - 1 of 0.
            assert gate.limit(tps[2]) == 0
            assert gate.holds(tps[2]) == (Hold("creation", 0, n0 - 1, -1),)
            assert gate.limit(tps[0]) is None and gate.limit(tps[1]) is None

            # The group (this member) has delivered partition 0 up to, not past, the threshold.
            at = {tps[0]: (n0 - 1, 0), tps[1]: (0, 0), tps[2]: (0, 0)}
            hw = {tps[0]: n0}
            await polled_until(gate, at, hw, lambda: gate.holds(tps[2])[0].group_position == n0 - 1)
            assert gate.limit(tps[2]) == 0 and not [c for c in listener.calls if c[0] == "assigned"]

            # One past it (the high watermark: reported at once): released.
            at[tps[0]] = (n0, 0)
            await polled_until(gate, at, hw, lambda: gate.limit(tps[2]) is None)
            assert [c for c in listener.calls if c[0] == "assigned"] == [("assigned", [2])]
            assert ("maybe_revoked", [0]) in listener.calls

            # Records after the expansion (some on 2), then a shrink 3 -> 2 marks partition 2,
            # which now blocks partition 0 (its keys hash back to 0).
            after = await produce(cluster.bootstrap, topic, 40)
            n2 = after.get(2, 0)
            n0_total = n0 + after.get(0, 0)
            assert n2 > 0
            await asyncio.to_thread(create_partitions, cluster, topic, 2)
            await wait_counts(cc, topic, 3, (2, 2))
            member = await form_group(cc, member.group_id, topic, 3, member.member_id)
            await gate.on_assigned(member, tps, cc.metadata)
            await polled_until(gate, {}, {}, lambda: gate.holds(tps[0])[0].threshold is not None)
            assert gate.holds(tps[0]) == (Hold("deletion", 2, n0_total - 1, -1),)
            assert gate.limit(tps[0]) == n0_total and gate.limit(tps[1]) is None

            # The group has not drained partition 2 yet: partition 0 stays limited.
            at = {tps[0]: (n0_total, 1), tps[1]: (0, 1), tps[2]: (n2 - 1, 0)}
            hw = {tps[0]: n0_total, tps[2]: n2}
            await polled_until(gate, at, hw, lambda: gate.holds(tps[0])[0].group_position == n2 - 1)
            assert gate.limit(tps[0]) == n0_total

            # Drained: partition 0 delivers freely, after one more on_partition_key_assigned([0]).
            at[tps[2]] = (n2, 0)
            await polled_until(gate, at, hw, lambda: gate.limit(tps[0]) is None)
            assert [c for c in listener.calls if c[0] == "assigned"] == [("assigned", [2]), ("assigned", [0])]
        finally:
            await cc.close()

    asyncio.run(asyncio.wait_for(go(), TIMEOUT))

