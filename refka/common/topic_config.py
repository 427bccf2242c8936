"""Topic configs: the one table of their rules, like Kafka's LogConfig ConfigDef.

One ``ConfigKey`` per topic config: its name, type (Kafka's ConfigType), default,
validator, one-line documentation, and the broker properties that set its default
(Kafka's ServerTopicConfigSynonyms, most precise first: ``log.retention.ms`` over
``.minutes`` over ``.hours``). Everything else derives from it:

- the admin path (CreateTopics, AlterConfigs, IncrementalAlterConfigs) checks a topic's
  configs with ``validate_topic_configs``; a bad one raises ``InvalidConfigError``, which
  the client gets as INVALID_CONFIG with its message as it is;
- the broker's ``LogConfig`` (refka/broker/log/config.py): its fields, their defaults and
  minimums, and the parsing of a topic's configs over the broker's defaults (``parse``);
- ``BrokerConfig`` (refka/broker/config.py): the type and default of each synonym the
  broker reads, and the broker-level default of every topic config (``defaults_from_broker``);
- DescribeConfigs: each config's type, documentation, synonym and default.

A topic's effective value is its own override, else the broker's synonym, else the
table's default.

Values travel as text (as CreateTopics and AlterConfigs carry them and
``/config/topics/<t>`` stores them). The rules, as Kafka's ConfigDef has them:

- INT is within [-2^31, 2^31-1] and LONG within [-2^63, 2^63-1], narrowed by a ``Range``;
  DOUBLE within its ``Range``.
- BOOLEAN is true or false, in any case.
- STRING with ``ValidString`` is exactly one of its choices.
- LIST is comma separated and stays text; with ``ValidList`` it has at least one item and
  each is one of the choices.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from refka.protocol.errors import ErrorCode

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

ConfigType = Literal["BOOLEAN", "STRING", "INT", "LONG", "DOUBLE", "LIST"]
Value = bool | int | float | str


class InvalidConfigError(ValueError):
    """A topic config name or value Kafka would refuse (INVALID_CONFIG); the message
    says which and why, for the client."""

    error_code = ErrorCode.INVALID_CONFIG


# ---- validators (Kafka's ConfigDef.Range, ValidString, ValidList) ---------------------------


@dataclass(frozen=True, slots=True)
class Range:
    """A number at least ``min`` and at most ``max`` (None: the type's largest)."""

    min: int
    max: int | None = None


@dataclass(frozen=True, slots=True)
class ValidString:
    choices: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ValidList:
    """At least one item, each one of ``choices``."""

    choices: tuple[str, ...]


Validator = Range | ValidString | ValidList | None


# ---- the table ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Synonym:
    """A broker property that sets a topic config's default (Kafka's ConfigSynonym);
    ``scale`` converts its unit into the topic config's (hours: 3 600 000 ms)."""

    name: str
    scale: int = 1


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One topic config, as Kafka's ConfigDef.ConfigKey declares it."""

    name: str
    type: ConfigType
    default: Value  # LIST: its text
    validator: Validator
    doc: str
    synonyms: tuple[Synonym, ...] = ()  # most precise first

    @property
    def default_text(self) -> str:
        return to_text(self.default)


def _key(name: str, type: ConfigType, default: Value, validator: Validator, doc: str,
         *synonyms: str | Synonym) -> ConfigKey:
    return ConfigKey(name, type, default, validator, doc,
                     tuple(s if isinstance(s, Synonym) else Synonym(s) for s in synonyms))


_HOUR_MS = 3_600_000
_DAY_MS = 24 * _HOUR_MS
_COMPAT_TIERED = "Accepted for compatibility (tiered storage, KIP-405); refka has one tier."
_COMPAT_TIMESTAMP = "Accepted; refka does not refuse records by timestamp."
_COMPAT_THROTTLE = "Accepted for compatibility; refka does not throttle replication."

_KEYS = [
    _key("cleanup.policy", "LIST", "delete", ValidList(("delete", "compact")),
         "delete: discard old segments; compact: keep the latest record per key.", "log.cleanup.policy"),
    _key("compression.type", "STRING", "producer",
         ValidString(("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
         "Compression of the topic's batches; 'producer' keeps the producer's.", "compression.type"),
    _key("delete.retention.ms", "LONG", _DAY_MS, Range(0),
         "How long tombstones are kept on compacted topics.", "log.cleaner.delete.retention.ms"),
    _key("file.delete.delay.ms", "LONG", 60_000, Range(0),
         "Delay before a deleted segment's files are removed.", "log.segment.delete.delay.ms"),
    _key("flush.messages", "LONG", LONG_MAX, Range(1),
         "fsync the log every this many messages.", "log.flush.interval.messages"),
    _key("flush.ms", "LONG", LONG_MAX, Range(0),
         "fsync the log at least this often.", "log.flush.interval.ms"),
    _key("index.interval.bytes", "INT", 4096, Range(0),
         "Bytes between offset index entries.", "log.index.interval.bytes"),
    _key("max.compaction.lag.ms", "LONG", LONG_MAX, Range(1),
         "Longest time a record stays uncompacted.", "log.cleaner.max.compaction.lag.ms"),
    _key("max.message.bytes", "INT", 1_048_588, Range(0),
         "Largest record batch the topic accepts.", "message.max.bytes"),
    _key("message.timestamp.type", "STRING", "CreateTime", ValidString(("CreateTime", "LogAppendTime")),
         "Whether record timestamps are the producer's or the broker's.", "log.message.timestamp.type"),
    _key("min.cleanable.dirty.ratio", "DOUBLE", 0.5, Range(0, 1),
         "Dirty fraction of the log that triggers compaction.", "log.cleaner.min.cleanable.ratio"),
    _key("min.compaction.lag.ms", "LONG", 0, Range(0),
         "Shortest time a record stays uncompacted.", "log.cleaner.min.compaction.lag.ms"),
    _key("min.insync.replicas", "INT", 1, Range(1),
         "Replicas that must have a record for acks=all to succeed.", "min.insync.replicas"),
    _key("preallocate", "BOOLEAN", False, None, "Preallocate segment files.", "log.preallocate"),
    _key("retention.bytes", "LONG", -1, Range(-1),
         "Largest size of a partition's log before old segments are deleted; -1 unlimited.",
         "log.retention.bytes"),
    _key("retention.ms", "LONG", 7 * _DAY_MS, Range(-1), "Longest time a segment is kept; -1 forever.",
         "log.retention.ms", Synonym("log.retention.minutes", 60_000), Synonym("log.retention.hours", _HOUR_MS)),
    _key("segment.bytes", "INT", 1024 * 1024 * 1024, Range(14),
         "Size at which a segment is rolled.", "log.segment.bytes"),
    _key("segment.index.bytes", "INT", 10 * 1024 * 1024, Range(4),
         "Size of a segment's offset index.", "log.index.size.max.bytes"),
    _key("segment.jitter.ms", "LONG", 0, Range(0),
         "Random jitter subtracted from segment.ms.", "log.roll.jitter.ms"),
    _key("segment.ms", "LONG", 7 * _DAY_MS, Range(1), "Age at which a segment is rolled.",
         "log.roll.ms", Synonym("log.roll.hours", _HOUR_MS)),
    _key("unclean.leader.election.enable", "BOOLEAN", False, None,
         "Allow an out-of-sync replica to become leader (data loss).", "unclean.leader.election.enable"),
    _key("message.downconversion.enable", "BOOLEAN", True, None,
         "Accepted for compatibility; refka never down-converts."),
    _key("local.retention.bytes", "LONG", -2, Range(-2), _COMPAT_TIERED, "log.local.retention.bytes"),
    _key("local.retention.ms", "LONG", -2, Range(-2), _COMPAT_TIERED, "log.local.retention.ms"),
    _key("remote.storage.enable", "BOOLEAN", False, None, _COMPAT_TIERED),
    _key("message.format.version", "STRING", "3.0-IV1", None,
         "Accepted for compatibility; refka writes RecordBatch v2 only.", "log.message.format.version"),
    _key("message.timestamp.difference.max.ms", "LONG", LONG_MAX, Range(0), _COMPAT_TIMESTAMP,
         "log.message.timestamp.difference.max.ms"),
    _key("message.timestamp.before.max.ms", "LONG", LONG_MAX, Range(0), _COMPAT_TIMESTAMP,
         "log.message.timestamp.before.max.ms"),
    _key("message.timestamp.after.max.ms", "LONG", LONG_MAX, Range(0), _COMPAT_TIMESTAMP,
         "log.message.timestamp.after.max.ms"),
    _key("enable.ordered.delivery", "BOOLEAN", True, None,
         "KIP-253: partition changes keep keyed records in order (leader epochs recorded, partitions "
         "can be removed); false: CreatePartitions follows Kafka's rules (add only, no bookkeeping)."),
    _key("follower.replication.throttled.replicas", "LIST", "", None, _COMPAT_THROTTLE),
    _key("leader.replication.throttled.replicas", "LIST", "", None, _COMPAT_THROTTLE),
]

TOPIC_CONFIGS: dict[str, ConfigKey] = {k.name: k for k in _KEYS}


# ---- parsing and validation ----------------------------------------------------------------------


class _Refused(Exception):
    """Why a text is not a value of its config (wrapped into InvalidConfigError)."""


def to_text(value: Any) -> str:
    """A value as stored and described: booleans lower-case, everything else as ``str``."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def items(text: str) -> list[str]:
    """The items of a LIST value, blanks dropped."""
    return [p.strip() for p in text.split(",") if p.strip()]


def _int(text: str, type: ConfigType, validator: Validator) -> int:
    try:
        n = int(text)
    except ValueError:
        raise _Refused(f"{text!r} is not a number") from None
    top = INT_MAX if type == "INT" else LONG_MAX
    lo = validator.min if isinstance(validator, Range) else -top - 1
    hi = validator.max if isinstance(validator, Range) and validator.max is not None else top
    if not lo <= n <= hi:
        raise _Refused(f"{n} is out of range [{lo}, {hi}]")
    return n


def _double(text: str, validator: Validator) -> float:
    try:
        f = float(text)
    except ValueError:
        raise _Refused(f"{text!r} is not a number") from None
    if isinstance(validator, Range):
        hi = float("inf") if validator.max is None else validator.max
        if not validator.min <= f <= hi:
            raise _Refused(f"{f} is not in [{validator.min}, {hi}]")
    return f


def _parse(key: ConfigKey, text: str) -> Value:
    v = key.validator
    if key.type in ("INT", "LONG"):
        return _int(text, key.type, v)
    if key.type == "DOUBLE":
        return _double(text, v)
    if key.type == "BOOLEAN":
        if text.lower() not in ("true", "false"):
            raise _Refused(f"{text!r} is not true or false")
        return text.lower() == "true"
    if isinstance(v, ValidString) and text not in v.choices:
        raise _Refused(f"{text!r} is not one of {', '.join(v.choices)}")
    if isinstance(v, ValidList):
        parts = items(text)
        if not parts or any(p not in v.choices for p in parts):
            raise _Refused(f"{text!r} is not a list of {', '.join(v.choices)}")
    return text


def parse(name: str, value: Any) -> Value:
    """The typed value of topic config ``name`` (LIST: its text); InvalidConfigError says
    what is wrong, in the words the client gets."""
    key = TOPIC_CONFIGS.get(name)
    if key is None:
        raise InvalidConfigError(f"Unknown topic config name: {name}")
    if value is None:
        raise InvalidConfigError(f"Null value not supported for topic config: {name}")
    text = to_text(value)
    try:
        return _parse(key, text)
    except _Refused as e:
        raise InvalidConfigError(f"Invalid value {text} for configuration {name}: {e}") from None


def validate_topic_configs(configs: Mapping[str, Any]) -> dict[str, str]:
    """A topic's configs as stored (text, booleans lower-case); InvalidConfigError names
    the first bad entry."""
    out: dict[str, str] = {}
    for name, value in configs.items():
        parse(name, value)
        out[name] = to_text(value)
    return out


def ordered_delivery(overrides: Mapping[str, str]) -> bool:
    """``enable.ordered.delivery`` of a topic with these overrides (KIP-253; no broker
    property sets its default). An unreadable value, which validation keeps out, counts
    as the default."""
    key = TOPIC_CONFIGS["enable.ordered.delivery"]
    try:
        return bool(parse(key.name, overrides.get(key.name, key.default)))
    except InvalidConfigError:
        return bool(key.default)


def defaults_from_broker(props: Mapping[str, Any]) -> dict[str, str]:
    """Every topic config's default on a broker with these properties: its most precise
    synonym that is set (in the topic config's unit), else the table's default; as text."""
    out: dict[str, str] = {}
    for key in _KEYS:
        out[key.name] = key.default_text
        for synonym in key.synonyms:
            if synonym.name in props:
                out[key.name] = _scaled(key, synonym, props[synonym.name])
                break
    return out


def _scaled(key: ConfigKey, synonym: Synonym, value: Any) -> str:
    text = to_text(value)
    if synonym.scale == 1:
        return text
    try:
        n = _int(text, "LONG", None)
    except _Refused as e:
        raise InvalidConfigError(f"Invalid value {text} for configuration {synonym.name}: {e}") from None
    return str(n if n < 0 else n * synonym.scale)  # negative: "forever", in any unit


__all__ = [
    "INT_MAX",
    "LONG_MAX",
    "TOPIC_CONFIGS",
    "ConfigKey",
    "ConfigType",
    "InvalidConfigError",
    "Range",
    "Synonym",
    "ValidList",
    "ValidString",
    "Validator",
    "defaults_from_broker",
    "items",
    "ordered_delivery",
    "parse",
    "to_text",
    "validate_topic_configs",
]
