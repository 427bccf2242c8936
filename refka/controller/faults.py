"""A test's way into the controller's KIP-253 operations, between their steps: never set
in production (nothing in refka sets it).

``step_hook``, when a test sets it, is awaited after each named step of an expansion, a
shrink (topics.py) and a partition removal (partition_deletion.py), with the step's
name: ``expansion.count_raised``, ``expansion.partitions_created``,
``expansion.epochs_bumped``, ``expansion.leader_and_isr_answered``,
``expansion.states_created``, ``shrink.marked``, ``shrink.epochs_bumped``,
``shrink.leader_and_isr_answered``, ``removal.assignment_written``,
``removal.replicas_stopped``. A unit test makes it hang (the controller is frozen after
that step, then stopped, and its successor must finish the operation from the znodes);
an integration test makes it kill its process (tests/integration/crashing_broker.py).

A module attribute rather than a controller setting, so a test can reach the
controllers of a subprocess before they exist, and so no broker property or
environment variable can switch it on in production.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

StepHook = Callable[[str], Awaitable[None]]

step_hook: StepHook | None = None


async def reached(step: str) -> None:
    """Called after each named step; a no-op unless a test set ``step_hook``."""
    if step_hook is not None:
        await step_hook(step)
