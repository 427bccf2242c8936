"""Helpers for the consumer-group tests: group members as processes, and the
delivery check (no gap; no duplicate of a record whose processing was committed).

Timeouts here only turn a hang into a failure; nothing asserts on time.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

TIMEOUT = 60.0
HERE = Path(__file__).parent


class MemberProcess:
    """A group member in its own process, printing JSON events one per line
    (see ck_group_member.py); they are collected as they arrive."""

    def __init__(self, argv: list[str], name: str, log_dir: Path, cwd: Path | None = None) -> None:
        self.argv = argv
        self.name = name
        self.log_path = log_dir / f"{name}.stderr"
        self.cwd = cwd
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self.proc: subprocess.Popen[str] | None = None
        self.exited = False

    def start(self) -> MemberProcess:
        err = open(self.log_path, "a")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                     text=True, cwd=self.cwd)
        err.close()
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line.startswith("{"):
                continue
            with self._cond:
                self.events.append(json.loads(line))
                self._cond.notify_all()
        with self._cond:
            self.exited = True
            self._cond.notify_all()

    def stderr_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text().splitlines()[-n:])
        except OSError:
            return ""

    def wait_for(self, pred: Callable[[MemberProcess], bool], what: str, timeout: float = TIMEOUT) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: pred(self) or self.exited, timeout) or not pred(self):
                raise AssertionError(f"{self.name}: {what} did not happen; events: {self.events[-10:]}\n"
                                     f"{self.stderr_tail()}")

    def snapshot(self) -> list[dict[str, Any]]:
        with self._cond:
            return list(self.events)

    @property
    def assignment(self) -> set[int]:
        """Partitions owned now, from the rebalance callbacks (eager or incremental)."""
        owned: set[int] = set()
        for ev in self.snapshot():
            if ev["ev"] == "assigned":
                owned |= set(ev["partitions"])
            elif ev["ev"] in ("revoked", "lost"):
                owned -= set(ev["partitions"])
        return owned

    def count(self, kind: str) -> int:
        return sum(1 for ev in self.snapshot() if ev["ev"] == kind)

    def close(self) -> None:
        """Asks the member to close its consumer (LeaveGroup) and waits for it to exit."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write("close\n")
        self.proc.stdin.flush()
        self.proc.wait(TIMEOUT)
        self.wait_for(lambda m: m.exited, "exit")

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, no last commit; the coordinator finds out by the session timeout."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(TIMEOUT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(TIMEOUT)


def ck_member(bootstrap: str, topic: str, group: str, name: str, log_dir: Path, **cfg: Any) -> MemberProcess:
    conf = {"bootstrap": bootstrap, "topic": topic, "group": group, "client_id": name, **cfg}
    return MemberProcess([sys.executable, str(HERE / "ck_group_member.py"), json.dumps(conf)], name, log_dir)


def processings(members: list[MemberProcess]) -> dict[tuple[int, int], list[bool]]:
    """(partition, offset) -> one flag per time a member processed it: whether that
    processing was covered by a later successful commit of the same member."""
    out: dict[tuple[int, int], list[bool]] = {}
    for m in members:
        pending: dict[int, dict[int, int]] = {}  # partition -> offset -> index in out[(p, o)]
        for ev in m.snapshot():
            if ev["ev"] == "rec":
                p, o = ev["p"], ev["o"]
                flags = out.setdefault((p, o), [])
                # Processing it again means the earlier one was never committed.
                pending.setdefault(p, {})[o] = len(flags)
                flags.append(False)
            elif ev["ev"] == "commit":
                for ps, committed in ev["offsets"].items():
                    p = int(ps)
                    waiting = pending.get(p, {})
                    for o in [o for o in waiting if o < committed]:
                        out[(p, o)][waiting.pop(o)] = True
    return out


def all_processed(members: list[MemberProcess], expected: dict[int, int]) -> bool:
    seen = processings(members)
    return all((p, o) in seen for p, n in expected.items() for o in range(n))


def check_delivery(members: list[MemberProcess], expected: dict[int, int]) -> dict[str, int]:
    """No gap: every offset below ``expected[partition]`` was processed. No duplicate
    beyond an uncommitted batch: a record processed more than once was committed by
    at most one of its processings (the others were a member's uncommitted tail)."""
    seen = processings(members)
    missing = [(p, o) for p, n in expected.items() for o in range(n) if (p, o) not in seen]
    assert not missing, f"records never processed: {missing[:20]} ({len(missing)})"
    recommitted = {k: v for k, v in seen.items() if sum(v) > 1}
    assert not recommitted, f"records processed again after a commit covered them: {sorted(recommitted)[:20]}"
    return {"records": sum(expected.values()), "duplicates": sum(len(v) - 1 for v in seen.values())}
