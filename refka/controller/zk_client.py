"""The controller's reads and writes of znodes (the part of Kafka's KafkaZkClient
the controller uses), over any MetadataStore, keeping the ControllerContext in
step with what it reads and writes.

Rules:

- Fencing: every write is one transaction that starts with a check of
  ``/controller_epoch``'s version (the one this controller wrote when it was
  elected, ``context.epoch_zk_version``). A controller that has been
  replaced cannot write: ``ControllerFencedError``, and it resigns.
- Conditional writes: a partition state or topic znode is written at the
  version last read. When someone else wrote meanwhile (a leader changed
  the ISR, an admin rewrote the topic), the context re-reads it and
  ``ConflictingWriteError`` tells the event loop to handle the event again
  soon, deciding from what is there now.
- Watches: a read the controller must hear about again sets the one-shot
  watch of its kind, which puts the matching event (events.py) on the
  controller's queue. One watcher per kind (a bound method, equal each
  time), so setting it twice on a path fires once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from refka.common import TopicPartition

from . import znodes
from .context import ControllerContext
from .events import (
    BrokerChange,
    ControllerEvent,
    IsrChangeNotification,
    PartitionModifications,
    TopicChange,
    TopicDeletion,
)
from .store import BadVersionError, MetadataStore, NodeExistsError, NoNodeError, Op, StoreError, WatchedEvent
from .znodes import BrokerInfo, PartitionStateZnode, PartitionZnode, TopicAssignment

log = structlog.get_logger("refka.controller")

DELETE_CHUNK = 256  # partitions whose znodes one transaction of a topic deletion removes


class ControllerFencedError(Exception):
    """Our controller epoch is no longer the current one: another controller took over."""


class ConflictingWriteError(Exception):
    """A conditional write lost to another writer: the event is to be handled again soon."""


class ControllerZkClient:
    def __init__(
        self, store: MetadataStore, context: ControllerContext, put: Callable[[ControllerEvent], None]
    ) -> None:
        self.store = store
        self.context = context
        self._put = put

    # ---- watches -------------------------------------------------------------------------------

    def _brokers_changed(self, event: WatchedEvent) -> None:
        self._put(BrokerChange())

    def _topics_changed(self, event: WatchedEvent) -> None:
        self._put(TopicChange())

    def _topic_changed(self, event: WatchedEvent) -> None:
        self._put(PartitionModifications(event.path.rsplit("/", 1)[1]))

    def _deletions_changed(self, event: WatchedEvent) -> None:
        self._put(TopicDeletion())

    def _isr_changes_changed(self, event: WatchedEvent) -> None:
        self._put(IsrChangeNotification())

    # ---- reads ---------------------------------------------------------------------------------

    async def read_brokers(self) -> dict[int, tuple[BrokerInfo, int]]:
        """The registered brokers (watched): id -> (registration, broker epoch = its czxid)."""
        children = await self.store.get_children(znodes.BROKER_IDS, watch=self._brokers_changed)
        found: dict[int, tuple[BrokerInfo, int]] = {}
        for c in children:
            try:
                bid = int(c)
                data, stat = await self.store.get(znodes.broker_path(bid))
            except (ValueError, NoNodeError):
                continue
            found[bid] = (BrokerInfo.from_json(bid, data), stat.czxid)
        return found

    async def topic_names(self) -> list[str]:
        """The children of ``/brokers/topics`` (watched)."""
        return await self.store.get_children(znodes.BROKER_TOPICS, watch=self._topics_changed)

    async def read_topic(self, name: str) -> tuple[TopicAssignment, int] | None:
        """A topic znode (its data watched) and its version; None when it is gone."""
        try:
            data, stat = await self.store.get(znodes.topic_path(name), watch=self._topic_changed)
        except NoNodeError:
            return None
        return TopicAssignment.from_json(name, data), stat.version

    async def load_topic(self, name: str) -> None:
        """Reads a topic znode (setting its data watch), its config, partition znodes
        and states into the context."""
        ctx = self.context
        read = await self.read_topic(name)
        if read is None:
            return
        topic, version = read
        ctx.topics[name] = topic
        ctx.topic_versions[name] = version
        try:
            cdata, _ = await self.store.get(znodes.topic_config_path(name))
            ctx.topic_configs[name] = znodes.TopicConfig.from_json(cdata).config
        except NoNodeError:
            ctx.topic_configs[name] = {}
        for p in sorted(topic.partitions):
            tp = (name, p)
            try:
                pdata, _ = await self.store.get(znodes.partition_path(name, p))
                ctx.partition_znodes[tp] = PartitionZnode.from_json(pdata)
            except NoNodeError:
                continue
            await self.read_state(tp)

    async def read_topic_config(self, name: str) -> dict[str, str]:
        """A topic's config overrides, read now into the context (the controller reads
        ``enable.ordered.delivery`` when the topic changes; AlterConfigs does not tell it)."""
        try:
            data, _ = await self.store.get(znodes.topic_config_path(name))
            config = znodes.TopicConfig.from_json(data).config
        except NoNodeError:
            config = {}
        self.context.topic_configs[name] = config
        return config

    async def partitions_being_removed(self, name: str) -> list[int]:
        """Partition znodes outside the topic's assignment: KIP-253 removals cut short
        after the assignment lost them (partition_deletion.py)."""
        topic = self.context.topics.get(name)
        try:
            children = await self.store.get_children(znodes.partitions_path(name))
        except NoNodeError:
            return []
        return sorted(
            int(c) for c in children if c.isdigit() and (topic is None or int(c) not in topic.partitions)
        )

    async def reload_topic(self, name: str) -> None:
        """After a conditional write lost: re-read the topic and the epoch counter."""
        await self.read_partition_epoch()
        await self.load_topic(name)

    async def read_state(self, tp: TopicPartition) -> PartitionStateZnode | None:
        ctx = self.context
        try:
            data, stat = await self.store.get(znodes.partition_state_path(*tp))
        except NoNodeError:
            ctx.states.pop(tp, None)
            ctx.state_versions.pop(tp, None)
            return None
        s = PartitionStateZnode.from_json(data)
        ctx.states[tp] = s
        ctx.state_versions[tp] = stat.version
        return s

    async def read_partition_epoch(self) -> None:
        ctx = self.context
        try:
            data, stat = await self.store.get(znodes.PARTITION_EPOCH)
            ctx.max_partition_epoch, ctx.partition_epoch_version = znodes.decode_int(data), stat.version
        except NoNodeError:
            ctx.max_partition_epoch, ctx.partition_epoch_version = 0, -1

    async def topics_to_delete(self) -> list[str]:
        """The children of ``/admin/delete_topics`` (watched)."""
        return await self.store.get_children(znodes.DELETE_TOPICS, watch=self._deletions_changed)

    async def topics_queued_for_deletion(self) -> set[str]:
        """The children of ``/admin/delete_topics``, read without a watch."""
        try:
            return set(await self.store.get_children(znodes.DELETE_TOPICS))
        except NoNodeError:
            return set()

    async def take_isr_changes(self) -> set[TopicPartition]:
        """The partitions named by the ISR change notifications (watched), which are deleted."""
        children = await self.store.get_children(znodes.ISR_CHANGE, watch=self._isr_changes_changed)
        changed: set[TopicPartition] = set()
        for child in sorted(children):
            path = f"{znodes.ISR_CHANGE}/{child}"
            try:
                data, _ = await self.store.get(path)
                changed |= set(znodes.decode_isr_change(data))
            except NoNodeError:
                continue
            except ValueError:
                log.warning("isr_change_notification_unreadable", path=path)
            try:
                await self.store.delete(path)
            except NoNodeError:
                pass
        return changed

    # ---- fenced writes ----------------------------------------------------------------------

    async def commit(self, ops: list[Op]) -> list[Any]:
        """Applies ``ops`` after a check that our controller epoch still stands."""
        if self.context.epoch_zk_version < 0:
            raise ControllerFencedError()  # not (or no longer) the controller
        txn = self.store.transaction().check(znodes.CONTROLLER_EPOCH, self.context.epoch_zk_version)
        txn.ops.extend(ops)
        try:
            results = await txn.commit()
        except BadVersionError as e:
            if e.index == 0:
                raise ControllerFencedError() from e
            raise
        return results[1:]

    def allocate_epochs(self, n: int) -> tuple[int, Op]:
        """``n`` new epochs from ``/partition_epoch``: (the first, the op that claims them).
        Once that op is committed, ``claimed_epochs(n)``."""
        ctx = self.context
        first = ctx.max_partition_epoch + 1
        data = znodes.encode_int(ctx.max_partition_epoch + n)
        if ctx.partition_epoch_version < 0:
            return first, ("create", znodes.PARTITION_EPOCH, data, False, False)
        return first, ("set", znodes.PARTITION_EPOCH, data, ctx.partition_epoch_version)

    def claimed_epochs(self, n: int) -> None:
        self.context.max_partition_epoch += n
        self.context.partition_epoch_version += 1

    async def write_states(self, new: Mapping[TopicPartition, PartitionStateZnode]) -> None:
        """Conditional writes of partition states (all or none)."""
        if not new:
            return
        ctx = self.context
        ops: list[Op] = [
            ("set", znodes.partition_state_path(*tp), s.to_json(), ctx.state_versions[tp])
            for tp, s in new.items()
        ]
        try:
            results = await self.commit(ops)
        except BadVersionError as e:
            # A leader changed the ISR meanwhile: take its state and decide again.
            if e.index is not None and e.index > 0:
                tp = list(new)[e.index - 1]
                await self.read_state(tp)
            raise ConflictingWriteError(f"partition state changed under the controller: {e.path}") from e
        for (tp, s), stat in zip(new.items(), results, strict=True):
            ctx.states[tp] = s
            ctx.state_versions[tp] = stat.version

    async def create_states(self, decided: Mapping[TopicPartition, PartitionStateZnode]) -> None:
        """New partitions' state znodes (all or none), at version 0."""
        if not decided:
            return
        ops: list[Op] = [
            ("create", znodes.partition_state_path(*tp), s.to_json(), False, False)
            for tp, s in decided.items()
        ]
        try:
            await self.commit(ops)
        except NodeExistsError as e:
            for tp in decided:
                await self.read_state(tp)
            raise ConflictingWriteError(str(e)) from e
        for tp, s in decided.items():
            self.context.states[tp] = s
            self.context.state_versions[tp] = 0

    async def write_topic(self, topic: TopicAssignment, epoch_claim: Op | None = None) -> None:
        """A conditional write of a topic znode, with ``epoch_claim`` (one epoch from
        ``allocate_epochs(1)``, for its topic epoch) in the same transaction."""
        name = topic.topic
        ops: list[Op] = [("set", topic.path, topic.to_json(), self.context.topic_versions[name])]
        if epoch_claim is not None:
            ops.append(epoch_claim)
        try:
            results = await self.commit(ops)
        except BadVersionError as e:
            await self.reload_topic(name)
            raise ConflictingWriteError(f"topic {name} changed under the controller") from e
        if epoch_claim is not None:
            self.claimed_epochs(1)
        self.context.topics[name] = topic
        self.context.topic_versions[name] = results[0].version

    async def create_partitions(
        self, name: str, made: Mapping[TopicPartition, PartitionZnode], epoch_claim: Op
    ) -> None:
        """New partition znodes, with the claim of their epochs in the same transaction."""
        await self.store.ensure_path(znodes.partitions_path(name))
        ops: list[Op] = [epoch_claim]
        ops += [("create", znodes.partition_path(*tp), pz.to_json(), False, False) for tp, pz in made.items()]
        try:
            await self.commit(ops)
        except (NodeExistsError, BadVersionError) as e:
            # Someone wrote there meanwhile (not a controller: it would be fenced): re-read.
            await self.reload_topic(name)
            raise ConflictingWriteError(str(e)) from e
        self.claimed_epochs(len(made))
        self.context.partition_znodes.update(made)

    async def create_topics(
        self,
        topics: Sequence[tuple[TopicAssignment, Mapping[TopicPartition, PartitionZnode],
                               Mapping[TopicPartition, PartitionStateZnode]]],
        epoch_claim: Op,
        epochs: int,
    ) -> None:
        """New topics whole, in one transaction with the claim of their ``epochs``: each
        topic znode (conditional on the version read: its counts and topic epoch), its
        partitions directory, partition znodes and states. Against ZooKeeper a transaction
        is a log write, so creating 10^5 topics one transaction each spends most of its
        time there (KIP-526 bench)."""
        ctx = self.context
        ops: list[Op] = [epoch_claim]
        where: list[int] = []
        for topic, made, states in topics:
            where.append(len(ops))
            ops.append(("set", topic.path, topic.to_json(), ctx.topic_versions[topic.topic]))
            ops.append(("create", znodes.partitions_path(topic.topic), b"", False, False))
            ops += [("create", znodes.partition_path(*tp), pz.to_json(), False, False) for tp, pz in made.items()]
            ops += [("create", znodes.partition_state_path(*tp), st.to_json(), False, False)
                    for tp, st in states.items()]
        try:
            results = await self.commit(ops)
        except (NodeExistsError, NoNodeError, BadVersionError) as e:
            raise ConflictingWriteError(str(e)) from e
        self.claimed_epochs(epochs)
        for (topic, made, states), i in zip(topics, where, strict=True):
            ctx.topics[topic.topic] = topic
            ctx.topic_versions[topic.topic] = results[i].version
            ctx.partition_znodes.update(made)
            for tp, st in states.items():
                ctx.states[tp] = st
                ctx.state_versions[tp] = 0

    async def write_partitions(self, made: Mapping[TopicPartition, PartitionZnode]) -> None:
        """Rewrites partition znodes (KIP-253 marks; all or none). Only controllers write
        them, and a replaced one is fenced, so the write is not conditional."""
        if not made:
            return
        ops: list[Op] = [("set", znodes.partition_path(*tp), pz.to_json(), -1) for tp, pz in made.items()]
        try:
            await self.commit(ops)
        except NoNodeError as e:
            # Removed meanwhile (the topic deleted): read the topic again and decide again.
            await self.reload_topic(next(iter(made))[0])
            raise ConflictingWriteError(str(e)) from e
        self.context.partition_znodes.update(made)

    async def remove_partitions(self, topic: TopicAssignment, removed: list[int]) -> None:
        """KIP-253 removal, first step: the topic znode without ``removed`` (written at the
        version last read) and their state znodes, in one transaction. Their partition
        znodes stay until the brokers have dropped them (``delete_partition_znodes``)."""
        ctx = self.context
        name = topic.topic
        ops: list[Op] = [("set", topic.path, topic.to_json(), ctx.topic_versions[name])]
        ops += [
            ("delete", znodes.partition_state_path(name, p), -1)
            for p in removed
            if (name, p) in ctx.state_versions
        ]
        try:
            results = await self.commit(ops)
        except (BadVersionError, NoNodeError) as e:
            await self.reload_topic(name)
            raise ConflictingWriteError(f"topic {name} changed under the controller") from e
        ctx.topics[name] = topic
        ctx.topic_versions[name] = results[0].version

    async def delete_partition_znodes(self, name: str, partitions: list[int]) -> None:
        """KIP-253 removal, last step: the partition znodes (with any state znode left)."""
        for p in partitions:
            ops: list[Op] = []
            if await self.store.exists(znodes.partition_state_path(name, p)) is not None:
                ops.append(("delete", znodes.partition_state_path(name, p), -1))
            ops.append(("delete", znodes.partition_path(name, p), -1))
            try:
                await self.commit(ops)
            except NoNodeError:
                pass  # gone already (the topic was deleted meanwhile)

    async def delete_topic(self, name: str, partitions: list[int]) -> None:
        """A topic's znodes, its config and its ``/admin/delete_topics`` entry. The partitions'
        znodes go DELETE_CHUNK partitions to a transaction, the event loop let go between
        (one transaction of 9,000 partitions held every broker of the process for about a
        second); the topic's own znodes and its ``/admin/delete_topics`` entry go last, so a
        controller that dies in between leaves the topic queued for deletion, and its
        successor, which leaves a topic queued for deletion alone until then
        (``TopicManager.deleting``), deletes the rest."""
        ctx = self.context
        ops: list[Op] = []
        try:
            for n, p in enumerate(partitions, 1):
                if (name, p) in ctx.state_versions:
                    ops.append(("delete", znodes.partition_state_path(name, p), -1))
                if (name, p) in ctx.partition_znodes:
                    ops.append(("delete", znodes.partition_path(name, p), -1))
                if n % DELETE_CHUNK == 0 and ops:
                    await self.commit(ops)
                    ops = []
                    await asyncio.sleep(0)
        except StoreError as e:
            log.info("topic_delete_fallback", topic=name, reason=repr(e))
            await self._delete_topic_recursively(name)
            return
        topic_exists = await self.store.exists(znodes.topic_path(name)) is not None
        if topic_exists and await self.store.exists(znodes.partitions_path(name)) is not None:
            ops.append(("delete", znodes.partitions_path(name), -1))
        if topic_exists:
            ops.append(("delete", znodes.topic_path(name), -1))
        if await self.store.exists(znodes.topic_config_path(name)) is not None:
            ops.append(("delete", znodes.topic_config_path(name), -1))
        ops.append(("delete", znodes.delete_topic_path(name), -1))
        try:
            await self.commit(ops)
        except StoreError as e:
            # Something unexpected under the topic: remove what is there, piece by piece.
            log.info("topic_delete_fallback", topic=name, reason=repr(e))
            await self._delete_topic_recursively(name)

    async def _delete_topic_recursively(self, name: str) -> None:
        for path in (
            znodes.topic_path(name),
            znodes.topic_config_path(name),
            znodes.delete_topic_path(name),
        ):
            try:
                await self.store.delete(path, recursive=True)
            except NoNodeError:
                pass
