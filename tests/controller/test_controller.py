"""The controller over an EmbeddedStore, with a channel that records what it sends.

Brokers are sessions on the store that register ``/brokers/ids/<id>``;
nothing listens on a socket. The last test runs the real ControllerChannel
against a tiny asyncio server that decodes LeaderAndIsr with our codec.
"""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

import pytest

from refka.controller import admin, znodes
from refka.controller.channel import BrokerGoneError, ControllerChannel
from refka.controller.controller import Controller, ControllerConfig
from refka.controller.store import EmbeddedStore, MetadataStore
from refka.protocol.api import Api, join
from refka.protocol.errors import ErrorCode
from refka.protocol.headers import decode_request_header, encode_response_header, peek_request_header
from refka.protocol.messages import APIS
from refka.protocol.messages.api_versions import ApiVersions
from refka.protocol.messages.leader_and_isr import TYPE_FULL, TYPE_INCREMENTAL, LeaderAndIsr
from refka.protocol.messages.list_offsets import ListOffsets
from refka.protocol.messages.stop_replica import StopReplica
from refka.protocol.messages.update_metadata import UpdateMetadata
from tests.waiting import wait_until_async

BROKERS = (1, 2, 3)


class FakeChannel:
    """Records (broker, api name, request); every request is answered at once with no error.
    ListOffsets (KIP-253's drain task) is answered from ``offsets``: (topic, partition) ->
    (log start offset, log end offset), UNKNOWN_TOPIC_OR_PARTITION for the others; a broker
    in ``silent`` never answers it."""

    def __init__(self) -> None:
        self.brokers: dict[int, znodes.BrokerInfo] = {}
        self.sent: list[tuple[int, str, Any]] = []
        self.stopped = False
        self.offsets: dict[tuple[str, int], tuple[int, int]] = {}
        self.silent: set[int] = set()

    def update_brokers(self, brokers: dict[int, znodes.BrokerInfo]) -> None:
        self.brokers = dict(brokers)

    def send(self, broker_id: int, api: Api, request: Any) -> asyncio.Future[Any]:
        self.sent.append((broker_id, api.name, request))
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if api is ListOffsets and broker_id in self.brokers:
            if broker_id not in self.silent:
                fut.set_result(self._list_offsets(request))
        elif broker_id in self.brokers:
            fut.set_result(api.Response(error_code=0))
        else:
            fut.set_exception(BrokerGoneError(str(broker_id)))
            fut.exception()
        return fut

    def _list_offsets(self, request: Any) -> Any:
        T = ListOffsets.Response.ListOffsetsTopicResponse
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                found = self.offsets.get((t.name, p.partition_index))
                parts.append(T.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index,
                    error_code=ErrorCode.NONE if found else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    offset=-1 if found is None else found[0] if p.timestamp == -2 else found[1],
                ))
            topics.append(T(name=t.name, partitions=parts))
        return ListOffsets.Response(topics=topics)

    async def stop(self) -> None:
        self.stopped = True
        self.brokers = {}

    def of(self, api: str, broker: int | None = None) -> list[Any]:
        return [r for b, a, r in self.sent if a == api and (broker is None or b == broker)]

    def clear(self) -> None:
        self.sent.clear()


class Cluster:
    """An embedded store, brokers as sessions, and controllers on some of them."""

    def __init__(self) -> None:
        self.store = EmbeddedStore(None)
        self.sessions: dict[int, MetadataStore] = {}
        self.controllers: dict[int, Controller] = {}
        self.channels: dict[int, FakeChannel] = {}

    async def start(self, candidates: tuple[int, ...] = (1,), config: dict[str, Any] | None = None) -> None:
        await self.store.start()
        await admin.ensure_cluster(self.store)
        for b in BROKERS:
            await self.start_broker(b)
        for b in candidates:
            self.channels[b] = FakeChannel()
            self.controllers[b] = Controller(self.sessions[b], b, self.channels[b], config)
            await self.controllers[b].start()
        await wait_until_async(lambda: any(c.is_active for c in self.controllers.values()))

    async def start_broker(self, b: int) -> None:
        s = self.sessions.get(b)
        if s is None:
            s = self.sessions[b] = self.store.open_session()
            await s.start()
        info = znodes.BrokerInfo(b, (znodes.Endpoint("PLAINTEXT", "127.0.0.1", 9090 + b),), rack=f"r{b}")
        await admin.register_broker(s, info)

    async def kill_broker(self, b: int) -> None:
        await self.sessions[b].expire_session()

    @property
    def active(self) -> Controller:
        return next(c for c in self.controllers.values() if c.is_active)

    @property
    def channel(self) -> FakeChannel:
        return self.channels[self.active.broker_id]

    async def settle(self) -> None:
        await asyncio.sleep(0.02)  # let watch callbacks reach the queue
        for c in self.controllers.values():
            await c.sync()

    async def json(self, path: str) -> Any:
        data, _ = await self.store.get(path)
        return json.loads(data)

    async def stop(self) -> None:
        for c in self.controllers.values():
            await c.stop()
        for s in self.sessions.values():
            await s.stop()
        await self.store.stop()


