"""A lab plan (``refka lab run PLAN.yaml``): what it may say, read and checked as a whole
before anything runs. No I/O but reading the file.

A plan is a YAML mapping:

    name: leader-ping-pong                 # required
    description: ...                       # optional
    setup:                                 # optional: topics created first (CreateTopics)
      topics:
        - {name: pp, partitions: 1, replication_factor: 3, configs: {min.insync.replicas: 2}}
    load:                                  # optional: a producer and a consumer for the plan's time
      topic: pp
      rate: 200                            # records per second (default 100)
      keys: 16                             # distinct keys, 0 for unkeyed records (default 16)
      value_bytes: 64                      # (default 64)
      group: g                             # optional: consume in this group (KIP-253 ordered delivery)
      drain_timeout: 20                    # seconds the consumer gets to read what was acknowledged
      expect: {max_lost: 0, min_acknowledged: 100}
    steps:                                 # required, in order
      - at: 1                              # seconds from the start of the steps (top-level only)
        move_leader: {topic: pp, partition: 0, to: 1}
      - after: 1                           # seconds after the previous step finished (default 0)
        wait: {leader: {topic: pp, partition: 0, is: 1}, timeout: 10}

Every step has one action, and may say ``at`` or ``after`` (not both) and
``continue_on_error: true`` (a failure is printed and the plan goes on). The steps start
once the setup is done and the load runs; ``at`` counts from then. Actions:

- ``move_leader: {topic, partition, to}``, ``elect_preferred: {topic, partitions?}``,
  ``reassign: {topic, assignments: {0: [1, 2, 0]}}``, ``partition_count: {topic, count}``
  (expand, or shrink a KIP-253 topic): the admin API's topic operations.
- ``stop: B`` (controlled shutdown), ``kill: B``, ``start: B``, ``expire_session: B``:
  a broker of the admin API's process; ``freeze: B``, ``thaw: B``: its Metadata answers.
- ``fault: {name?, kind, ...}``: the fault spec as ``POST /api/faults`` takes it
  (``FAULT_FIELDS``); ``name`` lets a later ``remove_fault: NAME`` remove it.
  ``clear_faults: true`` removes every fault. The load's clients are
  ``refka-lab-producer`` and ``refka-lab-consumer`` (a fault's ``client_id``).
- ``wait: {CONDITION: {...}, timeout: S}`` (default 30 s): until the condition holds,
  read from the admin API; failed at the timeout. Conditions (``CONDITIONS``):
  ``isr: {topic, partition?, size: N | full: true}`` (every partition when none is
  named; full: the ISR is every replica), ``leader: {topic, partition, is: B | not: B}``
  (-1: no leader), ``broker_state: {broker, state: live | offline}`` (registered in the
  cluster's metadata or not), ``partitions: {topic, count}`` (``count`` partitions not
  marked for deletion, each with a leader, any others marked: a KIP-253 change done).
- ``sleep: S``; ``repeat: {times: N, steps: [...]}``: the block N times (its steps use
  ``after``, not ``at``).

Refusals are ``PlanError``: where (``step 3.2``, ``load``, ...) and what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DEFAULT_WAIT_TIMEOUT = 30.0
MAX_REPEAT = 10_000
# The fault kinds of refka/broker/faults.py (KINDS), which the admin API adds.
FAULT_KINDS = ("error", "latency", "drop-before", "drop-after", "blackhole", "replication-delay", "throttle")
BROKER_STATES = ("live", "offline")
EXPECT_KEYS = ("max_lost", "max_duplicates", "max_failed", "max_out_of_order", "min_acknowledged",
               "min_consumed")
STEP_MODIFIERS = ("at", "after", "continue_on_error")


class PlanError(ValueError):
    """A plan refused: ``where`` in the plan (``step 3.2``, ``load``...), and what is wrong."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int = 1
    replication_factor: int = 1
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LoadSpec:
    topic: str
    rate: float = 100.0
    keys: int = 16
    value_bytes: int = 64
    group: str | None = None
    drain_timeout: float = 20.0
    expect: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """One step: its place (``3``, ``3.2`` for step 2 of repeat step 3), its action and the
    action's checked argument, when it starts, and for ``repeat`` its block."""

    path: str
    action: str
    args: Any
    at: float | None = None
    after: float = 0.0
    continue_on_error: bool = False
    times: int = 0
    steps: tuple[Step, ...] = ()


