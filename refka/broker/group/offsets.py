"""Committed offsets of one group, and when they expire.

A group's offsets live in memory (``Group.offsets``: (topic, partition) ->
``CommittedOffset``) and in its __consumer_offsets partition (storage.py); the
coordinator changes the memory only after the record is in the log.

Expiry follows Kafka's ``GroupMetadata.removeExpiredOffsets`` (KIP-211), run
every offsets.retention.check.interval.ms:

- an offset committed with a retention time (OffsetCommit v2-v4
  retention_time_ms) expires at its own expire timestamp;
- otherwise, in an Empty group with a protocol type, every offset expires
  offsets.retention.minutes after the group became Empty (its state timestamp;
  the commit timestamp when that is unknown);
- in a Stable consumer group whose subscriptions are known, offsets of topics
  nobody subscribes to expire that long after their commit;
- in a group without a protocol type (a "simple" consumer that only commits),
  each offset expires that long after its commit;
- otherwise (a live group rebalancing, or subscriptions unknown) nothing expires.

An Empty group left with no offsets is then deleted (storage tombstones).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from refka.common import TopicPartition

CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = -1  # KIP-320: the epoch of the last consumed record
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: int = -1  # only from OffsetCommit v2-v4 with a retention_time_ms
    topic_epoch: int = -1  # refka KIP-232: the topic epoch the offset was committed under


def older_epochs(new: CommittedOffset, last: CommittedOffset | None) -> bool:
    """KIP-232 (seed 002, "When coordinator receives the OffsetCommitRequest"): whether a
    commit carries a topic epoch smaller than the one last committed for its partition, or
    the same topic epoch and a smaller leader epoch (INVALID_INTERNAL_METADATA, nothing
    written). A commit with -1 in either (a stock client, an OffsetCommit before v8 for the
    topic epoch, before v6 for the leader epoch) is never refused: Kafka's behaviour. A
    stored -1 is older than any epoch."""
    if new.topic_epoch < 0 or new.leader_epoch < 0 or last is None:
        return False
    return (new.topic_epoch, new.leader_epoch) < (last.topic_epoch, last.leader_epoch)


def expired_offsets(
    offsets: dict[TopicPartition, CommittedOffset],
    now_ms: int,
    retention_ms: int,
    *,
    is_empty: bool,
    is_stable: bool,
    protocol_type: str | None,
    state_timestamp: int,
    subscribed_topics: set[str] | None,
) -> list[TopicPartition]:
    """The partitions whose committed offsets have expired (see the module docstring)."""

    def older(base_of, keep: set[str] = frozenset()) -> list[TopicPartition]:  # type: ignore[assignment]
        out = []
        for tp, o in offsets.items():
            if tp[0] in keep:
                continue
            if o.expire_timestamp >= 0:
                if now_ms >= o.expire_timestamp:
                    out.append(tp)
            elif now_ms - base_of(o) >= retention_ms:
                out.append(tp)
        return out

    if protocol_type and is_empty:
        return older(lambda o: state_timestamp if state_timestamp >= 0 else o.commit_timestamp)
    if protocol_type == CONSUMER_PROTOCOL_TYPE and subscribed_topics is not None and is_stable:
        return older(lambda o: o.commit_timestamp, subscribed_topics)
    if not protocol_type:
        return older(lambda o: o.commit_timestamp)
    return []


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def subscription_topics(metadata: bytes) -> set[str] | None:
    """The topics of a consumer protocol subscription (ConsumerProtocolSubscription,
    every version starts with int16 version, then the topics as an array of
    strings); None when it does not parse."""
    try:
        pos = 2
        (n,) = _I32.unpack_from(metadata, pos)
        pos += 4
        if n < 0:
            return None
        topics = set()
        for _ in range(n):
            (length,) = _I16.unpack_from(metadata, pos)
            pos += 2
            if length < 0 or pos + length > len(metadata):
                return None
            topics.add(bytes(metadata[pos : pos + length]).decode())
            pos += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