@pytest.fixture
async def cluster():
    c = Cluster()
    await c.start()
    yield c
    await c.stop()


async def create(
    cluster: Cluster, name: str, assignment: dict[int, list[int]], **configs: str
) -> znodes.TopicAssignment:
    brokers = {b: None for b in cluster.active.context.live}
    topic = await admin.create_topic(cluster.store, name, -1, -1, assignment, configs, brokers)
    await wait_until_async(lambda: all(cluster.active.partition_state(name, p) for p in assignment))
    await cluster.settle()
    return topic


def partition_states(request: Any) -> dict[tuple[str, int], Any]:
    return {(t.topic_name, p.partition_index): p for t in request.topic_states for p in t.partition_states}


async def test_failover_writes_the_epoch_and_sends_full_requests(cluster: Cluster) -> None:
    c = cluster.active
    assert (c.broker_id, c.epoch, c.active_controller_id) == (1, 1, 1)
    assert await cluster.json("/controller_epoch") == 1
    controller = await cluster.json("/controller")
    assert controller["version"] == 2 and controller["brokerid"] == 1
    await cluster.settle()
    ch = cluster.channel
    for b in BROKERS:
        (lai,) = ch.of("LeaderAndIsr", b)
        assert (lai.type, lai.controller_epoch, lai.topic_states) == (TYPE_FULL, 1, [])
        (um,) = ch.of("UpdateMetadata", b)
        assert (um.controller_epoch, um.controller_metadata_epoch) == (1, 0)
        assert [x.id for x in um.live_brokers] == [1, 2, 3]
        assert um.live_brokers[1].endpoints[0].port == 9092 and um.live_brokers[1].rack == "r2"
        assert um.broker_epoch == (await cluster.store.exists(f"/brokers/ids/{b}")).czxid
    assert c.metadata_epoch == 1


async def test_topic_creation_writes_znodes_and_sends_leader_and_isr(cluster: Cluster) -> None:
    cluster.channel.clear()
    topic = await create(cluster, "orders", {0: [2, 1], 1: [3, 2], 2: [1, 3]}, **{"retention.ms": "1000"})
    assert await cluster.json("/brokers/topics/orders") == {
        "version": 3,
        "topic_id": znodes.topic_id_to_str(topic.topic_id),
        "partitions": {"0": [2, 1], "1": [3, 2], "2": [1, 3]},
        "adding_replicas": {},
        "removing_replicas": {},
        "initial_partition_count": 3,
        "undeleted_partition_count": 3,
        "topic_epoch": 1,
    }
    for p, epoch in ((0, 2), (1, 3), (2, 4)):
        assert await cluster.json(f"/brokers/topics/orders/partitions/{p}") == {
            "version": 1,
            "partition_epoch": epoch,
            "leaderEpochAfterCreation": {},
            "leaderEpochBeforeDeletion": {},
        }
    assert await cluster.json("/brokers/topics/orders/partitions/1/state") == {
        "controller_epoch": 1,
        "leader": 3,
        "version": 1,
        "leader_epoch": 0,
        "isr": [3, 2],
    }
    assert await cluster.json("/partition_epoch") == 4
    assert await cluster.json("/config/topics/orders") == {"version": 1, "config": {"retention.ms": "1000"}}

    ch = cluster.channel
    lai2 = ch.of("LeaderAndIsr", 2)
    assert len(lai2) == 1 and lai2[0].type == TYPE_INCREMENTAL
    states = partition_states(lai2[0])
    assert set(states) == {("orders", 0), ("orders", 1)}
    p0 = states[("orders", 0)]
    assert (p0.leader, p0.leader_epoch, p0.isr, p0.replicas, p0.is_new) == (2, 0, [2, 1], [2, 1], True)
    assert (p0.controller_epoch, p0.zk_version, p0.partition_epoch) == (1, 0, 2)
    ts = lai2[0].topic_states[0]
    assert ts.topic_id == topic.topic_id
    assert (ts.partition_counts.initial_partition_count, ts.partition_counts.undeleted_partition_count) == (
        3,
        3,
    )
    assert {x.broker_id for x in lai2[0].live_leaders} == {2, 3}
    assert lai2[0].controller_epoch == 1
    # One UpdateMetadata broadcast, the same metadata epoch for everyone.
    ums = [ch.of("UpdateMetadata", b) for b in BROKERS]
    assert all(len(u) == 1 for u in ums)
    assert {u[0].controller_metadata_epoch for u in ums} == {1}
    um = ums[0][0]
    assert um.max_partition_epoch == 4
    t = um.topic_states[0]
    assert (t.topic_name, t.topic_epoch, t.topic_id) == ("orders", 1, topic.topic_id)
    assert sorted((p.partition_index, p.leader, p.partition_epoch) for p in t.partition_states) == [
        (0, 2, 2),
        (1, 3, 3),
        (2, 1, 4),
    ]
    # LeaderAndIsr goes out before the UpdateMetadata that announces it.
    order = [a for b, a, _ in ch.sent if b == 2]
    assert order == ["LeaderAndIsr", "UpdateMetadata"]


