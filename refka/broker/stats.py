"""KIP-526's per-client metadata record, kept by client id over all connections.

For every client id: how many Metadata requests it sent, how many asked for all
topics, and which topics each named (tests read it on the broker's loop). Per
request and per connection, with the connection's identity, sizes, latency and
error codes, see recording.py, which the admin API and /metrics read.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field


@dataclass
class ClientMetadataTraffic:
    requests: int = 0
    all_topics_requests: int = 0
    topics_named: Counter = field(default_factory=Counter)
    # the last requests, newest last: (monotonic time, topics or None for all)
    recent: deque = field(default_factory=lambda: deque(maxlen=256))


class Stats:
    def __init__(self) -> None:
        self.metadata_by_client: dict[str, ClientMetadataTraffic] = {}

    def metadata_request(self, client_id: str | None, topics: list[str] | None) -> None:
        import time

        t = self.metadata_by_client.get(client_id or "")
        if t is None:
            t = self.metadata_by_client[client_id or ""] = ClientMetadataTraffic()
        t.requests += 1
        if topics is None:
            t.all_topics_requests += 1
        else:
            t.topics_named.update(topics)
        t.recent.append((time.monotonic(), topics))
