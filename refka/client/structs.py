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
  for (Java's OffsetAndMetadata.leaderEpoch); -1 when unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple


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


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str
    leader_epoch: int = -1
