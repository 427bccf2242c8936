"""The coordinator's keyed timers (timer.py) on a real event loop, every delay 0: what
fires is decided by keys, cancels and order, never by how long anything takes. A timer
due no later than the one a test awaits has run by the time the test resumes."""

from __future__ import annotations

import asyncio

import structlog

from refka.broker.group.timer import Timer


def finish(done: asyncio.Future[None]):
    return lambda: done.set_result(None)


async def test_scheduling_a_key_again_replaces_its_timer():
    timer = Timer()
    fired: list[str] = []
    done = asyncio.get_running_loop().create_future()
    timer.schedule(("heartbeat", "g", "m"), 0, fired.append, "first")
    timer.schedule(("heartbeat", "g", "m"), 0, lambda: (fired.append("second"), done.set_result(None)))
    await done
    assert fired == ["second"]


async def test_cancelled_and_closed_timers_do_not_fire():
    timer = Timer()
    fired: list[str] = []
    loop = asyncio.get_running_loop()
    timer.schedule(("join", "g"), 0, fired.append, "cancelled")
    timer.cancel(("join", "g"))
    timer.cancel(("never", "scheduled"))
    done = loop.create_future()
    timer.schedule(("sync", "g"), 0, finish(done))
    await done
    timer.schedule(("join", "g"), 0, fired.append, "closed")
    timer.close()
    done = loop.create_future()
    timer.schedule(("sync", "g"), 0, finish(done))  # a closed Timer still schedules
    await done
    assert fired == []


async def test_a_failing_callback_is_logged_as_a_group_timer_failure():
    timer = Timer()
    done = asyncio.get_running_loop().create_future()

    def fail() -> None:
        done.set_result(None)
        raise RuntimeError("a bug of ours")

    with structlog.testing.capture_logs() as logs:
        timer.schedule(("sync", "g"), 0, fail)
        await done
    assert [(e["event"], e["timer"]) for e in logs] == [("group_timer_failed", "sync")]
