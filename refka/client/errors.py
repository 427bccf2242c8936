"""The reference client's exceptions (names after aiokafka's ``aiokafka.errors``)."""

from __future__ import annotations

from refka.protocol import ErrorCode


class KafkaError(Exception):
    """A broker's error answer for a request or a record; ``code`` is Kafka's number."""

    def __init__(self, code: ErrorCode | int, message: str = "") -> None:
        self.code = ErrorCode(code)
        super().__init__(f"{self.code.name}: {message or self.code.meaning}")

    @property
    def retriable(self) -> bool:
        return self.code.retriable


class KafkaTimeoutError(Exception):
    """What was asked did not happen within its timeout (a record within delivery_timeout_ms)."""


class ProducerClosed(Exception):
    """The producer was stopped before the record could be sent."""


class ConsumerStoppedError(Exception):
    """The consumer was stopped (``getmany`` and the iterator end with it)."""


class IllegalStateError(Exception):
    """Asked of a partition the consumer is not assigned, or of a consumer not subscribed."""


class IllegalOperation(Exception):
    """Asked what needs a ``group_id`` (commit, committed) of a consumer without one."""


class CommitFailedError(Exception):
    """The group rebalanced (or dropped this member) before the commit: the partitions may be
    another member's now, so the offsets were not committed."""


class InvalidInternalMetadataError(KafkaError):
    """KIP-232 (seed 002's InvalidInternalMetadataException): the coordinator refused a commit
    whose topic epoch, or leader epoch under the same topic epoch, is older than the last one
    committed for the partition (INVALID_INTERNAL_METADATA, refka's 10232). Not retriable: the
    offsets come from before a re-creation of the topic or a leader change the group has passed."""

    def __init__(self, partitions: object) -> None:
        super().__init__(ErrorCode.INVALID_INTERNAL_METADATA, f"offsets refused for {partitions}")
        self.partitions = partitions


class OffsetOutOfRangeError(KafkaError):
    """A fetch position outside the log, with ``auto_offset_reset="none"``."""

    def __init__(self, positions: dict[object, int]) -> None:
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, f"positions {positions}")
        self.positions = positions


class NoOffsetForPartitionError(Exception):
    """No committed offset and ``auto_offset_reset="none"``."""
