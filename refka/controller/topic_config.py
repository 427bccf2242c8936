"""Topic configs: Kafka's names, types, validation and broker-level synonyms.

The one table of topic configs: the admin path (CreateTopics, AlterConfigs)
validates through it and DescribeConfigs describes from it, so they agree on
what a topic config is. A
topic's effective value is its own override, else the broker's synonym
(``log.retention.ms`` for ``retention.ms``), else the default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A config name or value Kafka would refuse (INVALID_CONFIG)."""


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    type: str  # Kafka's ConfigType names: BOOLEAN, STRING, INT, LONG, DOUBLE, LIST, CLASS, PASSWORD
    broker_synonym: str | None
    validate: Callable[[str], None]
    doc: str


def _int_at_least(lo: int, kind: str = "INT") -> Callable[[str], None]:
    top = 2**31 - 1 if kind == "INT" else LONG_MAX

    def check(v: str) -> None:
        try:
            n = int(v)
        except ValueError:
            raise ConfigError(f"{v!r} is not a number") from None
        if n < lo or n > top:
            raise ConfigError(f"{n} is out of range [{lo}, {top}]")

    return check


def _one_of(*choices: str) -> Callable[[str], None]:
    def check(v: str) -> None:
        if v not in choices:
            raise ConfigError(f"{v!r} is not one of {', '.join(choices)}")

    return check


def _cleanup_policy(v: str) -> None:
    parts = [p.strip() for p in v.split(",") if p.strip()]
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise ConfigError(f"{v!r} is not a list of delete, compact")


def _bool(v: str) -> None:
    if v.lower() not in ("true", "false"):
        raise ConfigError(f"{v!r} is not true or false")


def _ratio(v: str) -> None:
    try:
        f = float(v)
    except ValueError:
        raise ConfigError(f"{v!r} is not a number") from None
    if not 0 <= f <= 1:
        raise ConfigError(f"{f} is not in [0, 1]")


def _any(v: str) -> None:
    return None


