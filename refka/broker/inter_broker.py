"""Who may send a broker the inter-broker APIs, and which controller it obeys.

LeaderAndIsr, StopReplica and UpdateMetadata come from the controller,
ControlledShutdown from a broker. Kafka serves them only to a principal with
ClusterAction; refka has no authentication, so the rules below stand in for
it (without them one StopReplica from any client, with controller epoch
2^31-1, fenced the real controller off a broker until it restarted). They are
checked in the order of Kafka's KafkaApis: authorization, the broker epoch,
the controller epoch.

1. Only brokers. With ``inter.broker.listener.name`` set (it must name one of
   ``listeners``), a connection on that listener is a broker's and one on any
   other listener never is. Without it, a connection becomes a broker's when a
   request on it carries the ``controller_token`` of the registered controller
   (refka's tag, ``TAG_CONTROLLER_TOKEN``): 63 random bits the controller's
   election wrote into /controller along with the new /controller_epoch, known
   only to the store and to whoever reads it, the brokers. A broker id and
   broker epoch would not do: broker epochs are zxids, counters a client can
   run through. LeaderAndIsr, StopReplica and UpdateMetadata must also name the
   registered controller_id and controller_epoch with it. Versions without
   tagged fields (LeaderAndIsr v0-3, StopReplica v0-1, UpdateMetadata v0-5,
   ControlledShutdown v0-2) are served only on a connection that already is a
   broker's. Anything else is CLUSTER_AUTHORIZATION_FAILED (the handlers also
   put it on every partition, as Kafka's getErrorResponse does), with one
   warning naming the peer and the API.
2. STALE_BROKER_EPOCH: a broker_epoch older than this broker's registration
   (KIP-380; -1 is not checked).
3. Controller epochs. Older than the newest this broker obeyed:
   STALE_CONTROLLER_EPOCH. Newer: it must be the store's. Larger than
   /controller_epoch it cannot come from the real controller, which wrote its
   epoch before sending anything, so it is refused as in rule 1 (Kafka would
   adopt it); smaller, it is a controller since superseded
   (STALE_CONTROLLER_EPOCH); equal and from the registered controller_id, it
   becomes the newest obeyed.

The registration is read through the controller side and kept. A claim the
kept one cannot confirm is checked against a read that began after the request
arrived, since a new controller may reach a broker before the broker has seen
its election; there is one read at a time, shared by every request waiting
for it. A claim the kept registration already refutes (a token for an epoch it
knows, an epoch it knows is older) costs no read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Protocol

from refka.protocol import ErrorCode
from refka.protocol.messages import APIS

from .controller_side import ControllerRegistration, StoreError
from .logging import get_logger

log = get_logger("refka.inter_broker")

NO_TOKEN = -1  # the tag's default: not sent


class Registrations(Protocol):
    """What the gate needs of the controller side (``ControllerSide``)."""

    broker_epoch: int  # this broker's registration (czxid of /brokers/ids/<id>); -1 before it

    async def controller_registration(self) -> ControllerRegistration | None: ...


class InterBrokerGate:
    """Rules 1-3 above for one broker. ``registrations`` is attached with the controller
    side; until then nobody can be checked, and only the inter-broker listener is served."""

    def __init__(self, inter_broker_listener: str | None) -> None:
        self.listener = inter_broker_listener
        self.registrations: Registrations | None = None
        self.controller_epoch = -1  # the newest controller epoch obeyed
        self._registration: ControllerRegistration | None = None
        self._read_at = float("-inf")  # when the read that gave _registration began (monotonic)
        self._read: asyncio.Future[None] | None = None

    async def admit_control_request(self, ctx: Any, controller_id: int, controller_epoch: int,
                                    broker_epoch: int, controller_token: int) -> ErrorCode:
        """LeaderAndIsr, StopReplica, UpdateMetadata: NONE when this broker obeys it, else the
        error the whole request is answered with."""
        claim = (controller_id, controller_epoch, controller_token)
        try:
            refused = await self._not_a_broker(
                ctx, controller_id, controller_token,
                matches=lambda r: (r.controller_id, r.controller_epoch, r.controller_token) == claim,
                worth_a_read=lambda r: controller_epoch > r.controller_epoch,
            )
            if refused is not None:
                return self._refuse(ctx, refused)
            side = self.registrations
            if broker_epoch != -1 and side is not None and broker_epoch < side.broker_epoch:
                return ErrorCode.STALE_BROKER_EPOCH
            return await self._fence_controller_epoch(ctx, controller_id, controller_epoch)
        except (StoreError, ValueError, KeyError) as e:  # the registration could not be read
            return self._refuse(ctx, f"controller registration unreadable: {e!r}")

    async def admit_controlled_shutdown(self, ctx: Any, broker_id: int, controller_token: int) -> ErrorCode:
        """ControlledShutdown: NONE when it comes from a broker; which broker, and whether
        its broker_epoch is the registered one, the controller checks."""
        try:
            refused = await self._not_a_broker(
                ctx, broker_id, controller_token,
                matches=lambda r: r.controller_token == controller_token,
                worth_a_read=lambda r: True,
            )
        except (StoreError, ValueError, KeyError) as e:
            refused = f"controller registration unreadable: {e!r}"
        return ErrorCode.NONE if refused is None else self._refuse(ctx, refused)

    # -- rule 1

    async def _not_a_broker(self, ctx: Any, broker_id: int, token: int,
                            matches: Callable[[ControllerRegistration], bool],
                            worth_a_read: Callable[[ControllerRegistration], bool]) -> str | None:
        """None when the request's connection is a broker's, else why not."""
        conn = ctx.conn
        if self.listener is not None:
            return None if conn.listener == self.listener else f"not the inter-broker listener {self.listener}"
        if conn.broker_id is not None:
            return None
        if token == NO_TOKEN:
            return "no controller token (sent by a client, or a version without tagged fields)"
        reg = self._registration
        if reg is None or (not matches(reg) and worth_a_read(reg)):
            reg = await self._registration_read_after(ctx.received)
        if reg is None:
            return "no controller is registered"
        if not matches(reg):
            return "not the registered controller's token, id and epoch"
        conn.broker_id = broker_id
        return None

    # -- rule 3

    async def _fence_controller_epoch(self, ctx: Any, controller_id: int, controller_epoch: int) -> ErrorCode:
        if controller_epoch == self.controller_epoch:
            return ErrorCode.NONE
        reg = self._registration
        if controller_epoch > self.controller_epoch and (reg is None or reg.controller_epoch < controller_epoch):
            reg = await self._registration_read_after(ctx.received)
        if controller_epoch < self.controller_epoch:  # also after the read: another request may have moved it
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if reg is None:
            return self._refuse(ctx, "no controller is registered")
        if controller_epoch > reg.controller_epoch:
            return self._refuse(ctx, f"controller epoch {controller_epoch} is newer than the store's "
                                     f"{reg.controller_epoch}")
        if controller_epoch < reg.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if controller_id != reg.controller_id:
            return self._refuse(ctx, f"controller epoch {controller_epoch} belongs to broker {reg.controller_id}, "
                                     f"not {controller_id}")
        self.controller_epoch = controller_epoch
        return ErrorCode.NONE

    # -- the registration

    async def _registration_read_after(self, received: float) -> ControllerRegistration | None:
        """The registration from a store read that began at or after ``received``; raises
        what the read raised."""
        while self._read_at < received:
            read = self._read
            if read is None:
                read = self._read = asyncio.ensure_future(self._read_registration(time.monotonic()))
            await asyncio.shield(read)
        return self._registration

    async def _read_registration(self, began: float) -> None:
        try:
            side = self.registrations
            reg = await side.controller_registration() if side is not None else None
        finally:
            self._read = None
        if began > self._read_at:
            self._registration, self._read_at = reg, began

    def _refuse(self, ctx: Any, reason: str) -> ErrorCode:
        conn = ctx.conn
        api = APIS.get(ctx.api_key)
        log.warning("inter_broker_request_refused", api=api.name if api else ctx.api_key,
                    api_version=ctx.api_version, peer=conn.peer, listener=conn.listener, reason=reason)
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
