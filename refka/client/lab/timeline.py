"""A plan's timeline file (``refka lab run --timeline FILE``): the plan's own events merged
with the cluster's, one JSON object a line, sorted by ``t_ms``, for a Spark job to read
(``spark.read.json(FILE)``).

Every line has ``t_ms`` (wall-clock milliseconds since the epoch, a float), ``source``
("plan" or "cluster") and ``type``. The plan's lines (``source: plan``):

- ``plan_started``: ``plan``, ``description``, ``file``, ``run_id``, ``url``, ``bootstrap``,
  ``steps`` (how many run, repeats unrolled);
- ``plan_step``: one per step run, at its start: ``step`` (its place: "3", "3.2" for step 2
  of repeat step 3), ``rounds`` (the enclosing repeats' rounds, from 1; [] at the top),
  ``action``, ``args`` (as the plan gives them), ``elapsed_s`` (from the start of the
  steps; null for setup), ``duration_ms``, ``outcome`` ("ok" or "error"), ``result`` (the
  admin API's answer, or what a wait saw), ``error`` (null when ok), and with a load
  ``load_sent``, ``load_acknowledged``, ``load_consumed`` at its end. Setup's topics are
  steps "setup.N" with action ``create_topic``;
- ``load_started`` (``topic``, ``rate``, ``keys``, ``group``; once a first record went
  round) and ``load_report`` (refka/client/lab/load.py's counters, ``violations``);
- ``plan_finished``: ``outcome`` ("ok" or "failed"), ``failed_step``, ``reason``, ``duration_s``.

The cluster's lines (``source: cluster``) are ``GET /api/timeline``'s events of every
broker the admin API serves, since the run started, as they are: ``seq`` (per broker),
``time_ms`` (the same as ``t_ms``), ``broker`` (whose view: a metadata change is seen by
every broker, so it is there once per broker that saw it; a ``fault_fired`` is on the broker
it fired on), ``type`` (topic_created, topic_deleted, partition_created, partition_removed,
leader_changed, isr_changed, replicas_changed, controller_changed, fault_fired) and the
type's fields (``topic``, ``partition``, ``old_leader``/``new_leader``,
``old_epoch``/``new_epoch``, ``old_isr``/``new_isr``, ...). A broker that restarts starts
a new view (``seq`` from 1 again, the topics it learns as ``topic_created``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from .api import AdminApi, AdminError

POLL_S = 0.5


class TimelineFollower:
    """Reads ``GET /api/timeline?broker=N&since=SEQ`` of every broker the admin API serves,
    every POLL_S (the API keeps a bounded deque per broker, and a stopped broker's view goes
    with it, so it is read as the run goes rather than once at the end)."""

    def __init__(self, api: AdminApi, started_ms: float) -> None:
        self.api = api
        self.started_ms = started_ms
        self.events: list[dict[str, Any]] = []
        self._since: dict[int, int] = {}  # broker -> the last seq read of its current view
        self._last_ms: dict[int, float] = {}  # broker -> the time of the last event read

    def restarted(self, broker: int) -> None:
        """The broker was stopped or started: its next view numbers its events from 1."""
        self._since[broker] = 0

    async def poll(self) -> None:
        try:
            cluster = await self.api.get("/api/cluster")
        except AdminError:
            return
        for b in cluster.get("brokers", []):
            if b.get("served_here"):
                self._since.setdefault(b["id"], 0)
        for broker in sorted(self._since):
            try:
                rows = await self.api.get_lines("/api/timeline", broker=broker, since=self._since[broker])
            except AdminError as e:
                if e.status == 404:  # not running now: when it is again, its view is a new one
                    self._since[broker] = 0
                continue
            last = self._last_ms.get(broker, self.started_ms)
            for r in rows:
                self._since[broker] = max(self._since[broker], r["seq"])
                if r["time_ms"] >= last and r["time_ms"] >= self.started_ms:
                    self.events.append({"t_ms": r["time_ms"], "source": "cluster", **r})
                    self._last_ms[broker] = r["time_ms"]

    async def follow(self) -> None:
        """Polls until cancelled."""
        while True:
            await self.poll()
            await asyncio.sleep(POLL_S)


def write(path: str | Path, plan_events: list[dict[str, Any]], cluster_events: list[dict[str, Any]]) -> int:
    """Writes the merged timeline; the number of lines."""
    lines = sorted([*plan_events, *cluster_events], key=lambda e: e["t_ms"])
    with open(path, "w", encoding="utf-8") as f:
        for e in lines:
            f.write(json.dumps(e, separators=(",", ":"), default=str) + "\n")
    return len(lines)