_DEFS = [
    TopicConfigDef("cleanup.policy", "LIST", "log.cleanup.policy", _cleanup_policy,
                   "delete: discard old segments; compact: keep the latest record per key."),
    TopicConfigDef("compression.type", "STRING", "compression.type",
                   _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
                   "Compression of the topic's batches; 'producer' keeps the producer's."),
    TopicConfigDef("delete.retention.ms", "LONG", "log.cleaner.delete.retention.ms", _int_at_least(0, "LONG"),
                   "How long tombstones are kept on compacted topics."),
    TopicConfigDef("file.delete.delay.ms", "LONG", "log.segment.delete.delay.ms", _int_at_least(0, "LONG"),
                   "Delay before a deleted segment's files are removed."),
    TopicConfigDef("flush.messages", "LONG", "log.flush.interval.messages", _int_at_least(1, "LONG"),
                   "fsync the log every this many messages."),
    TopicConfigDef("flush.ms", "LONG", "log.flush.interval.ms", _int_at_least(0, "LONG"),
                   "fsync the log at least this often."),
    TopicConfigDef("index.interval.bytes", "INT", "log.index.interval.bytes", _int_at_least(0),
                   "Bytes between offset index entries."),
    TopicConfigDef("max.compaction.lag.ms", "LONG", "log.cleaner.max.compaction.lag.ms", _int_at_least(1, "LONG"),
                   "Longest time a record stays uncompacted."),
    TopicConfigDef("max.message.bytes", "INT", "message.max.bytes", _int_at_least(0),
                   "Largest record batch the topic accepts."),
    TopicConfigDef("message.timestamp.type", "STRING", "log.message.timestamp.type",
                   _one_of("CreateTime", "LogAppendTime"),
                   "Whether record timestamps are the producer's or the broker's."),
    TopicConfigDef("min.cleanable.dirty.ratio", "DOUBLE", "log.cleaner.min.cleanable.ratio", _ratio,
                   "Dirty fraction of the log that triggers compaction."),
    TopicConfigDef("min.compaction.lag.ms", "LONG", "log.cleaner.min.compaction.lag.ms", _int_at_least(0, "LONG"),
                   "Shortest time a record stays uncompacted."),
    TopicConfigDef("min.insync.replicas", "INT", "min.insync.replicas", _int_at_least(1),
                   "Replicas that must have a record for acks=all to succeed."),
    TopicConfigDef("preallocate", "BOOLEAN", "log.preallocate", _bool, "Preallocate segment files."),
    TopicConfigDef("retention.bytes", "LONG", "log.retention.bytes", _int_at_least(-1, "LONG"),
                   "Largest size of a partition's log before old segments are deleted; -1 unlimited."),
    TopicConfigDef("retention.ms", "LONG", "log.retention.ms", _int_at_least(-1, "LONG"),
                   "Longest time a segment is kept; -1 forever."),
    TopicConfigDef("segment.bytes", "INT", "log.segment.bytes", _int_at_least(14),
                   "Size at which a segment is rolled."),
    TopicConfigDef("segment.index.bytes", "INT", "log.index.size.max.bytes", _int_at_least(4),
                   "Size of a segment's offset index."),
    TopicConfigDef("segment.jitter.ms", "LONG", "log.roll.jitter.ms", _int_at_least(0, "LONG"),
                   "Random jitter subtracted from segment.ms."),
    TopicConfigDef("segment.ms", "LONG", "log.roll.ms", _int_at_least(1, "LONG"),
                   "Age at which a segment is rolled."),
    TopicConfigDef("unclean.leader.election.enable", "BOOLEAN", "unclean.leader.election.enable", _bool,
                   "Allow an out-of-sync replica to become leader (data loss)."),
    TopicConfigDef("message.downconversion.enable", "BOOLEAN", None, _bool,
                   "Accepted for compatibility; refka never down-converts."),
    TopicConfigDef("local.retention.bytes", "LONG", "log.local.retention.bytes", _int_at_least(-2, "LONG"),
                   "Accepted for compatibility (tiered storage, KIP-405); refka has one tier."),
    TopicConfigDef("local.retention.ms", "LONG", "log.local.retention.ms", _int_at_least(-2, "LONG"),
                   "Accepted for compatibility (tiered storage, KIP-405); refka has one tier."),
    TopicConfigDef("remote.storage.enable", "BOOLEAN", None, _bool,
                   "Accepted for compatibility (tiered storage, KIP-405); refka has one tier."),
    TopicConfigDef("message.format.version", "STRING", "log.message.format.version", _any,
                   "Accepted for compatibility; refka writes RecordBatch v2 only."),
    TopicConfigDef("message.timestamp.difference.max.ms", "LONG", "log.message.timestamp.difference.max.ms",
                   _int_at_least(0, "LONG"), "Accepted; refka does not refuse records by timestamp."),
    TopicConfigDef("message.timestamp.before.max.ms", "LONG", "log.message.timestamp.before.max.ms",
                   _int_at_least(0, "LONG"), "Accepted; refka does not refuse records by timestamp."),
    TopicConfigDef("message.timestamp.after.max.ms", "LONG", "log.message.timestamp.after.max.ms",
                   _int_at_least(0, "LONG"), "Accepted; refka does not refuse records by timestamp."),
    TopicConfigDef("enable.ordered.delivery", "BOOLEAN", None, _bool,
                   "refka KIP-253: consumers deliver keyed records in order across partition changes."),
    TopicConfigDef("follower.replication.throttled.replicas", "LIST", None, _any,
                   "Accepted for compatibility; refka does not throttle replication."),
    TopicConfigDef("leader.replication.throttled.replicas", "LIST", None, _any,
                   "Accepted for compatibility; refka does not throttle replication."),
]

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in _DEFS}

# Defaults for topic configs whose broker synonym refka's BrokerConfig does not carry.
STATIC_DEFAULTS: dict[str, str] = {
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "max.compaction.lag.ms": str(LONG_MAX),
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "preallocate": "false",
    "segment.jitter.ms": "0",
    "message.downconversion.enable": "true",
    "follower.replication.throttled.replicas": "",
    "leader.replication.throttled.replicas": "",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "remote.storage.enable": "false",
    "message.format.version": "3.0-IV1",
    "message.timestamp.difference.max.ms": str(LONG_MAX),
    "message.timestamp.before.max.ms": str(LONG_MAX),
    "message.timestamp.after.max.ms": str(LONG_MAX),
    "enable.ordered.delivery": "false",
}


def validate_topic_configs(configs: Mapping[str, Any]) -> dict[str, str]:
    """The configs as stored (strings; booleans lower-case); ConfigError names the first bad entry."""
    out: dict[str, str] = {}
    for name, value in configs.items():
        d = TOPIC_CONFIGS.get(name)
        if d is None:
            raise ConfigError(f"Unknown topic config name: {name}")
        if value is None:
            raise ConfigError(f"Null value not supported for topic config: {name}")
        text = str(value).lower() if isinstance(value, bool) else str(value)
        try:
            d.validate(text)
        except ConfigError as e:
            raise ConfigError(f"Invalid value {text} for configuration {name}: {e}") from None
        out[name] = text
    return out


def broker_default(name: str, broker_topic_defaults: dict[str, str]) -> str | None:
    if name in broker_topic_defaults:
        return broker_topic_defaults[name]
    return STATIC_DEFAULTS.get(name)
