"""Controller election on both stores (embedded and a real ZooKeeper)."""

from __future__ import annotations

import asyncio
import json

from test_controller import FakeChannel

from refka.controller import admin, znodes
from refka.controller.controller import Controller
from refka.controller.election import ControllerElection
from tests.waiting import wait_until_async


class Candidate:
    def __init__(self, store, broker_id: int) -> None:
        self.events: list[tuple[str, int]] = []
        self.election = ControllerElection(
            store,
            broker_id,
            lambda e: self.events.append(("elected", e)),
            lambda: self.events.append(("resigned", 0)),
        )


async def test_one_winner_and_the_epoch_moves_on(stores) -> None:
    sessions = [await stores.session() for _ in range(3)]
    candidates = [Candidate(s, b) for b, s in enumerate(sessions, start=1)]
    await asyncio.gather(*(c.election.start() for c in candidates))
    await wait_until_async(lambda: all(c.election.active_controller_id != -1 for c in candidates), 10)
    winners = [c for c in candidates if c.election.is_controller]
    assert len(winners) == 1
    first = winners[0]
    assert first.election.epoch == 1 and first.events == [("elected", 1)]
    assert {c.election.active_controller_id for c in candidates} == {first.election.broker_id}
    assert json.loads((await stores.first.get(znodes.CONTROLLER))[0])["brokerid"] == first.election.broker_id
    assert first.election.next_metadata_epoch() == 0
    assert first.election.next_metadata_epoch() == 1

    # The winner's session expires: it resigns, and one of the others wins epoch 2.
    await first.election.store.expire_session()
    await wait_until_async(lambda: ("resigned", 0) in first.events, 15)
    await wait_until_async(lambda: any(c.election.epoch == 2 for c in candidates), 15)
    second = next(c for c in candidates if c.election.epoch == 2)
    assert sum(c.election.is_controller for c in candidates) == 1
    assert second.election.metadata_epoch == 0
    assert (await stores.first.get(znodes.CONTROLLER_EPOCH))[0] == b"2"
    for c in candidates:
        await c.election.stop()
    assert await stores.first.exists(znodes.CONTROLLER) is None


async def test_each_election_writes_a_fresh_controller_token_into_the_znode(stores) -> None:
    sessions = [await stores.session() for _ in range(2)]
    candidates = [Candidate(s, b) for b, s in enumerate(sessions, start=1)]
    await asyncio.gather(*(c.election.start() for c in candidates))
    await wait_until_async(lambda: any(c.election.is_controller for c in candidates), 10)
    first = next(c for c in candidates if c.election.is_controller)
    loser = next(c for c in candidates if c is not first)
    token = first.election.token
    assert 0 <= token < 2**63 and loser.election.token == -1
    znode = znodes.ControllerZnode.from_json((await stores.first.get(znodes.CONTROLLER))[0])
    assert (znode.broker_id, znode.controller_token) == (first.election.broker_id, token)

    await first.election.stop()  # gives up /controller: the other wins with a token of its own
    await wait_until_async(lambda: loser.election.is_controller, 15)
    assert first.election.token == -1
    assert loser.election.token not in (-1, token)
    znode = znodes.ControllerZnode.from_json((await stores.first.get(znodes.CONTROLLER))[0])
    assert znode.controller_token == loser.election.token
    await loser.election.stop()


async def test_a_controller_on_each_store_creates_a_topic(stores) -> None:
    await admin.ensure_cluster(stores.first)
    brokers = []
    for b in (1, 2):
        s = await stores.session()
        await admin.register_broker(
            s, znodes.BrokerInfo(b, (znodes.Endpoint("PLAINTEXT", "127.0.0.1", 9000 + b),))
        )
        brokers.append(s)
    channel = FakeChannel()
    controller = Controller(brokers[0], 1, channel)
    await controller.start()
    try:
        await wait_until_async(lambda: controller.is_active, 10)
        await admin.create_topic(stores.first, "t", -1, -1, {0: [2, 1]}, None, {1: None, 2: None})
        await wait_until_async(lambda: controller.partition_state("t", 0) is not None, 10)
        state = json.loads((await stores.first.get("/brokers/topics/t/partitions/0/state"))[0])
        assert (state["leader"], state["isr"], state["leader_epoch"]) == (2, [2, 1], 0)
        await brokers[1].expire_session()  # broker 2 fails
        await wait_until_async(lambda: controller.partition_state("t", 0).leader == 1, 15)
        assert controller.partition_state("t", 0).leader_epoch == 1
    finally:
        await controller.stop()
