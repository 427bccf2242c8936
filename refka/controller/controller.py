"""The controller: one event queue, one consumer, over the metadata store.

Every broker runs a ``Controller``; the one that wins the election
(election.py) is active, the others only campaign. Watch callbacks, session
changes and broker requests (controlled shutdown, preferred election) become
events on one ``asyncio.Queue``; a single task handles them one at a time, so
the controller's state needs no locks. Each handler re-reads what it reacts to
from the store, setting the next (one-shot) watch as it reads.

What the active controller does:

- Election (failover): reads brokers, topics, partition znodes and states;
  writes what is missing (KIP-253 counts and KIP-232 epochs of topics a
  controller never saw, partitions left half-created); elects leaders for
  partitions whose leader is gone; sends a *full* LeaderAndIsr to every live
  broker (type 1, KIP-516: a broker drops partitions not in it) and
  UpdateMetadata to every live broker.
- Topic creation (``/brokers/topics`` children): partition epochs from the
  cluster-wide counter ``/partition_epoch`` (so a re-created topic gets new,
  larger epochs; the topic's topic_epoch comes from it too), partition and
  state znodes (leader = first live replica, ISR = live replicas,
  leader_epoch 0), LeaderAndIsr to the replicas, UpdateMetadata to all.
- Partition expansion (the topic znode's data grows), KIP-253 step 2: raise
  undeleted_partition_count in the topic znode; bump the leader epoch of every
  existing partition and send them LeaderAndIsr (with the new count), waiting
  (bounded) for the answers; create each new partition's znode with
  ``leaderEpochAfterCreation`` = the old partitions' epochs before the bump,
  and its state; LeaderAndIsr for the new partitions; UpdateMetadata. A
  controller that fails half way is continued by the next one: partitions
  without a partition znode are new.
- Topic deletion (``/admin/delete_topics`` children): UpdateMetadata with
  leader -2 for its partitions, StopReplica(delete) to every live replica,
  then the topic's znodes go. (Kafka waits for every replica to confirm before
  removing the znodes; refka does not: a replica on a dead broker keeps its
  log until that broker's next full LeaderAndIsr, which omits it.)
- Broker failure (``/brokers/ids`` children): partitions it led get a new
  leader from the ISR (first live ISR member in assignment order; unclean only
  with ``unclean.leader.election.enable``, broker or topic level), ISRs lose
  it, leader epochs go up; LeaderAndIsr to the remaining replicas,
  UpdateMetadata to all. With no eligible leader the partition is left with
  leader -1 and its ISR as it was (never empty), to be elected when a member
  returns. A broker that re-registers with a new epoch (czxid) is a failure
  and a start-up.
- Broker start-up: full UpdateMetadata to it (and the new broker list to the
  others), full LeaderAndIsr to it, elections for partitions it can lead.
- Controlled shutdown (``controlled_shutdown()``, called by the broker's
  ControlledShutdown handler): the broker's leaderships move to other ISR
  members, it leaves the ISRs it follows in (StopReplica without delete);
  returns the partitions it still leads.
- ISR changes: leaders write the ISR themselves and leave a sequential
  ``/isr_change_notification/isr_change_`` (see admin.py); the controller
  re-reads those states and broadcasts UpdateMetadata.
- Every write carries a check of ``/controller_epoch``'s version, so a
  controller that has been replaced cannot write; it resigns instead.

- Reassignment (AlterPartitionReassignments): reassignment.py, a mixin on
  this event queue.

Not yet: KIP-253 partition deletion (a smaller undeleted_partition_count; the
hook ``_on_partition_shrink`` logs it), automatic preferred-leader rebalancing.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from refka.protocol.errors import ErrorCode
from refka.protocol.messages.leader_and_isr import TYPE_FULL, TYPE_INCREMENTAL, LeaderAndIsr
from refka.protocol.messages.stop_replica import StopReplica
from refka.protocol.messages.update_metadata import SECURITY_PROTOCOLS, UpdateMetadata

from . import znodes
from .channel import Channel
from .election import ControllerElection
from .reassignment import ReassignmentMixin
from .state_machine import (
    PartitionStateMachine,
    PartitionStateName,
    ReplicaStateMachine,
    ReplicaStateName,
    elect_controlled_shutdown,
    elect_offline,
    elect_preferred,
    initial_state,
)
from .store import (
    BadVersionError,
    ConnectionClosedError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    StoreError,
    WatchedEvent,
)
from .znodes import LEADER_DURING_DELETE, NO_LEADER, PartitionStateZnode, PartitionZnode, TopicAssignment

log = structlog.get_logger("refka.controller")

TP = tuple[str, int]
P = PartitionStateName
R = ReplicaStateName
EPOCH_DURING_DELETE = -2  # StopReplica's leader_epoch when the topic is deleted (Kafka's)


@dataclass
class ControllerConfig:
    """The controller's settings, from Kafka's property names (``from_properties``)."""

    unclean_leader_election_enable: bool = False
    inter_broker_listener_name: str | None = None  # None: each broker's first endpoint
    expansion_ack_timeout: float = 10.0  # KIP-253: wait for LeaderAndIsr answers this long
    retry_backoff: float = 0.2

    @classmethod
    def from_properties(cls, props: Mapping[str, Any] | None) -> ControllerConfig:
        props = props or {}

        def flag(name: str, default: bool) -> bool:
            v = props.get(name, default)
            return v if isinstance(v, bool) else str(v).strip().lower() == "true"

        return cls(
            unclean_leader_election_enable=flag("unclean.leader.election.enable", False),
            inter_broker_listener_name=props.get("inter.broker.listener.name") or None,
        )


class ControllerFencedError(Exception):
    """Our controller epoch is no longer the current one: another controller took over."""


class _Retry(Exception):
    """The event could not be finished now (a conflicting write): handle it again soon."""


@dataclass
class _Batch:
    """Requests collected while handling one event, sent together at its end
    (LeaderAndIsr, then UpdateMetadata, then StopReplica, like Kafka's)."""

    leader_and_isr: dict[int, dict[TP, bool]] = field(
        default_factory=lambda: defaultdict(dict)
    )  # broker -> tp -> is_new
    full_leader_and_isr: set[int] = field(default_factory=set)
    update_metadata: set[TP] = field(default_factory=set)
    deleted: dict[TP, PartitionStateZnode] = field(default_factory=dict)
    update_metadata_all: bool = False
    update_metadata_full_to: set[int] = field(default_factory=set)
    update_metadata_brokers: bool = False  # live brokers changed: tell everyone
    stop_replica: dict[int, dict[TP, tuple[bool, int]]] = field(default_factory=lambda: defaultdict(dict))

    def add_leader_and_isr(self, brokers: Iterable[int], tp: TP, is_new: bool = False) -> None:
        for b in brokers:
            self.leader_and_isr[b][tp] = is_new


class Controller(ReassignmentMixin):
    """See the module docstring. ``channel``: a ControllerChannel (owned: stopped by ``stop()``)."""

    def __init__(
        self,
        store: MetadataStore,
        broker_id: int,
        channel: Channel,
        config: ControllerConfig | Mapping[str, Any] | None = None,
    ) -> None:
        self.store = store
        self.broker_id = broker_id
        self.channel = channel
        self.config = (
            config if isinstance(config, ControllerConfig) else ControllerConfig.from_properties(config)
        )
        self.election = ControllerElection(store, broker_id, self._on_elected, self._on_resigned)
        self._events: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._active = False
        self._reset()

    # ---- public ------------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        """True while this broker is the controller and has finished taking over."""
        return self._active

    @property
    def epoch(self) -> int:
        return self.election.epoch

    @property
    def metadata_epoch(self) -> int:
        """The controller_metadata_epoch the next UpdateMetadata broadcast will carry."""
        return self.election.metadata_epoch

    @property
    def active_controller_id(self) -> int:
        return self.election.active_controller_id

    async def start(self) -> None:
        for path in znodes.PERSISTENT_PATHS:
            await self.store.ensure_path(path)
        self._task = asyncio.get_running_loop().create_task(self._run())
        await self.election.start()

    async def stop(self) -> None:
        """Resigns (gives up /controller if held), stops the event loop and the channel."""
        await self.election.stop()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._resign()
        await self.channel.stop()

    async def sync(self) -> None:
        """Returns once every event queued before the call has been handled (tests, lab)."""
        fut = asyncio.get_running_loop().create_future()
        self._events.put_nowait(("sync", fut))
        await fut

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int = -1) -> tuple[ErrorCode, list[TP]]:
        """Moves leadership away from ``broker_id``; (error, partitions it still leads)."""
        fut = asyncio.get_running_loop().create_future()
        self._events.put_nowait(("controlled_shutdown", broker_id, broker_epoch, fut))
        return await fut  # type: ignore[no-any-return]

    async def elect_preferred_leaders(self, partitions: Iterable[TP] | None = None) -> dict[TP, ErrorCode]:
        """Preferred-replica election for ``partitions`` (all when None)."""
        fut = asyncio.get_running_loop().create_future()
        self._events.put_nowait(("elect_preferred", None if partitions is None else list(partitions), fut))
        return await fut  # type: ignore[no-any-return]

    async def elect_unclean_leaders(self, partitions: Iterable[TP] | None = None) -> dict[TP, ErrorCode]:
        """Unclean election (ElectLeaders type 1, KIP-460) for leaderless ``partitions`` (all when None):
        any live assigned replica may lead, in or out of the ISR."""
        fut = asyncio.get_running_loop().create_future()
        self._events.put_nowait(("elect_unclean", None if partitions is None else list(partitions), fut))
        return await fut  # type: ignore[no-any-return]

    def partition_state(self, topic: str, partition: int) -> PartitionStateZnode | None:
        """The controller's view of a partition (while active)."""
        return self.states.get((topic, partition))

    # ---- state -------------------------------------------------------------------------------

    def _reset(self) -> None:
        self.live: dict[int, znodes.BrokerInfo] = {}
        self.broker_epochs: dict[int, int] = {}
        self.topics: dict[str, TopicAssignment] = {}
        self.topic_versions: dict[str, int] = {}
        self.partition_znodes: dict[TP, PartitionZnode] = {}
        self.states: dict[TP, PartitionStateZnode] = {}
        self.state_versions: dict[TP, int] = {}
        self.shutting_down: set[int] = set()
        self._failed_pending: set[int] = set()
        self._started_pending: set[int] = set()
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.max_partition_epoch = 0
        self._partition_epoch_version = -1
        self._epoch_zk_version = -1
        self.pstates = PartitionStateMachine()
        self.rstates = ReplicaStateMachine()

    def _replicas(self, tp: TP) -> list[int]:
        t = self.topics.get(tp[0])
        return list(t.partitions.get(tp[1], [])) if t else []

    def _partitions_of(self, topic: str) -> list[TP]:
        t = self.topics.get(topic)
        return [(topic, p) for p in sorted(t.partitions)] if t else []

    def _all_partitions(self) -> list[TP]:
        return [tp for name in sorted(self.topics) for tp in self._partitions_of(name)]

    def _unclean(self, topic: str) -> bool:
        v = self.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        return self.config.unclean_leader_election_enable if v is None else v.lower() == "true"

    # ---- event plumbing ----------------------------------------------------------------------

    def _on_elected(self, epoch: int) -> None:
        self._events.put_nowait(("elected", epoch))

    def _on_resigned(self) -> None:
        self._events.put_nowait(("resigned",))

    # One watcher object per kind, so setting it twice on a path fires once.
    def _watch_brokers(self, event: WatchedEvent) -> None:
        self._events.put_nowait(("brokers",))

    def _watch_topics(self, event: WatchedEvent) -> None:
        self._events.put_nowait(("topics",))

    def _watch_topic(self, event: WatchedEvent) -> None:
        self._events.put_nowait(("topic_changed", event.path.rsplit("/", 1)[1]))

    def _watch_deletions(self, event: WatchedEvent) -> None:
        self._events.put_nowait(("delete_topics",))

    def _watch_isr_changes(self, event: WatchedEvent) -> None:
        self._events.put_nowait(("isr_change",))

    async def _run(self) -> None:
        while True:
            event = await self._events.get()
            try:
                await self._dispatch(event)
            except asyncio.CancelledError:
                raise
            except Exception:  # the loop must outlive any bug in one event
                log.exception("controller_event_loop_error", kind=event[0])

    async def _dispatch(self, event: tuple[Any, ...]) -> None:
        kind = event[0]
        try:
            await self._handle(event)
        except asyncio.CancelledError:
            raise
        except ControllerFencedError:
            log.warning("controller_fenced", broker=self.broker_id, epoch=self.epoch)
            self._resign()
            self.election.fenced()
        except ConnectionClosedError:
            self._fail_request(event, ErrorCode.NOT_CONTROLLER)
        except (_Retry, StoreError) as e:
            log.info("controller_event_retry", kind=kind, reason=repr(e))
            if self._active and kind not in ("sync",):
                loop = asyncio.get_running_loop()
                loop.call_later(self.config.retry_backoff, self._events.put_nowait, event)
            else:
                self._fail_request(event, ErrorCode.NOT_CONTROLLER)
        except Exception:
            log.exception("controller_event_failed", kind=kind)
            self._fail_request(event, ErrorCode.UNKNOWN_SERVER_ERROR)

    def _fail_request(self, event: tuple[Any, ...], error: ErrorCode) -> None:
        fut = event[-1] if event and isinstance(event[-1], asyncio.Future) else None
        if fut is None or fut.done():
            return
        if event[0] == "controlled_shutdown":
            fut.set_result((error, []))
        elif event[0] in ("elect_preferred", "elect_unclean", "reassign"):
            fut.set_result({})
        else:
            fut.set_result(None)

    async def _handle(self, event: tuple[Any, ...]) -> None:
        kind = event[0]
        if kind == "sync":
            event[1].set_result(None)
            return
        if kind == "elected":
            if event[1] == self.election.epoch:
                await self._on_failover()
            return
        if kind == "resigned":
            self._resign()
            return
        if not self._active:
            self._fail_request(event, ErrorCode.NOT_CONTROLLER)
            return
        if kind == "brokers":
            await self._on_broker_change()
        elif kind == "topics":
            await self._on_topic_change()
        elif kind == "topic_changed":
            await self._on_topic_data_change(event[1])
        elif kind == "delete_topics":
            await self._on_topic_deletion()
        elif kind == "isr_change":
            await self._on_isr_change()
        elif kind == "controlled_shutdown":
            shutdown = await self._on_controlled_shutdown(event[1], event[2])
            if not event[3].done():
                event[3].set_result(shutdown)
        elif kind == "elect_preferred":
            elected = await self._on_elect_preferred(event[1])
            if not event[2].done():
                event[2].set_result(elected)
        elif kind == "elect_unclean":
            elected = await self._on_elect_unclean(event[1])
            if not event[2].done():
                event[2].set_result(elected)
        elif kind == "reassign":
            reassigned = await self._on_reassign(event[1], event[2])
            if not event[3].done():
                event[3].set_result(reassigned)

    # ---- fenced writes -----------------------------------------------------------------------

    async def _commit(self, ops: list[tuple[Any, ...]]) -> list[Any]:
        """Applies ``ops`` after a check that our controller epoch still stands."""
        if not self._active or self._epoch_zk_version < 0:
            raise ControllerFencedError()  # resigned while handling this event
        txn = self.store.transaction().check(znodes.CONTROLLER_EPOCH, self._epoch_zk_version)
        for op in ops:
            txn.ops.append(op)
        try:
            results = await txn.commit()
        except BadVersionError as e:
            if e.index == 0:
                raise ControllerFencedError() from e
            raise
        return results[1:]

    async def _allocate_epochs(self, n: int) -> tuple[int, tuple[Any, ...]]:
        """``n`` new epochs from ``/partition_epoch``: (the first, the op that claims them)."""
        first = self.max_partition_epoch + 1
        data = znodes.encode_int(self.max_partition_epoch + n)
        if self._partition_epoch_version < 0:
            return first, ("create", znodes.PARTITION_EPOCH, data, False, False)
        return first, ("set", znodes.PARTITION_EPOCH, data, self._partition_epoch_version)

    def _claimed_epochs(self, n: int) -> None:
        self.max_partition_epoch += n
        self._partition_epoch_version += 1

    async def _read_partition_epoch(self) -> None:
        try:
            data, stat = await self.store.get(znodes.PARTITION_EPOCH)
            self.max_partition_epoch, self._partition_epoch_version = znodes.decode_int(data), stat.version
        except NoNodeError:
            self.max_partition_epoch, self._partition_epoch_version = 0, -1

    async def _write_states(self, new: Mapping[TP, PartitionStateZnode]) -> None:
        """Conditional writes of partition states (all or none); a conflict re-reads them and retries."""
        if not new:
            return
        ops = [
            ("set", znodes.partition_state_path(*tp), s.to_json(), self.state_versions[tp])
            for tp, s in new.items()
        ]
        try:
            results = await self._commit(ops)
        except BadVersionError as e:
            # A leader changed the ISR meanwhile: take its state and decide again.
            if e.index is not None and e.index > 0:
                tp = list(new)[e.index - 1]
                await self._read_state(tp)
            raise _Retry(f"partition state changed under the controller: {e.path}") from e
        for (tp, s), stat in zip(new.items(), results, strict=True):
            self.states[tp] = s
            self.state_versions[tp] = stat.version

    async def _read_state(self, tp: TP) -> PartitionStateZnode | None:
        try:
            data, stat = await self.store.get(znodes.partition_state_path(*tp))
        except NoNodeError:
            self.states.pop(tp, None)
            self.state_versions.pop(tp, None)
            return None
        s = PartitionStateZnode.from_json(data)
        self.states[tp] = s
        self.state_versions[tp] = stat.version
        return s

    # ---- election / resignation ----------------------------------------------------------------

    def _resign(self) -> None:
        if self._active:
            log.info("controller_resigned", broker=self.broker_id)
        self._active = False
        self._reset()
        self.channel.update_brokers({})

    async def _on_failover(self) -> None:
        self._reset()
        epoch = self.election.epoch
        self._epoch_zk_version = self.election.epoch_zk_version
        log.info("controller_failover_started", broker=self.broker_id, epoch=epoch)
        await self._read_partition_epoch()
        found = await self._read_brokers()
        self.live = {b: info for b, (info, _) in found.items()}
        self.broker_epochs = {b: e for b, (_, e) in found.items()}
        self.channel.update_brokers(self.live)
        names = await self.store.get_children(znodes.BROKER_TOPICS, watch=self._watch_topics)
        for name in names:
            await self._load_topic(name)
        self._active = True
        # Partition and replica states from what the store says.
        for tp in self._all_partitions():
            s = self.states.get(tp)
            if s is None:
                continue
            for r in self._replicas(tp):
                self.rstates.transition((*tp, r), R.NEW)
                self.rstates.transition((*tp, r), R.ONLINE if r in self.live else R.OFFLINE)
            self.pstates.transition(tp, P.NEW)
            self.pstates.transition(tp, P.ONLINE if s.leader in self.live else P.OFFLINE)
        batch = _Batch()
        # Finish what earlier controllers did not: counts, epochs, half-made partitions.
        for name in sorted(self.topics):
            await self._complete_topic(name, batch)
        await self._elect_offline(self.pstates.keys_in(P.OFFLINE), batch)
        # Replicas on brokers that are not registered leave the ISRs of partitions whose
        # leader is alive too (Kafka's removeReplicasFromIsr at controller start-up).
        await self._on_brokers_failed(set(), batch, set())
        batch.full_leader_and_isr |= set(self.live)
        batch.update_metadata_all = True
        batch.update_metadata_full_to |= set(self.live)
        await self._send(batch)
        log.info(
            "controller_failover_done",
            broker=self.broker_id,
            epoch=epoch,
            brokers=sorted(self.live),
            topics=len(self.topics),
            partitions=len(self.states),
        )
        for kind in ("delete_topics", "isr_change"):
            self._events.put_nowait((kind,))

    async def _read_brokers(self) -> dict[int, tuple[znodes.BrokerInfo, int]]:
        children = await self.store.get_children(znodes.BROKER_IDS, watch=self._watch_brokers)
        found: dict[int, tuple[znodes.BrokerInfo, int]] = {}
        for c in children:
            try:
                bid = int(c)
                data, stat = await self.store.get(znodes.broker_path(bid))
            except (ValueError, NoNodeError):
                continue
            found[bid] = (znodes.BrokerInfo.from_json(bid, data), stat.czxid)
        return found

    async def _load_topic(self, name: str) -> None:
        """Reads a topic znode (setting its data watch), its partition znodes and states."""
        try:
            data, stat = await self.store.get(znodes.topic_path(name), watch=self._watch_topic)
        except NoNodeError:
            return
        topic = TopicAssignment.from_json(name, data)
        self.topics[name] = topic
        self.topic_versions[name] = stat.version
        try:
            cdata, _ = await self.store.get(znodes.topic_config_path(name))
            self.topic_configs[name] = znodes.TopicConfig.from_json(cdata).config
        except NoNodeError:
            self.topic_configs[name] = {}
        for p in sorted(topic.partitions):
            tp = (name, p)
            try:
                pdata, _ = await self.store.get(znodes.partition_path(name, p))
                self.partition_znodes[tp] = PartitionZnode.from_json(pdata)
            except NoNodeError:
                continue
            await self._read_state(tp)

    # ---- topics: creation, completion, expansion -------------------------------------------------

    async def _on_topic_change(self) -> None:
        names = set(await self.store.get_children(znodes.BROKER_TOPICS, watch=self._watch_topics))
        batch = _Batch()
        for name in sorted(names - set(self.topics)):
            await self._load_topic(name)
            if name in self.topics:
                log.info("topic_created", topic=name, partitions=len(self.topics[name].partitions))
        for name in sorted(names & set(self.topics)):
            if self._incomplete(name):  # new, or left unfinished by a retried event
                await self._complete_topic(name, batch)
        for name in sorted(set(self.topics) - names):
            # Removed behind the controller's back (not through /admin/delete_topics).
            log.warning("topic_znode_vanished", topic=name)
            self._forget_topic(name, batch)
        await self._send(batch)

    async def _on_topic_data_change(self, name: str) -> None:
        old = self.topics.get(name)
        try:
            data, stat = await self.store.get(znodes.topic_path(name), watch=self._watch_topic)
        except NoNodeError:
            return  # deleted: the children watch handles it
        topic = TopicAssignment.from_json(name, data)
        if old is None:
            return
        if topic.topic_id != old.topic_id:
            log.warning("topic_replaced", topic=name)
        self.topics[name] = topic
        self.topic_versions[name] = stat.version
        if 0 <= topic.undeleted_partition_count < len(old.partitions) and len(topic.partitions) <= len(
            old.partitions
        ):
            await self._on_partition_shrink(name, topic.undeleted_partition_count)
            return
        if len(topic.partitions) > len(old.partitions) or any(
            (name, p) not in self.partition_znodes for p in topic.partitions
        ):
            batch = _Batch()
            await self._complete_topic(name, batch)
            await self._send(batch)

    def _incomplete(self, name: str) -> bool:
        t = self.topics[name]
        if t.topic_epoch < 0 or t.initial_partition_count < 0 or t.undeleted_partition_count < 0:
            return True
        return any(
            (name, p) not in self.partition_znodes or (name, p) not in self.states for p in t.partitions
        )

    async def _on_partition_shrink(self, name: str, undeleted: int) -> None:
        """KIP-253 step 3 (partition deletion): not implemented yet."""
        log.warning("partition_deletion_not_supported", topic=name, undeleted_partition_count=undeleted)

    async def _complete_topic(self, name: str, batch: _Batch) -> None:
        """Brings a topic's znodes to what the assignment says: KIP-253 counts and
        the topic epoch, then creation (a new topic) or expansion (new partitions
        of an existing topic), finishing what an earlier controller started."""
        topic = self.topics[name]
        existing = [p for p in sorted(topic.partitions) if (name, p) in self.partition_znodes]
        new = [p for p in sorted(topic.partitions) if (name, p) not in self.partition_znodes]
        expansion = bool(existing) and bool(new)

        # The topic znode: counts (KIP-253 change 1 and step 2) and the topic epoch.
        changed = replace(topic, partitions=dict(topic.partitions))
        if changed.initial_partition_count < 0:
            changed.initial_partition_count = len(existing) if expansion else len(topic.partitions)
        if changed.undeleted_partition_count < len(topic.partitions) and not any(
            self.partition_znodes[(name, p)].marked_for_deletion for p in existing
        ):
            changed.undeleted_partition_count = len(topic.partitions)
        claim: tuple[Any, ...] | None = None
        if changed.topic_epoch < 0:
            changed.topic_epoch, claim = await self._allocate_epochs(1)
        if changed != topic:
            ops: list[tuple[Any, ...]] = [("set", changed.path, changed.to_json(), self.topic_versions[name])]
            if claim is not None:
                ops.append(claim)
            try:
                results = await self._commit(ops)
            except BadVersionError as e:
                await self._conflict(name)
                raise _Retry(f"topic {name} changed under the controller") from e
            if claim is not None:
                self._claimed_epochs(1)
            self.topics[name] = topic = changed
            self.topic_versions[name] = results[0].version

        # Partitions with a znode but no state: a creation cut short.
        for p in existing:
            tp = (name, p)
            if tp not in self.states:
                await self._create_states([tp], batch)

        if not new:
            return
        after_creation: dict[int, int] = {}
        if expansion:
            after_creation = await self._bump_for_expansion(name, existing, batch)
        await self._create_partitions(name, new, after_creation, batch)

    async def _bump_for_expansion(self, name: str, existing: list[int], batch: _Batch) -> dict[int, int]:
        """KIP-253 step 2: every existing partition's leader epoch + 1, LeaderAndIsr
        with the new undeleted_partition_count, and wait (bounded) for the answers.
        Returns the epochs *before* the bump, for leaderEpochAfterCreation."""
        before = {p: self.states[(name, p)].leader_epoch for p in existing if (name, p) in self.states}
        epoch = self.election.epoch
        bumped = {
            (name, p): replace(self.states[(name, p)], leader_epoch=before[p] + 1, controller_epoch=epoch)
            for p in before
        }
        await self._write_states(bumped)
        log.info("partition_expansion_epochs_bumped", topic=name, before=before)
        now = _Batch()
        for tp in bumped:
            now.add_leader_and_isr([r for r in self._replicas(tp) if r in self.live], tp)
        futures = self._send_leader_and_isr(now)
        if futures:
            done, pending = await asyncio.wait(futures, timeout=self.config.expansion_ack_timeout)
            if pending:
                log.warning("partition_expansion_ack_timeout", topic=name, unanswered=len(pending))
        batch.update_metadata |= set(bumped)
        return before

    async def _create_partitions(
        self, name: str, partitions: list[int], after_creation: dict[int, int], batch: _Batch
    ) -> None:
        """Partition znodes (epochs from the counter) and states for new partitions."""
        first, claim = await self._allocate_epochs(len(partitions))
        await self.store.ensure_path(znodes.partitions_path(name))
        ops: list[tuple[Any, ...]] = [claim]
        made: dict[TP, PartitionZnode] = {}
        for i, p in enumerate(partitions):
            pz = PartitionZnode(partition_epoch=first + i, leader_epoch_after_creation=dict(after_creation))
            made[(name, p)] = pz
            ops.append(("create", znodes.partition_path(name, p), pz.to_json(), False, False))
        try:
            await self._commit(ops)
        except (NodeExistsError, BadVersionError) as e:
            # Someone wrote there meanwhile (not a controller: it would be fenced): re-read.
            await self._conflict(name)
            raise _Retry(str(e)) from e
        self._claimed_epochs(len(partitions))
        self.partition_znodes.update(made)
        log.info(
            "partitions_created",
            topic=name,
            partitions=partitions,
            partition_epochs=[first + i for i in range(len(partitions))],
            leader_epoch_after_creation=after_creation or None,
        )
        await self._create_states(list(made), batch)

    async def _conflict(self, name: str) -> None:
        """After a conditional write lost: re-read the topic and the epoch counter."""
        await self._read_partition_epoch()
        await self._load_topic(name)

    async def _create_states(self, tps: list[TP], batch: _Batch) -> None:
        """New -> Online: the first live replica leads, at leader_epoch 0."""
        epoch = self.election.epoch
        ops: list[tuple[Any, ...]] = []
        decided: dict[TP, PartitionStateZnode] = {}
        for tp in tps:
            if self.pstates.state(tp) is P.NON_EXISTENT:
                self.pstates.transition(tp, P.NEW)
            for r in self._replicas(tp):
                if self.rstates.state((*tp, r)) is R.NON_EXISTENT:
                    self.rstates.transition((*tp, r), R.NEW)
            s = initial_state(self._replicas(tp), self.live, epoch)
            if s is None:
                log.warning("partition_has_no_live_replica", topic=tp[0], partition=tp[1])
                continue
            decided[tp] = s
            ops.append(("create", znodes.partition_state_path(*tp), s.to_json(), False, False))
        if not ops:
            return
        try:
            await self._commit(ops)
        except NodeExistsError as e:
            for tp in decided:
                await self._read_state(tp)
            raise _Retry(str(e)) from e
        for tp, s in decided.items():
            self.states[tp] = s
            self.state_versions[tp] = 0
            self.pstates.transition(tp, P.ONLINE)
            for r in self._replicas(tp):
                self.rstates.transition((*tp, r), R.ONLINE if r in self.live else R.OFFLINE)
            batch.add_leader_and_isr([r for r in self._replicas(tp) if r in self.live], tp, is_new=True)
            batch.update_metadata.add(tp)
            log.info(
                "leader_elected", topic=tp[0], partition=tp[1], leader=s.leader, leader_epoch=s.leader_epoch
            )

    def _forget_topic(self, name: str, batch: _Batch) -> None:
        for tp in self._partitions_of(name):
            s = self.states.pop(tp, None)
            if s is not None:
                batch.deleted[tp] = s
                batch.update_metadata.add(tp)
            self.state_versions.pop(tp, None)
            self.partition_znodes.pop(tp, None)
            self.pstates.forget(tp)
            for r in self._replicas(tp):
                self.rstates.forget((*tp, r))
        self.topics.pop(name, None)
        self.topic_versions.pop(name, None)
        self.topic_configs.pop(name, None)

    # ---- topic deletion ----------------------------------------------------------------------------

    async def _on_topic_deletion(self) -> None:
        names = await self.store.get_children(znodes.DELETE_TOPICS, watch=self._watch_deletions)
        batch = _Batch()
        for name in sorted(names):
            if name not in self.topics:
                await self._delete_znodes(name, [])
                continue
            tps = self._partitions_of(name)
            for tp in tps:
                if self.pstates.state(tp) is not P.NON_EXISTENT:
                    if self.pstates.state(tp) is not P.OFFLINE:
                        self.pstates.transition(tp, P.OFFLINE)
                    self.pstates.transition(tp, P.NON_EXISTENT)
                for r in self._replicas(tp):
                    key = (*tp, r)
                    if self.rstates.state(key) is R.NON_EXISTENT:
                        continue
                    if self.rstates.state(key) is not R.OFFLINE:
                        self.rstates.transition(key, R.OFFLINE)
                    self.rstates.transition(key, R.DELETION_STARTED)
                    if r in self.live:
                        batch.stop_replica[r][tp] = (True, EPOCH_DURING_DELETE)
                    # Not waiting for the replica's answer (see the module docstring).
                    self.rstates.transition(key, R.DELETION_SUCCESSFUL)
                    self.rstates.transition(key, R.NON_EXISTENT)
            await self._delete_znodes(name, [p for _, p in tps])
            self._forget_topic(name, batch)
            log.info("topic_deleted", topic=name, partitions=len(tps))
        await self._send(batch)

    async def _delete_znodes(self, name: str, partitions: list[int]) -> None:
        ops: list[tuple[Any, ...]] = []
        for p in partitions:
            if (name, p) in self.state_versions:
                ops.append(("delete", znodes.partition_state_path(name, p), -1))
            if (name, p) in self.partition_znodes:
                ops.append(("delete", znodes.partition_path(name, p), -1))
        topic_exists = await self.store.exists(znodes.topic_path(name)) is not None
        if topic_exists and await self.store.exists(znodes.partitions_path(name)) is not None:
            ops.append(("delete", znodes.partitions_path(name), -1))
        if topic_exists:
            ops.append(("delete", znodes.topic_path(name), -1))
        if await self.store.exists(znodes.topic_config_path(name)) is not None:
            ops.append(("delete", znodes.topic_config_path(name), -1))
        ops.append(("delete", znodes.delete_topic_path(name), -1))
        try:
            await self._commit(ops)
        except StoreError as e:
            # Something unexpected under the topic: remove what is there, piece by piece.
            log.info("topic_delete_fallback", topic=name, reason=repr(e))
            for path in (
                znodes.topic_path(name),
                znodes.topic_config_path(name),
                znodes.delete_topic_path(name),
            ):
                try:
                    await self.store.delete(path, recursive=True)
                except NoNodeError:
                    pass

    # ---- brokers ----------------------------------------------------------------------------------

    async def _on_broker_change(self) -> None:
        found = await self._read_brokers()
        dead = {b for b in self.live if b not in found or found[b][1] != self.broker_epochs.get(b)}
        started = {b for b in found if b not in self.live or b in dead}
        for b in dead:
            self.live.pop(b, None)
            self.broker_epochs.pop(b, None)
        for b in started:
            self.live[b] = found[b][0]
            self.broker_epochs[b] = found[b][1]
        if dead or started:
            self.channel.update_brokers(self.live)
            if dead:
                log.info("brokers_failed", brokers=sorted(dead))
            if started:
                log.info("brokers_started", brokers=sorted(started))
        # Kept until handled: a retried event (after a conflicting write) still knows.
        self._failed_pending |= dead
        self._started_pending |= started
        if not self._failed_pending and not self._started_pending:
            return
        batch = _Batch()
        batch.update_metadata_brokers = True
        if self._failed_pending:
            # A failed broker that is live again re-registered (a bounce): it is
            # not a candidate in these elections, and it leaves the ISRs.
            await self._on_brokers_failed(self._failed_pending, batch, self._failed_pending & set(self.live))
        if self._started_pending:
            await self._on_brokers_started(self._started_pending & set(self.live), batch)
        self._failed_pending.clear()
        self._started_pending.clear()
        await self._send(batch)

    async def _on_brokers_failed(self, dead: set[int], batch: _Batch, bounced: set[int]) -> None:
        """Partitions whose leader is not a live candidate get one from the ISR;
        ISRs keep only live candidates. Worked out from the states, not from
        ``dead`` alone, so handling it twice changes nothing the second time."""
        self.shutting_down -= dead
        candidates = {b for b in self.live if b not in bounced}
        epoch = self.election.epoch
        new: dict[TP, PartitionStateZnode] = {}
        for tp in self._all_partitions():
            replicas = self._replicas(tp)
            for r in replicas:
                key = (*tp, r)
                if r not in candidates and self.rstates.state(key) in (R.NEW, R.ONLINE, R.OFFLINE):
                    self.rstates.transition(key, R.OFFLINE)
            s = self.states.get(tp)
            if s is None:
                continue
            if s.leader not in candidates:
                if self.pstates.state(tp) in (P.NEW, P.ONLINE, P.OFFLINE):
                    self.pstates.transition(tp, P.OFFLINE)
                e = elect_offline(s, replicas, candidates, epoch, self._unclean(tp[0]))
                if e.state is not None:
                    new[tp] = e.state
                    if e.unclean:
                        log.warning(
                            "unclean_leader_elected", topic=tp[0], partition=tp[1], leader=e.state.leader
                        )
                    continue
                # No eligible leader: none, and the ISR as it was (never empty) for when one returns.
                isr = tuple(r for r in s.isr if r in candidates) or s.isr
                if s.leader != NO_LEADER or isr != s.isr:
                    new[tp] = PartitionStateZnode(
                        NO_LEADER, s.leader_epoch + 1, isr, epoch, s.leader_recovery_state
                    )
                    log.warning("partition_offline", topic=tp[0], partition=tp[1], reason=e.reason)
            elif any(r not in candidates for r in s.isr):
                isr = tuple(r for r in s.isr if r in candidates)
                new[tp] = PartitionStateZnode(s.leader, s.leader_epoch + 1, isr, epoch, s.leader_recovery_state)
        await self._write_states(new)
        for tp, s in new.items():
            if s.leader != NO_LEADER and self.pstates.state(tp) is not P.ONLINE:
                self.pstates.transition(tp, P.ONLINE)
            batch.add_leader_and_isr([r for r in self._replicas(tp) if r in self.live], tp)
            batch.update_metadata.add(tp)
            if s.leader != NO_LEADER:
                log.info(
                    "leader_elected",
                    topic=tp[0],
                    partition=tp[1],
                    leader=s.leader,
                    leader_epoch=s.leader_epoch,
                )
        for tp in self._all_partitions():
            if any(r in dead for r in self._replicas(tp)):
                batch.update_metadata.add(tp)  # offline_replicas changed

    async def _on_brokers_started(self, started: set[int], batch: _Batch) -> None:
        batch.update_metadata_full_to |= started
        batch.full_leader_and_isr |= started
        for tp in self._all_partitions():
            for r in self._replicas(tp):
                if r in started:
                    key = (*tp, r)
                    if self.rstates.state(key) is R.NON_EXISTENT:
                        self.rstates.transition(key, R.NEW)
                    self.rstates.transition(key, R.ONLINE)
        offline = [
            tp
            for tp in self._all_partitions()
            if tp in self.states
            and self.states[tp].leader not in self.live
            and any(r in started for r in self._replicas(tp))
        ]
        await self._elect_offline(offline, batch)
        # Partitions that never got a state (no live replica at creation).
        waiting = [
            tp for tp in self._all_partitions() if tp not in self.states and tp in self.partition_znodes
        ]
        if waiting:
            await self._create_states(waiting, batch)

    async def _elect_offline(self, tps: list[TP], batch: _Batch) -> None:
        epoch = self.election.epoch
        new: dict[TP, PartitionStateZnode] = {}
        for tp in tps:
            s = self.states[tp]
            e = elect_offline(s, self._replicas(tp), self.live, epoch, self._unclean(tp[0]))
            if e.state is not None:
                new[tp] = e.state
            else:
                log.warning("partition_offline", topic=tp[0], partition=tp[1], reason=e.reason)
        await self._write_states(new)
        for tp, s in new.items():
            if self.pstates.state(tp) is not P.ONLINE:
                if self.pstates.state(tp) is P.NON_EXISTENT:
                    self.pstates.transition(tp, P.NEW)
                self.pstates.transition(tp, P.ONLINE)
            batch.add_leader_and_isr([r for r in self._replicas(tp) if r in self.live], tp)
            batch.update_metadata.add(tp)
            log.info(
                "leader_elected", topic=tp[0], partition=tp[1], leader=s.leader, leader_epoch=s.leader_epoch
            )

    # ---- controlled shutdown, preferred election, ISR changes ------------------------------------------

    async def _on_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[TP]]:
        if broker_id not in self.live:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        if broker_epoch != -1 and broker_epoch != self.broker_epochs.get(broker_id):
            return ErrorCode.STALE_BROKER_EPOCH, []
        self.shutting_down.add(broker_id)
        log.info("controlled_shutdown_started", broker=broker_id)
        epoch = self.election.epoch
        new: dict[TP, PartitionStateZnode] = {}
        stop: list[TP] = []
        for tp in self._all_partitions():
            replicas = self._replicas(tp)
            s = self.states.get(tp)
            if s is None or broker_id not in replicas or len(replicas) < 2:
                continue
            if s.leader == broker_id:
                e = elect_controlled_shutdown(s, replicas, self.live, self.shutting_down, epoch)
                if e.state is not None:
                    new[tp] = e.state
            elif broker_id in s.isr:
                new[tp] = PartitionStateZnode(
                    s.leader,
                    s.leader_epoch + 1,
                    tuple(r for r in s.isr if r != broker_id),
                    epoch,
                    s.leader_recovery_state,
                )
                stop.append(tp)
        await self._write_states(new)
        batch = _Batch()
        for tp in new:
            # The broker follows where it led; where it followed, it stops (StopReplica).
            targets = [
                r for r in self._replicas(tp) if r in self.live and not (r == broker_id and tp in stop)
            ]
            batch.add_leader_and_isr(targets, tp)
            batch.update_metadata.add(tp)
        for tp in stop:
            batch.stop_replica[broker_id][tp] = (False, new[tp].leader_epoch)
        await self._send(batch)
        # As Kafka's doControlledShutdown: only replicated partitions count as remaining
        # (one with a single replica cannot move, and the broker must not wait for it).
        remaining = [
            tp
            for tp in self._all_partitions()
            if tp in self.states and self.states[tp].leader == broker_id and len(self._replicas(tp)) > 1
        ]
        log.info("controlled_shutdown_done", broker=broker_id, moved=len(new), remaining=len(remaining))
        return ErrorCode.NONE, remaining

    async def _on_elect_preferred(self, tps: list[TP] | None) -> dict[TP, ErrorCode]:
        epoch = self.election.epoch
        out: dict[TP, ErrorCode] = {}
        new: dict[TP, PartitionStateZnode] = {}
        for tp in tps if tps is not None else self._all_partitions():
            s = self.states.get(tp)
            if s is None:
                out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            e = elect_preferred(s, self._replicas(tp), self.live, epoch)
            if e.state is None:
                led = s.leader == self._replicas(tp)[0]
                out[tp] = ErrorCode.ELECTION_NOT_NEEDED if led else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
                continue
            new[tp] = e.state
            out[tp] = ErrorCode.NONE
        await self._write_states(new)
        batch = _Batch()
        for tp in new:
            batch.add_leader_and_isr([r for r in self._replicas(tp) if r in self.live], tp)
            batch.update_metadata.add(tp)
        await self._send(batch)
        return out

    async def _on_elect_unclean(self, tps: list[TP] | None) -> dict[TP, ErrorCode]:
        """As Kafka's KafkaController.electLeaders with ElectionType.UNCLEAN: a partition
        whose leader is live needs no election; the others get the offline election with
        unclean allowed (ELIGIBLE_LEADERS_NOT_AVAILABLE when no assigned replica is live)."""
        out: dict[TP, ErrorCode] = {}
        leaderless: list[TP] = []
        for tp in tps if tps is not None else self._all_partitions():
            s = self.states.get(tp)
            if s is None:
                out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif s.leader != NO_LEADER and s.leader in self.live:
                out[tp] = ErrorCode.ELECTION_NOT_NEEDED
            else:
                leaderless.append(tp)
        epoch = self.election.epoch
        new: dict[TP, PartitionStateZnode] = {}
        for tp in leaderless:
            e = elect_offline(self.states[tp], self._replicas(tp), self.live, epoch, True)
            if e.state is None:
                out[tp] = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                continue
            new[tp] = e.state
            out[tp] = ErrorCode.NONE
        await self._write_states(new)
        batch = _Batch()
        for tp, s in new.items():
            if self.pstates.state(tp) is not P.ONLINE:
                if self.pstates.state(tp) is P.NON_EXISTENT:
                    self.pstates.transition(tp, P.NEW)
                self.pstates.transition(tp, P.ONLINE)
            batch.add_leader_and_isr([r for r in self._replicas(tp) if r in self.live], tp)
            batch.update_metadata.add(tp)
            log.info("leader_elected", topic=tp[0], partition=tp[1], leader=s.leader,
                     leader_epoch=s.leader_epoch, unclean=True)
        await self._send(batch)
        return out

    async def _on_isr_change(self) -> None:
        children = await self.store.get_children(znodes.ISR_CHANGE, watch=self._watch_isr_changes)
        changed: set[TP] = set()
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
        batch = _Batch()
        stale = False
        for tp in sorted(changed):
            if tp[0] in self.topics and (s := await self._read_state(tp)) is not None:
                batch.update_metadata.add(tp)
                stale = stale or any(r not in self.live for r in s.isr)
        if changed:
            log.info("isr_changes_propagated", partitions=len(batch.update_metadata))
        # Reassignments whose targets all joined the ISR complete (all after a failover).
        await self._complete_reassignments(None, batch)
        if stale:
            # A leader re-added a broker that has gone meanwhile (e.g. one that followed until
            # its controlled shutdown ended): the broker change was handled on the older state,
            # so shrink again now, as Kafka's controller does from ZooKeeper's current state.
            await self._on_brokers_failed(set(), batch, set())
        await self._send(batch)

    # ---- requests ------------------------------------------------------------------------------------

    def _endpoint(self, broker_id: int) -> znodes.Endpoint:
        return self.live[broker_id].endpoint(self.config.inter_broker_listener_name)

    def _partition_counts(self, topic_state_cls: Any, topic: TopicAssignment) -> Any:
        return topic_state_cls.PartitionCounts(
            initial_partition_count=topic.initial_partition_count,
            undeleted_partition_count=topic.undeleted_partition_count,
        )

    def _leader_and_isr(self, broker_id: int, parts: Mapping[TP, bool], full: bool) -> Any:
        Req = LeaderAndIsr.Request
        TS = Req.LeaderAndIsrTopicState
        PS = TS.LeaderAndIsrPartitionState
        by_topic: dict[str, list[Any]] = defaultdict(list)
        leaders: set[int] = set()
        for tp in sorted(parts):
            s = self.states.get(tp)
            topic = self.topics.get(tp[0])
            if s is None or topic is None:
                continue
            pz = self.partition_znodes.get(tp)
            by_topic[tp[0]].append(
                PS(
                    partition_index=tp[1],
                    controller_epoch=s.controller_epoch,
                    leader=s.leader,
                    leader_epoch=s.leader_epoch,
                    isr=list(s.isr),
                    zk_version=self.state_versions.get(tp, 0),
                    replicas=self._replicas(tp),
                    adding_replicas=list(topic.adding_replicas.get(tp[1], [])),
                    removing_replicas=list(topic.removing_replicas.get(tp[1], [])),
                    is_new=parts[tp],
                    leader_recovery_state=s.leader_recovery_state,
                    partition_epoch=pz.partition_epoch if pz else -1,
                )
            )
            if s.leader in self.live:
                leaders.add(s.leader)
        topic_states = [
            TS(
                topic_name=name,
                topic_id=self.topics[name].topic_id,
                partition_states=states,
                partition_counts=self._partition_counts(TS, self.topics[name]),
            )
            for name, states in by_topic.items()
        ]
        live_leaders = []
        for b in sorted(leaders):
            ep = self._endpoint(b)
            live_leaders.append(Req.LeaderAndIsrLiveLeader(broker_id=b, host_name=ep.host, port=ep.port))
        return Req(
            controller_id=self.broker_id,
            controller_epoch=self.election.epoch,
            broker_epoch=self.broker_epochs.get(broker_id, -1),
            type=TYPE_FULL if full else TYPE_INCREMENTAL,
            topic_states=topic_states,
            live_leaders=live_leaders,
        )

    def _update_metadata(
        self, broker_id: int, tps: Iterable[TP], deleted: Mapping[TP, PartitionStateZnode], metadata_epoch: int
    ) -> Any:
        Req = UpdateMetadata.Request
        TS = Req.UpdateMetadataTopicState
        PS = TS.UpdateMetadataPartitionState
        epoch = self.election.epoch
        by_topic: dict[str, list[Any]] = defaultdict(list)
        for tp in sorted(tps):
            if tp in deleted:
                gone = deleted[tp]
                by_topic[tp[0]].append(
                    PS(
                        partition_index=tp[1],
                        controller_epoch=epoch,
                        leader=LEADER_DURING_DELETE,
                        leader_epoch=gone.leader_epoch,
                        isr=list(gone.isr),
                        zk_version=0,
                        replicas=[],
                        offline_replicas=[],
                    )
                )
                continue
            s = self.states.get(tp)
            if s is None or tp[0] not in self.topics:
                continue
            replicas = self._replicas(tp)
            pz = self.partition_znodes.get(tp)
            by_topic[tp[0]].append(
                PS(
                    partition_index=tp[1],
                    controller_epoch=s.controller_epoch,
                    leader=s.leader,
                    leader_epoch=s.leader_epoch,
                    isr=list(s.isr),
                    zk_version=self.state_versions.get(tp, 0),
                    replicas=replicas,
                    offline_replicas=[r for r in replicas if r not in self.live],
                    partition_epoch=pz.partition_epoch if pz else -1,
                )
            )
        topic_states = []
        for name, states in by_topic.items():
            topic = self.topics.get(name)
            if topic is None:  # deleted: no ids or counts any more
                topic_states.append(TS(topic_name=name, partition_states=states))
                continue
            topic_states.append(
                TS(
                    topic_name=name,
                    topic_id=topic.topic_id,
                    partition_states=states,
                    topic_epoch=topic.topic_epoch,
                    partition_counts=self._partition_counts(TS, topic),
                )
            )
        live_brokers = []
        for b in sorted(self.live):
            info = self.live[b]
            live_brokers.append(
                Req.UpdateMetadataBroker(
                    id=b,
                    endpoints=[
                        Req.UpdateMetadataBroker.UpdateMetadataEndpoint(
                            port=ep.port,
                            host=ep.host,
                            listener=ep.listener,
                            security_protocol=SECURITY_PROTOCOLS.get(ep.security_protocol, 0),
                        )
                        for ep in info.endpoints
                    ],
                    rack=info.rack,
                )
            )
        return Req(
            controller_id=self.broker_id,
            controller_epoch=epoch,
            broker_epoch=self.broker_epochs.get(broker_id, -1),
            topic_states=topic_states,
            live_brokers=live_brokers,
            controller_metadata_epoch=metadata_epoch,
            max_partition_epoch=self.max_partition_epoch,
        )

    def _send_leader_and_isr(self, batch: _Batch) -> list[asyncio.Future[Any]]:
        futures = []
        for b in sorted(set(batch.leader_and_isr) | batch.full_leader_and_isr):
            if b not in self.live:
                continue
            full = b in batch.full_leader_and_isr
            parts: dict[TP, bool] = {}
            if full:
                parts = {
                    tp: False
                    for tp in self._all_partitions()
                    if b in self._replicas(tp) and tp in self.states
                }
            parts.update(batch.leader_and_isr.get(b, {}))
            if not parts and not full:
                continue
            futures.append(self.channel.send(b, LeaderAndIsr, self._leader_and_isr(b, parts, full)))
        return futures

    async def _send(self, batch: _Batch) -> None:
        """Sends what the event decided: LeaderAndIsr, UpdateMetadata (one broadcast,
        one controller_metadata_epoch), StopReplica."""
        if not self._active:
            return
        self._send_leader_and_isr(batch)
        if (
            batch.update_metadata
            or batch.update_metadata_all
            or batch.update_metadata_brokers
            or batch.deleted
        ):
            metadata_epoch = self.election.next_metadata_epoch()
            everything = self._all_partitions()
            for b in sorted(self.live):
                full = batch.update_metadata_all or b in batch.update_metadata_full_to
                tps = everything if full else sorted(batch.update_metadata | set(batch.deleted))
                self.channel.send(
                    b, UpdateMetadata, self._update_metadata(b, tps, batch.deleted, metadata_epoch)
                )
        for b, parts in sorted(batch.stop_replica.items()):
            if b not in self.live or not parts:
                continue
            Req = StopReplica.Request
            TS = Req.StopReplicaTopicState
            by_topic: dict[str, list[Any]] = defaultdict(list)
            for (t, p), (delete, leader_epoch) in sorted(parts.items()):
                by_topic[t].append(
                    TS.StopReplicaPartitionState(
                        partition_index=p, leader_epoch=leader_epoch, delete_partition=delete
                    )
                )
            req = Req(
                controller_id=self.broker_id,
                controller_epoch=self.election.epoch,
                broker_epoch=self.broker_epochs.get(b, -1),
                topic_states=[TS(topic_name=t, partition_states=ps) for t, ps in by_topic.items()],
            )
            self.channel.send(b, StopReplica, req)
