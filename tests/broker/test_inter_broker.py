"""The inter-broker gate (refka/broker/inter_broker.py) with a fake store view: who may
send LeaderAndIsr / StopReplica / UpdateMetadata / ControlledShutdown, and which
controller epochs a broker obeys."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest
from structlog.testing import capture_logs

from refka.broker.controller_side import ControllerRegistration, StoreError
from refka.broker.inter_broker import InterBrokerGate
from refka.protocol import ErrorCode
from refka.protocol.messages.controlled_shutdown import ControlledShutdown
from refka.protocol.messages.stop_replica import StopReplica

CAF = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TOKEN = 0x1234_5678_9ABC_DEF0
CONTROLLER = ControllerRegistration(controller_id=2, controller_epoch=7, controller_token=TOKEN)


class FakeStore:
    """The controller side as the gate sees it: this broker's epoch and the registration."""

    def __init__(self, registration: ControllerRegistration | None = CONTROLLER, broker_epoch: int = 100) -> None:
        self.registration = registration
        self.broker_epoch = broker_epoch
        self.reads = 0
        self.hold: asyncio.Event | None = None  # set: reads wait for it
        self.error: Exception | None = None

    async def controller_registration(self) -> ControllerRegistration | None:
        """What the store holds when the read begins (it answers once ``hold`` is set)."""
        self.reads += 1
        registration, error = self.registration, self.error
        if self.hold is not None:
            await self.hold.wait()
        if error is not None:
            raise error
        return registration


def gate_with(store: FakeStore | None = None, listener: str | None = None) -> InterBrokerGate:
    gate = InterBrokerGate(listener)
    gate.registrations = store if store is not None else FakeStore()
    return gate


def connection(listener: str = "PLAINTEXT") -> SimpleNamespace:
    return SimpleNamespace(listener=listener, peer="10.0.0.9:4242", broker_id=None)


def request_ctx(conn: SimpleNamespace, api: Any = StopReplica, version: int = 4) -> SimpleNamespace:
    return SimpleNamespace(conn=conn, api_key=api.key, api_version=version, received=time.monotonic())


async def control(gate: InterBrokerGate, conn: SimpleNamespace, controller_id: int = 2, epoch: int = 7,
                  token: int = TOKEN, broker_epoch: int = -1, version: int = 4) -> ErrorCode:
    return await gate.admit_control_request(request_ctx(conn, version=version), controller_id, epoch,
                                            broker_epoch, token)


# -- rule 1: only brokers


async def test_a_request_without_token_is_refused_with_one_warning_naming_peer_and_api() -> None:
    gate = gate_with()
    with capture_logs() as logs:
        # The StopReplica v0 of the report: controller epoch 2^31-1, no tagged fields.
        assert await control(gate, connection(), controller_id=0, epoch=2**31 - 1, token=-1, version=0) == CAF
    (line,) = logs
    assert line["event"] == "inter_broker_request_refused" and line["log_level"] == "warning"
    assert (line["peer"], line["api"], line["api_version"]) == ("10.0.0.9:4242", "StopReplica", 0)
    assert gate.controller_epoch == -1, "a refused epoch is never adopted"


async def test_the_registered_controllers_token_id_and_epoch_make_the_connection_a_brokers() -> None:
    store = FakeStore()
    gate = gate_with(store)
    conn = connection()
    assert await control(gate, conn) == ErrorCode.NONE
    assert conn.broker_id == 2 and gate.controller_epoch == 7
    # Later requests on it need no token, old versions included.
    assert await control(gate, conn, token=-1, version=0) == ErrorCode.NONE
    assert store.reads == 1


@pytest.mark.parametrize("forged", [
    {"token": TOKEN + 1},
    {"controller_id": 1},
    {"epoch": 8},
    {"epoch": 6},
    {"epoch": 2**31 - 1},
])
async def test_a_forged_token_controller_id_or_epoch_is_refused(forged: dict[str, int]) -> None:
    gate = gate_with()
    conn = connection()
    assert await control(gate, conn, **forged) == CAF
    assert conn.broker_id is None and gate.controller_epoch == -1
    assert await control(gate, conn) == ErrorCode.NONE, "the real controller still gets through"


async def test_no_registered_controller_or_no_store_view_refuses() -> None:
    assert await control(gate_with(FakeStore(registration=None)), connection()) == CAF
    assert await control(InterBrokerGate(None), connection()) == CAF


async def test_an_unreadable_store_refuses_and_the_next_request_reads_again() -> None:
    store = FakeStore()
    store.error = StoreError("/controller", "connection loss")
    gate = gate_with(store)
    with capture_logs() as logs:
        assert await control(gate, connection()) == CAF
    assert "unreadable" in logs[0]["reason"]
    store.error = None
    assert await control(gate, connection()) == ErrorCode.NONE


async def test_on_the_inter_broker_listener_brokers_need_no_token_and_other_listeners_refuse() -> None:
    store = FakeStore()
    gate = gate_with(store, listener="BROKER")
    assert await control(gate, connection("CLIENT")) == CAF, "not even the real controller's token"
    assert await control(gate, connection("BROKER"), token=-1, version=0) == ErrorCode.NONE
    assert gate.controller_epoch == 7


# -- rule 2: the broker epoch


