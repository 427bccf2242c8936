"""Partition reassignment (KIP-455, ZooKeeper era), as Kafka's
KafkaController.onPartitionReassignment does it; a mixin of :class:`Controller`
so it runs on the controller's one event queue with its state.

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

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import structlog

from refka.protocol.errors import ErrorCode

from .state_machine import elect_reassignment
from .store import BadVersionError
from .znodes import PartitionStateZnode

if TYPE_CHECKING:
    from .controller import _Batch

log = structlog.get_logger("refka.controller")

TP = tuple[str, int]
ReassignResult = tuple[ErrorCode, str | None]
# (replicas, adding, removing)
Ongoing = tuple[list[int], list[int], list[int]]


class ReassignmentMixin:
    """Reassignment for :class:`Controller` (see the module docstring)."""

    # Provided by Controller.
    topics: dict[str, Any]
    topic_versions: dict[str, int]
    states: dict[TP, PartitionStateZnode]
    live: dict[int, Any]
    _events: asyncio.Queue[tuple[Any, ...]]

    # ---- public ----------------------------------------------------------------------------

    async def alter_partition_reassignments(
        self, targets: Mapping[TP, list[int] | None], allow_replication_factor_change: bool = True
    ) -> dict[TP, ReassignResult]:
        """Starts, retargets or (None) cancels reassignments; the result per partition."""
        fut = asyncio.get_running_loop().create_future()
        self._events.put_nowait(("reassign", dict(targets), allow_replication_factor_change, fut))
        return await fut  # type: ignore[no-any-return]

    def ongoing_reassignments(self, partitions: Iterable[TP] | None = None) -> dict[TP, Ongoing]:
        """The reassignments in progress (of ``partitions``, or all)."""
        out: dict[TP, Ongoing] = {}
        wanted = None if partitions is None else set(partitions)
        for name, t in self.topics.items():
            for p in sorted(set(t.adding_replicas) | set(t.removing_replicas)):
                if wanted is not None and (name, p) not in wanted:
                    continue
                adding, removing = t.adding_replicas.get(p, []), t.removing_replicas.get(p, [])
                if adding or removing:
                    out[(name, p)] = (list(t.partitions.get(p, [])), list(adding), list(removing))
        return out

    # ---- events ----------------------------------------------------------------------------

    async def _on_reassign(
        self, targets: dict[TP, list[int] | None], allow_rf_change: bool
    ) -> dict[TP, ReassignResult]:
        from .controller import _Batch

        out: dict[TP, ReassignResult] = {}
        started: dict[TP, list[int]] = {}
        for tp, target in targets.items():
            t = self.topics.get(tp[0])
            if t is None or tp[1] not in t.partitions or tp not in self.states:
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
        batch = _Batch()
        for tp, target in started.items():
            await self._start_reassignment(tp, target, batch)
        await self._complete_reassignments(list(started), batch)
        await self._send(batch)  # type: ignore[attr-defined]
        return out

    def _invalid_target(self, target: list[int]) -> str | None:
        if not target:
            return "The target replica list is empty."
        if len(set(target)) != len(target):
            return f"The target replica list {target} names a broker twice."
        unknown = [b for b in target if b not in self.live]
        if unknown:
            return f"The target replica list names brokers that are not alive: {unknown}."
        return None

    async def _write_topic(self, name: str, changed: Any) -> None:
        from .controller import _Retry

        try:
            results = await self._commit(  # type: ignore[attr-defined]
                [("set", changed.path, changed.to_json(), self.topic_versions[name])]
            )
        except BadVersionError as e:
            await self._conflict(name)  # type: ignore[attr-defined]
            raise _Retry(f"topic {name} changed under the controller") from e
        self.topics[name] = changed
        self.topic_versions[name] = results[0].version

    async def _start_reassignment(self, tp: TP, target: list[int], batch: _Batch) -> None:
        name, p = tp
        t = self.topics[name]
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
        await self._write_topic(name, changed)
        s = self.states[tp]
        epoch = self.election.epoch  # type: ignore[attr-defined]
        await self._write_states(  # type: ignore[attr-defined]
            {tp: replace(s, leader_epoch=s.leader_epoch + 1, controller_epoch=epoch)}
        )
        # Replicas this broker was adding under an earlier target and no longer wants.
        dropped = [r for r in adding_now if r not in rs]
        for r in rs:
            if r in self.live:
                batch.add_leader_and_isr([r], tp, is_new=r in ar)
        for r in dropped:
            if r in self.live:
                batch.stop_replica[r][tp] = (True, self.states[tp].leader_epoch)
        batch.update_metadata.add(tp)
        log.info("reassignment_started", topic=name, partition=p, replicas=rs, adding=ar, removing=rr)

    async def _complete_reassignments(self, tps: Iterable[TP] | None, batch: _Batch) -> None:
        """Completes each ongoing reassignment (of ``tps``, or all) whose target is in the ISR."""
        ongoing = self.ongoing_reassignments(tps)
        for tp, (replicas, _adding, removing) in sorted(ongoing.items()):
            target = [r for r in replicas if r not in removing]
            s = self.states.get(tp)
            if s is None or any(r not in s.isr for r in target):
                continue
            await self._finish_reassignment(tp, target, removing, s, batch)

    async def _finish_reassignment(
        self, tp: TP, target: list[int], removing: list[int], s: PartitionStateZnode, batch: _Batch
    ) -> None:
        epoch = self.election.epoch  # type: ignore[attr-defined]
        isr = tuple(r for r in s.isr if r in target)
        if s.leader in target and s.leader in self.live:
            new = replace(s, leader_epoch=s.leader_epoch + 1, isr=isr, controller_epoch=epoch)
        else:
            e = elect_reassignment(s, target, self.live, epoch)
            if e.state is None:
                log.warning("reassignment_waiting", topic=tp[0], partition=tp[1], reason=e.reason)
                return
            new = replace(e.state, isr=isr)
        await self._write_states({tp: new})  # type: ignore[attr-defined]
        name, p = tp
        t = self.topics[name]
        changed = replace(
            t,
            partitions={**t.partitions, p: list(target)},
            adding_replicas={k: v for k, v in t.adding_replicas.items() if k != p},
            removing_replicas={k: v for k, v in t.removing_replicas.items() if k != p},
        )
        await self._write_topic(name, changed)
        batch.add_leader_and_isr([r for r in target if r in self.live], tp)
        for r in removing:
            if r in self.live:
                batch.stop_replica[r][tp] = (True, new.leader_epoch)
        batch.update_metadata.add(tp)
        log.info("reassignment_completed", topic=name, partition=p, replicas=target, leader=new.leader,
                 leader_epoch=new.leader_epoch)
