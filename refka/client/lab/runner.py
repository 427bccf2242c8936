"""Running a plan (plan.py) against a cluster: its setup, its load, its steps in time, each
printed as it happens, then the load's report and the timeline file.

The order: the topics of ``setup`` are created (CreateTopics; one that exists already is a
failure: a plan starts from a fresh topic); the load starts and the steps' clock starts once
a first record has gone round; each step waits for its time (``at`` from the start of
the steps, or ``after`` the previous step finished), runs, and is printed with its time,
its outcome and how long it took. A step that fails (the API refused, a wait timed out)
ends the plan unless it says ``continue_on_error``. Then, whatever happened: the faults the
plan added and did not remove are removed, the load stops and reports (its ``expect``
unmet fails the plan), and the timeline is written.

Exit status: 0 when every step ran (or failed with continue_on_error) and the load met
its expectations; 1 otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

from refka.client.connection import BrokerConnectionError, connect
from refka.protocol import ErrorCode
from refka.protocol.messages.create_topics import CreateTopics

from . import conditions, timeline
from .api import AdminApi, AdminError, quote
from .load import Load, LoadError, LoadReport
from .plan import Plan, Step, TopicSpec, count_steps

POLL_S = 0.1  # how often a wait reads the admin API (it offers reads, not waits)
LOAD_START_TIMEOUT_S = 30.0


class StepFailed(Exception):
    pass


def now_ms() -> float:
    return round(time.time() * 1000, 3)


def _compact(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))


def describe(action: str, args: Any) -> str:
    """A step as one short line: ``move_leader topic=pp partition=0 to=2``."""
    if action == "wait" and isinstance(args, dict):
        return f"wait {args['condition']} {describe('', args['args']).strip()} (timeout {args['timeout']:g}s)"
    if isinstance(args, dict):
        return f"{action} " + " ".join(f"{k}={_compact(v)}" for k, v in args.items())
    return f"{action} {'' if args is None else args}".rstrip()


def brief(result: Any, args: Any = None, limit: int = 120) -> str:
    """An answer in a line: a JSON object as ``key=value``, without what the step said
    already, the nulls and the creation time."""
    if isinstance(result, dict):
        said = args if isinstance(args, dict) else {}
        text = " ".join(f"{k}={_compact(v)}" for k, v in result.items()
                        if v is not None and k != "created_ms" and said.get(k) != v)
    else:
        text = _compact(result)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Printer:
    """Each event as it happens: a line of text, or with ``--json`` the event itself."""

    def __init__(self, out: TextIO, as_json: bool) -> None:
        self.out = out
        self.as_json = as_json

    def event(self, e: dict[str, Any]) -> None:
        if self.as_json:
            print(json.dumps(e, separators=(",", ":"), default=str), file=self.out, flush=True)
            return
        kind = e["type"]
        if kind == "plan_started":
            line = (f"plan {e['plan']} ({e['file']}): {e['steps']} steps; admin API {e['url']}, "
                    f"bootstrap {e['bootstrap']}")
        elif kind == "plan_step":
            when = "   setup" if e["elapsed_s"] is None else f"{e['elapsed_s']:8.3f}s"
            rounds = f" [round {'.'.join(map(str, e['rounds']))}]" if e["rounds"] else ""
            outcome = f"ok: {brief(e['result'], e['args'])}" if e["outcome"] == "ok" else f"FAILED: {e['error']}"
            line = (f"{when}  #{e['step']}{rounds}  {describe(e['action'], e['args'])}  {outcome}  "
                    f"({e['duration_ms'] / 1000:.3f}s)")
        elif kind == "load_started":
            line = (f"load: {e['rate']:g} records/s on {e['topic']} ({e['keys']} keys"
                    f"{', group ' + e['group'] if e['group'] else ''}); a first record went round in "
                    f"{e['seconds']:.3f}s")
        elif kind == "load_report":
            line = "load: " + LoadReport(**{k: v for k, v in e.items() if k in LoadReport.__dataclass_fields__}).summary()
            if e["violations"]:
                line += "\nload: NOT AS EXPECTED: " + "; ".join(e["violations"])
        elif kind == "plan_finished":
            line = f"plan {e['plan']}: {e['outcome'].upper()} in {e['duration_s']:.1f}s"
            if e["reason"]:
                line += f" ({e['reason']})"
        else:
            line = json.dumps(e)
        print(line, file=self.out, flush=True)


async def create_topics(bootstrap: str, topics: tuple[TopicSpec, ...]) -> dict[str, str | None]:
    """CreateTopics for the plan's topics; each topic's error (None: created)."""
    R = CreateTopics.Request
    req = R(topics=[R.CreatableTopic(
        name=t.name, num_partitions=t.partitions, replication_factor=t.replication_factor, assignments=[],
        configs=[R.CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in t.configs.items()])
        for t in topics], timeout_ms=30_000)
    conn = await connect(bootstrap, "refka-lab")
    try:
        resp = await conn.request(CreateTopics, req)
    finally:
        await conn.close()
    out: dict[str, str | None] = {}
    for t in resp.topics:
        out[t.name] = None if not t.error_code else (
            f"{ErrorCode(t.error_code).name}: {t.error_message or ErrorCode(t.error_code).meaning}")
    return out


class Runner:
    def __init__(self, plan: Plan, api: AdminApi, bootstrap: str, printer: Printer, file: str = "") -> None:
        self.plan = plan
        self.api = api
        self.bootstrap = bootstrap
        self.printer = printer
        self.file = file
        self.run_id = uuid.uuid4().hex[:12]
        self.events: list[dict[str, Any]] = []
        self.follower = timeline.TimelineFollower(api, now_ms())
        self.load: Load | None = None
        self.t0 = 0.0  # monotonic time of the start of the steps
        self._faults: dict[str, int] = {}  # a fault step's name -> the id the API gave it
        self._installed: set[int] = set()  # faults this plan added and has not removed
        self._failed: tuple[str, str] | None = None  # (step, why) that ended the plan

    def emit(self, e: dict[str, Any]) -> None:
        e = {"t_ms": e.pop("t_ms", now_ms()), "source": "plan", **e}
        self.events.append(e)
        self.printer.event(e)

    async def run(self) -> int:
        started = time.monotonic()
        self.emit({"type": "plan_started", "plan": self.plan.name, "description": self.plan.description,
                   "file": self.file, "run_id": self.run_id, "url": self.api.url, "bootstrap": self.bootstrap,
                   "steps": count_steps(self.plan.steps)})
        follow = asyncio.create_task(self.follower.follow(), name="lab-timeline")
        report: LoadReport | None = None
        try:
            if await self._setup() and await self._start_load():
                self.t0 = time.monotonic()
                await self._steps(self.plan.steps, [])
        finally:
            await self._remove_faults()
            if self.load is not None:
                report = await self.load.stop()
            follow.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follow
            await self.follower.poll()  # the last events
        violations: list[str] = []
        if report is not None:
            violations = report.violations(self.plan.load.expect if self.plan.load is not None else {})
            self.emit({"type": "load_report", **report.as_dict(), "violations": violations})
        reason = None
        if self._failed is not None:
            reason = f"step {self._failed[0]} failed: {self._failed[1]}"
        elif violations:
            reason = "the load was not as expected"
        self.emit({"type": "plan_finished", "plan": self.plan.name, "outcome": "failed" if reason else "ok",
                   "failed_step": self._failed[0] if self._failed else None, "reason": reason,
                   "duration_s": round(time.monotonic() - started, 3)})
        return 1 if reason else 0

    # -- setup and load -----------------------------------------------------------------

    async def _setup(self) -> bool:
        if not self.plan.topics:
            return True
        t_ms, t = now_ms(), time.monotonic()
        try:
            errors = await create_topics(self.bootstrap, self.plan.topics)
        except (BrokerConnectionError, OSError, TimeoutError) as e:
            errors = {spec.name: f"cannot create it: {e}" for spec in self.plan.topics}
        ok = True
        for i, spec in enumerate(self.plan.topics, 1):
            error = errors.get(spec.name, "not in CreateTopics' answer")
            self._step_event(f"setup.{i}", [], "create_topic", {
                "name": spec.name, "partitions": spec.partitions, "replication_factor": spec.replication_factor,
                **({"configs": spec.configs} if spec.configs else {})}, t_ms, t,
                None if error else "created", error, elapsed=False)
            if error:
                self._failed = (f"setup.{i}", error)
                ok = False
        return ok

    async def _start_load(self) -> bool:
        spec = self.plan.load
        if spec is None:
            return True
        t = time.monotonic()
        self.load = Load(spec, self.bootstrap, self.run_id)
        try:
            await self.load.start(LOAD_START_TIMEOUT_S)
        except (LoadError, BrokerConnectionError, OSError) as e:
            self._failed = ("load", str(e))
            return False
        self.emit({"type": "load_started", "topic": spec.topic, "rate": spec.rate, "keys": spec.keys,
                   "group": spec.group, "seconds": round(time.monotonic() - t, 3)})
        return True

    # -- steps ----------------------------------------------------------------------------

    async def _steps(self, steps: tuple[Step, ...], rounds: list[int]) -> bool:
        """Runs the steps in time; False once one failed without continue_on_error."""
        for s in steps:
            delay = s.after if s.at is None else self.t0 + s.at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if s.action == "repeat":
                for i in range(1, s.times + 1):
                    if not await self._steps(s.steps, [*rounds, i]):
                        return False
                continue
            t_ms, t = now_ms(), time.monotonic()
            try:
                result, error = await self._do(s), None
            except (StepFailed, AdminError) as e:
                result, error = None, str(e)
            self._step_event(s.path, rounds, s.action, s.args, t_ms, t, result, error)
            if error is not None and not s.continue_on_error:
                self._failed = (s.path, error)
                return False
        return True

    def _step_event(self, path: str, rounds: list[int], action: str, args: Any, t_ms: float, t: float,
                    result: Any, error: str | None, elapsed: bool = True) -> None:
        e: dict[str, Any] = {
            "t_ms": t_ms, "type": "plan_step", "step": path, "rounds": rounds, "action": action, "args": args,
            "elapsed_s": round(t - self.t0, 3) if elapsed else None,
            "duration_ms": round((time.monotonic() - t) * 1000, 3),
            "outcome": "ok" if error is None else "error", "result": result, "error": error}
        if self.load is not None:
            e["load_sent"], e["load_acknowledged"], e["load_consumed"] = self.load.counts()
        self.emit(e)

    async def _do(self, s: Step) -> Any:
        a = s.args
        simple = _SIMPLE.get(s.action)
        if simple is not None:
            method, path, body = simple(a)
            result = await (self.api.post(path, body) if method == "POST" else self.api.delete(path))
            if s.action in ("stop", "kill", "start"):
                self.follower.restarted(a)
            if s.action == "clear_faults":
                self._installed.clear()
            return result
        handlers: dict[str, Callable[[Any], Awaitable[Any]]] = {
            "fault": self._fault, "remove_fault": self._remove_fault, "sleep": self._sleep, "wait": self._wait}
        return await handlers[s.action](a)

    async def _fault(self, a: dict[str, Any]) -> Any:
        result = await self.api.post("/api/faults", {k: v for k, v in a.items() if k != "name"})
        self._installed.add(result["id"])
        if "name" in a:
            self._faults[a["name"]] = result["id"]
        return result

    async def _remove_fault(self, name: str) -> Any:
        fault_id = self._faults.get(name)
        if fault_id is None:
            raise StepFailed(f"fault {name!r} was not added (its step failed)")
        self._installed.discard(fault_id)
        try:
            return await self.api.delete(f"/api/faults/{fault_id}")
        except AdminError as e:
            if e.status != 404:
                raise
            return {"id": fault_id, "removed": False, "why": "gone already (its count fired or it expired)"}

    async def _sleep(self, seconds: float) -> Any:
        await asyncio.sleep(seconds)
        return f"slept {seconds:g}s"

    async def _wait(self, w: dict[str, Any]) -> Any:
        condition, args = w["condition"], w["args"]
        path = conditions.source(condition, args)
        deadline = time.monotonic() + w["timeout"]
        t = time.monotonic()
        while True:
            try:
                ok, seen = conditions.holds(condition, args, await self.api.get(path))
            except AdminError as e:  # e.g. a broker that restarted does not know the topic yet
                ok, seen = False, str(e)
            if ok:
                return f"{seen} after {time.monotonic() - t:.3f}s"
            if time.monotonic() >= deadline:
                raise StepFailed(f"timed out after {w['timeout']:g}s; last seen: {seen}")
            await asyncio.sleep(POLL_S)

    async def _remove_faults(self) -> None:
        """The faults this plan added and did not remove (a plan that failed half-way)."""
        for fault_id in sorted(self._installed):
            with contextlib.suppress(AdminError):
                await self.api.delete(f"/api/faults/{fault_id}")
        self._installed.clear()


def _broker_op(op: str) -> Callable[[int], tuple[str, str, None]]:
    path = {"expire_session": "expire-session", "freeze": "metadata/freeze", "thaw": "metadata/thaw"}.get(op, op)
    return lambda b: ("POST", f"/api/brokers/{b}/{path}", None)


# action -> (method, path, body) from its argument: the steps that are one call of the API.
_SIMPLE: dict[str, Callable[[Any], tuple[str, str, dict[str, Any] | None]]] = {
    "move_leader": lambda a: ("POST", f"/api/topics/{quote(a['topic'])}/partitions/{a['partition']}/leader",
                              {"broker": a["to"]}),
    "elect_preferred": lambda a: ("POST", f"/api/topics/{quote(a['topic'])}/elect-preferred",
                                  {"partitions": a["partitions"]} if "partitions" in a else None),
    "reassign": lambda a: ("POST", f"/api/topics/{quote(a['topic'])}/reassign", {"assignments": a["assignments"]}),
    "partition_count": lambda a: ("POST", f"/api/topics/{quote(a['topic'])}/partition-count", {"count": a["count"]}),
    **{op: _broker_op(op) for op in ("stop", "kill", "start", "expire_session", "freeze", "thaw")},
    "clear_faults": lambda a: ("DELETE", "/api/faults", None),
}


async def bootstrap_of(api: AdminApi) -> str:
    """The brokers' advertised endpoints, from ``GET /api/cluster`` (PLAINTEXT where there are several)."""
    cluster = await api.get("/api/cluster")
    out = []
    for b in cluster.get("brokers", []):
        endpoints = b.get("endpoints") or {}
        if endpoints:
            out.append(endpoints.get("PLAINTEXT") or next(iter(endpoints.values())))
    if not out:
        raise AdminError(f"{api.url}/api/cluster lists no broker endpoints")
    return ",".join(out)


async def run_plan(plan: Plan, url: str, bootstrap: str | None, *, token: str | None = None,
                   timeline_path: str | None = None, as_json: bool = False, file: str = "",
                   out: TextIO = sys.stdout) -> int:
    api = AdminApi(url, token)
    if bootstrap is None:
        bootstrap = await bootstrap_of(api)
    runner = Runner(plan, api, bootstrap, Printer(out, as_json), file)
    rc = await runner.run()
    if timeline_path is not None:
        n = timeline.write(timeline_path, runner.events, runner.follower.events)
        if not as_json:
            print(f"timeline: {n} lines ({len(runner.follower.events)} of the cluster's) in {timeline_path}",
                  file=out, flush=True)
    return rc
