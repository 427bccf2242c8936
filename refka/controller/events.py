"""The controller's events (Kafka's ControllerEvent): one class per kind.

Everything the controller reacts to becomes one of these on its one queue
(controller.py), handled one at a time in queue order:

- from the election (election.py): ``Elected`` (with the epoch won; stale when
  the epoch moved on before it was handled) and ``Resigned`` (the session or
  ``/controller`` was lost, or the broker stops);
- from a fired one-shot watch (zk_client.py sets them): ``BrokerChange``
  (children of ``/brokers/ids``), ``TopicChange`` (children of
  ``/brokers/topics``), ``PartitionModifications`` (a topic znode's data),
  ``TopicDeletion`` (children of ``/admin/delete_topics``),
  ``IsrChangeNotification`` (children of ``/isr_change_notification``);
- from the controller itself (partition_deletion.py, KIP-253's drain task):
  ``PartitionDeletionCheck`` every ``partition.deletion.check.interval.ms``, and
  ``PartitionsDrained`` with what the leaders answered;
- requests a caller awaits (``ControllerRequest``): ``ControlledShutdown``,
  ``ReplicaLeaderElection`` (preferred or unclean, KIP-460),
  ``ApiPartitionReassignment`` (KIP-455), and ``Sync`` (a barrier for tests
  and the lab).

A watch event carries no data beyond what names the znode: its handler
re-reads the store. A request carries its own future; ``complete`` answers
it, and ``fail(error)`` answers it in the request's own shape when it cannot
be handled (this broker is not the controller, or a bug), as Kafka's
``preempt`` calls an event's callback with an error.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from refka.common import TopicPartition
from refka.protocol.errors import ErrorCode

T = TypeVar("T")

# AlterPartitionReassignments' answer for one partition: (error, message).
ReassignResult = tuple[ErrorCode, str | None]


class ControllerEvent:
    """Something the controller handles on its event task."""

    __slots__ = ()


# ---- from the election ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Elected(ControllerEvent):
    """This broker won ``epoch``: take over (Kafka's onControllerFailover)."""

    epoch: int


@dataclass(frozen=True, slots=True)
class Resigned(ControllerEvent):
    """This broker is no longer the controller: forget the cluster."""


# ---- from watches ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerChange(ControllerEvent):
    """``/brokers/ids`` children changed: brokers started, failed or re-registered."""


@dataclass(frozen=True, slots=True)
class TopicChange(ControllerEvent):
    """``/brokers/topics`` children changed: topics created (or removed behind our back)."""


@dataclass(frozen=True, slots=True)
class PartitionModifications(ControllerEvent):
    """``/brokers/topics/<topic>`` data changed: partitions added, or a reassignment written."""

    topic: str


@dataclass(frozen=True, slots=True)
class TopicDeletion(ControllerEvent):
    """``/admin/delete_topics`` children changed: topics to delete."""


@dataclass(frozen=True, slots=True)
class IsrChangeNotification(ControllerEvent):
    """``/isr_change_notification`` children changed: leaders wrote new ISRs."""


# ---- KIP-253's drain task (partition_deletion.py) -------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionDeletionCheck(ControllerEvent):
    """Time to ask the leaders of partitions marked for deletion for their offsets."""


@dataclass(frozen=True, slots=True)
class PartitionsDrained(ControllerEvent):
    """The leaders' answers to a check made by the controller of ``epoch``: the marked
    partitions found empty, each with the topic id and leader epoch it was asked under."""

    epoch: int
    drained: dict[TopicPartition, tuple[bytes, int]]


# ---- requests ------------------------------------------------------------------------------


def _new_future() -> asyncio.Future[Any]:
    return asyncio.get_running_loop().create_future()


@dataclass(eq=False, kw_only=True)
class ControllerRequest(ControllerEvent, abc.ABC, Generic[T]):
    """An event a caller awaits: made on the loop, it carries the future of its reply."""

    future: asyncio.Future[T] = dataclasses.field(default_factory=_new_future, repr=False)

    def complete(self, reply: T) -> None:
        if not self.future.done():
            self.future.set_result(reply)

    @abc.abstractmethod
    def fail(self, error: ErrorCode) -> None:
        """Answers with ``error`` in this request's shape."""


@dataclass(eq=False)
class Sync(ControllerRequest[None]):
    """Done once every event queued before it has been handled."""

    def fail(self, error: ErrorCode) -> None:
        self.complete(None)


@dataclass(eq=False)
class ControlledShutdown(ControllerRequest[tuple[ErrorCode, list[TopicPartition]]]):
    """Move leadership away from ``broker_id``; the reply: (error, partitions it still leads)."""

    broker_id: int
    broker_epoch: int

    def fail(self, error: ErrorCode) -> None:
        self.complete((error, []))


@dataclass(eq=False)
class ReplicaLeaderElection(ControllerRequest[dict[TopicPartition, ErrorCode]]):
    """ElectLeaders for ``partitions`` (all when None): the preferred replica, or with
    ``unclean`` any live assigned replica of a leaderless partition. The reply: an error
    per partition; empty when the request could not be handled."""

    partitions: list[TopicPartition] | None
    unclean: bool = False

    def fail(self, error: ErrorCode) -> None:
        self.complete({})


@dataclass(eq=False)
class ApiPartitionReassignment(ControllerRequest[dict[TopicPartition, ReassignResult]]):
    """AlterPartitionReassignments: a target per partition (None cancels); the reply: a
    result per partition; empty when the request could not be handled."""

    targets: dict[TopicPartition, list[int] | None]
    allow_replication_factor_change: bool = True

    def fail(self, error: ErrorCode) -> None:
        self.complete({})
