"""Topic creation, completion, expansion and deletion on the active controller
(Kafka's onNewPartitionCreation, onPartitionModification's expansion, and
TopicDeletionManager), run on the controller's event task.

- Creation (``TopicChange``: ``/brokers/topics`` children): partition epochs
  from the cluster-wide counter ``/partition_epoch`` (so a re-created topic
  gets new, larger epochs; the topic's topic_epoch comes from it too),
  partition and state znodes (leader = first live replica, ISR = live
  replicas, leader_epoch 0), LeaderAndIsr to the replicas, UpdateMetadata to
  all.
- Completion (at failover, and for a topic a retried event left unfinished):
  KIP-253 counts and the KIP-232 topic epoch of a topic no controller
  finished, partitions left half-created (a znode and no state).
- Expansion (``PartitionModifications``: the topic znode's data grows),
  KIP-253 step 2: raise undeleted_partition_count in the topic znode; bump
  the leader epoch of every existing partition and send them LeaderAndIsr
  (with the new count), waiting (bounded) for the answers; create each new
  partition's znode with ``leaderEpochAfterCreation`` = the old partitions'
  epochs before the bump, and its state; LeaderAndIsr for the new
  partitions; UpdateMetadata. A controller that fails half way is continued
  by the next one: partitions without a partition znode are new.
- Deletion (``TopicDeletion``: ``/admin/delete_topics`` children):
  UpdateMetadata with leader -2 for its partitions, StopReplica(delete) to
  every live replica, then the topic's znodes go. (Kafka waits for every
  replica to confirm before removing the znodes; refka does not: a replica on
  a dead broker keeps its log until that broker's next full LeaderAndIsr,
  which omits it.)

Not yet: KIP-253 partition deletion (a smaller undeleted_partition_count;
``_on_partition_shrink`` logs it).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import structlog

from refka.common import TopicPartition

from .context import ControllerContext
from .election import ControllerElection
from .request_batch import BatchSender, RequestBatch
from .state_machine import PartitionStateName, ReplicaStateName, initial_state
from .store import Op
from .zk_client import ControllerZkClient
from .znodes import PartitionStateZnode, PartitionZnode

log = structlog.get_logger("refka.controller")

P = PartitionStateName
R = ReplicaStateName
EPOCH_DURING_DELETE = -2  # StopReplica's leader_epoch when the topic is deleted (Kafka's)


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

    # ---- events --------------------------------------------------------------------------------

    async def on_topic_change(self) -> None:
        ctx = self.context
        names = set(await self.zk.topic_names())
        batch = RequestBatch()
        for name in sorted(names - set(ctx.topics)):
            await self.zk.load_topic(name)
            if name in ctx.topics:
                log.info("topic_created", topic=name, partitions=len(ctx.topics[name].partitions))
        for name in sorted(names & set(ctx.topics)):
            if self._incomplete(name):  # new, or left unfinished by a retried event
                await self.complete_topic(name, batch)
        for name in sorted(set(ctx.topics) - names):
            # Removed behind the controller's back (not through /admin/delete_topics).
            log.warning("topic_znode_vanished", topic=name)
            self._forget_topic(name, batch)
        self.sender.send(batch)

    async def on_partition_modifications(self, name: str) -> None:
        ctx = self.context
        old = ctx.topics.get(name)
        read = await self.zk.read_topic(name)
        if read is None:
            return  # deleted: the children watch handles it
        topic, version = read
        if old is None:
            return
        if topic.topic_id != old.topic_id:
            log.warning("topic_replaced", topic=name)
        ctx.topics[name] = topic
        ctx.topic_versions[name] = version
        if 0 <= topic.undeleted_partition_count < len(old.partitions) and len(topic.partitions) <= len(
            old.partitions
        ):
            await self._on_partition_shrink(name, topic.undeleted_partition_count)
            return
        if len(topic.partitions) > len(old.partitions) or any(
            (name, p) not in ctx.partition_znodes for p in topic.partitions
        ):
            batch = RequestBatch()
            await self.complete_topic(name, batch)
            self.sender.send(batch)

    async def on_topic_deletion(self) -> None:
        ctx = self.context
        names = await self.zk.topics_to_delete()
        batch = RequestBatch()
        for name in sorted(names):
            if name not in ctx.topics:
                await self.zk.delete_topic(name, [])
                continue
            tps = ctx.partitions_of(name)
            for tp in tps:
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

    # ---- creation, completion, expansion ---------------------------------------------------------

    def _incomplete(self, name: str) -> bool:
        ctx = self.context
        t = ctx.topics[name]
        if t.topic_epoch < 0 or t.initial_partition_count < 0 or t.undeleted_partition_count < 0:
            return True
        return any(
            (name, p) not in ctx.partition_znodes or (name, p) not in ctx.states for p in t.partitions
        )

    async def _on_partition_shrink(self, name: str, undeleted: int) -> None:
        """KIP-253 step 3 (partition deletion): not implemented yet."""
        log.warning("partition_deletion_not_supported", topic=name, undeleted_partition_count=undeleted)

    async def complete_topic(self, name: str, batch: RequestBatch) -> None:
        """Brings a topic's znodes to what the assignment says: KIP-253 counts and
        the topic epoch, then creation (a new topic) or expansion (new partitions
        of an existing topic), finishing what an earlier controller started."""
        ctx = self.context
        topic = ctx.topics[name]
        existing = [p for p in sorted(topic.partitions) if (name, p) in ctx.partition_znodes]
        new = [p for p in sorted(topic.partitions) if (name, p) not in ctx.partition_znodes]
        expansion = bool(existing) and bool(new)

        # The topic znode: counts (KIP-253 change 1 and step 2) and the topic epoch.
        changed = replace(topic, partitions=dict(topic.partitions))
        if changed.initial_partition_count < 0:
            changed.initial_partition_count = len(existing) if expansion else len(topic.partitions)
        if changed.undeleted_partition_count < len(topic.partitions) and not any(
            ctx.partition_znodes[(name, p)].marked_for_deletion for p in existing
        ):
            changed.undeleted_partition_count = len(topic.partitions)
        claim: Op | None = None
        if changed.topic_epoch < 0:
            changed.topic_epoch, claim = self.zk.allocate_epochs(1)
        if changed != topic:
            await self.zk.write_topic(changed, claim)

        # Partitions with a znode but no state: a creation cut short.
        for p in existing:
            tp = (name, p)
            if tp not in ctx.states:
                await self.create_states([tp], batch)

        if not new:
            return
        after_creation: dict[int, int] = {}
        if expansion:
            after_creation = await self._bump_for_expansion(name, existing, batch)
        await self._create_partitions(name, new, after_creation, batch)

    async def _bump_for_expansion(
        self, name: str, existing: list[int], batch: RequestBatch
    ) -> dict[int, int]:
        """KIP-253 step 2: every existing partition's leader epoch + 1, LeaderAndIsr
        with the new undeleted_partition_count, and wait (bounded) for the answers.
        Returns the epochs *before* the bump, for leaderEpochAfterCreation."""
        ctx = self.context
        before = {p: ctx.states[(name, p)].leader_epoch for p in existing if (name, p) in ctx.states}
        epoch = self.election.epoch
        bumped = {
            (name, p): replace(ctx.states[(name, p)], leader_epoch=before[p] + 1, controller_epoch=epoch)
            for p in before
        }
        await self.zk.write_states(bumped)
        log.info("partition_expansion_epochs_bumped", topic=name, before=before)
        now = RequestBatch()
        for tp in bumped:
            now.add_leader_and_isr(ctx.live_replicas(tp), tp)
        futures = self.sender.send_leader_and_isr(now)
        if futures:
            done, pending = await asyncio.wait(futures, timeout=self.expansion_ack_timeout)
            if pending:
                log.warning("partition_expansion_ack_timeout", topic=name, unanswered=len(pending))
        batch.update_metadata |= set(bumped)
        return before

    async def _create_partitions(
        self, name: str, partitions: list[int], after_creation: dict[int, int], batch: RequestBatch
    ) -> None:
        """Partition znodes (epochs from the counter) and states for new partitions."""
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
        await self.create_states(list(made), batch)

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
        for tp, s in decided.items():
            ctx.pstates.transition(tp, P.ONLINE)
            for r in ctx.replicas(tp):
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
