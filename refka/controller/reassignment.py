"""Partition reassignment (KIP-455, ZooKeeper era), as Kafka's
KafkaController.onPartitionReassignment does it: ``ReassignmentManager``, a
collaborator the controller builds with the context, the zk client, the
request sender and the election (for the controller epoch), run on the
controller's event task (``ApiPartitionReassignment`` events, and after each
``IsrChangeNotification``).

The ongoing reassignment lives in the topic znode (``/brokers/topics/<t>``,
version 3): ``partitions[p]`` is the full replica set RS while it runs,
``adding_replicas[p]`` / ``removing_replicas[p]`` the AR / RR lists; no entry
means none in progress. (Kafka's legacy ``/admin/reassign_partitions`` znode is
not read: KIP-455's API writes the topic znode, as here.)

Rules, with ORS the original replicas and TRS the target:

- Start (or change the target of a running one; ORS is then RS minus AR):
  RS = TRS followed by the ORS not in TRS, AR = TRS - ORS, RR = ORS - TRS.
  Written to the topic znode; the leader epoch goes up (same leader and
  ISR); LeaderAndIsr to every live replica of RS (the added ones as new, so
  they create the partition and follow), UpdateMetadata to all.
- Completion, once every TRS replica is in the ISR (checked after each ISR
  change the leaders report, and at once when it already holds): the leader
  stays if it is in TRS and live, else the first live TRS replica in the ISR
  is elected; the leader epoch goes up and the ISR keeps only TRS; the topic
  znode gets RS = TRS and no AR/RR; LeaderAndIsr to TRS, StopReplica with
  delete to RR, UpdateMetadata to all.
- Cancel (target null): the target becomes ORS, so the added replicas are the
  ones removed. NO_REASSIGNMENT_IN_PROGRESS when none runs.
- A target must name each broker once and only registered brokers
  (INVALID_REPLICA_ASSIGNMENT); with allow_replication_factor_change false
  (KIP-860) its size must be ORS's (INVALID_REPLICATION_FACTOR). An unknown
  topic or partition is UNKNOWN_TOPIC_OR_PARTITION.

Reassignment needs replication: a new replica joins the ISR only once it has
caught up (replication/), and only then does the reassignment complete.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

import structlog

from refka.common import TopicPartition
from refka.protocol.errors import ErrorCode

from .context import ControllerContext
from .election import ControllerElection
from .events import ReassignResult
from .request_batch import BatchSender, RequestBatch
from .state_machine import elect_reassignment
from .zk_client import ControllerZkClient
from .znodes import PartitionStateZnode

log = structlog.get_logger("refka.controller")

# (replicas, adding, removing)
Ongoing = tuple[list[int], list[int], list[int]]


class ReassignmentManager:
    def __init__(
        self,
        context: ControllerContext,
        zk: ControllerZkClient,
        sender: BatchSender,
        election: ControllerElection,
    ) -> None:
        self.context = context
        self.zk = zk
        self.sender = sender
        self.election = election  # the controller epoch the new states carry

    def ongoing(self, partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, Ongoing]:
        """The reassignments in progress (of ``partitions``, or all)."""
        out: dict[TopicPartition, Ongoing] = {}
        wanted = None if partitions is None else set(partitions)
        for name, t in self.context.topics.items():
            for p in sorted(set(t.adding_replicas) | set(t.removing_replicas)):
                if wanted is not None and (name, p) not in wanted:
                    continue
                adding, removing = t.adding_replicas.get(p, []), t.removing_replicas.get(p, [])
                if adding or removing:
                    out[(name, p)] = (list(t.partitions.get(p, [])), list(adding), list(removing))
        return out

    async def on_reassign(
        self, targets: Mapping[TopicPartition, list[int] | None], allow_rf_change: bool
    ) -> dict[TopicPartition, ReassignResult]:
        """Starts, retargets or (None) cancels reassignments; the result per partition."""
        ctx = self.context
        out: dict[TopicPartition, ReassignResult] = {}
        started: dict[TopicPartition, list[int]] = {}
        for tp, target in targets.items():
            t = ctx.topics.get(tp[0])
            if t is None or tp[1] not in t.partitions or tp not in ctx.states:
                out[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
                continue
            replicas = list(t.partitions[tp[1]])
            adding = list(t.adding_replicas.get(tp[1], []))
            origin = [r for r in replicas if r not in adding]
            running = bool(adding or t.removing_replicas.get(tp[1]))
            if target is None:
                if not running:
                    out[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
                    continue
                target = origin
            else:
                problem = self._invalid_target(target)
                if problem:
                    out[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
                    continue
                if not allow_rf_change and len(target) != len(origin):
                    out[tp] = (ErrorCode.INVALID_REPLICATION_FACTOR,
                               f"The replication factor would change from {len(origin)} to {len(target)}.")
                    continue
            if not running and list(target) == replicas:
                out[tp] = (ErrorCode.NONE, None)  # already there: nothing to do
                continue
            started[tp] = list(target)
            out[tp] = (ErrorCode.NONE, None)
        batch = RequestBatch()
        for tp, target in started.items():
            await self._start(tp, target, batch)
        await self.complete(list(started), batch)
        self.sender.send(batch)
        return out

    def _invalid_target(self, target: list[int]) -> str | None:
        if not target:
            return "The target replica list is empty."
        if len(set(target)) != len(target):
            return f"The target replica list {target} names a broker twice."
        unknown = [b for b in target if b not in self.context.live]
        if unknown:
            return f"The target replica list names brokers that are not alive: {unknown}."
        return None

    async def _start(self, tp: TopicPartition, target: list[int], batch: RequestBatch) -> None:
        ctx = self.context
        name, p = tp
        t = ctx.topics[name]
        adding_now = t.adding_replicas.get(p, [])
        origin = [r for r in t.partitions[p] if r not in adding_now]
        rs = list(target) + [r for r in origin if r not in target]
        ar = [r for r in target if r not in origin]
        rr = [r for r in origin if r not in target]
        changed = replace(
            t,
            partitions={**t.partitions, p: rs},
            adding_replicas={k: v for k, v in {**t.adding_replicas, p: ar}.items() if v},
            removing_replicas={k: v for k, v in {**t.removing_replicas, p: rr}.items() if v},
        )
        await self.zk.write_topic(changed)
        s = ctx.states[tp]
        epoch = self.election.epoch
        await self.zk.write_states({tp: replace(s, leader_epoch=s.leader_epoch + 1, controller_epoch=epoch)})
        # Replicas this broker was adding under an earlier target and no longer wants.
        dropped = [r for r in adding_now if r not in rs]
        for r in rs:
            if r in ctx.live:
                batch.add_leader_and_isr([r], tp, is_new=r in ar)
        for r in dropped:
            if r in ctx.live:
                batch.add_stop_replica(r, tp, delete=True, leader_epoch=ctx.states[tp].leader_epoch)
        batch.update_metadata.add(tp)
        log.info("reassignment_started", topic=name, partition=p, replicas=rs, adding=ar, removing=rr)

    async def complete(self, tps: Iterable[TopicPartition] | None, batch: RequestBatch) -> None:
        """Completes each ongoing reassignment (of ``tps``, or all) whose target is in the ISR."""
        ongoing = self.ongoing(tps)
        for tp, (replicas, _adding, removing) in sorted(ongoing.items()):
            target = [r for r in replicas if r not in removing]
            s = self.context.states.get(tp)
            if s is None or any(r not in s.isr for r in target):
                continue
            await self._finish(tp, target, removing, s, batch)

    async def _finish(
        self,
        tp: TopicPartition,
        target: list[int],
        removing: list[int],
        s: PartitionStateZnode,
        batch: RequestBatch,
    ) -> None:
        ctx = self.context
        epoch = self.election.epoch
        isr = tuple(r for r in s.isr if r in target)
        if s.leader in target and s.leader in ctx.live:
            new = replace(s, leader_epoch=s.leader_epoch + 1, isr=isr, controller_epoch=epoch)
        else:
            e = elect_reassignment(s, target, ctx.live, epoch)
            if e.state is None:
                log.warning("reassignment_waiting", topic=tp[0], partition=tp[1], reason=e.reason)
                return
            new = replace(e.state, isr=isr)
        await self.zk.write_states({tp: new})
        name, p = tp
        t = ctx.topics[name]
        changed = replace(
            t,
            partitions={**t.partitions, p: list(target)},
            adding_replicas={k: v for k, v in t.adding_replicas.items() if k != p},
            removing_replicas={k: v for k, v in t.removing_replicas.items() if k != p},
        )
        await self.zk.write_topic(changed)
        batch.add_leader_and_isr([r for r in target if r in ctx.live], tp)
        for r in removing:
            if r in ctx.live:
                batch.add_stop_replica(r, tp, delete=True, leader_epoch=new.leader_epoch)
        batch.update_metadata.add(tp)
        log.info("reassignment_completed", topic=name, partition=p, replicas=target, leader=new.leader,
                 leader_epoch=new.leader_epoch)
