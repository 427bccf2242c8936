"""Incremental fetch sessions (KIP-227).

A client that sends session_id 0 / epoch 0 asks for a session: the broker
remembers its partitions and fetch positions, answers with a session id, and
from then on the client sends only what changed (epoch 1, 2, ...) and the
broker answers only partitions with news (records, a moved high watermark,
log start offset, or an error). Epoch -1 closes a session (or asks for none).

The cache holds at most max.incremental.fetch.session.cache.slots sessions;
when full, the least recently used session is evicted and its client gets
FETCH_SESSION_ID_NOT_FOUND on its next incremental fetch, then starts over
with a full fetch, as with Kafka.
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from dataclasses import dataclass

INITIAL_EPOCH = 0
FINAL_EPOCH = -1


@dataclass(slots=True)
class SessionPartition:
    topic: str  # name, or "" when the request named the topic by ID only and it is unknown
    topic_id: bytes
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    # what the last response that included this partition said
    sent_high_watermark: int = -1
    sent_log_start_offset: int = -1


class FetchSession:
    __slots__ = ("session_id", "epoch", "partitions", "last_used", "uses_topic_ids")

    def __init__(self, session_id: int, uses_topic_ids: bool) -> None:
        self.session_id = session_id
        self.epoch = 1  # the epoch the next incremental request must carry
        self.partitions: OrderedDict[tuple[bytes | str, int], SessionPartition] = OrderedDict()
        self.last_used = time.monotonic()
        self.uses_topic_ids = uses_topic_ids


class FetchSessionCache:
    def __init__(self, max_slots: int) -> None:
        self.max_slots = max_slots
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = itertools.count(1)

    def create(self, uses_topic_ids: bool) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        while len(self.sessions) >= self.max_slots:
            self.sessions.popitem(last=False)
        sid = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        s = FetchSession(sid, uses_topic_ids)
        self.sessions[sid] = s
        return s

    def get(self, session_id: int) -> FetchSession | None:
        s = self.sessions.get(session_id)
        if s is not None:
            self.sessions.move_to_end(session_id)
            s.last_used = time.monotonic()
        return s

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)
