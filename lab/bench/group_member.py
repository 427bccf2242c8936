"""One consumer-group member for the group benchmark (groups.py), in its own process.

    python -m lab.bench.group_member '<json settings>'

One process per member: the Python client holds the GIL in its poll loop, so
three members in one process would measure the GIL, not the broker.

Settings (JSON, first argument): ``bootstrap``, ``topic``, ``group``,
``config`` (extra confluent-kafka settings), ``commit_every`` (records between
synchronous commits), ``ends`` (partition -> end offset: report ``end`` when
that offset - 1 is consumed; empty for an endless trickle).

Talks to the benchmark with lines: it reads commands on stdin and writes
JSON events on stdout, one per line, each with ``t`` = ``time.monotonic()``
(CLOCK_MONOTONIC, the same clock in every process of this machine):

- ``ready`` once the Consumer exists; ``go`` (stdin) makes it subscribe;
- with ``hold`` in the settings, every assignment is paused at once (in the
  assign callback) until ``resume`` (stdin): then ``resumed``;
- ``assign`` / ``revoke`` / ``lost`` with the partitions, from the rebalance
  callbacks (called from inside ``poll``/``consume``);
- ``first``: the first record of a partition since it was assigned (``p``,
  ``offset``);
- ``end``: the record at ``ends[p] - 1`` was consumed;
- ``commit``: the partitions of a successful commit (the first three only);
- ``stop`` (stdin): close() and report ``summary`` (records, per-partition
  runs of consecutive offsets consumed, commits and their latencies), exit;
- ``leave`` (stdin): ``left`` with ``t`` taken just before close() (the
  member's exit) and how long close() took, then ``summary``, exit.

Commits: ``commit(asynchronous=False)`` of the consumed positions after every
``commit_every`` records this member consumed (batches are cut so a commit
falls exactly on the multiple). A commit that fails (a rebalance under way,
nothing new to commit) is counted by error name and consumption goes on.
"""

from __future__ import annotations

import json
import resource
import sys
import threading
import time
from typing import Any, cast

from confluent_kafka import Consumer, KafkaException, TopicPartition


def _emit(event: str, **fields: Any) -> None:
    fields.setdefault("t", time.monotonic())
    sys.stdout.write(json.dumps({"ev": event, **fields}) + "\n")
    sys.stdout.flush()


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)  # librdkafka's threads included
    return r.ru_utime + r.ru_stime


class _Commands:
    """stdin lines, read on a thread; the poll loop looks at ``latest`` (stop,
    leave) and ``resume`` between polls."""

    def __init__(self) -> None:
        self.latest: str | None = None
        self.go = threading.Event()
        self.resume = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "go":
                self.go.set()
            elif cmd == "resume":
                self.resume.set()
            elif cmd:
                self.latest = cmd
                self.go.set()
        if self.latest is None:
            self.latest = "stop"  # the benchmark went away
        self.go.set()


def main() -> int:
    settings = json.loads(sys.argv[1])
    ends = {int(p): int(e) for p, e in settings.get("ends", {}).items()}
    commit_every = int(settings["commit_every"])
    consumer = Consumer({"bootstrap.servers": settings["bootstrap"], "group.id": settings["group"],
                         "client.id": f"bench-member-{settings['slot']}", **settings["config"]})
    commands = _Commands()
    owned: set[int] = set()  # the current assignment
    fresh: set[int] = set()  # assigned partitions with no record yet since their assignment
    runs: dict[int, list[list[int]]] = {}  # partition -> [[first offset, last offset + 1], ...]
    commit_seconds: list[float] = []
    commit_failures: dict[str, int] = {}
    assignments = 0
    holding = bool(settings.get("hold"))

    def on_assign(c: Consumer, partitions: list[TopicPartition]) -> None:
        nonlocal assignments
        assignments += 1
        if holding:
            c.assign(partitions)
            c.pause(partitions)
        owned.clear()
        owned.update(tp.partition for tp in partitions)
        fresh.clear()
        fresh.update(owned)
        _emit("assign", partitions=sorted(owned))

    def on_revoke(c: Consumer, partitions: list[TopicPartition]) -> None:
        owned.clear()
        fresh.clear()
        _emit("revoke", partitions=sorted(tp.partition for tp in partitions))

    def on_lost(c: Consumer, partitions: list[TopicPartition]) -> None:
        owned.clear()
        fresh.clear()
        _emit("lost", partitions=sorted(tp.partition for tp in partitions))

    def commit() -> None:
        t0 = time.perf_counter()
        try:
            consumer.commit(asynchronous=False)
        except KafkaException as e:
            name = e.args[0].name() if e.args and hasattr(e.args[0], "name") else str(e)
            commit_failures[name] = commit_failures.get(name, 0) + 1
        else:
            commit_seconds.append(time.perf_counter() - t0)
            if len(commit_seconds) <= 3:  # enough for the benchmark to see a group with offsets
                _emit("commit", partitions=sorted(owned))

    _emit("ready")
    commands.go.wait()
    cpu0 = _cpu()
    records = 0
    committed_at = 0  # the record count at the last commit
    if commands.latest is None:
        consumer.subscribe([settings["topic"]], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        take, poll = consumer.consume, consumer.poll
        while commands.latest is None:
            if holding and commands.resume.is_set():
                holding = False
                consumer.resume(consumer.assignment())
                _emit("resumed")
            # consume(n, 0) returns what is already fetched without waiting for
            # a full batch (that would delay the timestamps); when nothing is
            # there, poll() blocks until one record arrives (or 50 ms pass).
            batch = take(commit_every - records % commit_every, 0)
            if not batch:
                msg = poll(0.05)
                if msg is None:
                    continue
                batch = [msg]
            now = time.monotonic()
            for msg in batch:
                if msg.error() is not None:
                    _emit("error", error=str(msg.error()))
                    continue
                # A record (not an error) always has both.
                p, o = cast(int, msg.partition()), cast(int, msg.offset())
                prun = runs.setdefault(p, [])
                if prun and prun[-1][1] == o:
                    prun[-1][1] = o + 1
                else:
                    prun.append([o, o + 1])
                if p in fresh:
                    fresh.discard(p)
                    _emit("first", t=now, p=p, offset=o)
                if o == ends.get(p, -2) - 1:
                    _emit("end", t=now, p=p)
                records += 1
            if records != committed_at and not records % commit_every:
                committed_at = records
                commit()
    cpu1 = _cpu()
    if commands.latest == "leave":
        t_exit = time.monotonic()
        consumer.close()  # LeaveGroup
        _emit("left", t=t_exit, close_seconds=time.monotonic() - t_exit)
    else:
        consumer.close()
    _emit("summary", records=records, runs={str(p): r for p, r in runs.items()}, commits=len(commit_seconds),
          commit_seconds=commit_seconds, commit_failures=commit_failures, assignments=assignments,
          cpu_seconds=cpu1 - cpu0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