async def test_broker_failure_reelects_from_the_isr_and_bumps_the_leader_epoch(cluster: Cluster) -> None:
    await create(cluster, "t", {0: [2, 3, 1], 1: [3, 2, 1]})
    await create(cluster, "u", {0: [1, 3]})
    cluster.channel.clear()
    await cluster.kill_broker(2)
    c = cluster.active
    await wait_until_async(lambda: c.partition_state("t", 0).leader != 2)
    await cluster.settle()
    # p0 was led by 2: the first live ISR member in assignment order takes over.
    assert await cluster.json("/brokers/topics/t/partitions/0/state") == {
        "controller_epoch": 1,
        "leader": 3,
        "version": 1,
        "leader_epoch": 1,
        "isr": [3, 1],
    }
    # p1's leader lives; 2 leaves its ISR (the leader epoch goes up too).
    p1 = c.partition_state("t", 1)
    assert (p1.leader, p1.leader_epoch, p1.isr) == (3, 1, (3, 1))
    # Partitions without a replica on 2 are untouched.
    assert c.partition_state("u", 0).leader_epoch == 0
    ch = cluster.channel
    assert ch.of("LeaderAndIsr", 2) == []
    lai3 = partition_states(ch.of("LeaderAndIsr", 3)[0])
    assert (lai3[("t", 0)].leader, lai3[("t", 0)].leader_epoch, lai3[("t", 0)].zk_version) == (3, 1, 1)
    assert set(lai3) == {("t", 0), ("t", 1)}
    (um,) = ch.of("UpdateMetadata", 1)
    assert [b.id for b in um.live_brokers] == [1, 3]
    offline = {p.partition_index: p.offline_replicas for p in um.topic_states[0].partition_states}
    assert offline == {0: [2], 1: [2]}

    # Broker 2 comes back: a full LeaderAndIsr and full metadata for it.
    ch.clear()
    await cluster.start_broker(2)
    await wait_until_async(lambda: 2 in c.context.live)
    await cluster.settle()
    (full,) = ch.of("LeaderAndIsr", 2)
    assert full.type == TYPE_FULL
    assert set(partition_states(full)) == {("t", 0), ("t", 1)}
    um2 = ch.of("UpdateMetadata", 2)[0]
    assert sum(len(t.partition_states) for t in um2.topic_states) == 3
    # It is not back in any ISR: its leaders add it when it has caught up.
    assert c.partition_state("t", 0).isr == (3, 1)


async def test_no_eligible_leader_leaves_the_partition_offline_until_an_isr_member_returns(
    cluster: Cluster,
) -> None:
    await create(cluster, "solo", {0: [2, 3]})
    st = cluster.active.partition_state("solo", 0)
    await admin.update_isr(cluster.store, "solo", 0, znodes.PartitionStateZnode(2, st.leader_epoch, (2,), 1), 0)
    await cluster.kill_broker(2)
    c = cluster.active
    await wait_until_async(lambda: c.partition_state("solo", 0).leader == -1)
    # Unclean election is off: 3 is live but was not in the ISR.
    assert c.partition_state("solo", 0).isr == (2,)
    await cluster.start_broker(2)
    await wait_until_async(lambda: c.partition_state("solo", 0).leader == 2)
    assert c.partition_state("solo", 0).leader_epoch == 2


