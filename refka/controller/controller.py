"""The controller: one event queue, one consumer, over the metadata store.

Every broker runs a ``Controller``; the one that wins the election
(election.py) is active, the others only campaign. Election changes, fired
watches and broker requests become typed events (events.py) on one
``asyncio.Queue``; a single task handles them one at a time (``_process``,
dispatching on the event's class, as Kafka's KafkaController.process), so the
controller's state (context.py) needs no locks. Each handler re-reads what it
reacts to from the store, setting the next (one-shot) watch as it reads
(zk_client.py), and ends by sending what it decided to the brokers
(request_batch.py builds the requests, channel.py delivers them). Every
write is fenced by ``/controller_epoch``'s version: a controller that has
been replaced cannot write, it resigns instead. A write that loses to
another writer (a leader's ISR update) re-reads, and the event is handled
again after ``retry_backoff``.

Decided here:

- Failover (``Elected``): reads brokers, topics, partition znodes and states;
  completes what earlier controllers left unfinished (topics.py); elects
  leaders for partitions whose leader is gone; sends a *full* LeaderAndIsr
  (type 1, KIP-516: a broker drops partitions not in it) and a full
  UpdateMetadata to every live broker.
- Broker failure (``BrokerChange``): partitions it led get a new leader from
  the ISR (first live ISR member in assignment order; unclean only with
  ``unclean.leader.election.enable``, broker or topic level), ISRs lose it,
  leader epochs go up. With no eligible leader the partition is left with
  leader -1 and its ISR as it was (never empty), to be elected when a member
  returns. A broker that re-registers with a new epoch (czxid) is a failure
  and a start-up.
- Broker start-up: full UpdateMetadata to it (and the new broker list to the
  others), full LeaderAndIsr to it, elections for partitions it can lead.
- Controlled shutdown (``controlled_shutdown()``, from the broker's
  ControlledShutdown handler): the broker's leaderships move to other ISR
  members, it leaves the ISRs it follows in (StopReplica without delete);
  returns the partitions it still leads.
- Preferred and unclean elections (ElectLeaders, KIP-460).
- ISR changes: leaders write the ISR themselves and leave a sequential
  ``/isr_change_notification/isr_change_`` (admin.py); the controller
  re-reads those states, broadcasts UpdateMetadata and completes the
  reassignments whose targets joined the ISR.

Elsewhere, as collaborators built here with just what they use: topic
creation, KIP-253 expansion and shrink, and deletion in topics.py
(TopicManager), KIP-253's drain task in partition_deletion.py
(PartitionDeletionManager: started at failover, stopped at resignation),
reassignment (KIP-455) in reassignment.py (ReassignmentManager).

Not yet: automatic preferred-leader rebalancing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

from refka.common import TopicPartition
from refka.protocol.errors import ErrorCode

from . import znodes
from .channel import Channel
from .context import ControllerContext
from .election import ControllerElection
from .events import (
    ApiPartitionReassignment,
    BrokerChange,
    ControlledShutdown,
    ControllerEvent,
    ControllerRequest,
    Elected,
    IsrChangeNotification,
    PartitionDeletionCheck,
    PartitionModifications,
    PartitionsDrained,
    ReassignResult,
    ReplicaLeaderElection,
    Resigned,
    Sync,
    TopicChange,
    TopicDeletion,
)
from .partition_deletion import PartitionDeletionManager
from .reassignment import Ongoing, ReassignmentManager
from .request_batch import BatchSender, RequestBatch
from .state_machine import (
    PartitionStateName,
    ReplicaStateName,
    elect_controlled_shutdown,
    elect_offline,
    elect_preferred,
)
from .store import ConnectionClosedError, MetadataStore, StoreError
from .topics import TopicManager
from .zk_client import ConflictingWriteError, ControllerFencedError, ControllerZkClient
from .znodes import NO_LEADER, PartitionStateZnode

log = structlog.get_logger("refka.controller")

P = PartitionStateName
R = ReplicaStateName
T = TypeVar("T")


@dataclass
class ControllerConfig:
    """The controller's settings, from Kafka's property names (``from_properties``)."""

    unclean_leader_election_enable: bool = False
    inter_broker_listener_name: str | None = None  # None: each broker's first endpoint
    expansion_ack_timeout: float = 10.0  # KIP-253: wait for LeaderAndIsr answers this long
    partition_deletion_check_interval: float = 30.0  # KIP-253's drain task (seconds)
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
            partition_deletion_check_interval=int(props.get("partition.deletion.check.interval.ms", 30_000))
            / 1000,
        )


class Controller:
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
        self.context = ControllerContext()
        self._events: asyncio.Queue[ControllerEvent] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._active = False
        # Broker changes seen and not yet handled: a retried event (after a conflicting write) still knows.
        self._failed_pending: set[int] = set()
        self._started_pending: set[int] = set()
        self._zk = ControllerZkClient(store, self.context, self._events.put_nowait)
        self._sender = BatchSender(
            broker_id, self.context, channel, self.election, self.config.inter_broker_listener_name
        )
        self._topics = TopicManager(
            self.context, self._zk, self._sender, self.election, self.config.expansion_ack_timeout
        )
        self._reassignment = ReassignmentManager(self.context, self._zk, self._sender, self.election)
        self._deletion = PartitionDeletionManager(
            self.context,
            self._zk,
            self._sender,
            self.election,
            self._events.put_nowait,
            self.config.partition_deletion_check_interval,
            self.config.expansion_ack_timeout,
        )

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
        await self._request(Sync())

    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int = -1
    ) -> tuple[ErrorCode, list[TopicPartition]]:
        """Moves leadership away from ``broker_id``; (error, partitions it still leads)."""
        return await self._request(ControlledShutdown(broker_id, broker_epoch))

    async def elect_preferred_leaders(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, ErrorCode]:
        """Preferred-replica election for ``partitions`` (all when None)."""
        return await self._request(ReplicaLeaderElection(None if partitions is None else list(partitions)))

    async def elect_unclean_leaders(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, ErrorCode]:
        """Unclean election (ElectLeaders type 1, KIP-460) for leaderless ``partitions`` (all when None):
        any live assigned replica may lead, in or out of the ISR."""
        return await self._request(
            ReplicaLeaderElection(None if partitions is None else list(partitions), unclean=True)
        )

    async def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, list[int] | None], allow_replication_factor_change: bool = True
    ) -> dict[TopicPartition, ReassignResult]:
        """Starts, retargets or (None) cancels reassignments; the result per partition."""
        return await self._request(ApiPartitionReassignment(dict(targets), allow_replication_factor_change))

    def ongoing_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, Ongoing]:
        """The reassignments in progress (of ``partitions``, or all): (replicas, adding, removing)."""
        return self._reassignment.ongoing(partitions)

    def offline_partition_count(self) -> int:
        """Kafka's OfflinePartitionsCount: partitions without a leader, topics queued for
        deletion left out (as Kafka's controller leaves them out)."""
        deleting = self._topics.deleting
        return sum(1 for tp in self.context.pstates.keys_in(PartitionStateName.OFFLINE) if tp[0] not in deleting)

    def partition_state(self, topic: str, partition: int) -> PartitionStateZnode | None:
        """The controller's view of a partition (while active)."""
        return self.context.states.get((topic, partition))

    # ---- the event loop ------------------------------------------------------------------------

    def _on_elected(self, epoch: int) -> None:
        self._events.put_nowait(Elected(epoch))

    def _on_resigned(self) -> None:
        self._events.put_nowait(Resigned())

    async def _request(self, request: ControllerRequest[T]) -> T:
        self._events.put_nowait(request)
        return await request.future

    async def _run(self) -> None:
        while True:
            event = await self._events.get()
            try:
                await self._dispatch(event)
            except asyncio.CancelledError:
                raise
            except Exception:  # the loop must outlive any bug in one event
                log.exception("controller_event_loop_error", kind=type(event).__name__)

    async def _dispatch(self, event: ControllerEvent) -> None:
        """Handles one event; what goes wrong decides whether it is retried."""
        try:
            await self._process(event)
        except asyncio.CancelledError:
            raise
        except ControllerFencedError:
            log.warning("controller_fenced", broker=self.broker_id, epoch=self.epoch)
            self._resign()
            self.election.fenced()
            _fail(event, ErrorCode.NOT_CONTROLLER)  # as Kafka answers on ControllerMovedException
        except ConnectionClosedError:
            _fail(event, ErrorCode.NOT_CONTROLLER)
        except (ConflictingWriteError, StoreError) as e:
            log.info("controller_event_retry", kind=type(event).__name__, reason=repr(e))
            if self._active:
                loop = asyncio.get_running_loop()
                loop.call_later(self.config.retry_backoff, self._events.put_nowait, event)
            else:
                _fail(event, ErrorCode.NOT_CONTROLLER)
        except Exception:
            log.exception("controller_event_failed", kind=type(event).__name__)
            _fail(event, ErrorCode.UNKNOWN_SERVER_ERROR)

    async def _process(self, event: ControllerEvent) -> None:
        """One event, by its class (Kafka's KafkaController.process): the election's
        always; the others only while active (a request is answered NOT_CONTROLLER)."""
        match event:
            case Sync():
                event.complete(None)
            case Elected(epoch=epoch):
                if epoch == self.election.epoch:  # not superseded while it waited in the queue
                    await self._on_failover()
            case Resigned():
                self._resign()
            case _ if not self._active:
                _fail(event, ErrorCode.NOT_CONTROLLER)
            case BrokerChange():
                await self._on_broker_change()
            case TopicChange():
                await self._topics.on_topic_change()
            case PartitionModifications(topic=name):
                await self._topics.on_partition_modifications(name)
            case TopicDeletion():
                await self._topics.on_topic_deletion()
            case IsrChangeNotification():
                await self._on_isr_change()
            case PartitionDeletionCheck():
                await self._deletion.on_check()
            case PartitionsDrained(epoch=epoch, drained=drained):
                if epoch == self.election.epoch:  # not a check of an earlier term
                    await self._deletion.on_drained(drained)
            case ControlledShutdown(broker_id=broker_id, broker_epoch=broker_epoch):
                event.complete(await self._on_controlled_shutdown(broker_id, broker_epoch))
            case ReplicaLeaderElection(partitions=tps, unclean=False):
                event.complete(await self._on_elect_preferred(tps))
            case ReplicaLeaderElection(partitions=tps, unclean=True):
                event.complete(await self._on_elect_unclean(tps))
            case ApiPartitionReassignment(targets=targets, allow_replication_factor_change=allow):
                event.complete(await self._reassignment.on_reassign(targets, allow))

    # ---- election / resignation ----------------------------------------------------------------

    def _reset(self) -> None:
        self.context.reset()
        self._failed_pending.clear()
        self._started_pending.clear()

    def _resign(self) -> None:
        if self._active:
            log.info("controller_resigned", broker=self.broker_id)
        self._active = False
        self._deletion.stop()
        self._reset()
        self.channel.update_brokers({})

    async def _on_failover(self) -> None:
        self._reset()
        ctx = self.context
        epoch = self.election.epoch
        ctx.epoch_zk_version = self.election.epoch_zk_version
        log.info("controller_failover_started", broker=self.broker_id, epoch=epoch)
        await self._zk.read_partition_epoch()
        found = await self._zk.read_brokers()
        ctx.live = {b: info for b, (info, _) in found.items()}
        ctx.broker_epochs = {b: e for b, (_, e) in found.items()}
        self.channel.update_brokers(ctx.live)
        for name in await self._zk.topic_names():
            await self._zk.load_topic(name)
        self._active = True
        # Partition and replica states from what the store says.
        for tp in ctx.all_partitions():
            s = ctx.states.get(tp)
            if s is None:
                continue
            for r in ctx.replicas(tp):
                ctx.rstates.transition((*tp, r), R.NEW)
                ctx.rstates.transition((*tp, r), R.ONLINE if r in ctx.live else R.OFFLINE)
            ctx.pstates.transition(tp, P.NEW)
            ctx.pstates.transition(tp, P.ONLINE if s.leader in ctx.live else P.OFFLINE)
        batch = RequestBatch()
        # Finish what earlier controllers did not: counts, epochs, half-made partitions (not
        # for a topic queued for deletion, which its deletion finishes).
        await self._topics.refresh_deleting()
        for name in sorted(ctx.topics):
            await self._topics.complete_topic(name, batch)
        await self._elect_offline(ctx.pstates.keys_in(P.OFFLINE), batch)
        # Replicas on brokers that are not registered leave the ISRs of partitions whose
        # leader is alive too (Kafka's removeReplicasFromIsr at controller start-up).
        await self._on_brokers_failed(set(), batch, set())
        batch.full_leader_and_isr |= set(ctx.live)
        batch.update_metadata_all = True
        batch.update_metadata_full_to |= set(ctx.live)
        self._sender.send(batch)
        log.info(
            "controller_failover_done",
            broker=self.broker_id,
            epoch=epoch,
            brokers=sorted(ctx.live),
            topics=len(ctx.topics),
            partitions=len(ctx.states),
        )
        # Deletions and ISR changes that arrived while no controller watched.
        self._events.put_nowait(TopicDeletion())
        self._events.put_nowait(IsrChangeNotification())
        # KIP-253's drain task: removals cut short, then a check now and every interval.
        await self._deletion.start()

    # ---- brokers ----------------------------------------------------------------------------------

    def _unclean(self, topic: str) -> bool:
        v = self.context.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        return self.config.unclean_leader_election_enable if v is None else v.lower() == "true"

    async def _on_broker_change(self) -> None:
        ctx = self.context
        found = await self._zk.read_brokers()
        dead = {b for b in ctx.live if b not in found or found[b][1] != ctx.broker_epochs.get(b)}
        started = {b for b in found if b not in ctx.live or b in dead}
        for b in dead:
            ctx.live.pop(b, None)
            ctx.broker_epochs.pop(b, None)
        for b in started:
            ctx.live[b] = found[b][0]
            ctx.broker_epochs[b] = found[b][1]
        if dead or started:
            self.channel.update_brokers(ctx.live)
            if dead:
                log.info("brokers_failed", brokers=sorted(dead))
            if started:
                log.info("brokers_started", brokers=sorted(started))
        self._failed_pending |= dead
        self._started_pending |= started
        if not self._failed_pending and not self._started_pending:
            return
        batch = RequestBatch()
        batch.update_metadata_brokers = True
        if self._failed_pending:
            # A failed broker that is live again re-registered (a bounce): it is
            # not a candidate in these elections, and it leaves the ISRs.
            await self._on_brokers_failed(self._failed_pending, batch, self._failed_pending & set(ctx.live))
        if self._started_pending:
            await self._on_brokers_started(self._started_pending & set(ctx.live), batch)
        self._failed_pending.clear()
        self._started_pending.clear()
        self._sender.send(batch)

    async def _on_brokers_failed(self, dead: set[int], batch: RequestBatch, bounced: set[int]) -> None:
        """Partitions whose leader is not a live candidate get one from the ISR;
        ISRs keep only live candidates. Worked out from the states, not from
        ``dead`` alone, so handling it twice changes nothing the second time."""
        ctx = self.context
        ctx.shutting_down -= dead
        candidates = {b for b in ctx.live if b not in bounced}
        epoch = self.election.epoch
        new: dict[TopicPartition, PartitionStateZnode] = {}
        for tp in ctx.all_partitions():
            replicas = ctx.replicas(tp)
            for r in replicas:
                key = (*tp, r)
                if r not in candidates and ctx.rstates.state(key) in (R.NEW, R.ONLINE, R.OFFLINE):
                    ctx.rstates.transition(key, R.OFFLINE)
            s = ctx.states.get(tp)
            if s is None:
                continue
            if s.leader not in candidates:
                if ctx.pstates.state(tp) in (P.NEW, P.ONLINE, P.OFFLINE):
                    ctx.pstates.transition(tp, P.OFFLINE)
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
                new[tp] = PartitionStateZnode(
                    s.leader, s.leader_epoch + 1, isr, epoch, s.leader_recovery_state
                )
        await self._zk.write_states(new)
        for tp, s in new.items():
            if s.leader != NO_LEADER and ctx.pstates.state(tp) is not P.ONLINE:
                ctx.pstates.transition(tp, P.ONLINE)
            batch.add_leader_and_isr(ctx.live_replicas(tp), tp)
            batch.update_metadata.add(tp)
            if s.leader != NO_LEADER:
                log.info(
                    "leader_elected",
                    topic=tp[0],
                    partition=tp[1],
                    leader=s.leader,
                    leader_epoch=s.leader_epoch,
                )
        for tp in ctx.all_partitions():
            if any(r in dead for r in ctx.replicas(tp)):
                batch.update_metadata.add(tp)  # offline_replicas changed

    async def _on_brokers_started(self, started: set[int], batch: RequestBatch) -> None:
        ctx = self.context
        batch.update_metadata_full_to |= started
        batch.full_leader_and_isr |= started
        for tp in ctx.all_partitions():
            for r in ctx.replicas(tp):
                if r in started:
                    key = (*tp, r)
                    if ctx.rstates.state(key) is R.NON_EXISTENT:
                        ctx.rstates.transition(key, R.NEW)
                    ctx.rstates.transition(key, R.ONLINE)
        offline = [
            tp
            for tp in ctx.all_partitions()
            if tp in ctx.states
            and ctx.states[tp].leader not in ctx.live
            and any(r in started for r in ctx.replicas(tp))
        ]
        await self._elect_offline(offline, batch)
        # Partitions that never got a state (no live replica at creation).
        waiting = [tp for tp in ctx.all_partitions() if tp not in ctx.states and tp in ctx.partition_znodes]
        if waiting:
            await self._topics.create_states(waiting, batch)

    async def _elect_offline(self, tps: list[TopicPartition], batch: RequestBatch) -> None:
        ctx = self.context
        epoch = self.election.epoch
        new: dict[TopicPartition, PartitionStateZnode] = {}
        for tp in tps:
            s = ctx.states[tp]
            e = elect_offline(s, ctx.replicas(tp), ctx.live, epoch, self._unclean(tp[0]))
            if e.state is not None:
                new[tp] = e.state
            else:
                log.warning("partition_offline", topic=tp[0], partition=tp[1], reason=e.reason)
        await self._zk.write_states(new)
        for tp, s in new.items():
            self._online(tp)
            batch.add_leader_and_isr(ctx.live_replicas(tp), tp)
            batch.update_metadata.add(tp)
            log.info(
                "leader_elected", topic=tp[0], partition=tp[1], leader=s.leader, leader_epoch=s.leader_epoch
            )

    def _online(self, tp: TopicPartition) -> None:
        """The partition has a leader now: OnlinePartition (through NewPartition if it was unknown)."""
        pstates = self.context.pstates
        if pstates.state(tp) is not P.ONLINE:
            if pstates.state(tp) is P.NON_EXISTENT:
                pstates.transition(tp, P.NEW)
            pstates.transition(tp, P.ONLINE)

    # ---- controlled shutdown, leader elections, ISR changes ------------------------------------------

    async def _on_controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[ErrorCode, list[TopicPartition]]:
        ctx = self.context
        if broker_id not in ctx.live:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        if broker_epoch != -1 and broker_epoch != ctx.broker_epochs.get(broker_id):
            return ErrorCode.STALE_BROKER_EPOCH, []
        ctx.shutting_down.add(broker_id)
        log.info("controlled_shutdown_started", broker=broker_id)
        epoch = self.election.epoch
        new: dict[TopicPartition, PartitionStateZnode] = {}
        stop: list[TopicPartition] = []
        for tp in ctx.all_partitions():
            replicas = ctx.replicas(tp)
            s = ctx.states.get(tp)
            if s is None or broker_id not in replicas or len(replicas) < 2:
                continue
            if s.leader == broker_id:
                e = elect_controlled_shutdown(s, replicas, ctx.live, ctx.shutting_down, epoch)
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
        await self._zk.write_states(new)
        batch = RequestBatch()
        for tp in new:
            # The broker follows where it led; where it followed, it stops (StopReplica).
            targets = [r for r in ctx.live_replicas(tp) if not (r == broker_id and tp in stop)]
            batch.add_leader_and_isr(targets, tp)
            batch.update_metadata.add(tp)
        for tp in stop:
            batch.add_stop_replica(broker_id, tp, delete=False, leader_epoch=new[tp].leader_epoch)
        self._sender.send(batch)
        # As Kafka's doControlledShutdown: only replicated partitions count as remaining
        # (one with a single replica cannot move, and the broker must not wait for it).
        remaining = [
            tp
            for tp in ctx.all_partitions()
            if tp in ctx.states and ctx.states[tp].leader == broker_id and len(ctx.replicas(tp)) > 1
        ]
        log.info("controlled_shutdown_done", broker=broker_id, moved=len(new), remaining=len(remaining))
        return ErrorCode.NONE, remaining

    async def _on_elect_preferred(self, tps: list[TopicPartition] | None) -> dict[TopicPartition, ErrorCode]:
        ctx = self.context
        epoch = self.election.epoch
        out: dict[TopicPartition, ErrorCode] = {}
        new: dict[TopicPartition, PartitionStateZnode] = {}
        for tp in tps if tps is not None else ctx.all_partitions():
            s = ctx.states.get(tp)
            if s is None:
                out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            e = elect_preferred(s, ctx.replicas(tp), ctx.live, epoch)
            if e.state is None:
                led = s.leader == ctx.replicas(tp)[0]
                out[tp] = ErrorCode.ELECTION_NOT_NEEDED if led else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
                continue
            new[tp] = e.state
            out[tp] = ErrorCode.NONE
        await self._zk.write_states(new)
        batch = RequestBatch()
        for tp in new:
            batch.add_leader_and_isr(ctx.live_replicas(tp), tp)
            batch.update_metadata.add(tp)
        self._sender.send(batch)
        return out

    async def _on_elect_unclean(self, tps: list[TopicPartition] | None) -> dict[TopicPartition, ErrorCode]:
        """As Kafka's KafkaController.electLeaders with ElectionType.UNCLEAN: a partition
        whose leader is live needs no election; the others get the offline election with
        unclean allowed (ELIGIBLE_LEADERS_NOT_AVAILABLE when no assigned replica is live)."""
        ctx = self.context
        out: dict[TopicPartition, ErrorCode] = {}
        leaderless: list[TopicPartition] = []
        for tp in tps if tps is not None else ctx.all_partitions():
            s = ctx.states.get(tp)
            if s is None:
                out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif s.leader != NO_LEADER and s.leader in ctx.live:
                out[tp] = ErrorCode.ELECTION_NOT_NEEDED
            else:
                leaderless.append(tp)
        epoch = self.election.epoch
        new: dict[TopicPartition, PartitionStateZnode] = {}
        for tp in leaderless:
            e = elect_offline(ctx.states[tp], ctx.replicas(tp), ctx.live, epoch, True)
            if e.state is None:
                out[tp] = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                continue
            new[tp] = e.state
            out[tp] = ErrorCode.NONE
        await self._zk.write_states(new)
        batch = RequestBatch()
        for tp, s in new.items():
            self._online(tp)
            batch.add_leader_and_isr(ctx.live_replicas(tp), tp)
            batch.update_metadata.add(tp)
            log.info("leader_elected", topic=tp[0], partition=tp[1], leader=s.leader,
                     leader_epoch=s.leader_epoch, unclean=True)
        self._sender.send(batch)
        return out

    async def _on_isr_change(self) -> None:
        ctx = self.context
        changed = await self._zk.take_isr_changes()
        batch = RequestBatch()
        stale = False
        for tp in sorted(changed):
            if tp[0] in ctx.topics and (s := await self._zk.read_state(tp)) is not None:
                batch.update_metadata.add(tp)
                stale = stale or any(r not in ctx.live for r in s.isr)
        if changed:
            log.info("isr_changes_propagated", partitions=len(batch.update_metadata))
        # Reassignments whose targets all joined the ISR complete (all after a failover).
        await self._reassignment.complete(None, batch)
        if stale:
            # A leader re-added a broker that has gone meanwhile (e.g. one that followed until
            # its controlled shutdown ended): the broker change was handled on the older state,
            # so shrink again now, as Kafka's controller does from ZooKeeper's current state.
            await self._on_brokers_failed(set(), batch, set())
        self._sender.send(batch)


def _fail(event: ControllerEvent, error: ErrorCode) -> None:
    """Answers a request that cannot be handled; a watch or election event needs no answer."""
    if isinstance(event, ControllerRequest):
        event.fail(error)
