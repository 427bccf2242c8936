"""Waiting, in a test, for what another process, thread or task does: one helper.

``wait_until(predicate, timeout=..., interval=..., message=...)`` calls
``predicate`` until it returns something truthy, and returns that, so a wait
can hand back what it waited for::

    meta = wait_until(lambda: (m := leader_of(topic)) and m.leader_epoch > epoch and m,
                      message="a new leader epoch")

``wait_until_async`` is the same for a test on the event loop, waiting for that
loop's own tasks: it sleeps with ``asyncio.sleep``, and polls more often by
default, its predicate being a look at in-process state rather than a request.

The timeout only guards against hangs (no test asserts on time). When it
passes, the AssertionError names what was awaited (``message``, or what a
callable ``message`` returns then) and the predicate's last answer.
``ignoring`` names exceptions that mean "not yet" (a broker between states)
rather than a failure; the last one is reported as the last answer.
"""

from __future__ import annotations

import asyncio
import reprlib
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

TIMEOUT = 60.0

_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 400


def wait_until(
    predicate: Callable[[], T],
    timeout: float = TIMEOUT,
    interval: float = 0.1,
    message: str | Callable[[], str] = "the condition",
    *,
    ignoring: tuple[type[Exception], ...] = (),
) -> T:
    deadline = time.monotonic() + timeout
    while True:
        try:
            last: object = predicate()
            if last:
                return last  # type: ignore[return-value]
        except ignoring as e:
            last = e
        if time.monotonic() >= deadline:
            raise _timed_out(message, timeout, last)
        time.sleep(interval)


async def wait_until_async(
    predicate: Callable[[], T],
    timeout: float = TIMEOUT,
    interval: float = 0.01,
    message: str | Callable[[], str] = "the condition",
    *,
    ignoring: tuple[type[Exception], ...] = (),
) -> T:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            last: object = predicate()
            if last:
                return last  # type: ignore[return-value]
        except ignoring as e:
            last = e
        if loop.time() >= deadline:
            raise _timed_out(message, timeout, last)
        await asyncio.sleep(interval)


def _timed_out(message: str | Callable[[], str], timeout: float, last: object) -> AssertionError:
    what = message() if callable(message) else message
    seen = "" if isinstance(last, bool) else f"; last: {_repr.repr(last)}"
    return AssertionError(f"timed out after {timeout:g}s waiting for {what}{seen}")