async def test_unclean_election_when_the_topic_allows_it(cluster: Cluster) -> None:
    await create(cluster, "dirty", {0: [2, 3]}, **{"unclean.leader.election.enable": "true"})
    st = cluster.active.partition_state("dirty", 0)
    await admin.update_isr(cluster.store, "dirty", 0, znodes.PartitionStateZnode(2, st.leader_epoch, (2,), 1), 0)
    await cluster.kill_broker(2)
    c = cluster.active
    await wait_until_async(lambda: c.partition_state("dirty", 0).leader == 3)
    state = await cluster.json("/brokers/topics/dirty/partitions/0/state")
    assert (state["isr"], state["leader_recovery_state"]) == ([3], 1)


async def test_controller_failover_increments_the_epoch_and_resets_the_metadata_epoch() -> None:
    cl = Cluster()
    await cl.start(candidates=(1, 2))
    try:
        first = cl.active
        assert first.broker_id == 1 and first.epoch == 1
        assert not cl.controllers[2].is_active and cl.controllers[2].active_controller_id == 1
        await create(cl, "t", {0: [1, 2], 1: [2, 3]})
        assert first.metadata_epoch == 2  # 0: failover, 1: the topic
        # Broker 1 loses its session: it resigns, broker 2 takes over.
        await cl.kill_broker(1)
        await wait_until_async(lambda: cl.controllers[2].is_active and not first.is_active)
        await cl.settle()
        second = cl.controllers[2]
        assert second.epoch == 2 and second.active_controller_id == 2
        assert await cl.json("/controller_epoch") == 2
        assert (await cl.json("/controller"))["brokerid"] == 2
        ch = cl.channels[2]
        ums = ch.of("UpdateMetadata", 3)
        assert (ums[0].controller_epoch, ums[0].controller_metadata_epoch) == (2, 0)
        assert [u.controller_metadata_epoch for u in ums] == list(range(len(ums)))
        full = [r for r in ch.of("LeaderAndIsr", 3) if r.type == TYPE_FULL]
        assert full and full[0].controller_epoch == 2
        # The partition broker 1 led moved: the new controller handled its failure.
        await wait_until_async(lambda: second.partition_state("t", 0).leader == 2)
        assert second.partition_state("t", 0).leader_epoch == 1
        # The old controller cannot write any more.
        assert first.epoch == -1
    finally:
        await cl.stop()


async def test_a_stopped_controller_hands_over_cleanly() -> None:
    cl = Cluster()
    await cl.start(candidates=(1, 2))
    try:
        await cl.controllers[1].stop()
        assert cl.channels[1].stopped
        await wait_until_async(lambda: cl.controllers[2].is_active)
        assert cl.controllers[2].epoch == 2
        assert 1 in cl.controllers[2].context.live  # broker 1 itself still runs
    finally:
        await cl.stop()


async def test_a_broker_that_is_not_the_controller_answers_requests_with_not_controller() -> None:
    cl = Cluster()
    await cl.start(candidates=(1, 2))
    try:
        standby = next(c for c in cl.controllers.values() if not c.is_active)
        assert await standby.controlled_shutdown(3) == (ErrorCode.NOT_CONTROLLER, [])
        assert await standby.elect_preferred_leaders() == {}
        assert await standby.elect_unclean_leaders([("t", 0)]) == {}
        assert await standby.alter_partition_reassignments({("t", 0): [1]}) == {}
        await standby.sync()
    finally:
        await cl.stop()


async def test_a_request_that_finds_its_controller_fenced_is_answered_not_controller(cluster: Cluster) -> None:
    await create(cluster, "f", {0: [1, 2]})
    c = cluster.active
    # Another controller's election bumped /controller_epoch behind this one's back:
    # its next write fails the epoch check, and it resigns.
    await cluster.store.set("/controller_epoch", b"99")
    answer = await asyncio.wait_for(c.controlled_shutdown(1), 10)
    assert answer == (ErrorCode.NOT_CONTROLLER, [])


