"""events.py: a request answers through its own future, in its own shape."""

from __future__ import annotations

from refka.controller.events import (
    ApiPartitionReassignment,
    ControlledShutdown,
    ReplicaLeaderElection,
    Sync,
)
from refka.protocol.errors import ErrorCode


async def test_a_failed_request_answers_in_its_own_shape() -> None:
    shutdown = ControlledShutdown(2, 17)
    shutdown.fail(ErrorCode.NOT_CONTROLLER)
    assert await shutdown.future == (ErrorCode.NOT_CONTROLLER, [])
    election = ReplicaLeaderElection([("t", 0)], unclean=True)
    election.fail(ErrorCode.UNKNOWN_SERVER_ERROR)
    assert await election.future == {}
    reassignment = ApiPartitionReassignment({("t", 0): [1, 2]})
    reassignment.fail(ErrorCode.NOT_CONTROLLER)
    assert await reassignment.future == {}
    sync = Sync()
    sync.fail(ErrorCode.NOT_CONTROLLER)
    assert await sync.future is None


async def test_a_request_is_answered_once() -> None:
    shutdown = ControlledShutdown(2, -1)
    shutdown.complete((ErrorCode.NONE, [("t", 0)]))
    shutdown.fail(ErrorCode.NOT_CONTROLLER)  # e.g. a retry that found the controller gone
    assert await shutdown.future == (ErrorCode.NONE, [("t", 0)])


async def test_a_request_whose_caller_gave_up_is_not_answered() -> None:
    election = ReplicaLeaderElection(None)
    election.future.cancel()
    election.complete({("t", 0): ErrorCode.NONE})
    assert election.future.cancelled()
