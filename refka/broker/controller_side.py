"""The broker's one interface to the controller package: the only broker module
that imports ``refka.controller``. What the rest of the broker needs from there
(the errors admin writes raise, topic-name rules, producer id blocks) is
re-exported below; everything else goes through ``ControllerSide``.

Each broker has its own metadata-store session: it registers
``/brokers/ids/<id>`` (ephemeral) on it, runs for controller on it, and does
its admin writes (CreateTopics, DeleteTopics, CreatePartitions, configs)
through it, as Kafka's ZooKeeper-mode brokers do. The controller tells every
broker, this one included, what to do over the Kafka protocol
(LeaderAndIsr, UpdateMetadata, StopReplica on the broker's listener:
``inter.broker.listener.name``, else its first). Who the controller is, as the
store records it (``controller_registration``: /controller's broker id and
controller_token, /controller_epoch), is what broker/inter_broker.py checks
those requests against.

Topic config changes reach every broker as in Kafka's ZooKeeper mode
(ZkNodeChangeNotificationListener): AlterConfigs writes ``/config/topics/<t>``
and a sequential ``/config/changes/config_change_<n>``; each broker watches the
children of ``/config/changes`` (a one-shot watch, set again at every read and
after a new session), reads the notifications newer than the last it handled,
and for a topic it hosts re-reads the topic's config and gives its partition
logs the new LogConfig. Notifications older than 15 minutes are deleted by
whichever broker sees them, as Kafka does.

Dynamic broker configs take the same path (Kafka's DynamicConfigManager for brokers):
AlterConfigs on a BROKER resource writes ``/config/brokers/<id>`` or, for the cluster-wide
defaults, ``/config/brokers/<default>`` and a ``brokers/<entity>`` notification; a broker
re-reads both at start (before it registers) and at a notification for either, takes them
as its BrokerConfig's dynamic layers (config.DYNAMIC_CONFIGS: the topic defaults), and
gives every local partition log the LogConfig they make.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from refka.common.topic_config import InvalidConfigError
from refka.controller import admin, znodes
from refka.controller import store as stores
from refka.controller.admin import (
    AdminError,
    InvalidTopicError,
    TopicExistsError,
    TopicSpec,
    validate_topic_name,
)
from refka.controller.channel import ControllerChannel, request_controlled_shutdown
from refka.controller.controller import Controller
from refka.controller.election import GOODBYE_TIMEOUT_S
from refka.controller.producer_ids import ProducerIdManager, ProducerIdsExhaustedError
from refka.controller.store import (
    BadVersionError,
    EmbeddedStore,
    MetadataStore,
    NoNodeError,
    SessionState,
    StoreError,
    WatchedEvent,
)
from refka.protocol import ErrorCode

from .config import BrokerConfig
from .logging import get_logger
from .metadata_cache import MetadataCache
from .partition import Partition, PartitionState
from .replica_manager import ReplicaManager

__all__ = [
    "AdminError",
    "ControllerRegistration",
    "ControllerSide",
    "InvalidTopicError",
    "ProducerIdManager",
    "ProducerIdsExhaustedError",
    "StoreError",
    "TopicExistsError",
    "TopicSpec",
    "open_store",
    "validate_topic_name",
]

log = get_logger("refka.controller_side")

# Kafka's ZkNodeChangeNotificationListener.changeExpirationMs.
CONFIG_CHANGE_EXPIRATION_MS = 15 * 60 * 1000


@dataclass(frozen=True)
class ControllerRegistration:
    """The active controller as the store records it: /controller's broker id and
    controller_token (-1 when written by an older refka) and /controller_epoch."""

    controller_id: int
    controller_epoch: int
    controller_token: int


def open_store(zookeeper: str | None, journal_dir: Path | None, session_timeout_ms: int = 18000) -> MetadataStore:
    """The store brokers open their sessions on (not itself started)."""
    if zookeeper:
        return stores.ZooKeeperStore(zookeeper, session_timeout=session_timeout_ms / 1000)
    return EmbeddedStore(journal_dir)


class ControllerSide:
    """One broker's store session, controller candidacy and admin writes. Built from the
    few things it uses: the broker's id and config, its metadata cache (the cluster id
    goes there), its replica manager (topic config changes reach the partition logs
    through it) and its task spawner. Also the replication's ``IsrWriter``."""

    def __init__(self, store: MetadataStore, node_id: int, config: BrokerConfig, metadata: MetadataCache,
                 replicas: ReplicaManager, spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]) -> None:
        self.node_id = node_id
        self.config = config
        self.metadata = metadata
        self.replicas = replicas
        self.spawn = spawn
        self.session = store.open_session()
        self.controller: Controller | None = None
        self.broker_epoch = -1
        self._info: znodes.BrokerInfo | None = None
        self._last_config_change = -1  # sequence number of the last notification handled
        self._config_changes_pending = False
        self._config_changes_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.session.start()
        self.session.add_listener(self._on_session_state)
        self.metadata.cluster_id = await admin.ensure_cluster(self.session)
        await self._broker_config_changed()
        self._schedule_config_changes()
        self._info = znodes.BrokerInfo(
            broker_id=self.node_id,
            endpoints=tuple(self.config.advertised_listeners),
            rack=self.config.rack,
        )
        self.broker_epoch = await admin.register_broker(self.session, self._info)
        channel = ControllerChannel(self.node_id, listener=self.config.inter_broker_listener)
        self.controller = Controller(self.session, self.node_id, channel, self.config.raw)
        await self.controller.start()
        log.info("broker_registered", broker=self.node_id, broker_epoch=self.broker_epoch)

    async def controller_registration(self) -> ControllerRegistration | None:
        """The active controller, read from the store now; None while there is none.
        /controller and /controller_epoch are two reads: they belong together when the
        epoch was set by the transaction that created /controller (the same zxid), and are
        read again (a few times) when an election fell between them. Raises StoreError."""
        for _attempt in range(3):
            try:
                data, stat = await self.session.get(znodes.CONTROLLER)
                epoch_data, epoch_stat = await self.session.get(znodes.CONTROLLER_EPOCH)
            except NoNodeError:
                return None
            if epoch_stat.mzxid == stat.czxid:
                break
        znode = znodes.ControllerZnode.from_json(data)
        return ControllerRegistration(znode.broker_id, znodes.decode_int(epoch_data), znode.controller_token)

    @property
    def active_controller(self) -> Controller | None:
        """This broker's controller when it is the active one (the admin APIs that only
        the controller answers: elections, reassignments), else None."""
        c = self.controller
        return c if c is not None and c.is_active else None

    def _on_session_state(self, state: SessionState) -> None:
        # A new session after expiry lost our ephemeral registration: register again.
        if state == SessionState.CONNECTED and self._info is not None and self.broker_epoch >= 0:
            self.spawn(self._reregister())
            self._schedule_config_changes()  # the watch went with the old session

    async def _reregister(self) -> None:
        assert self._info is not None
        try:
            self.broker_epoch = await admin.register_broker(self.session, self._info)
        except Exception as e:  # the next CONNECTED tries again
            log.warning("broker_reregister_failed", broker=self.node_id, error=str(e))

    async def controlled_shutdown(self, max_retries: int | None = None) -> bool:
        """Asks the controller to move leadership off this broker before it stops (Kafka's
        KafkaServer.controlledShutdown): up to ``controlled.shutdown.max.retries`` attempts,
        ``controlled.shutdown.retry.backoff.ms`` apart, until the controller answers NONE with
        no partition left that this broker leads (partitions with one replica do not count).
        True when it succeeded; the broker stops either way."""
        cfg = self.config
        node_id = self.node_id
        attempts = cfg["controlled.shutdown.max.retries"] if max_retries is None else max_retries
        backoff = cfg["controlled.shutdown.retry.backoff.ms"] / 1000
        advertised = cfg.advertised_listeners
        listener = cfg.inter_broker_listener or (advertised[0].listener if advertised else None)
        for attempt in range(1, max(attempts, 1) + 1):
            outcome = "no_controller"
            try:
                # The controller and its token as the store has them now: the token tells
                # the controller that this request comes from a broker (inter_broker.py).
                registration = await self.controller_registration()
                cid = registration.controller_id if registration is not None else -1
                if cid == node_id and self.controller is not None:
                    error, remaining = await self.controller.controlled_shutdown(node_id, self.broker_epoch)
                    outcome = ErrorCode(error).name
                elif registration is not None and cid >= 0 and (m := self.metadata.brokers.get(cid)) is not None \
                        and (ep := m.endpoint(listener)) is not None:
                    code, remaining = await request_controlled_shutdown(
                        ep[0], ep[1], node_id, self.broker_epoch, registration.controller_token, timeout=30.0)
                    error = ErrorCode(code)
                    outcome = error.name
                else:
                    error, remaining = ErrorCode.NOT_CONTROLLER, []
                if error == ErrorCode.NONE and not remaining:
                    log.info("controlled_shutdown_succeeded", broker=node_id, attempt=attempt)
                    return True
                if error == ErrorCode.NONE:
                    outcome = f"{len(remaining)} partitions still led"
            except (TimeoutError, OSError, ConnectionError, StoreError) as e:
                outcome = repr(e)
            log.warning("controlled_shutdown_attempt_failed", broker=node_id, attempt=attempt, reason=outcome)
            if attempt < attempts:
                await asyncio.sleep(backoff)
        log.warning("controlled_shutdown_failed", broker=node_id, attempts=attempts)
        return False

    async def stop(self) -> None:
        if self.controller is not None:
            await self.controller.stop()
        try:  # bounded as the controller's resignation (election.GOODBYE_TIMEOUT_S): the
            # registration goes with the session anyway, and the store may be out of reach
            await asyncio.wait_for(admin.deregister_broker(self.session, self.node_id), GOODBYE_TIMEOUT_S)
        except Exception as e:
            log.debug("broker_deregister_failed", error=repr(e))
        await self.session.stop()

    # -- admin writes

    async def _brokers(self) -> dict[int, str | None]:
        return {bid: info.rack for bid, info in (await admin.live_brokers(self.session)).items()}

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           assignment: Mapping[int, Sequence[int]] | None, configs: Mapping[str, Any],
                           *, validate_only: bool = False) -> bytes:
        spec = admin.TopicSpec(name, num_partitions, replication_factor, assignment, configs)
        (result,) = await self.create_topics([spec], validate_only=validate_only)
        if isinstance(result, Exception):
            raise result
        return result.topic_id

    async def create_topics(self, specs: Sequence[admin.TopicSpec], *, validate_only: bool = False,
                            ) -> list[znodes.TopicAssignment | admin.AdminError | InvalidConfigError]:
        """The topics of one CreateTopics request, in its order: each one's assignment or its error.
        KIP-578's limits count the topics admitted earlier in the request."""
        results: list[znodes.TopicAssignment | admin.AdminError | InvalidConfigError | None] = [None] * len(specs)
        where = []
        for i, spec in enumerate(specs):
            try:
                if not spec.replica_assignment:
                    self._check_partition_count(spec.num_partitions)  # before that many are assigned in memory
                where.append(i)
            except admin.AdminError as e:
                results[i] = e
        if where:
            done = await admin.create_topics(self.session, [specs[i] for i in where], await self._brokers(),
                                             validate_only=validate_only, check=self._partition_budget())
            for i, r in zip(where, done, strict=True):
                results[i] = r
        return [r for r in results if r is not None]

    async def delete_topic(self, name: str) -> None:
        await admin.delete_topic(self.session, name)

    async def create_partitions(self, name: str, count: int, assignment: Sequence[Sequence[int]] | None,
                                *, validate_only: bool = False) -> None:
        meta = self.metadata.topic(name)
        self._check_partition_count(count - (len(meta.partitions) if meta is not None else 0))
        await admin.create_partitions(self.session, name, count, assignment, await self._brokers(),
                                      validate_only=validate_only, check=self._partition_budget())

    def _check_partition_count(self, new: int) -> None:
        """max.partitions, checked on the count alone: also before a request's partitions
        are assigned (num_partitions 2^31-1 would otherwise be built in memory first)."""
        max_total = self.config["max.partitions"]
        total = self.metadata.partition_count + new
        if total > max_total:
            raise admin.PolicyViolationError(
                f"A request for {new} partitions would take the cluster to {total}, "
                f"above max.partitions ({max_total}).")

    def _partition_budget(self) -> admin.PartitionCheck:
        """KIP-578: ``max.partitions`` bounds the cluster's partitions, ``max.broker.partitions``
        the replicas one broker hosts; a topic or a partition increase that would pass either is
        refused whole (POLICY_VIOLATION). Counted from this broker's metadata cache, as Kafka
        counts from its controller's view, plus what this check admitted before (the earlier
        topics of one CreateTopics request)."""
        max_per_broker = self.config["max.broker.partitions"]
        hosted = Counter(self.metadata.replicas_per_broker)
        admitted = 0

        def check(new: Mapping[int, Sequence[int]]) -> None:
            nonlocal admitted
            self._check_partition_count(admitted + len(new))
            per_broker = Counter(r for replicas in new.values() for r in replicas)
            over = sorted(b for b, n in per_broker.items() if hosted[b] + n > max_per_broker)
            if over:
                raise admin.PolicyViolationError(
                    f"A request for {len(new)} partitions would give broker(s) {over} more than "
                    f"max.broker.partitions ({max_per_broker}) replicas.")
            admitted += len(new)
            hosted.update(per_broker)

        return check

    async def topic_configs(self, name: str) -> dict[str, str]:
        try:
            return await admin.get_topic_config(self.session, name)
        except admin.AdminError:
            return {}

    async def set_topic_configs(self, name: str, configs: Mapping[str, Any]) -> dict[str, str]:
        return await admin.set_topic_config(self.session, name, configs)

    async def broker_configs(self, entity: str) -> dict[str, str]:
        """The dynamic configs stored for ``entity``: a broker id, or "" for the cluster-wide defaults."""
        return await admin.get_broker_config(self.session, entity or znodes.DEFAULT_BROKER_ENTITY)

    async def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        await admin.set_broker_config(self.session, entity or znodes.DEFAULT_BROKER_ENTITY, configs)

    # -- topic config changes (see the module docstring)

    def _watch_config_changes(self, event: WatchedEvent) -> None:
        self._schedule_config_changes()

    def _schedule_config_changes(self) -> None:
        self._config_changes_pending = True
        if self._config_changes_task is None or self._config_changes_task.done():
            self._config_changes_task = self.spawn(self._process_config_changes())

    async def _process_config_changes(self) -> None:
        while self._config_changes_pending:
            self._config_changes_pending = False
            try:
                children = await self.session.get_children(znodes.CONFIG_CHANGES,
                                                            watch=self._watch_config_changes)
                await self._handle_config_changes(children)
            except StoreError as e:  # a new session (CONNECTED) schedules another read
                log.warning("config_changes_unreadable", broker=self.node_id, error=repr(e))
                return

    async def _handle_config_changes(self, children: list[str]) -> None:
        now_ms = int(time.time() * 1000)
        for child in sorted(children):
            if not child.startswith(znodes.CONFIG_CHANGE_PREFIX):
                continue
            try:
                seq = int(child[len(znodes.CONFIG_CHANGE_PREFIX):])
            except ValueError:
                continue
            path = f"{znodes.CONFIG_CHANGES}/{child}"
            if seq > self._last_config_change:
                try:
                    data, stat = await self.session.get(path)
                except NoNodeError:
                    continue
                self._last_config_change = seq
                try:
                    kind, _, name = znodes.decode_config_change(data).partition("/")
                except ValueError:
                    log.warning("config_change_unreadable", path=path)
                    continue
                if kind == "topics" and name:
                    await self._topic_config_changed(name)
                elif kind == "brokers" and name in (znodes.DEFAULT_BROKER_ENTITY, str(self.node_id)):
                    await self._broker_config_changed()
            else:
                found = await self.session.exists(path)
                if found is None:
                    continue
                stat = found
            if now_ms - stat.ctime > CONFIG_CHANGE_EXPIRATION_MS:
                try:
                    await self.session.delete(path)
                except NoNodeError:
                    pass

    async def _topic_config_changed(self, topic: str) -> None:
        """Re-read the topic's overrides and hand every local log of it the new LogConfig."""
        configs = self.replicas.topic_configs
        if topic not in configs and not self._hosted(topic):
            return  # read when a partition of it arrives (LeaderAndIsr)
        try:
            overrides = await admin.get_topic_config(self.session, topic)
        except admin.UnknownTopicError:
            return
        parts = self._hosted(topic)
        if topic not in configs and not parts:
            return
        configs[topic] = overrides
        try:
            cfg = self.replicas.log_config(topic)
        except ValueError as e:  # validated on the way in; an older refka may have written it
            log.warning("topic_config_not_applied", topic=topic, error=str(e))
            return
        for p in parts:
            p.log.update_config(cfg)
        log.info("topic_config_applied", broker=self.node_id, topic=topic, overrides=overrides,
                 partitions=len(parts))

    async def _broker_config_changed(self) -> None:
        """Re-read this broker's and the cluster-wide dynamic configs; when a value changed,
        every local partition log gets its topic's new LogConfig (its defaults changed)."""
        per_broker = await admin.get_broker_config(self.session, str(self.node_id))
        default = await admin.get_broker_config(self.session, znodes.DEFAULT_BROKER_ENTITY)
        changed = self.config.set_dynamic(per_broker, default)
        if not changed:
            return
        by_topic: dict[str, list[Partition]] = {}
        for (topic, _i), p in list(self.replicas.partitions.items()):
            by_topic.setdefault(topic, []).append(p)
        for topic, parts in by_topic.items():
            try:
                cfg = self.replicas.log_config(topic)
            except ValueError as e:
                log.warning("topic_config_not_applied", topic=topic, error=str(e))
                continue
            for p in parts:
                p.log.update_config(cfg)
        log.info("broker_config_applied", broker=self.node_id, changed=changed, partitions=sum(map(len, by_topic.values())))

    def _hosted(self, topic: str) -> list[Partition]:
        return [p for (t, _i), p in list(self.replicas.partitions.items()) if t == topic]

    # -- the leader's ISR writes (replication.isr_manager.IsrWriter)

    async def write_isr(self, topic: str, partition: int, state: PartitionState, isr: list[int]) -> int | None:
        new = znodes.PartitionStateZnode(leader=state.leader, leader_epoch=state.leader_epoch, isr=tuple(isr),
                                    controller_epoch=state.controller_epoch,
                                    leader_recovery_state=state.leader_recovery_state)
        try:
            return await admin.update_isr(self.session, topic, partition, new, state.zk_version)
        except BadVersionError:
            log.info("isr_update_conflict", topic=topic, partition=partition, zk_version=state.zk_version)
        except StoreError as e:
            log.warning("isr_update_failed", topic=topic, partition=partition, error=repr(e))
        return None

    async def notify_isr_change(self, topic: str, partition: int) -> None:
        try:
            await admin.notify_isr_change(self.session, [(topic, partition)])
        except StoreError as e:
            log.warning("isr_change_notify_failed", topic=topic, partition=partition, error=repr(e))
