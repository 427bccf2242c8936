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
