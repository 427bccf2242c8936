"""Topic creation, completion, KIP-253 expansion and shrink, and deletion on the
active controller (Kafka's onNewPartitionCreation, onPartitionModification's
expansion, and TopicDeletionManager), run on the controller's event task.

- Creation (``TopicChange``: ``/brokers/topics`` children): partition epochs
  from the cluster-wide counter ``/partition_epoch`` (so a re-created topic
  gets new, larger epochs; the topic's topic_epoch comes from it too),
  partition and state znodes (leader = first live replica, ISR = live
  replicas, leader_epoch 0), LeaderAndIsr to the replicas, UpdateMetadata to
  all.
- Completion (``complete_topic``: at failover, on every change of the topic
  znode, and for a topic a retried event left unfinished): whatever the znodes
  say is not done yet, in the steps below. Seed change 1: a topic znode
  without ``initial_partition_count`` gets it (and undeleted_partition_count
  and the KIP-232 topic epoch), whoever wrote it.
- Expansion (the assignment has partitions without a partition znode), seed
  step 2, with ``enable.ordered.delivery`` (the default):
    E1  topic znode: undeleted_partition_count = the assignment's size;
    E2  the new partitions' znodes, in one transaction, each with
        ``leaderEpochAfterCreation`` = {P2: P2's leader epoch now} for every
        older partition P2 with a state;
    E3  every P2 whose leader epoch still equals what E2 recorded: + 1 (one
        transaction), LeaderAndIsr with the new count, waiting (bounded) for
        the answers;
    E4  the new partitions' states; LeaderAndIsr (is_new), UpdateMetadata.
  With ``enable.ordered.delivery=false``, Kafka's expansion: E2 records
  nothing and E3 bumps nothing.
- Shrink (partitions at or above undeleted_partition_count, which the admin
  lowered, that are not marked yet), seed step 3:
    S1  every unmarked P1 >= N, in one transaction: ``leaderEpochBeforeDeletion``
        = {P2 < N: P2's leader epoch now} (a partition is marked for deletion
        iff that map is not empty);
    S2  every P2 whose leader epoch still equals what a marked partition
        recorded for it: + 1 (one transaction), LeaderAndIsr with the new
        count, waiting (bounded) for the answers;
    S3  UpdateMetadata for every partition of the topic (the count, the marks).
  Marked partitions stay readable and hosted; partition_deletion.py removes
  each once it is empty.
- Deletion (``TopicDeletion``: ``/admin/delete_topics`` children):
  UpdateMetadata with leader -2 for its partitions, StopReplica(delete) to
  every live replica, then the topic's znodes go, the partitions' 256 at a
  time with the event loop let go between, the topic's own last; a topic
  queued for deletion is never completed meanwhile, at failover either, so
  what a dead controller left half deleted is only deleted. (Kafka waits for every
  replica to confirm before removing the znodes; refka does not: a replica on
  a dead broker keeps its log until that broker's next full LeaderAndIsr,
  which omits it.)

Why a controller that dies between any two steps leaves znodes its successor
finishes from, without doing a step twice (seed: "the new controller can
continue ..."). Every step is decided from the znodes alone. E1 and S1 skip
what is written already (a raised count, a partition znode, a non-empty map).
E3 and S2 bump P2 only while its leader epoch equals an epoch recorded by E2 or
S1: the bump makes it larger, and so does any later leader change, which also
carries the new count, since E1 (or the admin's write of N) precedes the
recording; epochs never go down. So a P2 is bumped once per recording, however
often the steps run, and a recording is never left without its bump: it
precedes the bump, and as long as the bump is missing the recorded epoch equals
the current one. Each step's writes are one transaction, so no partition is
half-marked or half-bumped. The LeaderAndIsr and UpdateMetadata a dead
controller did not send, its successor's failover sends (full, to every
broker). This orders step 2 differently from the seed, which bumps first and
then creates the partition znodes with the epochs from before the bump: a
controller dying between the two would leave no record of those epochs, and
its successor would bump again.

``faults.reached`` marks each step for the tests that stop a controller there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import replace

import structlog

from refka.common import TopicPartition
from refka.common.topic_config import ordered_delivery

from .context import ControllerContext
from .election import ControllerElection
from .faults import reached
from .request_batch import BatchSender, RequestBatch
from .state_machine import PartitionStateName, ReplicaStateName, initial_state
from .store import Op
from .zk_client import DELETE_CHUNK, ConflictingWriteError, ControllerZkClient
from .znodes import PartitionStateZnode, PartitionZnode

log = structlog.get_logger("refka.controller")

P = PartitionStateName
R = ReplicaStateName
EPOCH_DURING_DELETE = -2  # StopReplica's leader_epoch when the topic is deleted (Kafka's)
# Znode operations per transaction when new topics are created together (_create_fresh):
# about 200 KB of znode data for one-partition topics, inside ZooKeeper's 1 MiB jute.maxbuffer.
_OPS_PER_CREATION = 2000


class TopicManager:
    def __init__(
        self,
        context: ControllerContext,
        zk: ControllerZkClient,
        sender: BatchSender,
        election: ControllerElection,
        expansion_ack_timeout: float,
    ) -> None:
        self.context = context
        self.zk = zk
        self.sender = sender
        self.election = election  # the controller epoch the new states carry
        self.expansion_ack_timeout = expansion_ack_timeout  # KIP-253: wait for LeaderAndIsr answers
        # Topics loaded by a TopicChange whose completion has not returned yet (new ones, and
        # those a retried event left unfinished): the only ones a TopicChange looks at again,
        # not every topic (KIP-526: at 10^5 topics that sweep held the loop ~0.2 s per event).
        # A hint only: _incomplete decides, and failover completes every topic anyway.
        self._unfinished: set[str] = set()
        # Topics queued in /admin/delete_topics: never completed (a deletion a dead controller
        # left half done must not have its partitions made again), only deleted (Kafka's
        # TopicDeletionManager keeps them ineligible too). Read again at every topic event.
        self.deleting: set[str] = set()


    async def refresh_deleting(self) -> None:
        self.deleting = await self.zk.topics_queued_for_deletion()

    # ---- events --------------------------------------------------------------------------------

    async def on_topic_change(self) -> None:
        ctx = self.context
        await self.refresh_deleting()
        names = set(await self.zk.topic_names())
        batch = RequestBatch()
        added = sorted(names - set(ctx.topics))
        await asyncio.gather(*(self.zk.load_topic(name) for name in added))  # the reads go out together
        for name in added:
            if name in ctx.topics:
                self._unfinished.add(name)
                log.info("topic_created", topic=name, partitions=len(ctx.topics[name].partitions))
        await self._create_fresh(sorted(n for n in self._unfinished if n in names and self._fresh(n)), batch)
        for name in sorted(self._unfinished):
            if name in names and name in ctx.topics and self._incomplete(name):
                await self.complete_topic(name, batch)
            self._unfinished.discard(name)
        for name in sorted(set(ctx.topics) - names):
            # Removed behind the controller's back (not through /admin/delete_topics).
            log.warning("topic_znode_vanished", topic=name)
            self._forget_topic(name, batch)
        self.sender.send(batch)

    async def on_partition_modifications(self, name: str) -> None:
        """The topic znode changed: partitions added, the count lowered, a reassignment."""
        ctx = self.context
        old = ctx.topics.get(name)
        read = await self.zk.read_topic(name)
        if read is None:
            return  # deleted: the children watch handles it
        topic, version = read
        if old is None:
            return
        await self.refresh_deleting()
        if topic.topic_id != old.topic_id:
            log.warning("topic_replaced", topic=name)
        ctx.topics[name] = topic
        ctx.topic_versions[name] = version
        await self.zk.read_topic_config(name)  # enable.ordered.delivery as it is now
        batch = RequestBatch()
        await self.complete_topic(name, batch)
        self.sender.send(batch)

    async def on_topic_deletion(self) -> None:
        ctx = self.context
        names = await self.zk.topics_to_delete()
        self.deleting = set(names)
        batch = RequestBatch()
        for name in sorted(names):
            if name not in ctx.topics:
                await self.zk.delete_topic(name, [])
                continue
            tps = ctx.partitions_of(name)
            for n, tp in enumerate(tps, 1):
                if n % DELETE_CHUNK == 0:
                    await asyncio.sleep(0)  # thousands of partitions: let the brokers of this process answer
                if ctx.pstates.state(tp) is not P.NON_EXISTENT:
                    if ctx.pstates.state(tp) is not P.OFFLINE:
                        ctx.pstates.transition(tp, P.OFFLINE)
                    ctx.pstates.transition(tp, P.NON_EXISTENT)
                for r in ctx.replicas(tp):
                    key = (*tp, r)
                    if ctx.rstates.state(key) is R.NON_EXISTENT:
                        continue
                    if ctx.rstates.state(key) is not R.OFFLINE:
                        ctx.rstates.transition(key, R.OFFLINE)
                    ctx.rstates.transition(key, R.DELETION_STARTED)
                    if r in ctx.live:
                        batch.add_stop_replica(r, tp, delete=True, leader_epoch=EPOCH_DURING_DELETE)
                    # Not waiting for the replica's answer (see the module docstring).
                    ctx.rstates.transition(key, R.DELETION_SUCCESSFUL)
                    ctx.rstates.transition(key, R.NON_EXISTENT)
            await self.zk.delete_topic(name, [p for _, p in tps])
            self._forget_topic(name, batch)
            log.info("topic_deleted", topic=name, partitions=len(tps))
        self.sender.send(batch)

    # ---- creation, completion, expansion, shrink ----------------------------------------------

    def _incomplete(self, name: str) -> bool:
        if name in self.deleting:
            return False
        ctx = self.context
        t = ctx.topics[name]
        if t.topic_epoch < 0 or t.initial_partition_count < 0 or t.undeleted_partition_count < 0:
            return True
        if any((name, p) not in ctx.partition_znodes or (name, p) not in ctx.states for p in t.partitions):
            return True
        return bool(self._to_mark(name))

    def _fresh(self, name: str) -> bool:
        """Just written by an admin: no topic epoch, no partition znode, no state yet."""
        ctx = self.context
        t = ctx.topics.get(name)
        return (t is not None and bool(t.partitions) and t.topic_epoch < 0 and name not in self.deleting
                and not any((name, p) in ctx.partition_znodes or (name, p) in ctx.states for p in t.partitions))

    async def _create_fresh(self, names: list[str], batch: RequestBatch) -> None:
        """Creation of new topics many to a transaction: what ``complete_topic`` does for a
        fresh topic (counts and topic epoch, partition znodes, states) in one write for
        many topics. A topic with a partition no live replica can lead, or whose write
        conflicts, is left to ``complete_topic``."""
        ctx = self.context
        epoch = self.election.epoch
        chunk: list[tuple] = []
        size = 0
        for name in names:
            topic = ctx.topics[name]
            states = {(name, p): initial_state(replicas, ctx.live, epoch) for p, replicas in topic.partitions.items()}
            if any(s is None for s in states.values()):
                continue
            chunk.append((name, states))
            size += 2 + 2 * len(states)
            if size >= _OPS_PER_CREATION:
                await self._create_chunk(chunk, batch)
                chunk, size = [], 0
        await self._create_chunk(chunk, batch)

    async def _create_chunk(self, chunk: list[tuple], batch: RequestBatch) -> None:
        if not chunk:
            return
        ctx = self.context
        first, claim = self.zk.allocate_epochs(sum(1 + len(states) for _, states in chunk))
        writes = []
        next_epoch = first
        for name, states in chunk:
            topic = ctx.topics[name]
            n = len(topic.partitions)
            changed = replace(topic, partitions=dict(topic.partitions), topic_epoch=next_epoch,
                              initial_partition_count=n if topic.initial_partition_count < 0
                              else topic.initial_partition_count,
                              undeleted_partition_count=max(n, topic.undeleted_partition_count))
            made = {(name, p): PartitionZnode(partition_epoch=next_epoch + 1 + i, leader_epoch_after_creation={})
                    for i, p in enumerate(sorted(topic.partitions))}
            next_epoch += 1 + n
            writes.append((changed, made, states))
        try:
            await self.zk.create_topics(writes, claim, next_epoch - first)
        except ConflictingWriteError as e:
            log.info("topic_creation_conflict", topics=len(chunk), error=str(e))  # complete_topic, one by one
            await self.zk.read_partition_epoch()
            for name, _ in chunk:
                await self.zk.load_topic(name)
            return
        for changed, made, states in writes:
            name = changed.topic
            log.info("partitions_created", topic=name, partitions=sorted(changed.partitions),
                     partition_epochs=[pz.partition_epoch for pz in made.values()], leader_epoch_after_creation=None)
            self._started(states, batch)
            self._unfinished.discard(name)

    async def complete_topic(self, name: str, batch: RequestBatch) -> None:
        """Brings a topic's znodes to what its topic znode says (the module docstring's
        steps): counts and topic epoch, then creation or expansion (partitions without a
        partition znode), then shrink (partitions at or above the count not marked yet),
        finishing what an earlier controller started."""
        if name in self.deleting:
            return  # only deleted from now on (``deleting``)
        ctx = self.context
        topic = ctx.topics[name]
        ordered = ordered_delivery(ctx.topic_configs.get(name, {}))
        older: list[int] = []
        new: list[int] = []
        for p in sorted(topic.partitions):
            (older if (name, p) in ctx.partition_znodes else new).append(p)
        # Only partitions at or above the count are ever marked (_shrink): often there are none.
        n = topic.undeleted_partition_count
        marked: list[int] = []
        if len(topic.partitions) > n:
            marked = [p for p in older if p >= max(n, 0) and ctx.partition_znodes[(name, p)].marked_for_deletion]
        expansion = bool(older) and bool(new)

        # E1 and seed change 1: the topic znode's counts, and its topic epoch.
        changed = replace(topic, partitions=dict(topic.partitions))
        if changed.initial_partition_count < 0:
            changed.initial_partition_count = len(older) if expansion else len(topic.partitions)
        if changed.undeleted_partition_count < 0:
            changed.undeleted_partition_count = marked[0] if marked else len(topic.partitions)
        elif new and not marked and changed.undeleted_partition_count < len(topic.partitions):
            changed.undeleted_partition_count = len(topic.partitions)
        claim: Op | None = None
        if changed.topic_epoch < 0:
            changed.topic_epoch, claim = self.zk.allocate_epochs(1)
        if changed != topic:
            await self.zk.write_topic(changed, claim)
            if expansion:
                await reached("expansion.count_raised")

        # E2: the new partitions' znodes (a creation's too, with nothing to record).
        if new:
            after_creation: dict[int, int] = {}
            if expansion and ordered:
                after_creation = {
                    p: ctx.states[(name, p)].leader_epoch for p in older if (name, p) in ctx.states
                }
            await self._create_partitions(name, new, after_creation)
            if expansion:
                await reached("expansion.partitions_created")
        # E3: the bump E2 recorded, unless done. Partitions with a znode and no state are
        # new ones whose E4 is still to come (or that had no live replica yet).
        stateless = [p for p in sorted(topic.partitions) if (name, p) not in ctx.states]
        due = self._due_bumps(
            name, (ctx.partition_znodes[(name, p)].leader_epoch_after_creation for p in stateless)
        )
        if due:
            await self._bump(name, due, "expansion", batch)
        # E4 (and a creation): the states.
        if stateless:
            await self.create_states([(name, p) for p in stateless], batch)
            if expansion:
                await reached("expansion.states_created")
        await self._shrink(name, batch)

    def _to_mark(self, name: str) -> list[int]:
        """Partitions at or above undeleted_partition_count that are not marked yet."""
        ctx = self.context
        topic = ctx.topics[name]
        n = topic.undeleted_partition_count
        if n < 0 or len(topic.partitions) <= n:  # no partition at or above the count
            return []
        return [
            p
            for p in sorted(topic.partitions)
            if p >= n and (pz := ctx.partition_znodes.get((name, p))) is not None and not pz.marked_for_deletion
        ]

    async def _shrink(self, name: str, batch: RequestBatch) -> None:
        """Seed step 3 (S1-S3 of the module docstring), from what the znodes say."""
        ctx = self.context
        topic = ctx.topics[name]
        n = topic.undeleted_partition_count
        if n < 0 or len(topic.partitions) <= n:
            return  # no partition at or above the count: none marked, none to mark
        unmarked = self._to_mark(name)
        if unmarked:
            before = {
                p: ctx.states[(name, p)].leader_epoch
                for p in sorted(topic.partitions)
                if p < n and (name, p) in ctx.states
            }
            if not before:  # nothing to record yet: no partition below N has a leader epoch
                log.warning("partition_marking_waits_for_states", topic=name, partitions=unmarked)
                return
            await self.zk.write_partitions(
                {
                    (name, p): replace(ctx.partition_znodes[(name, p)], leader_epoch_before_deletion=dict(before))
                    for p in unmarked
                }
            )
            log.info(
                "partitions_marked_for_deletion",
                topic=name,
                partitions=unmarked,
                undeleted_partition_count=n,
                leader_epoch_before_deletion=before,
            )
            await reached("shrink.marked")
        recorded = [
            pz.leader_epoch_before_deletion
            for p in sorted(topic.partitions)
            if (pz := ctx.partition_znodes.get((name, p))) is not None and pz.marked_for_deletion
        ]
        due = self._due_bumps(name, recorded)
        if due:
            await self._bump(name, due, "shrink", batch)
        if unmarked or due:
            batch.update_metadata |= set(ctx.partitions_of(name))

    def _due_bumps(self, name: str, recorded: Iterable[dict[int, int]]) -> list[int]:
        """The partitions whose leader epoch still equals one a partition znode recorded
        for them (E2, S1): their bump is still to be done."""
        ctx = self.context
        topic = ctx.topics[name]
        due: set[int] = set()
        seen: set[tuple[tuple[int, int], ...]] = set()
        for epochs in recorded:
            key = tuple(sorted(epochs.items()))
            if not epochs or key in seen:  # one map per expansion or shrink, shared by its partitions
                continue
            seen.add(key)
            for p, epoch in epochs.items():
                s = ctx.states.get((name, p))
                if s is not None and s.leader_epoch == epoch and p in topic.partitions:
                    due.add(p)
        return sorted(due)

    async def _bump(self, name: str, partitions: list[int], kind: str, batch: RequestBatch) -> None:
        """E3 / S2: each partition's leader epoch + 1, LeaderAndIsr with the topic's count
        now, and a wait (bounded) for the answers, so producers that still use the old
        count are refused before the metadata tells them the new one."""
        ctx = self.context
        epoch = self.election.epoch
        bumped = {
            (name, p): replace(ctx.states[(name, p)], leader_epoch=ctx.states[(name, p)].leader_epoch + 1,
                               controller_epoch=epoch)
            for p in partitions
        }
        await self.zk.write_states(bumped)
        log.info(
            f"partition_{kind}_epochs_bumped",
            topic=name,
            leader_epochs={tp[1]: s.leader_epoch for tp, s in bumped.items()},
            undeleted_partition_count=ctx.topics[name].undeleted_partition_count,
        )
        await reached(f"{kind}.epochs_bumped")
        now = RequestBatch()
        for tp in bumped:
            now.add_leader_and_isr(ctx.live_replicas(tp), tp)
        futures = self.sender.send_leader_and_isr(now)
        if futures:
            _done, pending = await asyncio.wait(futures, timeout=self.expansion_ack_timeout)
            if pending:
                log.warning(f"partition_{kind}_ack_timeout", topic=name, unanswered=len(pending))
        await reached(f"{kind}.leader_and_isr_answered")
        batch.update_metadata |= set(bumped)

    async def _create_partitions(self, name: str, partitions: list[int], after_creation: dict[int, int]) -> None:
        """Partition znodes (epochs from the counter) for new partitions; no states yet."""
        first, claim = self.zk.allocate_epochs(len(partitions))
        made: dict[TopicPartition, PartitionZnode] = {}
        for i, p in enumerate(partitions):
            made[(name, p)] = PartitionZnode(
                partition_epoch=first + i, leader_epoch_after_creation=dict(after_creation)
            )
        await self.zk.create_partitions(name, made, claim)
        log.info(
            "partitions_created",
            topic=name,
            partitions=partitions,
            partition_epochs=[first + i for i in range(len(partitions))],
            leader_epoch_after_creation=after_creation or None,
        )

    async def create_states(self, tps: list[TopicPartition], batch: RequestBatch) -> None:
        """New -> Online: the first live replica leads, at leader_epoch 0."""
        ctx = self.context
        epoch = self.election.epoch
        decided: dict[TopicPartition, PartitionStateZnode] = {}
        for tp in tps:
            if ctx.pstates.state(tp) is P.NON_EXISTENT:
                ctx.pstates.transition(tp, P.NEW)
            for r in ctx.replicas(tp):
                if ctx.rstates.state((*tp, r)) is R.NON_EXISTENT:
                    ctx.rstates.transition((*tp, r), R.NEW)
            s = initial_state(ctx.replicas(tp), ctx.live, epoch)
            if s is None:
                log.warning("partition_has_no_live_replica", topic=tp[0], partition=tp[1])
                continue
            decided[tp] = s
        await self.zk.create_states(decided)
        self._started(decided, batch)

    def _started(self, decided: dict[TopicPartition, PartitionStateZnode], batch: RequestBatch) -> None:
        """New partitions whose states are written: online, LeaderAndIsr (is_new), UpdateMetadata."""
        ctx = self.context
        for tp, s in decided.items():
            if ctx.pstates.state(tp) is P.NON_EXISTENT:
                ctx.pstates.transition(tp, P.NEW)
            ctx.pstates.transition(tp, P.ONLINE)
            for r in ctx.replicas(tp):
                if ctx.rstates.state((*tp, r)) is R.NON_EXISTENT:
                    ctx.rstates.transition((*tp, r), R.NEW)
                ctx.rstates.transition((*tp, r), R.ONLINE if r in ctx.live else R.OFFLINE)
            batch.add_leader_and_isr(ctx.live_replicas(tp), tp, is_new=True)
            batch.update_metadata.add(tp)
            log.info(
                "leader_elected", topic=tp[0], partition=tp[1], leader=s.leader, leader_epoch=s.leader_epoch
            )

    # ---- deletion ------------------------------------------------------------------------------

    def _forget_topic(self, name: str, batch: RequestBatch) -> None:
        ctx = self.context
        for tp in ctx.partitions_of(name):
            s = ctx.states.pop(tp, None)
            if s is not None:
                batch.deleted[tp] = s
                batch.update_metadata.add(tp)
            ctx.state_versions.pop(tp, None)
            ctx.partition_znodes.pop(tp, None)
            ctx.pstates.forget(tp)
            for r in ctx.replicas(tp):
                ctx.rstates.forget((*tp, r))
        ctx.topics.pop(name, None)
        ctx.topic_versions.pop(name, None)
        ctx.topic_configs.pop(name, None)