@dataclass(frozen=True)
class Plan:
    name: str
    steps: tuple[Step, ...]
    description: str = ""
    topics: tuple[TopicSpec, ...] = ()
    load: LoadSpec | None = None


# -- value checks: each takes the value and where it is, and answers it checked -----------

Check = Callable[[Any, str], Any]


def _int(v: Any, where: str) -> int:
    if type(v) is not int:
        raise PlanError(where, f"expected an integer, got {v!r}")
    return v


def _natural(v: Any, where: str) -> int:
    if _int(v, where) < 0:
        raise PlanError(where, f"expected an integer >= 0, got {v!r}")
    return v  # type: ignore[no-any-return]


def _positive_int(v: Any, where: str) -> int:
    if _int(v, where) < 1:
        raise PlanError(where, f"expected an integer >= 1, got {v!r}")
    return v  # type: ignore[no-any-return]


def _seconds(v: Any, where: str) -> float:
    if type(v) not in (int, float) or v < 0:
        raise PlanError(where, f"expected a number of seconds >= 0, got {v!r}")
    return float(v)


def _positive(v: Any, where: str) -> float:
    if type(v) not in (int, float) or v <= 0:
        raise PlanError(where, f"expected a number > 0, got {v!r}")
    return float(v)


def _str(v: Any, where: str) -> str:
    if not isinstance(v, str) or not v:
        raise PlanError(where, f"expected a non-empty string, got {v!r}")
    return v


def _bool(v: Any, where: str) -> bool:
    if type(v) is not bool:
        raise PlanError(where, f"expected true or false, got {v!r}")
    return v


def _number(v: Any, where: str) -> float:
    if type(v) not in (int, float):
        raise PlanError(where, f"expected a number, got {v!r}")
    return v  # type: ignore[no-any-return]


def _int_or_str(v: Any, where: str) -> int | str:
    if type(v) is int or (isinstance(v, str) and v):
        return v  # type: ignore[no-any-return]
    raise PlanError(where, f"expected an error name or number, got {v!r}")


def _as_is(v: Any, where: str) -> Any:
    """Checked by the caller (a block of steps, a section read further)."""
    return v


def _one_of(*choices: str) -> Check:
    def check(v: Any, where: str) -> str:
        if v not in choices:
            raise PlanError(where, f"expected one of {', '.join(choices)}, got {v!r}")
        return v  # type: ignore[no-any-return]
    return check


def _list_of(item: Check) -> Check:
    def check(v: Any, where: str) -> list[Any]:
        if not isinstance(v, list) or not v:
            raise PlanError(where, f"expected a non-empty list, got {v!r}")
        return [item(x, f"{where}[{i}]") for i, x in enumerate(v)]
    return check


def _configs(v: Any, where: str) -> dict[str, str]:
    if not isinstance(v, dict):
        raise PlanError(where, f"expected a mapping of config names to values, got {v!r}")
    out = {}
    for k, x in v.items():
        if not isinstance(k, str) or isinstance(x, (dict, list)) or x is None:
            raise PlanError(where, f"{k!r}: {x!r} is not a config name and a value")
        out[k] = str(x).lower() if isinstance(x, bool) else str(x)  # YAML's true is Kafka's "true"
    return out


def _assignments(v: Any, where: str) -> dict[str, list[int]]:
    if not isinstance(v, dict) or not v:
        raise PlanError(where, f"expected a mapping of partition -> replica ids, got {v!r}")
    out = {}
    for k, ids in v.items():
        p = k if type(k) is int else (int(k) if isinstance(k, str) and k.isdigit() else None)
        if p is None or p < 0:
            raise PlanError(where, f"{k!r} is not a partition number")
        out[str(p)] = _list_of(_natural)(ids, f"{where}.{k}")
    return out


def _mapping(v: Any, where: str, required: dict[str, Check], optional: dict[str, Check] | None = None
             ) -> dict[str, Any]:
    """``v`` as a mapping with these keys, each checked; an unknown or missing key is refused."""
    optional = optional or {}
    if not isinstance(v, dict):
        raise PlanError(where, f"expected a mapping with {', '.join([*required, *optional])}, got {v!r}")
    known = {**required, **optional}
    for k in v:
        if k not in known:
            raise PlanError(where, f"unknown key {k!r} (expected {', '.join(known)})")
    for k in required:
        if k not in v:
            raise PlanError(where, f"{k!r} is missing")
    return {k: known[k](x, f"{where}.{k}") for k, x in v.items()}


