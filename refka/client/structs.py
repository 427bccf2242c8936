"""The values the reference consumer hands its user, named and shaped as
aiokafka's (``aiokafka.structs``), so code written for aiokafka reads them
unchanged.

- ``TopicPartition`` is a NamedTuple, so it equals and hashes as the plain
  ``(topic, partition)`` tuples refka.common and the broker key partitions by.
- ``ConsumerRecord`` has aiokafka's fields in aiokafka's order, plus
  ``leader_epoch`` (the partition leader epoch of the record's batch, as
  Java's ConsumerRecord.leaderEpoch; KIP-320), which a commit carries.
  ``checksum`` is always None: RecordBatch v2 has a CRC per batch, not per
  record (aiokafka answers None for v2 as well).
- ``OffsetAndMetadata`` is aiokafka's with the ``leader_epoch`` its TODO asks
  for (Java's OffsetAndMetadata.leaderEpoch) and KIP-232's ``topic_epoch``
  (seed 002); -1 when unknown. ``offset_epoch`` gives both as an ``OffsetEpoch``.
- ``OffsetEpoch`` is seed 002's class: a topic epoch and a leader epoch, what a
  user stores next to an offset kept outside Kafka and hands back to
  ``Consumer.seek(tp, offset, offset_epoch)``. The seed leaves its byte format
  open ("can be evolved"); ``encode`` writes the JSON its earlier revision gave
  the internal metadata string, ``{"version":1,"topic_epoch":..,"leader_epoch":..}``,
  so a stored value says what it is; ``decode`` raises ValueError for anything
  else (the seed's IllegalArgumentException from seek).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeGuard


class TopicPartition(NamedTuple):
    topic: str
    partition: int


@dataclass(slots=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: bytes | None
    value: bytes | None
    checksum: int | None
    serialized_key_size: int  # -1 for a null key
    serialized_value_size: int  # -1 for a null value
    headers: Sequence[tuple[str, bytes | None]]
    leader_epoch: int = -1


_OFFSET_EPOCH_VERSION = 1


class OffsetEpoch(NamedTuple):
    topic_epoch: int
    leader_epoch: int

    def encode(self) -> bytes:
        return json.dumps({"version": _OFFSET_EPOCH_VERSION, "topic_epoch": self.topic_epoch,
                           "leader_epoch": self.leader_epoch}, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str) -> OffsetEpoch:
        try:
            doc = json.loads(bytes(data) if not isinstance(data, str) else data)
        except (ValueError, TypeError) as e:
            raise ValueError(f"not an encoded OffsetEpoch: {e}") from None
        if not isinstance(doc, dict) or doc.get("version") != _OFFSET_EPOCH_VERSION:
            raise ValueError(f"not an encoded OffsetEpoch of version {_OFFSET_EPOCH_VERSION}: {doc!r}")
        topic_epoch, leader_epoch = doc.get("topic_epoch"), doc.get("leader_epoch")
        if not (_epoch(topic_epoch) and _epoch(leader_epoch)):
            raise ValueError(f"an OffsetEpoch's epochs are int32s of -1 or more: {doc!r}")
        return cls(topic_epoch, leader_epoch)


def _epoch(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and -1 <= value < 2**31


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str
    leader_epoch: int = -1
    topic_epoch: int = -1

    @property
    def offset_epoch(self) -> OffsetEpoch:
        return OffsetEpoch(self.topic_epoch, self.leader_epoch)
