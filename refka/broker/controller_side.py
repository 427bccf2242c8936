"""The broker's small interface to the controller package.

Each broker has its own metadata-store session: it registers
``/brokers/ids/<id>`` (ephemeral) on it, runs for controller on it, and does
its admin writes (CreateTopics, DeleteTopics, CreatePartitions, configs)
through it, as Kafka's ZooKeeper-mode brokers do. The controller tells every
broker, this one included, what to do over the Kafka protocol
(LeaderAndIsr, UpdateMetadata, StopReplica on the broker's listener).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from refka.controller import admin, znodes
from refka.controller.channel import ControllerChannel
from refka.controller.controller import Controller
from refka.controller.store import EmbeddedStore, MetadataStore, SessionState, ZooKeeperStore

from .logging import get_logger

if TYPE_CHECKING:
    from .broker import Broker

log = get_logger("refka.controller_side")


def open_store(zookeeper: str | None, journal_dir: Path | None) -> MetadataStore:
    """The store brokers open their sessions on (not itself started)."""
    if zookeeper:
        return ZooKeeperStore(zookeeper)
    return EmbeddedStore(journal_dir)


class ControllerSide:
    def __init__(self, broker: Broker, store: MetadataStore) -> None:
        self.broker = broker
        self.session = store.open_session()
        self.controller: Controller | None = None
        self.broker_epoch = -1
        self._info: znodes.BrokerInfo | None = None

    async def start(self) -> None:
        b = self.broker
        await self.session.start()
        self.session.add_listener(self._on_session_state)
        b.metadata.cluster_id = await admin.ensure_cluster(self.session)
        self._info = znodes.BrokerInfo(
            broker_id=b.node_id,
            endpoints=tuple(znodes.Endpoint(ep.listener, ep.host, ep.port) for ep in b.advertised),
            rack=b.config.rack,
        )
        self.broker_epoch = await admin.register_broker(self.session, self._info)
        self.controller = Controller(self.session, b.node_id, ControllerChannel(b.node_id), b.config.raw)
        await self.controller.start()
        log.info("broker_registered", broker=b.node_id, broker_epoch=self.broker_epoch)

    def _on_session_state(self, state: SessionState) -> None:
        # A new session after expiry lost our ephemeral registration: register again.
        if state == SessionState.CONNECTED and self._info is not None and self.broker_epoch >= 0:
            self.broker.spawn(self._reregister())

    async def _reregister(self) -> None:
        assert self._info is not None
        try:
            self.broker_epoch = await admin.register_broker(self.session, self._info)
        except Exception as e:  # the next CONNECTED tries again
            log.warning("broker_reregister_failed", broker=self.broker.node_id, error=str(e))

    async def stop(self) -> None:
        if self.controller is not None:
            await self.controller.stop()
        try:
            await admin.deregister_broker(self.session, self.broker.node_id)
        except Exception as e:
            log.debug("broker_deregister_failed", error=str(e))
        await self.session.stop()

    # -- admin writes

    async def _brokers(self) -> dict[int, str | None]:
        return {bid: info.rack for bid, info in (await admin.live_brokers(self.session)).items()}

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           assignment: Mapping[int, Sequence[int]] | None, configs: Mapping[str, Any],
                           *, validate_only: bool = False) -> bytes:
        topic = await admin.create_topic(self.session, name, num_partitions, replication_factor, assignment,
                                         configs, await self._brokers(), validate_only=validate_only)
        return topic.topic_id

    async def delete_topic(self, name: str) -> None:
        await admin.delete_topic(self.session, name)

    async def create_partitions(self, name: str, count: int, assignment: Sequence[Sequence[int]] | None,
                                *, validate_only: bool = False) -> None:
        await admin.create_partitions(self.session, name, count, assignment, await self._brokers(),
                                      validate_only=validate_only)

    async def topic_configs(self, name: str) -> dict[str, str]:
        try:
            return await admin.get_topic_config(self.session, name)
        except admin.AdminError:
            return {}

    async def set_topic_configs(self, name: str, configs: Mapping[str, Any]) -> dict[str, str]:
        return await admin.set_topic_config(self.session, name, configs)