def _exactly_one(d: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
    given = [k for k in keys if k in d]
    if len(given) != 1:
        raise PlanError(where, f"give exactly one of {', '.join(keys)}")


# -- conditions -------------------------------------------------------------------------

def _isr(v: Any, where: str) -> dict[str, Any]:
    d = _mapping(v, where, {"topic": _str}, {"partition": _natural, "size": _positive_int, "full": _bool})
    _exactly_one(d, ("size", "full"), where)
    if d.get("full") is False:
        raise PlanError(where + ".full", "only full: true means something")
    return d


def _leader(v: Any, where: str) -> dict[str, Any]:
    d = _mapping(v, where, {"topic": _str, "partition": _natural}, {"is": _int, "not": _int})
    _exactly_one(d, ("is", "not"), where)
    return d


CONDITIONS: dict[str, Check] = {
    "isr": _isr,
    "leader": _leader,
    "broker_state": lambda v, w: _mapping(v, w, {"broker": _natural, "state": _one_of(*BROKER_STATES)}),
    "partitions": lambda v, w: _mapping(v, w, {"topic": _str, "count": _positive_int}),
}


def _wait(v: Any, where: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise PlanError(where, f"expected a mapping with one condition ({', '.join(CONDITIONS)}) and timeout")
    unknown = [k for k in v if k not in CONDITIONS and k != "timeout"]
    if unknown:
        raise PlanError(where, f"unknown condition {unknown[0]!r} (expected one of {', '.join(CONDITIONS)})")
    conds = [k for k in v if k in CONDITIONS]
    if len(conds) != 1:
        raise PlanError(where, f"a wait has exactly one condition ({', '.join(CONDITIONS)}), got {len(conds)}")
    timeout = _positive(v["timeout"], f"{where}.timeout") if "timeout" in v else DEFAULT_WAIT_TIMEOUT
    return {"condition": conds[0], "args": CONDITIONS[conds[0]](v[conds[0]], f"{where}.{conds[0]}"),
            "timeout": timeout}


# -- actions: each with the check of its argument ----------------------------------------

# The fields of POST /api/faults and their checks (refka/broker/faults.py; the API checks ranges).
FAULT_FIELDS: dict[str, Check] = {
    "kind": _one_of(*FAULT_KINDS), "broker": _natural, "api": _str, "api_key": _natural,
    "min_version": _natural, "max_version": _natural, "client_id": _str, "topic": _str,
    "partition": _natural, "follower": _natural, "error_code": _int_or_str, "latency_ms": _positive,
    "bytes_per_second": _positive_int, "count": _positive_int, "duration_ms": _positive,
}


def _fault(v: Any, where: str) -> dict[str, Any]:
    return _mapping(v, where, {"kind": FAULT_FIELDS["kind"]},
                    {"name": _str, **{k: c for k, c in FAULT_FIELDS.items() if k != "kind"}})


def _nothing(v: Any, where: str) -> None:
    if v not in (None, True, {}):
        raise PlanError(where, f"takes no argument (write true), got {v!r}")


_TOPIC_OPS: dict[str, Check] = {
    "move_leader": lambda v, w: _mapping(v, w, {"topic": _str, "partition": _natural, "to": _natural}),
    "elect_preferred": lambda v, w: _mapping(v, w, {"topic": _str}, {"partitions": _list_of(_natural)}),
    "reassign": lambda v, w: _mapping(v, w, {"topic": _str, "assignments": _assignments}),
    "partition_count": lambda v, w: _mapping(v, w, {"topic": _str, "count": _positive_int}),
}
BROKER_OPS = ("stop", "kill", "start", "expire_session", "freeze", "thaw")
ACTIONS: dict[str, Check] = {
    **_TOPIC_OPS,
    **{op: _natural for op in BROKER_OPS},
    "fault": _fault,
    "remove_fault": _str,
    "clear_faults": _nothing,
    "wait": _wait,
    "sleep": _seconds,
    "repeat": _as_is,  # its block is read by _step
}


def _step(raw: Any, path: str, top_level: bool, fault_names: set[str]) -> Step:
    where = f"step {path}"
    if not isinstance(raw, dict):
        raise PlanError(where, f"expected a mapping with one action ({', '.join(ACTIONS)}), got {raw!r}")
    unknown = [k for k in raw if k not in ACTIONS and k not in STEP_MODIFIERS]
    if unknown:
        raise PlanError(where, f"unknown key {unknown[0]!r} (actions: {', '.join(ACTIONS)}; "
                               f"with them: {', '.join(STEP_MODIFIERS)})")
    actions = [k for k in raw if k in ACTIONS]
    if len(actions) != 1:
        raise PlanError(where, f"a step has exactly one action, got {len(actions)} ({', '.join(actions) or 'none'})")
    action = actions[0]
    inside = f"{where}: "  # then the key: "step 3: move_leader.to"
    where = f"{where} ({action})"
    if "at" in raw and "after" in raw:
        raise PlanError(where, "give at or after, not both")
    if "at" in raw and not top_level:
        raise PlanError(where, "'at' is for top-level steps only: inside repeat, use 'after'")
    at = _seconds(raw["at"], inside + "at") if "at" in raw else None
    after = _seconds(raw["after"], inside + "after") if "after" in raw else 0.0
    coe = _bool(raw["continue_on_error"], inside + "continue_on_error") if "continue_on_error" in raw else False
    if action == "repeat":
        block = _mapping(raw["repeat"], inside + "repeat", {"times": _positive_int, "steps": _as_is})
        if block["times"] > MAX_REPEAT:
            raise PlanError(inside + "repeat.times", f"at most {MAX_REPEAT}")
        steps = _steps(block["steps"], inside + "repeat.steps", path + ".", False, fault_names)
        return Step(path, action, None, at, after, coe, times=block["times"], steps=steps)
    args = ACTIONS[action](raw[action], inside + action)
    if action == "fault" and "name" in args:
        fault_names.add(args["name"])
    if action == "remove_fault" and args not in fault_names:
        raise PlanError(where, f"no earlier fault step is named {args!r}")
    return Step(path, action, args, at, after, coe)


def _steps(raw: Any, where: str, prefix: str, top_level: bool, fault_names: set[str]) -> tuple[Step, ...]:
    if not isinstance(raw, list) or not raw:
        raise PlanError(where, "expected a non-empty list of steps")
    out = [_step(s, f"{prefix}{i}", top_level, fault_names) for i, s in enumerate(raw, 1)]
    last_at: Step | None = None
    for s in out:
        if s.at is not None:
            if last_at is not None and last_at.at is not None and s.at < last_at.at:
                raise PlanError(f"step {s.path} ({s.action})",
                                f"at {s.at:g} is before step {last_at.path}'s at {last_at.at:g}")
            last_at = s
    return tuple(out)


def _topic(v: Any, where: str) -> TopicSpec:
    d = _mapping(v, where, {"name": _str},
                 {"partitions": _positive_int, "replication_factor": _positive_int, "configs": _configs})
    return TopicSpec(**d)


def _expect(v: Any, where: str) -> dict[str, int]:
    return _mapping(v, where, {}, {k: _natural for k in EXPECT_KEYS})


def _load(v: Any, where: str) -> LoadSpec:
    d = _mapping(v, where, {"topic": _str}, {
        "rate": _positive, "keys": _natural, "value_bytes": _natural, "group": _str,
        "drain_timeout": _positive, "expect": _expect})
    return LoadSpec(**d)


def parse_plan(raw: Any) -> Plan:
    """A plan from its YAML document (already loaded), checked whole; PlanError otherwise."""
    d = _mapping(raw, "plan", {"name": _str, "steps": _as_is}, {"description": _str, "setup": _as_is, "load": _load})
    topics: tuple[TopicSpec, ...] = ()
    if "setup" in d:
        setup = _mapping(d["setup"], "setup", {"topics": _as_is})
        if not isinstance(setup["topics"], list) or not setup["topics"]:
            raise PlanError("setup.topics", "expected a non-empty list of topics")
        topics = tuple(_topic(t, f"setup.topics[{i}]") for i, t in enumerate(setup["topics"]))
        names = [t.name for t in topics]
        if len(set(names)) != len(names):
            raise PlanError("setup.topics", "a topic is named twice")
    steps = _steps(d["steps"], "steps", "", True, set())
    return Plan(name=d["name"], description=d.get("description", ""), topics=topics, load=d.get("load"),
                steps=steps)


def load_plan(path: str | Path) -> Plan:
    """Reads and checks a plan file; PlanError (where: the file) when it cannot be read or parsed."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise PlanError(str(path), f"cannot read it: {e.strerror or e}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise PlanError(str(path), f"not YAML: {e}") from None
    return parse_plan(raw)


def count_steps(steps: tuple[Step, ...]) -> int:
    """How many steps run, repeats unrolled (a repeat step itself not counted)."""
    return sum(s.times * count_steps(s.steps) if s.action == "repeat" else 1 for s in steps)
