"""Broker configuration with Kafka's property names.

Sources, lowest precedence first: built-in defaults, a ``server.properties``
file (``--config``), ``REFKA_`` environment variables (``REFKA_LOG_RETENTION_MS``
is ``log.retention.ms``), then flags (``--override key=value`` and the named
flags of ``refka serve``). Unknown properties are kept (and logged once) so a
Kafka properties file can be used as it is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from refka.common import Endpoint, topic_config

from .log.open_files import DEFAULT_MAX_OPEN_FILES

# Topic configs whose broker synonym (the most precise one) is a property of refka's
# broker; its type and default come from the topic-config table. The table's other
# synonyms (log.retention.hours, log.preallocate, ...) are not read: their topic configs
# keep the table's defaults, and DescribeConfigs reports them when set.
TOPIC_CONFIG_SYNONYMS_READ = (
    "cleanup.policy",
    "compression.type",
    "delete.retention.ms",
    "flush.messages",
    "index.interval.bytes",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.ms",
    "unclean.leader.election.enable",
)
_PROPERTY_TYPES: dict[str, type] = {"BOOLEAN": bool, "STRING": str, "LIST": str, "INT": int, "LONG": int,
                                    "DOUBLE": float}


def _topic_config_synonyms() -> dict[str, tuple[type, Any]]:
    out = {}
    for name in TOPIC_CONFIG_SYNONYMS_READ:
        key = topic_config.TOPIC_CONFIGS[name]
        out[key.synonyms[0].name] = (_PROPERTY_TYPES[key.type], key.default)
    return out


# name -> (type, default). Types: int, bool, str, float, list (comma separated).
DEFAULTS: dict[str, tuple[type, Any]] = {
    "broker.id": (int, 0),
    "listeners": (str, "PLAINTEXT://127.0.0.1:9092"),
    "advertised.listeners": (str, ""),
    # "": no listener of its own; the inter-broker APIs are then served to the registered
    # controller on any listener (broker/inter_broker.py).
    "inter.broker.listener.name": (str, ""),
    "broker.rack": (str, ""),
    "log.dirs": (str, "./refka-data"),
    "zookeeper.connect": (str, ""),
    "zookeeper.session.timeout.ms": (int, 18000),
    "num.partitions": (int, 1),
    "default.replication.factor": (int, 1),
    "auto.create.topics.enable": (bool, True),
    "delete.topic.enable": (bool, True),
    "log.retention.check.interval.ms": (int, 300_000),
    "log.cleaner.enable": (bool, True),
    "log.cleaner.backoff.ms": (int, 15000),
    "log.cleaner.dedupe.buffer.size": (int, 128 * 1024 * 1024),
    # -1: not set, flush.ms keeps its own default (Kafka's default here is null).
    "log.flush.interval.ms": (int, -1),
    # Not Kafka's (it keeps every segment open and asks for ulimit -n >= 100,000): the
    # descriptors one broker's logs keep open between them, least recently used closed
    # first (log/open_files.py). 4096 holds the files of ~1,300 busy partitions (a
    # segment's file and its two indexes; mappings hold none) and leaves most of a
    # 20,000-descriptor limit to connections; a partition at rest holds none.
    "log.open.files.max": (int, DEFAULT_MAX_OPEN_FILES),
    "socket.request.max.bytes": (int, 104857600),
    "connections.max.idle.ms": (int, 600_000),
    # KIP-578 (Kafka's defaults are unbounded). Descriptors no longer bound partitions
    # (log.open.files.max): one broker was measured holding 100,000 (README, Storage and
    # durability). What these defaults bound is what one request can make a broker do on
    # its one event loop: creating or deleting 32,767 partitions at once left three
    # brokers of one process without answers for 4.5-9.6 s (the fuzzer's CreatePartitions);
    # 3,900 at once keeps them answering within 1.2 s. Raise them for a lab that needs more.
    "max.partitions": (int, 100_000),
    "max.broker.partitions": (int, 4_000),
    "max.connections": (int, 2**31 - 1),
    "max.connections.per.ip": (int, 2**31 - 1),
    "queued.max.request.bytes": (int, -1),
    "replica.lag.time.max.ms": (int, 30000),
    "replica.fetch.max.bytes": (int, 1048576),
    "replica.fetch.wait.max.ms": (int, 500),
    "replica.fetch.backoff.ms": (int, 1000),
    "replica.fetch.response.max.bytes": (int, 10485760),
    "replica.high.watermark.checkpoint.interval.ms": (int, 5000),
    "offsets.topic.num.partitions": (int, 50),
    "offsets.topic.replication.factor": (int, 1),
    "offsets.retention.minutes": (int, 10080),
    "group.initial.rebalance.delay.ms": (int, 3000),
    "group.min.session.timeout.ms": (int, 6000),
    "group.max.session.timeout.ms": (int, 1800000),
    "group.max.size": (int, 2**31 - 1),
    "offsets.retention.check.interval.ms": (int, 600000),
    "offsets.commit.timeout.ms": (int, 5000),
    "offsets.load.buffer.size": (int, 5 * 1024 * 1024),
    "offsets.topic.segment.bytes": (int, 100 * 1024 * 1024),
    "offset.metadata.max.bytes": (int, 4096),
    "controlled.shutdown.enable": (bool, True),
    "controlled.shutdown.max.retries": (int, 3),
    "controlled.shutdown.retry.backoff.ms": (int, 5000),
    # KIP-253 (the seed's name; no Kafka property): how often the active controller asks the
    # leaders of partitions marked for deletion whether they are empty, and removes those that are.
    "partition.deletion.check.interval.ms": (int, 30_000),
    "leader.discovery.hints.enable": (bool, True),
    # refka's tagged fields (protocol/extensions.py) in Metadata and OffsetFetch answers:
    # "requested" (only to a client whose request carries refka_extensions, so a stock
    # client gets what Kafka sends), "always" or "never" (labs). EXTENSION_MODES.
    "refka.protocol.extensions": (str, "requested"),
    # Per-connection request recording (broker/recording.py): entries kept per connection
    # (0: no per-request recording), and how many closed connections' recordings are kept.
    "refka.recording.ring.size": (int, 256),
    "refka.recording.closed.connections": (int, 64),
    "cluster.id": (str, ""),
    "fetch.max.bytes": (int, 57671680),
    "max.incremental.fetch.session.cache.slots": (int, 1000),
    **_topic_config_synonyms(),
}


EXTENSION_MODES = ("requested", "always", "never")

# Kafka's dynamic broker configs that refka implements: the broker synonyms of topic configs
# (Kafka's DynamicLogConfig: the defaults of every topic without an override of its own),
# settable per broker (/config/brokers/<id>) and cluster-wide (/config/brokers/<default>)
# through AlterConfigs and IncrementalAlterConfigs. Each maps to its topic config, whose
# rules validate a value. Every other property is static (read_only in DescribeConfigs).
DYNAMIC_CONFIGS: dict[str, str] = {
    **{topic_config.TOPIC_CONFIGS[name].synonyms[0].name: name for name in TOPIC_CONFIG_SYNONYMS_READ},
    "log.flush.interval.ms": "flush.ms",
}
# ConfigSource (DescribeConfigs), in precedence order for a broker property
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 2, 3, 4, 5


def validate_dynamic(configs: Mapping[str, str]) -> dict[str, str]:
    """``configs`` as a dynamic broker config set is stored, or ValueError naming the first
    entry that is not a dynamic config or not a valid value (Kafka answers both
    INVALID_REQUEST)."""
    static = sorted(n for n in configs if n not in DYNAMIC_CONFIGS)
    if static:
        known = [n for n in static if n in DEFAULTS]
        raise ValueError(f"Cannot update these configs dynamically: {', '.join(known)}" if known
                         else f"Not dynamic broker configs refka implements: {', '.join(static)} (those are "
                              f"the topic defaults: {', '.join(sorted(DYNAMIC_CONFIGS))})")
    out = {}
    for name, value in configs.items():
        try:
            parse_value(DEFAULTS[name][0], value)
            topic_config.validate_topic_configs({DYNAMIC_CONFIGS[name]: value})
        except (ValueError, topic_config.InvalidConfigError) as e:
            raise ValueError(f"Invalid value {value} for configuration {name}: {e}") from None
        out[name] = value.strip()
    return out


def answers_extensions(mode: str, requested: bool) -> bool:
    """Whether an answer carries refka's tagged fields, under refka.protocol.extensions
    ``mode``, to a request whose refka_extensions is ``requested``."""
    return mode == "always" or (requested and mode == "requested")


def parse_value(kind: type, raw: str) -> Any:
    raw = raw.strip()
    if kind is bool:
        if raw.lower() in ("true", "1", "yes"):
            return True
        if raw.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"not a boolean: {raw!r}")
    if kind is int:
        return int(raw)
    if kind is float:
        return float(raw)
    return raw


def read_properties(path: Path) -> dict[str, str]:
    """Java properties: key=value or key: value, '#' and '!' comments."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        s = line.strip()
        if not s or s[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in s:
                k, v = s.split(sep, 1)
                out[k.strip()] = v.strip()
                break
    return out


def env_properties(environ: Mapping[str, str]) -> dict[str, str]:
    """``REFKA_LOG_RETENTION_MS=5`` -> ``log.retention.ms=5`` (known names only)."""
    out = {}
    by_env = {"REFKA_" + k.upper().replace(".", "_"): k for k in DEFAULTS}
    for k, v in environ.items():
        if k in by_env:
            out[by_env[k]] = v
    return out


def parse_listeners(spec: str) -> list[Endpoint]:
    return [Endpoint.parse(item) for item in filter(None, (s.strip() for s in spec.split(",")))]


class BrokerConfig:
    """Typed view over Kafka properties."""

    def __init__(self, props: Mapping[str, str] | None = None) -> None:
        self.raw: dict[str, str] = dict(props or {})
        self.values: dict[str, Any] = {}
        for name, (kind, default) in DEFAULTS.items():
            if name in self.raw:
                try:
                    self.values[name] = parse_value(kind, self.raw[name])
                except ValueError as e:
                    raise ValueError(f"invalid value for {name}: {e}") from None
            else:
                self.values[name] = default
        self.unknown = sorted(k for k in self.raw if k not in DEFAULTS)
        # Dynamic broker configs (DYNAMIC_CONFIGS), as the metadata store has them: this
        # broker's own, and the cluster-wide defaults; above the static properties.
        self.dynamic_broker: dict[str, str] = {}
        self.dynamic_default: dict[str, str] = {}
        if self.values["refka.protocol.extensions"] not in EXTENSION_MODES:
            raise ValueError(f"invalid value for refka.protocol.extensions: "
                             f"{self.values['refka.protocol.extensions']!r} (one of {', '.join(EXTENSION_MODES)})")
        ib = self.inter_broker_listener
        for name in ("listeners", "advertised.listeners"):
            # As Kafka refuses to start: brokers would look for each other on a listener that
            # is not there (the controller would fall back to a client listener, which refuses it).
            eps = self.listeners if name == "listeners" else self.advertised_listeners
            if ib is not None and ib not in {ep.listener for ep in eps}:
                raise ValueError(f"inter.broker.listener.name {ib} is not one of {name} "
                                 f"({', '.join(map(str, eps))})")

    @classmethod
    def load(
        cls,
        file: Path | None = None,
        environ: Mapping[str, str] | None = None,
        overrides: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        props: dict[str, str] = {}
        if file is not None:
            props.update(read_properties(file))
        props.update(env_properties(os.environ if environ is None else environ))
        props.update(overrides or {})
        return cls(props)

    def set_dynamic(self, per_broker: Mapping[str, str], default: Mapping[str, str]) -> dict[str, Any]:
        """Takes the dynamic configs read from the store; the properties whose value changed
        (name -> new value). Precedence: this broker's, the cluster default, the static
        property, the built-in default. A stored entry that is not a dynamic config, or not
        valid (written by something other than refka's AlterConfigs), is left out."""
        def usable(layer: Mapping[str, str]) -> dict[str, str]:
            out = {}
            for name, value in layer.items():
                try:
                    out.update(validate_dynamic({name: value}))
                except ValueError:
                    continue
            return out

        self.dynamic_broker, self.dynamic_default = usable(per_broker), usable(default)
        changed = {}
        for name in DYNAMIC_CONFIGS:
            value = self.sources(name)[0][1]
            if value != self.values[name]:
                self.values[name] = changed[name] = value
        return changed

    def sources(self, name: str) -> list[tuple[int, Any, str]]:
        """(ConfigSource, value, its text as written) of each layer that sets property
        ``name``, the one in force first; the built-in default last."""
        kind, default = DEFAULTS[name]
        out: list[tuple[int, Any, str]] = []
        for source, layer in ((DYNAMIC_BROKER_CONFIG, self.dynamic_broker),
                              (DYNAMIC_DEFAULT_BROKER_CONFIG, self.dynamic_default),
                              (STATIC_BROKER_CONFIG, self.raw)):
            if name in layer:
                out.append((source, parse_value(kind, layer[name]), layer[name]))
        out.append((DEFAULT_CONFIG, default, topic_config.to_text(default)))
        return out

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, self.raw.get(name, default))

    def with_overrides(self, **props: str) -> BrokerConfig:
        raw = dict(self.raw)
        raw.update(props)
        return BrokerConfig(raw)

    @property
    def broker_id(self) -> int:
        return int(self.values["broker.id"])

    @property
    def listeners(self) -> list[Endpoint]:
        return parse_listeners(self.values["listeners"])

    @property
    def advertised_listeners(self) -> list[Endpoint]:
        adv = self.values["advertised.listeners"]
        return parse_listeners(adv) if adv else self.listeners

    @property
    def inter_broker_listener(self) -> str | None:
        """``inter.broker.listener.name``: the listener brokers use to reach each other, the
        only one that serves them the inter-broker APIs; None when not set."""
        return self.values["inter.broker.listener.name"] or None

    @property
    def rack(self) -> str | None:
        return self.values["broker.rack"] or None

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(p) for p in str(self.values["log.dirs"]).split(",") if p]

    def topic_defaults(self) -> dict[str, str]:
        """Every topic config's broker-level default, in topic-config names (text)."""
        props = dict(self.values)
        if props["log.flush.interval.ms"] < 0:
            del props["log.flush.interval.ms"]  # not set
        return topic_config.defaults_from_broker(props)
