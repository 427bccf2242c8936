"""Keyed one-shot timers for the group coordinator: asyncio timer handles.

A group's timers (its join phase, its pending syncs, each member's session)
and the offsets expiry are each a key; scheduling a key again replaces its
timer, so a heartbeat moves a member's deadline instead of adding one.
Nothing polls. A timer whose callback raises logs it and the others carry
on. Tests use a manual timer with the same schedule / cancel / close.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ..logging import get_logger

log = get_logger("refka.group")


class Timer:
    """Keyed one-shot timers: asyncio timer handles, a new schedule replacing the old."""

    def __init__(self) -> None:
        self._handles: dict[tuple[Any, ...], asyncio.TimerHandle] = {}

    def schedule(self, key: tuple[Any, ...], delay_ms: int, fn: Callable[..., None], *args: Any) -> None:
        self.cancel(key)
        loop = asyncio.get_running_loop()
        self._handles[key] = loop.call_later(max(delay_ms, 0) / 1000, self._fire, key, fn, args)

    def _fire(self, key: tuple[Any, ...], fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        self._handles.pop(key, None)
        try:
            fn(*args)
        except Exception:
            log.exception("group_timer_failed", timer=str(key[0]))

    def cancel(self, key: tuple[Any, ...]) -> None:
        h = self._handles.pop(key, None)
        if h is not None:
            h.cancel()

    def close(self) -> None:
        for h in self._handles.values():
            h.cancel()
        self._handles.clear()
