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

from refka.common import Endpoint

# name -> (type, default). Types: int, bool, str, float, list (comma separated).
DEFAULTS: dict[str, tuple[type, Any]] = {
    "broker.id": (int, 0),
    "listeners": (str, "PLAINTEXT://127.0.0.1:9092"),
    "advertised.listeners": (str, ""),
    "broker.rack": (str, ""),
    "log.dirs": (str, "./refka-data"),
    "zookeeper.connect": (str, ""),
    "zookeeper.session.timeout.ms": (int, 18000),
    "num.partitions": (int, 1),
    "default.replication.factor": (int, 1),
    "min.insync.replicas": (int, 1),
    "auto.create.topics.enable": (bool, True),
    "delete.topic.enable": (bool, True),
    "unclean.leader.election.enable": (bool, False),
    "log.retention.ms": (int, 7 * 24 * 3600 * 1000),
    "log.retention.bytes": (int, -1),
    "log.segment.bytes": (int, 1024 * 1024 * 1024),
    "log.roll.ms": (int, 7 * 24 * 3600 * 1000),
    "log.index.interval.bytes": (int, 4096),
    "log.index.size.max.bytes": (int, 10 * 1024 * 1024),
    "log.retention.check.interval.ms": (int, 300_000),
    "log.message.timestamp.type": (str, "CreateTime"),
    "log.cleanup.policy": (str, "delete"),
    "log.cleaner.enable": (bool, True),
    "log.cleaner.backoff.ms": (int, 15000),
    "log.cleaner.delete.retention.ms": (int, 86400000),
    "log.cleaner.min.cleanable.ratio": (float, 0.5),
    "log.cleaner.min.compaction.lag.ms": (int, 0),
    "log.cleaner.max.compaction.lag.ms": (int, 2**63 - 1),
    "log.cleaner.dedupe.buffer.size": (int, 128 * 1024 * 1024),
    "log.flush.interval.messages": (int, 2**63 - 1),
    "log.flush.interval.ms": (int, -1),
    "message.max.bytes": (int, 1048588),
    "socket.request.max.bytes": (int, 104857600),
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
    "leader.discovery.hints.enable": (bool, True),
    "cluster.id": (str, ""),
    "fetch.max.bytes": (int, 57671680),
    "max.incremental.fetch.session.cache.slots": (int, 1000),
    "compression.type": (str, "producer"),
}


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
    def rack(self) -> str | None:
        return self.values["broker.rack"] or None

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(p) for p in str(self.values["log.dirs"]).split(",") if p]

    def topic_defaults(self) -> dict[str, str]:
        """Broker-level defaults of topic configs, in topic-config names."""
        v = self.values
        return {
            "retention.ms": str(v["log.retention.ms"]),
            "retention.bytes": str(v["log.retention.bytes"]),
            "segment.bytes": str(v["log.segment.bytes"]),
            "segment.ms": str(v["log.roll.ms"]),
            "index.interval.bytes": str(v["log.index.interval.bytes"]),
            "segment.index.bytes": str(v["log.index.size.max.bytes"]),
            "message.timestamp.type": str(v["log.message.timestamp.type"]),
            "cleanup.policy": str(v["log.cleanup.policy"]),
            "max.message.bytes": str(v["message.max.bytes"]),
            "min.insync.replicas": str(v["min.insync.replicas"]),
            "unclean.leader.election.enable": str(v["unclean.leader.election.enable"]).lower(),
            "flush.messages": str(v["log.flush.interval.messages"]),
            "flush.ms": str(v["log.flush.interval.ms"] if v["log.flush.interval.ms"] >= 0 else 2**63 - 1),
            "compression.type": str(v["compression.type"]),
            "delete.retention.ms": str(v["log.cleaner.delete.retention.ms"]),
            "min.cleanable.dirty.ratio": str(v["log.cleaner.min.cleanable.ratio"]),
            "min.compaction.lag.ms": str(v["log.cleaner.min.compaction.lag.ms"]),
            "max.compaction.lag.ms": str(v["log.cleaner.max.compaction.lag.ms"]),
        }
