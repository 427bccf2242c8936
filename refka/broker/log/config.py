"""Per-partition log settings: the topic configs a partition log obeys, typed.

A field per topic config of the table (refka.common.topic_config), named as the config
with ``_`` for ``.``; its default and minimum are the table's, and so is the parsing:
``LogConfig.from_props({"retention.ms": "60000"}, base)`` takes a topic's configs (text, as
AlterConfigs and CreateTopics carry them) over ``base``; ``LogConfig.from_broker_props``
reads the broker-wide defaults from server.properties names (``log.retention.ms``,
``log.segment.bytes``, ...) by the table's synonyms. A bad value raises the table's
``InvalidConfigError``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from refka.common.topic_config import TOPIC_CONFIGS, InvalidConfigError, defaults_from_broker, items, parse

LOG_APPEND_TIME = "LogAppendTime"


def _default(name: str) -> Any:
    return TOPIC_CONFIGS[name].default


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = _default("segment.bytes")
    segment_ms: int = _default("segment.ms")
    retention_ms: int = _default("retention.ms")  # -1: keep forever
    retention_bytes: int = _default("retention.bytes")  # -1: no size limit
    index_interval_bytes: int = _default("index.interval.bytes")
    segment_index_bytes: int = _default("segment.index.bytes")
    message_timestamp_type: str = _default("message.timestamp.type")
    max_message_bytes: int = _default("max.message.bytes")
    cleanup_policy: str = _default("cleanup.policy")  # "compact,delete" for both: sorted, once each
    # Kept for AlterConfigs round trips. Removed segments are renamed to *.deleted at
    # once and unlinked by the LogManager's retention pass after this delay.
    file_delete_delay_ms: int = _default("file.delete.delay.ms")
    # fsync after this many messages / this long since the last fsync. Default off,
    # as in Kafka: appends reach the kernel (unbuffered writes) and survive a process crash.
    flush_messages: int = _default("flush.messages")
    flush_ms: int = _default("flush.ms")
    # Compaction (cleaner.py), for cleanup.policy=compact.
    delete_retention_ms: int = _default("delete.retention.ms")  # how long tombstones stay
    min_cleanable_dirty_ratio: float = _default("min.cleanable.dirty.ratio")
    min_compaction_lag_ms: int = _default("min.compaction.lag.ms")
    max_compaction_lag_ms: int = _default("max.compaction.lag.ms")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def deletes(self) -> bool:
        """Whether retention by time/size applies (cleanup.policy contains delete)."""
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compacts(self) -> bool:
        """Whether the cleaner compacts the log (cleanup.policy contains compact)."""
        return "compact" in self.cleanup_policy.split(",")

    @classmethod
    def from_props(cls, props: Mapping[str, Any], base: LogConfig | None = None) -> LogConfig:
        """``base`` (default: the table's defaults) overridden by topic properties.

        Names that are not log settings are ignored: topic configs such as
        ``min.insync.replicas`` belong to other parts of the broker.
        """
        changes: dict[str, Any] = {}
        for name, value in props.items():
            field = _FIELDS.get(name)
            if field is None:
                continue
            parsed = parse(name, value)
            if field == "cleanup_policy":
                parsed = ",".join(sorted(set(items(str(parsed)))))
            changes[field] = parsed
        return dataclasses.replace(base or cls(), **changes)

    @classmethod
    def from_broker_props(cls, props: Mapping[str, Any]) -> LogConfig:
        """Broker-wide defaults from server.properties names (``log.retention.hours``...).

        As in Kafka, the most precise synonym wins: ``log.retention.ms`` over
        ``.minutes`` over ``.hours``; ``log.roll.ms`` over ``log.roll.hours``.
        """
        return cls.from_props(defaults_from_broker(props))

    def to_props(self) -> dict[str, str]:
        """Kafka topic property names and string values (DescribeConfigs)."""
        return {name: str(getattr(self, field)) for name, field in _FIELDS.items()}


# topic config name -> field
_FIELDS = {f.name.replace("_", "."): f.name for f in dataclasses.fields(LogConfig)}

__all__ = ["InvalidConfigError", "LogConfig"]
