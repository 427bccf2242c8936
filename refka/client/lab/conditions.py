"""A plan's ``wait`` conditions, judged from what the admin API answers: each names the
path it reads (``source``) and decides from that answer whether it holds, saying what it
saw (``holds``). No I/O: the runner reads, these decide.

- ``isr: {topic, partition?, size: N | full: true}``: the partition's ISR has N brokers, or
  is every replica; with no partition named, every partition's (``GET /api/topics/{t}``).
- ``leader: {topic, partition, is: B | not: B}``: the partition's leader is B, or is not
  (-1: no leader; a leader the broker's metadata does not list as live is -1).
- ``broker_state: {broker, state: live | offline}``: the broker is registered in the
  cluster's metadata, or is not (``GET /api/cluster``): after ``stop`` it is offline once
  the controller has seen it go, after ``start`` live once it has registered.
- ``partitions: {topic, count}``: ``count`` partitions are not marked for deletion (the
  topic's KIP-253 ``undeleted_partition_count``; all of them for a plain topic), each has a
  leader, and any others are marked: an expansion or a KIP-253 shrink is done.
"""

from __future__ import annotations

from typing import Any

from .api import quote


def source(condition: str, args: dict[str, Any]) -> str:
    """The admin API path whose answer decides the condition."""
    return "/api/cluster" if condition == "broker_state" else f"/api/topics/{quote(args['topic'])}"


def holds(condition: str, args: dict[str, Any], view: dict[str, Any]) -> tuple[bool, str]:
    """Whether the condition holds in ``view`` (the answer of ``source``), and what was seen."""
    return _JUDGES[condition](args, view)


def _partition(view: dict[str, Any], index: int) -> dict[str, Any] | None:
    return next((p for p in view.get("partitions", []) if p["partition"] == index), None)


def _isr(args: dict[str, Any], view: dict[str, Any]) -> tuple[bool, str]:
    topic = args["topic"]
    if "partition" in args:
        p = _partition(view, args["partition"])
        if p is None:
            return False, f"{topic} has no partition {args['partition']}"
        parts = [p]
    else:
        parts = view.get("partitions", [])
    for p in parts:
        isr, replicas = p["isr"], p["replicas"]
        ok = set(isr) == set(replicas) if args.get("full") else len(isr) == args["size"]
        if not ok:
            return False, f"{topic}-{p['partition']} isr {isr}, replicas {replicas}"
    if len(parts) == 1:
        return True, f"{topic}-{parts[0]['partition']} isr {parts[0]['isr']}"
    return True, f"{topic}: every partition's isr ({len(parts)} partitions)"


def _leader(args: dict[str, Any], view: dict[str, Any]) -> tuple[bool, str]:
    topic, index = args["topic"], args["partition"]
    p = _partition(view, index)
    if p is None:
        return False, f"{topic} has no partition {index}"
    leader = p["leader"]
    ok = leader == args["is"] if "is" in args else leader != args["not"]
    return ok, f"{topic}-{index} leader {leader} (epoch {p['leader_epoch']})"


def _broker_state(args: dict[str, Any], view: dict[str, Any]) -> tuple[bool, str]:
    live = sorted(b["id"] for b in view.get("brokers", []))
    ok = (args["broker"] in live) == (args["state"] == "live")
    return ok, f"broker {args['broker']} {'live' if args['broker'] in live else 'offline'} (live: {live})"


def _partitions(args: dict[str, Any], view: dict[str, Any]) -> tuple[bool, str]:
    parts = view.get("partitions", [])
    undeleted = view.get("undeleted_partition_count", -1)
    if undeleted is None or undeleted < 0:
        undeleted = len(parts)
    count = args["count"]
    leaderless = [p["partition"] for p in parts if p["partition"] < count and p["leader"] < 0]
    unmarked = [p["partition"] for p in parts if p["partition"] >= count and not p["marked_for_deletion"]]
    marked = len(parts) - undeleted
    seen = f"{args['topic']}: {undeleted} partitions" + (f" (+{marked} marked for deletion)" if marked > 0 else "")
    if leaderless:
        seen += f", no leader for {leaderless}"
    ok = undeleted == count and len(parts) >= count and not leaderless and not unmarked
    return ok, seen


_JUDGES = {"isr": _isr, "leader": _leader, "broker_state": _broker_state, "partitions": _partitions}
