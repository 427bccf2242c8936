"""The leader's view of its followers: high watermark and ISR rules (no I/O).

Kafka's rules (Partition / Replica in kafka.cluster), as plain functions so
they can be tested without sockets:

- A follower's fetch at ``fetch_offset`` says its log end offset is
  ``fetch_offset``. It is *caught up* at that fetch when ``fetch_offset`` reached
  the leader's log end offset then, or reached the leader's log end offset of
  its previous fetch (it caught up at that previous fetch's time).
- The high watermark is the smallest log end offset in the ISR (the leader's
  own included) and never goes down; an ISR member whose log end offset is not
  known yet (the leader is new) holds it where it is.
- A follower outside the ISR joins it when its log end offset reached the high
  watermark and the start of the leader's current epoch (ISR expansion).
- A follower in the ISR leaves it when it has not been caught up for
  ``replica.lag.time.max.ms`` (ISR shrink).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

UNKNOWN = -1


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower, from its fetches."""

    log_end_offset: int = UNKNOWN
    last_fetch_ms: int = 0
    last_caught_up_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN


def on_follower_fetch(f: FollowerState, fetch_offset: int, leader_log_end_offset: int, now_ms: int) -> None:
    """Kafka's Replica.updateFetchState."""
    if fetch_offset >= leader_log_end_offset:
        f.last_caught_up_ms = max(f.last_caught_up_ms, now_ms)
    elif fetch_offset >= f.last_fetch_leader_log_end_offset >= 0:
        f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
    f.log_end_offset = fetch_offset
    f.last_fetch_ms = now_ms
    f.last_fetch_leader_log_end_offset = leader_log_end_offset


def high_watermark(current: int, leader_id: int, leader_log_end_offset: int, isr: Sequence[int],
                   followers: Mapping[int, FollowerState]) -> int:
    """The new high watermark: min log end offset of the ISR, never below ``current``."""
    low = leader_log_end_offset
    for r in isr:
        if r == leader_id:
            continue
        f = followers.get(r)
        leo = f.log_end_offset if f is not None else UNKNOWN
        if leo < 0:
            return current
        if leo < low:
            low = leo
    return low if low > current else current


def expansion_candidates(leader_id: int, isr: Sequence[int], replicas: Sequence[int],
                         followers: Mapping[int, FollowerState], high_watermark_: int,
                         epoch_start_offset: int) -> list[int]:
    """Followers outside the ISR that may join it now."""
    out = []
    for r in replicas:
        if r == leader_id or r in isr:
            continue
        f = followers.get(r)
        if f is not None and f.log_end_offset >= high_watermark_ and f.log_end_offset >= epoch_start_offset:
            out.append(r)
    return out


def lagging_replicas(leader_id: int, isr: Sequence[int], followers: Mapping[int, FollowerState],
                     now_ms: int, lag_time_max_ms: int) -> list[int]:
    """ISR members (not the leader) not caught up for more than ``lag_time_max_ms``."""
    out = []
    for r in isr:
        if r == leader_id:
            continue
        f = followers.get(r)
        if f is None or now_ms - f.last_caught_up_ms > lag_time_max_ms:
            out.append(r)
    return out