async def test_topic_deletion(cluster: Cluster) -> None:
    old = await create(cluster, "gone", {0: [1, 2], 1: [2, 3]})
    cluster.channel.clear()
    await admin.delete_topic(cluster.store, "gone")
    await wait_until_async(lambda: "gone" not in cluster.active.context.topics)
    await cluster.settle()
    for path in ("/brokers/topics/gone", "/config/topics/gone", "/admin/delete_topics/gone"):
        assert await cluster.store.exists(path) is None, path
    ch = cluster.channel
    stop2 = partition_states(ch.of("StopReplica", 2)[0])
    assert set(stop2) == {("gone", 0), ("gone", 1)}
    assert all(p.delete_partition and p.leader_epoch == -2 for p in stop2.values())
    um = ch.of("UpdateMetadata", 3)[0]
    assert {p.leader for p in um.topic_states[0].partition_states} == {-2}
    # Created again: a new topic id and larger epochs than any before (KIP-232).
    cluster.channel.clear()
    new = await create(cluster, "gone", {0: [3, 1]})
    assert new.topic_id != old.topic_id
    t = await cluster.json("/brokers/topics/gone")
    p = await cluster.json("/brokers/topics/gone/partitions/0")
    assert t["topic_epoch"] > 1 and p["partition_epoch"] > 3


async def test_partition_expansion_follows_kip_253(cluster: Cluster) -> None:
    await create(cluster, "grow", {0: [1, 2], 1: [3, 1]})
    await cluster.kill_broker(3)  # p1's leader moves: its epoch becomes 1, p0's stays 0
    c = cluster.active
    await wait_until_async(lambda: c.partition_state("grow", 1).leader_epoch == 1)
    await cluster.settle()
    cluster.channel.clear()
    brokers = {b: None for b in c.context.live}
    await admin.create_partitions(cluster.store, "grow", 4, [[2, 1], [1, 2]], brokers)
    await wait_until_async(lambda: c.partition_state("grow", 3) is not None)
    await cluster.settle()

    topic = await cluster.json("/brokers/topics/grow")
    assert (topic["initial_partition_count"], topic["undeleted_partition_count"]) == (2, 4)
    # Old partitions: leader epoch + 1.
    assert [c.partition_state("grow", p).leader_epoch for p in (0, 1)] == [1, 2]
    # New partitions record the old partitions' epochs from before that bump.
    for p in (2, 3):
        pz = await cluster.json(f"/brokers/topics/grow/partitions/{p}")
        assert pz["leaderEpochAfterCreation"] == {"0": 0, "1": 1}
        assert pz["leaderEpochBeforeDeletion"] == {}
        assert pz["partition_epoch"] > 3
        assert (await cluster.json(f"/brokers/topics/grow/partitions/{p}/state"))["leader_epoch"] == 0
    # The bump went out first, with the new count; then the new partitions; then the metadata.
    sent = [(b, a, r) for b, a, r in cluster.channel.sent if b == 1]
    kinds = [a for _, a, _ in sent]
    assert kinds == ["LeaderAndIsr", "LeaderAndIsr", "UpdateMetadata"]
    bump = sent[0][2]
    assert {p.partition_index: p.leader_epoch for p in bump.topic_states[0].partition_states} == {0: 1, 1: 2}
    assert bump.topic_states[0].partition_counts.undeleted_partition_count == 4
    created = sent[1][2]
    assert {p.partition_index for p in created.topic_states[0].partition_states} == {2, 3}
    assert all(p.is_new for p in created.topic_states[0].partition_states)
    um = sent[2][2]
    counts = um.topic_states[0].partition_counts
    assert (counts.initial_partition_count, counts.undeleted_partition_count) == (2, 4)
    assert len(um.topic_states[0].partition_states) == 4


async def test_a_new_controller_finishes_a_half_done_expansion() -> None:
    cl = Cluster()
    await cl.store.start()
    await admin.ensure_cluster(cl.store)
    for b in BROKERS:
        await cl.start_broker(b)
    # A topic as an earlier controller left it: partition 1 assigned but never created.
    tid = znodes.new_topic_id()
    topic = znodes.TopicAssignment(
        "half",
        tid,
        {0: [1, 2], 1: [2, 3]},
        initial_partition_count=1,
        undeleted_partition_count=1,
        topic_epoch=1,
    )
    await cl.store.create("/brokers/topics/half", topic.to_json())
    await cl.store.create(
        "/brokers/topics/half/partitions/0", znodes.PartitionZnode(2).to_json(), makepath=True
    )
    await cl.store.create(
        "/brokers/topics/half/partitions/0/state", znodes.PartitionStateZnode(1, 5, (1, 2), 0).to_json()
    )
    await cl.store.create("/partition_epoch", b"2")
    cl.channels[1] = FakeChannel()
    cl.controllers[1] = Controller(cl.sessions[1], 1, cl.channels[1])
    await cl.controllers[1].start()
    try:
        await wait_until_async(lambda: cl.controllers[1].is_active)
        await cl.settle()
        assert (await cl.json("/brokers/topics/half"))["undeleted_partition_count"] == 2
        assert await cl.json("/brokers/topics/half/partitions/1") == {
            "version": 1,
            "partition_epoch": 3,
            "leaderEpochAfterCreation": {"0": 5},
            "leaderEpochBeforeDeletion": {},
        }
        assert cl.controllers[1].partition_state("half", 0).leader_epoch == 6
    finally:
        await cl.stop()


