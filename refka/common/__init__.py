"""Values that the broker, the controller and the client all name: Kafka's
``org.apache.kafka.common`` for refka. Imports nothing of refka's but
``refka.protocol`` (the error codes).

- ``TopicPartition``: ``(topic, partition)``, the key of every per-partition map.
- ``Endpoint``: one listener of a broker, as configured (``listeners``,
  ``advertised.listeners``) and as registered in ``/brokers/ids/<id>``.
- ``topic_config``: the one table of topic configs (names, types, defaults,
  validators, documentation, broker synonyms) and its ``InvalidConfigError``,
  from which LogConfig, the broker's defaults, the admin validation and
  DescribeConfigs derive.
"""

from __future__ import annotations

from dataclasses import dataclass

TopicPartition = tuple[str, int]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A listener: its name, address and security protocol."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"

    @classmethod
    def parse(cls, text: str, protocol_map: dict[str, str] | None = None) -> Endpoint:
        """``"PLAINTEXT://host:9092"`` (``[::1]`` for IPv6). The security protocol is the
        listener's entry in ``protocol_map``, else the listener name when it names one,
        else PLAINTEXT."""
        listener, sep, rest = text.partition("://")
        if not sep:
            raise ValueError(f"not an endpoint: {text!r}")
        host, _, port = rest.rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        protocol = (protocol_map or {}).get(
            listener, listener if listener in SECURITY_PROTOCOLS else "PLAINTEXT"
        )
        return cls(listener, host, int(port), protocol)


__all__ = ["SECURITY_PROTOCOLS", "Endpoint", "TopicPartition"]