async def test_a_broker_epoch_older_than_this_registration_is_stale() -> None:
    gate = gate_with(FakeStore(broker_epoch=100))
    conn = connection()
    assert await control(gate, conn, broker_epoch=99) == ErrorCode.STALE_BROKER_EPOCH
    assert await control(gate, conn, broker_epoch=100) == ErrorCode.NONE
    assert await control(gate, conn, broker_epoch=-1) == ErrorCode.NONE


# -- rule 3: the controller epoch


async def test_an_epoch_older_than_the_newest_obeyed_is_stale_on_a_brokers_connection() -> None:
    gate = gate_with()
    conn = connection()
    assert await control(gate, conn) == ErrorCode.NONE
    assert await control(gate, conn, controller_id=1, epoch=6, token=-1) == ErrorCode.STALE_CONTROLLER_EPOCH


async def test_an_epoch_newer_than_the_stores_is_refused_even_from_a_broker_and_never_adopted() -> None:
    gate = gate_with(listener="BROKER")
    conn = connection("BROKER")
    assert await control(gate, conn) == ErrorCode.NONE
    for epoch in (8, 2**31 - 1):
        assert await control(gate, conn, epoch=epoch) == CAF
    assert gate.controller_epoch == 7
    assert await control(gate, conn) == ErrorCode.NONE


async def test_an_epoch_newer_than_obeyed_but_older_than_the_stores_is_a_superseded_controller() -> None:
    store = FakeStore()
    gate = gate_with(store, listener="BROKER")
    store.registration = ControllerRegistration(3, 9, TOKEN)
    assert await control(gate, connection("BROKER"), controller_id=2, epoch=7) == ErrorCode.STALE_CONTROLLER_EPOCH
    assert gate.controller_epoch == -1


async def test_the_store_epoch_must_belong_to_the_controller_id_claimed() -> None:
    gate = gate_with(listener="BROKER")
    assert await control(gate, connection("BROKER"), controller_id=1) == CAF


# -- reading the registration


async def test_a_new_controller_ahead_of_the_kept_registration_is_confirmed_by_a_new_read() -> None:
    store = FakeStore()
    gate = gate_with(store)
    assert await control(gate, connection()) == ErrorCode.NONE
    store.registration = ControllerRegistration(3, 8, TOKEN + 1)  # a new election
    assert await control(gate, connection(), controller_id=3, epoch=8, token=TOKEN + 1) == ErrorCode.NONE
    assert store.reads == 2 and gate.controller_epoch == 8


async def test_a_claim_the_kept_registration_refutes_costs_no_read() -> None:
    store = FakeStore()
    gate = gate_with(store)
    assert await control(gate, connection()) == ErrorCode.NONE
    for forged in ({"token": 1}, {"controller_id": 9}, {"epoch": 3}):
        assert await control(gate, connection(), **forged) == CAF
    assert store.reads == 1


async def test_requests_waiting_for_the_registration_share_one_read() -> None:
    store = FakeStore()
    store.hold = asyncio.Event()
    gate = gate_with(store)
    # Five requests received (decoded from one read of the socket, say) before any is handled.
    ctxs = [request_ctx(connection()) for _ in range(5)]
    waiting = [asyncio.ensure_future(gate.admit_control_request(ctx, 2, 2**31 - 1 if i % 2 else 7, -1, TOKEN))
               for i, ctx in enumerate(ctxs)]
    await asyncio.sleep(0.01)
    store.hold.set()
    assert await asyncio.gather(*waiting) == [ErrorCode.NONE, CAF, ErrorCode.NONE, CAF, ErrorCode.NONE]
    assert store.reads == 1


async def test_a_read_begun_before_the_request_arrived_does_not_confirm_it() -> None:
    store = FakeStore(registration=ControllerRegistration(2, 6, TOKEN - 1))
    store.hold = asyncio.Event()
    gate = gate_with(store)
    early = asyncio.ensure_future(control(gate, connection(), epoch=6, token=TOKEN - 1))
    await asyncio.sleep(0.01)  # its read is under way: then the election of epoch 7, then its request
    store.registration = CONTROLLER
    late = asyncio.ensure_future(control(gate, connection()))
    await asyncio.sleep(0.01)
    store.hold.set()
    assert await asyncio.gather(early, late) == [ErrorCode.NONE, ErrorCode.NONE]
    assert store.reads == 2 and gate.controller_epoch == 7


# -- ControlledShutdown


async def shutdown(gate: InterBrokerGate, conn: SimpleNamespace, broker_id: int = 1, token: int = TOKEN,
                   version: int = 3) -> ErrorCode:
    ctx = request_ctx(conn, ControlledShutdown, version)
    return await gate.admit_controlled_shutdown(ctx, broker_id, token)


async def test_controlled_shutdown_needs_the_controllers_token_or_the_inter_broker_listener() -> None:
    gate = gate_with()
    assert await shutdown(gate, connection(), token=-1, version=2) == CAF
    assert await shutdown(gate, connection(), token=TOKEN + 1) == CAF
    conn = connection()
    assert await shutdown(gate, conn) == ErrorCode.NONE
    assert conn.broker_id == 1
    on_listener = gate_with(listener="BROKER")
    assert await shutdown(on_listener, connection("BROKER"), token=-1, version=0) == ErrorCode.NONE
    assert await shutdown(on_listener, connection("CLIENT")) == CAF