async def test_a_new_controller_finishes_a_half_done_deletion_without_making_partitions_again() -> None:
    """A controller died while deleting a topic (its partitions' znodes go 256 at a time):
    partition 1's znodes are gone, partition 0's and the topic's are there, the topic is still
    queued in /admin/delete_topics. The next controller deletes the rest and never makes
    partition 1 again (complete_topic would, for a topic not queued for deletion)."""
    cl = Cluster()
    await cl.store.start()
    await admin.ensure_cluster(cl.store)
    for b in BROKERS:
        await cl.start_broker(b)
    topic = znodes.TopicAssignment("doomed", znodes.new_topic_id(), {0: [1, 2], 1: [2, 3]},
                                   initial_partition_count=2, undeleted_partition_count=2, topic_epoch=1)
    await cl.store.create("/brokers/topics/doomed", topic.to_json())
    await cl.store.create("/brokers/topics/doomed/partitions/0", znodes.PartitionZnode(2).to_json(), makepath=True)
    await cl.store.create("/brokers/topics/doomed/partitions/0/state",
                          znodes.PartitionStateZnode(1, 5, (1, 2), 0).to_json())
    await cl.store.create("/partition_epoch", b"3")
    await cl.store.create("/admin/delete_topics/doomed", b"", makepath=True)
    cl.channels[1] = FakeChannel()
    cl.controllers[1] = Controller(cl.sessions[1], 1, cl.channels[1])
    await cl.controllers[1].start()
    try:
        await wait_until_async(lambda: cl.controllers[1].is_active)
        await wait_until_async(lambda: "doomed" not in cl.controllers[1].context.topics)
        await cl.settle()
        for path in ("/brokers/topics/doomed", "/admin/delete_topics/doomed"):
            assert await cl.store.exists(path) is None, path
        assert (await cl.store.get("/partition_epoch"))[0] == b"3", "no partition was made again"
        made = [r for r in cl.channels[1].of("LeaderAndIsr", 2) + cl.channels[1].of("LeaderAndIsr", 3)
                if any(t.topic_name == "doomed" and p.partition_index == 1 and p.is_new
                       for t in r.topic_states for p in t.partition_states)]
        assert made == []
    finally:
        await cl.stop()


async def test_controlled_shutdown_moves_leadership_away(cluster: Cluster) -> None:
    await create(cluster, "cs", {0: [2, 1], 1: [1, 2]})
    await create(cluster, "cs1", {0: [2]})
    cluster.channel.clear()
    epoch = (await cluster.store.exists("/brokers/ids/2")).czxid
    error, remaining = await cluster.active.controlled_shutdown(2, epoch)
    assert error == ErrorCode.NONE
    # A single replica cannot move, and does not count as remaining (Kafka's
    # replicatedPartitionsBrokerLeads): the stopping broker must not retry for it.
    assert remaining == []
    assert cluster.active.partition_state("cs1", 0).leader == 2
    c = cluster.active
    assert (c.partition_state("cs", 0).leader, c.partition_state("cs", 0).isr) == (1, (1,))
    assert c.partition_state("cs", 1).isr == (1,)
    (stop,) = cluster.channel.of("StopReplica", 2)
    assert {(k, p.delete_partition) for k, p in partition_states(stop).items()} == {(("cs", 1), False)}
    lai2 = partition_states(cluster.channel.of("LeaderAndIsr", 2)[0])
    assert set(lai2) == {("cs", 0)}  # it follows where it led
    assert (await c.controlled_shutdown(2, epoch + 999))[0] == ErrorCode.STALE_BROKER_EPOCH
    assert (await c.controlled_shutdown(9))[0] == ErrorCode.BROKER_NOT_AVAILABLE


