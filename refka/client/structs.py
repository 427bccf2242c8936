"""The reference client's value types, in aiokafka's names."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """aiokafka's ``TopicPartition``: a tuple, so it equals refka.common's ``(topic, partition)`` keys."""

    topic: str
    partition: int
