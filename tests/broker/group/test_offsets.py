"""Committed offsets (offsets.py): when they expire, and the topics a subscription names."""

from __future__ import annotations

from refka.broker.group.offsets import expired_offsets, subscription_topics

from .harness import MINUTE, co, subscription


def test_expiry_rules():
    offs = {("a", 0): co(1, ts=0), ("b", 0): co(1, ts=0), ("c", 0): co(1, ts=0, expire_timestamp=50)}
    day = 24 * 60 * MINUTE
    common = dict(is_empty=False, is_stable=True, protocol_type="consumer", state_timestamp=0)
    # Stable consumer group: only topics nobody subscribes to (and explicit expiry).
    assert sorted(expired_offsets(offs, day, day, subscribed_topics={"a"}, **common)) == [("b", 0), ("c", 0)]
    # Rebalancing or subscriptions unknown: nothing.
    assert expired_offsets(offs, day, day, subscribed_topics=None, **common) == []
    # Empty group: counted from when it became Empty.
    empty = dict(common, is_empty=True, is_stable=False, state_timestamp=day)
    assert sorted(expired_offsets(offs, day + 1, day, subscribed_topics=None, **empty)) == [("c", 0)]
    assert len(expired_offsets(offs, 2 * day, day, subscribed_topics=None, **empty)) == 3
    # No protocol type (simple consumer): from each commit.
    simple = dict(common, protocol_type=None, is_stable=False, is_empty=True)
    assert len(expired_offsets(offs, day, day, subscribed_topics=None, **simple)) == 3


def test_subscription_topics():
    assert subscription_topics(subscription("a", "b")) == {"a", "b"}
    assert subscription_topics(b"\x00") is None