async def test_isr_change_notifications_are_broadcast(cluster: Cluster) -> None:
    await create(cluster, "isr", {0: [1, 2, 3]})
    cluster.channel.clear()
    version = await admin.update_isr(cluster.store, "isr", 0, znodes.PartitionStateZnode(1, 0, (1, 3), 1), 0)
    assert version == 1
    await admin.notify_isr_change(cluster.store, [("isr", 0)])
    c = cluster.active
    await wait_until_async(lambda: c.partition_state("isr", 0).isr == (1, 3))
    await cluster.settle()
    assert await cluster.store.get_children("/isr_change_notification") == []
    um = cluster.channel.of("UpdateMetadata", 2)[0]
    p = um.topic_states[0].partition_states[0]
    assert (p.isr, p.zk_version) == ([1, 3], 1)


async def test_preferred_leader_election(cluster: Cluster) -> None:
    await create(cluster, "pref", {0: [2, 1]})
    await cluster.kill_broker(2)
    c = cluster.active
    await wait_until_async(lambda: c.partition_state("pref", 0).leader == 1)
    await cluster.start_broker(2)
    await wait_until_async(lambda: 2 in c.context.live)
    st = c.partition_state("pref", 0)
    v = (await cluster.store.exists("/brokers/topics/pref/partitions/0/state")).version
    await admin.update_isr(cluster.store, "pref", 0, znodes.PartitionStateZnode(1, st.leader_epoch, (1, 2), 1), v)
    await admin.notify_isr_change(cluster.store, [("pref", 0)])
    await wait_until_async(lambda: c.partition_state("pref", 0).isr == (1, 2))
    result = await c.elect_preferred_leaders([("pref", 0)])
    assert result == {("pref", 0): ErrorCode.NONE}
    assert c.partition_state("pref", 0).leader == 2
    assert await c.elect_preferred_leaders([("pref", 0)]) == {("pref", 0): ErrorCode.ELECTION_NOT_NEEDED}


def test_config_from_kafka_properties() -> None:
    cfg = ControllerConfig.from_properties(
        {"unclean.leader.election.enable": "true", "inter.broker.listener.name": "X"}
    )
    assert cfg.unclean_leader_election_enable and cfg.inter_broker_listener_name == "X"
    assert not ControllerConfig.from_properties(None).unclean_leader_election_enable


# ---- the real channel against a tiny Kafka-speaking server -----------------------------------------


