"""Per-partition log settings, under Kafka's topic-config names.

``LogConfig.from_props({"retention.ms": "60000"})`` takes Kafka topic properties
(strings, as AlterConfigs and CreateTopics carry them) on top of a base config;
``LogConfig.from_broker_props`` reads the broker-wide defaults (``log.retention.ms``,
``log.segment.bytes``, ...) from server.properties names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LONG_MAX = 2**63 - 1
_DAY_MS = 24 * 60 * 60 * 1000

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


class InvalidConfigError(ValueError):
    """A property value Kafka would refuse (Kafka INVALID_CONFIG)."""

    error_code = 40


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * _DAY_MS
    retention_ms: int = 7 * _DAY_MS  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024
    message_timestamp_type: str = CREATE_TIME
    max_message_bytes: int = 1048588
    cleanup_policy: str = "delete"
    # Kept for AlterConfigs round trips. Removed segments are renamed to *.deleted at
    # once and unlinked by the LogManager's retention pass after this delay.
    file_delete_delay_ms: int = 60000
    # fsync after this many messages / this long since the last fsync. Default off,
    # as in Kafka: appends reach the kernel (unbuffered writes) and survive a process crash.
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    # Compaction (cleaner.py), for cleanup.policy=compact.
    delete_retention_ms: int = _DAY_MS  # how long tombstones stay
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX

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
        """``base`` (default: Kafka's defaults) overridden by topic properties.

        Unknown names are ignored: topic configs such as ``min.insync.replicas``
        belong to other parts of the broker.
        """
        return _apply(base or cls(), props, _TOPIC_NAMES)

    @classmethod
    def from_broker_props(cls, props: Mapping[str, Any]) -> LogConfig:
        """Broker-wide defaults from server.properties names (``log.retention.hours``...).

        As in Kafka, the most precise unit wins: ``log.retention.ms`` over
        ``.minutes`` over ``.hours``; ``log.roll.ms`` over ``log.roll.hours``.
        """
        p = dict(props)
        derived: dict[str, Any] = {}
        for key, scale, target in (
            ("log.retention.hours", 3600_000, "retention.ms"),
            ("log.retention.minutes", 60_000, "retention.ms"),
            ("log.retention.ms", 1, "retention.ms"),
            ("log.roll.hours", 3600_000, "segment.ms"),
            ("log.roll.ms", 1, "segment.ms"),
        ):
            if key in p:
                v = _int(key, p[key])
                derived[target] = v if v < 0 else v * scale
        for broker_name, topic_name in _BROKER_NAMES.items():
            if broker_name in p:
                derived[topic_name] = p[broker_name]
        return cls.from_props(derived)

    def to_props(self) -> dict[str, str]:
        """Kafka topic property names and string values (DescribeConfigs)."""
        return {name: str(getattr(self, attr)) for name, attr in _TOPIC_NAMES.items()}


_TOPIC_NAMES = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "segment.index.bytes": "segment_index_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "max.message.bytes": "max_message_bytes",
    "cleanup.policy": "cleanup_policy",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "delete.retention.ms": "delete_retention_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
}

_BROKER_NAMES = {
    "log.segment.bytes": "segment.bytes",
    "log.retention.bytes": "retention.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "message.max.bytes": "max.message.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
}

# Smallest accepted values, as Kafka's ConfigDef declares them.
_MINIMUM = {
    "segment_bytes": 14,
    "segment_ms": 1,
    "retention_ms": -1,
    "retention_bytes": -1,
    "index_interval_bytes": 0,
    "segment_index_bytes": 4,
    "max_message_bytes": 0,
    "file_delete_delay_ms": 0,
    "flush_messages": 1,
    "flush_ms": 0,
    "delete_retention_ms": 0,
    "min_compaction_lag_ms": 0,
    "max_compaction_lag_ms": 1,
}


def _int(name: str, value: Any) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise InvalidConfigError(f"{name}={value!r} is not an integer") from None


def _apply(base: LogConfig, props: Mapping[str, Any], names: Mapping[str, str]) -> LogConfig:
    changes: dict[str, Any] = {}
    for name, value in props.items():
        attr = names.get(name)
        if attr is None:
            continue
        if attr == "message_timestamp_type":
            text = str(value).strip()
            if text not in (CREATE_TIME, LOG_APPEND_TIME):
                raise InvalidConfigError(f"{name}={value!r}: expected CreateTime or LogAppendTime")
            changes[attr] = text
        elif attr == "cleanup_policy":
            parts = sorted({p.strip() for p in str(value).split(",") if p.strip()})
            if not parts or any(p not in ("compact", "delete") for p in parts):
                raise InvalidConfigError(f"{name}={value!r}: expected delete, compact or both")
            changes[attr] = ",".join(parts)
        elif attr == "min_cleanable_dirty_ratio":
            try:
                ratio = float(str(value).strip())
            except ValueError:
                raise InvalidConfigError(f"{name}={value!r} is not a number") from None
            if not 0 <= ratio <= 1:
                raise InvalidConfigError(f"{name}={ratio} is not in [0, 1]")
            changes[attr] = ratio
        else:
            v = _int(name, value)
            if v < _MINIMUM[attr]:
                raise InvalidConfigError(f"{name}={v} is below the minimum {_MINIMUM[attr]}")
            changes[attr] = v
    return dataclasses.replace(base, **changes)
