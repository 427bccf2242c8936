"""KIP-253's drain task on the active controller (seed, Proposed Changes 3, last
bullet): a partition marked for deletion is removed from its topic once it is empty.

Every ``partition.deletion.check.interval.ms`` while this controller is active, as
controller events (events.py; handled one at a time with all the others):

1. ``PartitionDeletionCheck``: for every partition marked for deletion (a non-empty
   ``leaderEpochBeforeDeletion``) whose leader is live, ListOffsets EARLIEST (the
   log start offset) and then LATEST (the log end offset) to the leader, over the
   controller's channel (channel.py: in order with the controller's other requests
   to that broker), with the leader epoch the controller knows as
   ``current_leader_epoch``, so a broker that leads under another epoch answers
   with an error rather than offsets. The answers are awaited off the event task, for
   at most the interval (and the LeaderAndIsr wait of the expansion); what did not
   come is logged and asked again at the next check. They come back as one event:
2. ``PartitionsDrained``: a partition whose log start offset equals its log end
   offset, still marked, under the same topic id and leader epoch it was asked with,
   is removed:
     R1  one transaction: the topic znode without it, its state znode deleted;
     R2  UpdateMetadata with its leader -2 (every broker drops it from its metadata,
         as for a deleted topic) and StopReplica(delete) to its live replicas; the
         StopReplica answers are awaited (bounded);
     R3  once every live replica answered: its partition znode deleted.
   Once a topic has no partition marked (nor being removed), CreatePartitions may
   grow it again (admin.py).

The seed's order is StopReplica, the assignment, the partition znode. Here the
assignment goes first (R1) so that a controller dying between any two steps leaves
a mark its successor finishes from: a partition znode outside its topic's
assignment is a removal cut short after R1, and every check (the first comes right
after a failover) does R2 and R3 again for it, with StopReplica to every live broker
(its replicas are no longer recorded; a broker that does not host it deletes
nothing). Before R1 nothing has changed: the partition is found empty again. A
broker that was down during R2 drops the partition at its next full LeaderAndIsr
(its log stays on disk), as for a deleted topic.

The log end offset is what LATEST answers to a replica: the controller asks with its
own broker id as replica_id, which Kafka's ListOffsets (and refka's) answers with the
leader's log end offset, where a consumer (replica_id -1) gets the high watermark.
Asking as a consumer would remove a partition whose last records are appended but not
yet replicated (start == high watermark < log end): records a producer with acks=1
already has acknowledged, and acks=all ones the followers were about to commit (found:
a batch of 23 acknowledged records lost in a CI run under load).

The task stops when the controller resigns (``stop``): its timer and the wait for
answers are cancelled, and answers to a check of an earlier controller epoch are
dropped (the event carries the epoch).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import structlog

from refka.common import TopicPartition
from refka.protocol import ErrorCode
from refka.protocol.messages.list_offsets import ListOffsets
from refka.protocol.messages.stop_replica import StopReplica

from .context import ControllerContext
from .election import ControllerElection
from .events import ControllerEvent, PartitionDeletionCheck, PartitionsDrained
from .faults import reached
from .request_batch import BatchSender, RequestBatch
from .state_machine import PartitionStateName, ReplicaStateName
from .zk_client import ControllerZkClient
from .znodes import NO_LEADER, PartitionStateZnode

log = structlog.get_logger("refka.controller")

P = PartitionStateName
R = ReplicaStateName
EARLIEST, LATEST = -2, -1  # ListOffsets timestamps
EPOCH_DURING_DELETE = -2  # StopReplica's leader_epoch for a partition being deleted (Kafka's)

# A check: per leader, the two ListOffsets answers to come, and what each partition was asked under.
Asked = dict[TopicPartition, tuple[bytes, int]]


class PartitionDeletionManager:
    def __init__(
        self,
        context: ControllerContext,
        zk: ControllerZkClient,
        sender: BatchSender,
        election: ControllerElection,
        put: Callable[[ControllerEvent], None],
        check_interval: float,
        ack_timeout: float,
    ) -> None:
        self.context = context
        self.zk = zk
        self.sender = sender
        self.election = election
        self._put = put
        self.check_interval = check_interval
        self.ack_timeout = ack_timeout  # StopReplica answers, and the longest wait for ListOffsets
        self._timer: asyncio.TimerHandle | None = None
        self._asking: asyncio.Task[None] | None = None
        # Removals past R1 whose partition znode is still there: (topic, topic id) -> partitions.
        self._removing: dict[tuple[str, bytes], set[int]] = defaultdict(set)

    # ---- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """After a failover: find the removals an earlier controller cut short, and check now."""
        self.stop()
        for name, topic in sorted(self.context.topics.items()):
            left = await self.zk.partitions_being_removed(name)
            if left:
                log.info("partition_removal_resumed", topic=name, partitions=left)
                self._removing[(name, topic.topic_id)].update(left)
        self._put(PartitionDeletionCheck())

    def stop(self) -> None:
        """The controller resigned: no more checks from this term."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._asking is not None:
            self._asking.cancel()
            self._asking = None
        self._removing.clear()

    def _schedule(self) -> None:
        if self._timer is not None:
            self._timer.cancel()  # a check handled again (after a retried store error)
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self.check_interval, self._put, PartitionDeletionCheck())

    # ---- events --------------------------------------------------------------------------------

    async def on_check(self) -> None:
        self._schedule()
        await self._finish_removals()
        if self._asking is not None and not self._asking.done():
            return  # the last check's answers are still awaited
        ctx = self.context
        by_leader: dict[int, Asked] = defaultdict(dict)
        for tp in self._marked():
            s = ctx.states.get(tp)
            if s is None or s.leader == NO_LEADER or s.leader not in ctx.live:
                log.info("partition_deletion_check_skipped", topic=tp[0], partition=tp[1], reason="no live leader")
                continue
            by_leader[s.leader][tp] = (ctx.topics[tp[0]].topic_id, s.leader_epoch)
        if not by_leader:
            return
        me = self.election.broker_id
        asked = {
            leader: (
                self.sender.channel.send(leader, ListOffsets, _list_offsets(parts, EARLIEST, me)),
                self.sender.channel.send(leader, ListOffsets, _list_offsets(parts, LATEST, me)),
                parts,
            )
            for leader, parts in by_leader.items()
        }
        timeout = min(self.check_interval, self.ack_timeout)
        self._asking = asyncio.get_running_loop().create_task(self._collect(self.election.epoch, asked, timeout))

    def _marked(self) -> list[TopicPartition]:
        """The partitions marked for deletion: only partitions at or above a topic's
        undeleted_partition_count can be, and partitions below it are never removed, so a
        topic has some exactly when it has more partitions than that count (checked per
        topic, not per partition: a check costs little among 100,000 partitions)."""
        ctx = self.context
        out: list[TopicPartition] = []
        for name, topic in ctx.topics.items():
            n = topic.undeleted_partition_count
            if n < 0 or len(topic.partitions) <= n:
                continue
            for p in sorted(topic.partitions):
                pz = ctx.partition_znodes.get((name, p))
                if p >= n and pz is not None and pz.marked_for_deletion:
                    out.append((name, p))
        return out

    async def on_drained(self, drained: dict[TopicPartition, tuple[bytes, int]]) -> None:
        """R1 and R2 (R3 too once the replicas answered) for the partitions still as asked."""
        ctx = self.context
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp, (topic_id, leader_epoch) in sorted(drained.items()):
            topic = ctx.topics.get(tp[0])
            pz = ctx.partition_znodes.get(tp)
            s = ctx.states.get(tp)
            if topic is None or topic.topic_id != topic_id or tp[1] not in topic.partitions:
                continue
            if pz is None or not pz.marked_for_deletion or s is None or s.leader_epoch != leader_epoch:
                continue  # changed since it was asked: the next check asks again
            by_topic[tp[0]].append(tp[1])
        for name, partitions in by_topic.items():
            await self._remove(name, partitions)

    # ---- ListOffsets ---------------------------------------------------------------------------

    async def _collect(self, epoch: int, asked: dict[int, tuple[Any, Any, Asked]], timeout: float) -> None:
        try:
            await self._collect_answers(epoch, asked, timeout)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug of ours: log it; the next check asks again
            log.exception("partition_deletion_check_error")

    async def _collect_answers(self, epoch: int, asked: dict[int, tuple[Any, Any, Asked]], timeout: float) -> None:
        futures = [f for earliest, latest, _ in asked.values() for f in (earliest, latest)]
        _done, pending = await asyncio.wait(futures, timeout=timeout)
        for f in pending:
            f.cancel()  # the channel drops it rather than retry it until the broker answers
        drained: dict[TopicPartition, tuple[bytes, int]] = {}
        for leader, (earliest, latest, parts) in sorted(asked.items()):
            if earliest in pending or latest in pending or earliest.exception() or latest.exception():
                log.warning(
                    "partition_deletion_check_unanswered",
                    leader=leader,
                    partitions=len(parts),
                    reason="timed out" if earliest in pending or latest in pending else "broker gone",
                )
                continue
            start, end = _offsets(earliest.result()), _offsets(latest.result())
            for tp, asked_under in parts.items():
                a, b = start.get(tp), end.get(tp)
                if isinstance(a, ErrorCode) or isinstance(b, ErrorCode) or a is None or b is None:
                    log.info("partition_deletion_check_failed", topic=tp[0], partition=tp[1], leader=leader,
                             error=(a if isinstance(a, ErrorCode) else b))
                elif a == b:
                    drained[tp] = asked_under
                else:
                    log.debug("partition_not_drained", topic=tp[0], partition=tp[1], log_start_offset=a,
                              log_end_offset=b)
        if drained:
            self._put(PartitionsDrained(epoch, drained))

    # ---- removal ---------------------------------------------------------------------------------

    async def _remove(self, name: str, partitions: list[int]) -> None:
        ctx = self.context
        topic = ctx.topics[name]
        replicas = {p: list(topic.partitions[p]) for p in partitions}
        gone: dict[TopicPartition, PartitionStateZnode] = {
            (name, p): ctx.states[(name, p)] for p in partitions if (name, p) in ctx.states
        }
        changed = replace(
            topic,
            partitions={p: r for p, r in topic.partitions.items() if p not in partitions},
            adding_replicas={p: r for p, r in topic.adding_replicas.items() if p not in partitions},
            removing_replicas={p: r for p, r in topic.removing_replicas.items() if p not in partitions},
        )
        # R1
        await self.zk.remove_partitions(changed, partitions)
        for p in partitions:
            tp = (name, p)
            ctx.states.pop(tp, None)
            ctx.state_versions.pop(tp, None)
            ctx.partition_znodes.pop(tp, None)
            if ctx.pstates.state(tp) is not P.NON_EXISTENT:
                if ctx.pstates.state(tp) is not P.OFFLINE:
                    ctx.pstates.transition(tp, P.OFFLINE)
                ctx.pstates.transition(tp, P.NON_EXISTENT)
            for r in replicas[p]:
                ctx.rstates.forget((name, p, r))
        key = (name, topic.topic_id)
        self._removing[key].update(partitions)
        log.info("partitions_removed_from_assignment", topic=name, partitions=partitions)
        await reached("removal.assignment_written")
        # R2, R3
        await self._stop_replicas(key, {p: [r for r in replicas[p] if r in ctx.live] for p in partitions}, gone)

    async def _finish_removals(self) -> None:
        """R2 and R3 for removals cut short (by a controller that died, or replicas that did
        not answer in time): StopReplica to every live broker."""
        for key, partitions in sorted(self._removing.items()):
            topic = self.context.topics.get(key[0])
            if topic is None or topic.topic_id != key[1]:  # the topic went meanwhile, with its znodes
                self._removing.pop(key, None)
                continue
            live = sorted(self.context.live)
            await self._stop_replicas(key, {p: live for p in sorted(partitions)}, {})

    async def _stop_replicas(
        self,
        key: tuple[str, bytes],
        brokers: dict[int, list[int]],
        gone: dict[TopicPartition, PartitionStateZnode],
    ) -> None:
        """R2 for ``brokers`` (partition -> the brokers to stop it on), then R3."""
        ctx = self.context
        name = key[0]
        batch = RequestBatch()
        for p in brokers:
            # UpdateMetadata's leader -2: the broker forgets the partition (its epoch and ISR unused).
            batch.deleted[(name, p)] = gone.get((name, p)) or PartitionStateZnode(NO_LEADER, -1, (), -1)
        self.sender.send(batch)
        per_broker: dict[int, dict[TopicPartition, tuple[bool, int]]] = defaultdict(dict)
        for p, rs in brokers.items():
            for r in rs:
                per_broker[r][(name, p)] = (True, EPOCH_DURING_DELETE)
        futures = [
            self.sender.channel.send(b, StopReplica, self.sender.stop_replica(b, parts))
            for b, parts in sorted(per_broker.items())
            if b in ctx.live
        ]
        if futures:
            done, pending = await asyncio.wait(futures, timeout=self.ack_timeout)
            if pending or any(f.exception() for f in done):
                log.warning("partition_removal_unanswered", topic=name, partitions=sorted(brokers),
                            unanswered=len(pending) + sum(1 for f in done if f.exception()))
                return  # R3 at the next check
        await reached("removal.replicas_stopped")
        # R3
        await self.zk.delete_partition_znodes(name, sorted(brokers))
        left = self._removing.get(key, set())
        left.difference_update(brokers)
        if not left:
            self._removing.pop(key, None)
        log.info("partitions_deleted", topic=name, partitions=sorted(brokers))


def _list_offsets(parts: Asked, timestamp: int, replica_id: int) -> Any:
    """ListOffsets as the replica ``replica_id``: LATEST is the log end offset."""
    Req = ListOffsets.Request
    T = Req.ListOffsetsTopic
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for (name, p), (_topic_id, leader_epoch) in sorted(parts.items()):
        by_topic[name].append(
            T.ListOffsetsPartition(partition_index=p, current_leader_epoch=leader_epoch, timestamp=timestamp)
        )
    return Req(
        replica_id=replica_id,
        isolation_level=0,
        topics=[T(name=name, partitions=ps) for name, ps in by_topic.items()],
    )


def _offsets(response: Any) -> dict[TopicPartition, int | ErrorCode]:
    """Each partition's offset, or its error."""
    out: dict[TopicPartition, int | ErrorCode] = {}
    for t in response.topics:
        for p in t.partitions:
            if p.error_code == ErrorCode.NONE:
                out[(t.name, p.partition_index)] = p.offset
                continue
            try:
                out[(t.name, p.partition_index)] = ErrorCode(p.error_code)
            except ValueError:
                out[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_SERVER_ERROR
    return out
