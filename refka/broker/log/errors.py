"""Errors a partition log raises. ``error_code`` is the Kafka error a handler answers with."""

from __future__ import annotations


class LogError(Exception):
    error_code: int = -1  # UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(LogError):
    """The offset is below the log start offset or above the log end offset."""

    error_code = 1

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is outside [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordTooLargeError(LogError):
    """A batch is larger than the topic's max.message.bytes."""

    error_code = 10


class UnexpectedAppendOffsetError(LogError):
    """A follower append whose offsets go backwards (a replication bug, or a
    follower that should have truncated first)."""


class LogClosedError(LogError):
    """The log was closed or deleted (Kafka answers NOT_LEADER_OR_FOLLOWER)."""

    error_code = 6
