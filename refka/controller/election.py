"""Controller election: the ``/controller`` ephemeral znode and ``/controller_epoch``.

A candidate wins by creating ``/controller`` (ephemeral, its broker id) and
bumping ``/controller_epoch`` *in one transaction* whose set is conditional
on the epoch znode's version (Kafka's registerControllerAndIncrementControllerEpoch):
of two candidates, at most one transaction commits, so at most one broker
ever holds a given epoch. The winner keeps the epoch znode's new version:
the controller puts a check on it in every write it makes, which fences a
controller that lost its session but has not noticed yet.

The winner also writes a fresh random ``controller_token`` into ``/controller``
(``token`` while it is controller): its requests carry it, and brokers check it
against the znode to tell the controller from a client (broker/inter_broker.py).

Every candidate watches ``/controller`` and campaigns again when it goes.
``controller_metadata_epoch`` (KIP-232) is kept here too: 0 after an
election, and each UpdateMetadata broadcast takes the next value
(``next_metadata_epoch()``): the first broadcast of a new controller carries
0, the next 1, and so on.

Error contract. SUSPENDED: nothing changes (the session may come back with
its ephemerals). LOST: the session and ``/controller`` with it are gone, so
a controller resigns at once (``on_resigned``); on the next CONNECTED every
candidate campaigns again. A ConnectionLossError during the transaction is
safe to retry: the next round finds our own ``/controller`` (owned by our
session) and takes the epoch it wrote. ``on_elected`` and ``on_resigned``
are plain callables run on the loop; they must not block (the controller
enqueues an event).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable

import structlog

from . import znodes
from .store import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLossError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
    SessionState,
    WatchedEvent,
)

log = structlog.get_logger("refka.controller.election")
# How long a resigning controller tries to delete /controller itself. With the store out of
# reach a request would wait for a reconnection that may never come (a broker told to stop
# while its ZooKeeper is down did not exit); the node goes with the session anyway.
GOODBYE_TIMEOUT_S = 5.0

RETRY_DELAY = 0.2


class ControllerElection:
    def __init__(
        self,
        store: MetadataStore,
        broker_id: int,
        on_elected: Callable[[int], object],
        on_resigned: Callable[[], object],
    ) -> None:
        self.store = store
        self.broker_id = broker_id
        self._on_elected = on_elected
        self._on_resigned = on_resigned
        self.epoch = -1  # our controller epoch while we are the controller
        self.epoch_zk_version = -1  # the version of /controller_epoch we wrote
        self.token = -1  # the controller_token we wrote into /controller, while we are the controller
        self.metadata_epoch = 0
        self.active_controller_id = -1  # whoever holds /controller, as last seen
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self._running = False

    @property
    def is_controller(self) -> bool:
        return self.epoch >= 0

    def next_metadata_epoch(self) -> int:
        """The controller_metadata_epoch of the next UpdateMetadata broadcast."""
        e = self.metadata_epoch
        self.metadata_epoch += 1
        return e

    # -- lifecycle

    async def start(self) -> None:
        self._running = True
        self.store.add_listener(self._on_session)
        self._kick()

    async def stop(self) -> None:
        """Stops campaigning and gives up ``/controller`` if we hold it."""
        self._running = False
        self.store.remove_listener(self._on_session)
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        was = self.is_controller
        self._lose()
        if was:
            try:
                await asyncio.wait_for(self._give_up_znode(), GOODBYE_TIMEOUT_S)
            except Exception as e:  # the session may already be gone, taking the node
                log.info("controller_resign_delete_skipped", broker=self.broker_id, reason=repr(e))
        if was:
            self._on_resigned()

    async def _give_up_znode(self) -> None:
        stat = await self.store.exists(znodes.CONTROLLER)
        if stat is not None and stat.ephemeral_owner == self.store.session_id:
            await self.store.delete(znodes.CONTROLLER, version=stat.version)

    def fenced(self) -> None:
        """The controller found its epoch superseded: stop being controller, look again."""
        if self.is_controller:
            self._lose()
        if self._running:
            self._kick()

    # -- events

    def _on_session(self, state: SessionState) -> None:
        if state == SessionState.LOST:
            if self.is_controller:
                log.warning("controller_session_lost", broker=self.broker_id, epoch=self.epoch)
                self._lose()
                self._on_resigned()
        elif state == SessionState.CONNECTED and self._running:
            self._kick()

    def _on_controller_znode(self, event: WatchedEvent) -> None:
        if self._running:
            self._kick()

    def _kick(self) -> None:
        """Runs one campaign round now, or again after the one in progress."""
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = asyncio.get_running_loop().create_task(self._campaign())

    def _lose(self) -> None:
        self.epoch = -1
        self.epoch_zk_version = -1
        self.token = -1

    # -- the campaign

    async def _campaign(self) -> None:
        while self._running:
            self._again = False
            try:
                await self._round()
            except (ConnectionLossError, SessionExpiredError) as e:
                log.info("controller_campaign_retry", broker=self.broker_id, reason=str(e))
                await asyncio.sleep(RETRY_DELAY)
                continue
            except ConnectionClosedError:
                return
            except Exception:
                log.exception("controller_campaign_failed", broker=self.broker_id)
                await asyncio.sleep(RETRY_DELAY)
                continue
            if not self._again:
                return

    async def _round(self) -> None:
        store = self.store
        while self._running:
            stat = await store.exists(znodes.CONTROLLER, watch=self._on_controller_znode)
            if stat is not None:
                try:
                    data, stat = await store.get(znodes.CONTROLLER)
                except NoNodeError:
                    continue
                znode = znodes.ControllerZnode.from_json(data)
                holder = znode.broker_id
                self.active_controller_id = holder
                ours = stat.ephemeral_owner == store.session_id and holder == self.broker_id
                if ours and not self.is_controller:
                    # Our own transaction went through before a connection loss.
                    data, estat = await store.get(znodes.CONTROLLER_EPOCH)
                    self._win(znodes.decode_int(data), estat.version, znode.controller_token)
                elif not ours and self.is_controller:
                    log.warning("controller_moved", broker=self.broker_id, to=holder)
                    self._lose()
                    self._on_resigned()
                return  # the watch brings us back when it changes
            epoch, version = await self._read_epoch()
            token = secrets.randbits(63)
            try:
                await (
                    store.transaction()
                    .create(
                        znodes.CONTROLLER,
                        znodes.ControllerZnode(self.broker_id, controller_token=token).to_json(),
                        ephemeral=True,
                    )
                    .set_data(znodes.CONTROLLER_EPOCH, znodes.encode_int(epoch + 1), version=version)
                    .commit()
                )
            except (NodeExistsError, BadVersionError):
                continue  # another candidate won this round: watch it
            self.active_controller_id = self.broker_id
            self._win(epoch + 1, version + 1, token)
            return

    async def _read_epoch(self) -> tuple[int, int]:
        while True:
            try:
                data, stat = await self.store.get(znodes.CONTROLLER_EPOCH)
                return znodes.decode_int(data), stat.version
            except NoNodeError:
                try:
                    await self.store.create(znodes.CONTROLLER_EPOCH, znodes.encode_int(0))
                except NodeExistsError:
                    pass

    def _win(self, epoch: int, zk_version: int, token: int) -> None:
        self.epoch = epoch
        self.epoch_zk_version = zk_version
        self.token = token
        self.metadata_epoch = 0
        log.info("controller_elected", broker=self.broker_id, epoch=epoch)
        self._on_elected(epoch)
