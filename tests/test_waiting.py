"""tests/waiting.py: what a wait returns, and how it fails."""

from __future__ import annotations

import pytest

from tests.waiting import wait_until, wait_until_async


def answers(*values):
    """A predicate answering ``values`` one per call."""
    it = iter(values)
    return lambda: next(it)


def raises_first(exc: Exception):
    """A predicate raising ``exc`` on its first call, then answering True."""
    calls = []

    def probe() -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise exc
        return True

    return probe


def test_returns_the_first_truthy_answer():
    assert wait_until(answers(0, None, [], {"leader": 1}), interval=0) == {"leader": 1}


def test_a_timeout_names_what_was_awaited_and_the_last_answer():
    with pytest.raises(AssertionError, match=r"^timed out after 0s waiting for ISR of 3; last: \[\]$"):
        wait_until(lambda: [], timeout=0, message="ISR of 3")


def test_a_false_answer_is_not_repeated_in_the_failure():
    with pytest.raises(AssertionError, match=r"^timed out after 0s waiting for the condition$"):
        wait_until(lambda: False, timeout=0)


def test_a_callable_message_is_asked_at_the_timeout():
    seen: list[int] = []
    with pytest.raises(AssertionError, match=r"waiting for 3 reads, saw 1; last: None$"):
        wait_until(lambda: seen.append(1), timeout=0, message=lambda: f"3 reads, saw {len(seen)}")


def test_an_exception_fails_at_once_unless_ignored():
    with pytest.raises(ConnectionError):
        wait_until(raises_first(ConnectionError("broker restarting")))
    assert wait_until(raises_first(ConnectionError("broker restarting")), interval=0,
                      ignoring=(ConnectionError,)) is True


def test_an_ignored_exception_is_the_last_answer_reported():
    def down() -> bool:
        raise ConnectionError("broker restarting")

    with pytest.raises(AssertionError, match=r"last: ConnectionError\('broker restarting'\)$"):
        wait_until(down, timeout=0, ignoring=(ConnectionError,))


async def test_the_async_wait_returns_and_fails_the_same_way():
    assert await wait_until_async(answers(False, "ready"), interval=0) == "ready"
    with pytest.raises(AssertionError, match=r"^timed out after 0s waiting for the condition$"):
        await wait_until_async(lambda: False, timeout=0)