class TinyBroker:
    """Answers ApiVersions and the controller's requests; records what it decoded."""

    def __init__(self, drop_first: int = 0, refuse_first: int = 0) -> None:
        self.received: list[tuple[str, int, Any]] = []
        self.connections = 0
        self.drop_first = drop_first
        self.refuse_first = refuse_first  # answered CLUSTER_AUTHORIZATION_FAILED
        self.server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                (n,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(n)
                key, version, cid = peek_request_header(frame)
                api = APIS[key]
                _, pos = decode_request_header(frame, api.request_header_version(version))
                request, _ = api.decode_request(frame, version, pos)
                if api is ApiVersions:
                    response = ApiVersions.Response(
                        error_code=0,
                        api_keys=[
                            ApiVersions.Response.ApiVersion(
                                api_key=a.key, min_version=a.min_version, max_version=a.max_version
                            )
                            for a in (LeaderAndIsr, UpdateMetadata, StopReplica, ApiVersions)
                        ],
                    )
                else:
                    self.received.append((api.name, version, request))
                    if self.drop_first > 0:
                        self.drop_first -= 1
                        writer.close()  # no answer: the controller must retry
                        return
                    response = api.Response(error_code=0)
                    if self.refuse_first > 0:
                        self.refuse_first -= 1
                        response.error_code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                body = join(api.encode_response(response, version))
                header = encode_response_header(cid, api.response_header_version(version))
                writer.write(struct.pack(">i", len(header) + len(body)) + header + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def test_controller_channel_talks_kafka_to_a_broker() -> None:
    broker = TinyBroker(drop_first=1)
    port = await broker.start()
    channel = ControllerChannel(controller_id=1, retry_backoff=0.01)
    try:
        channel.update_brokers({7: znodes.BrokerInfo(7, (znodes.Endpoint("PLAINTEXT", "127.0.0.1", port),))})
        R = LeaderAndIsr.Request
        TS = R.LeaderAndIsrTopicState
        futures = []
        for epoch in range(3):
            req = R(
                controller_id=1,
                controller_epoch=4,
                broker_epoch=99,
                type=TYPE_INCREMENTAL,
                topic_states=[
                    TS(
                        topic_name="t",
                        topic_id=b"\x07" * 16,
                        partition_counts=TS.PartitionCounts(
                            initial_partition_count=1, undeleted_partition_count=2
                        ),
                        partition_states=[
                            TS.LeaderAndIsrPartitionState(
                                partition_index=0,
                                controller_epoch=4,
                                leader=7,
                                leader_epoch=epoch,
                                isr=[7],
                                zk_version=epoch,
                                replicas=[7],
                                partition_epoch=12,
                            )
                        ],
                    )
                ],
                live_leaders=[R.LeaderAndIsrLiveLeader(broker_id=7, host_name="127.0.0.1", port=port)],
            )
            futures.append(channel.send(7, LeaderAndIsr, req))
        responses = await asyncio.wait_for(asyncio.gather(*futures), 10)
        assert [r.error_code for r in responses] == [0, 0, 0]
        # The first attempt was dropped and retried on a new connection; order held.
        assert broker.connections == 2
        seen = [
            (name, v, r.topic_states[0].partition_states[0].leader_epoch) for name, v, r in broker.received
        ]
        assert seen == [
            ("LeaderAndIsr", 7, 0),
            ("LeaderAndIsr", 7, 0),
            ("LeaderAndIsr", 7, 1),
            ("LeaderAndIsr", 7, 2),
        ]
        decoded = broker.received[-1][2]
        assert decoded.broker_epoch == 99 and decoded.topic_states[0].topic_id == b"\x07" * 16
        assert decoded.topic_states[0].partition_counts.undeleted_partition_count == 2
        assert decoded.topic_states[0].partition_states[0].partition_epoch == 12
        # A broker that leaves fails what is still queued for it.
        channel.remove_broker(7)
        with pytest.raises(BrokerGoneError):
            await channel.send(7, LeaderAndIsr, req)
    finally:
        await channel.stop()
        await broker.stop()


async def test_channel_retries_a_request_the_broker_did_not_take_for_the_controllers() -> None:
    """CLUSTER_AUTHORIZATION_FAILED: the broker has not seen our election yet (its store
    read lags): the same request again, after the backoff, on the same connection."""
    broker = TinyBroker(refuse_first=2)
    port = await broker.start()
    channel = ControllerChannel(controller_id=1, retry_backoff=0.01, max_retry_backoff=0.05)
    try:
        channel.update_brokers({1: znodes.BrokerInfo(1, (znodes.Endpoint("PLAINTEXT", "127.0.0.1", port),))})
        request = UpdateMetadata.Request(controller_id=1, controller_epoch=1, controller_token=77)
        response = await asyncio.wait_for(channel.send(1, UpdateMetadata, request), 10)
        assert response.error_code == 0
        assert [(name, r.controller_token) for name, _v, r in broker.received] == [("UpdateMetadata", 77)] * 3
        assert broker.connections == 1
    finally:
        await channel.stop()
        await broker.stop()


async def test_channel_retries_until_the_broker_listens() -> None:
    broker = TinyBroker()
    port = await broker.start()
    await broker.stop()  # nothing listens on the port yet
    channel = ControllerChannel(controller_id=1, retry_backoff=0.01, max_retry_backoff=0.05)
    try:
        channel.update_brokers({1: znodes.BrokerInfo(1, (znodes.Endpoint("PLAINTEXT", "127.0.0.1", port),))})
        fut = channel.send(1, UpdateMetadata, UpdateMetadata.Request(controller_id=1, controller_epoch=1))
        await asyncio.sleep(0.1)
        assert not fut.done()
        broker.server = await asyncio.start_server(broker._serve, "127.0.0.1", port)
        response = await asyncio.wait_for(fut, 10)
        assert response.error_code == 0
        assert broker.received[0][:2] == ("UpdateMetadata", 8)
    finally:
        await channel.stop()
        await broker.stop()


async def test_expansion_racing_the_creation_needs_no_epoch_bump(cluster: Cluster) -> None:
    brokers = {b: None for b in BROKERS}
    await admin.create_topic(cluster.store, "race", -1, -1, {0: [1, 2], 1: [2, 3]}, None, brokers)
    await admin.create_partitions(cluster.store, "race", 4, [[3, 1], [1, 3]], brokers)
    c = cluster.active
    await wait_until_async(lambda: all(c.partition_state("race", p) for p in range(4)))
    await cluster.settle()
    topic = await cluster.json("/brokers/topics/race")
    assert (topic["initial_partition_count"], topic["undeleted_partition_count"]) == (2, 4)
    assert [c.partition_state("race", p).leader_epoch for p in range(4)] == [0, 0, 0, 0]
    epochs = [
        (await cluster.json(f"/brokers/topics/race/partitions/{p}"))["partition_epoch"] for p in range(4)
    ]
    assert len(set(epochs)) == 4
