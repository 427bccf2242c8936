"""KIP-526's working set (refka/client/working_set.py): which topics the next Metadata
request names, worked out by hand from the seed's rules. Times are seconds on a clock the
test holds; max_age 100, max_idle 300 (the seed's defaults scaled), back-off 1."""

from __future__ import annotations

import math

import pytest

from refka.client.working_set import MetadataWorkingSet

AGE, IDLE, BACKOFF = 100.0, 300.0, 1.0


def working_set(**kw: float) -> MetadataWorkingSet:
    return MetadataWorkingSet(**{"max_age": AGE, "max_idle": IDLE, "retry_backoff": BACKOFF, **kw})


def names(n: int, prefix: str = "t") -> list[str]:
    return [f"{prefix}{i:03d}" for i in range(n)]


def refreshed(ws: MetadataWorkingSet, now: float) -> list[str]:
    """What ``due`` names at ``now``, answered at once."""
    topics = ws.due(now)
    if topics:
        ws.attempted(now)
        ws.answered(topics, now)
    return topics


def test_a_new_topic_is_asked_for_alone_and_at_once():
    ws = working_set()
    ws.use(names(30), 0.0)
    assert refreshed(ws, 0.0) == names(30)
    ws.use(["new"], 10.0)
    assert refreshed(ws, 10.0) == ["new"]  # the 30 others are 10 s old: not aging yet
    assert ws.due(10.0) == []


def test_requests_are_spaced_by_the_back_off():
    ws = working_set()
    ws.use(["a"], 0.0)
    assert refreshed(ws, 0.0) == ["a"]
    ws.use(["b"], 0.5)
    assert ws.due(0.5) == [] and ws.next_due(0.5) == 1.0
    assert refreshed(ws, 1.0) == ["b"]


def test_a_failed_request_is_asked_again_after_the_back_off():
    ws = working_set()
    ws.use(["a"], 0.0)
    assert ws.due(0.0) == ["a"]
    ws.attempted(0.0)  # no answer came
    assert ws.due(0.5) == []
    assert ws.due(1.0) == ["a"]


def test_aging_topics_wait_until_there_are_as_many_as_the_target_then_go_oldest_first():
    ws = working_set()
    assert ws.target_fetch_size() == 20
    for i, t in enumerate(names(25)):  # answered one second apart
        ws.use([t], float(i))
        assert refreshed(ws, float(i) + 0.5) == [t]
    # at 69.5 topics 0..19 are at least AGE/2 = 50 old: 20 = the target, so they go
    assert ws.due(69.0) == []
    assert refreshed(ws, 69.5) == names(20)
    assert ws.due(70.0) == []  # t020 (answered at 20.5) has aged, but alone it is below the target


def test_an_urgent_topic_takes_a_share_of_the_aging_ones_up_to_the_target():
    ws = working_set()
    ws.use(names(30), 0.0)
    assert refreshed(ws, 0.0) == names(30)
    ws.use(names(30, "u"), 40.0)
    assert refreshed(ws, 40.0) == names(30, "u")
    ws.use(["new"], 60.0)
    # T = {new}; U = the 30 answered at 0 (60 >= 50 old), 19 of them oldest first (ties by name)
    assert refreshed(ws, 60.0) == ["new", *names(19)]


def test_topics_older_than_max_age_are_urgent_even_below_the_target():
    ws = working_set()
    ws.use(["a", "b"], 0.0)
    assert refreshed(ws, 0.0) == ["a", "b"]
    assert ws.due(99.0) == []  # aging, but two are below the target of 20
    assert ws.next_due(99.0) == 100.0
    assert refreshed(ws, 100.0) == ["a", "b"]


def test_the_urgent_set_alone_may_exceed_the_target():
    ws = working_set()
    ws.use(names(50), 0.0)
    assert refreshed(ws, 0.0) == names(50)


def test_an_invalid_metadata_error_asks_for_the_whole_working_set():
    ws = working_set()
    ws.use(names(40), 0.0)
    assert refreshed(ws, 0.0) == names(40)
    ws.request_update()
    assert refreshed(ws, 5.0) == names(40)
    assert ws.due(10.0) == []  # answered: the flag is gone


def test_the_target_grows_with_topics_per_second_of_max_idle():
    ws = working_set(max_idle=10.0)
    ws.use(names(300), 0.0)
    assert ws.target_fetch_size() == 20  # 300 / 10 s = 30 per second, / 10 = 3
    ws.use(names(2500, "x"), 0.0)
    assert ws.target_fetch_size() == 28  # 2800 / 10 = 280 per second, / 10 = 28


def test_idle_topics_are_evicted_unless_busy_and_asked_for_again_when_used():
    ws = working_set()
    ws.use(["idle", "busy", "used"], 0.0)
    refreshed(ws, 0.0)
    ws.use(["used"], 200.0)
    assert ws.evict(299.0) == []
    assert ws.evict(300.0, busy=lambda t: t == "busy") == ["idle"]
    assert "idle" not in ws and "busy" in ws and len(ws) == 2
    assert ws.evict(400.0) == []  # busy was stamped at 300, used at 200: both within max_idle
    assert ws.evict(500.0) == ["used"]
    ws.use(["idle"], 510.0)
    assert ws.due(510.0) == ["busy", "idle"]  # idle is new again; busy, answered at 0, is past max_age


def test_a_wanted_topic_is_asked_again_after_an_answer_that_had_no_metadata_for_it():
    ws = working_set()
    ws.use(["missing"], 0.0)
    assert refreshed(ws, 0.0) == ["missing"]  # answered UNKNOWN_TOPIC_OR_PARTITION, say
    assert ws.due(2.0) == []
    ws.want("missing", 2.0)
    assert refreshed(ws, 2.0) == ["missing"]


def test_nothing_is_due_without_topics_and_max_idle_has_the_seeds_floor():
    ws = working_set()
    assert ws.due(0.0) == [] and ws.next_due(0.0) == math.inf
    ws.request_update()  # an error with nothing in use: no request, and nothing to wake for
    assert ws.due(0.0) == [] and ws.next_due(0.0) == math.inf
    with pytest.raises(ValueError):
        working_set(max_idle=4.9)
