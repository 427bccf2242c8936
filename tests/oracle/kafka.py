"""Apache Kafka 3.9.1's broker for the differential tests (tests/oracle/): refka.apache_kafka
runs it (``make kafka-oracle``'s jars, ZooKeeper mode); this waits until it answers ApiVersions
on a free loopback port."""

from __future__ import annotations

import time
from pathlib import Path

from refka.apache_kafka import VERSION, ApacheKafka, kafka_unavailable
from refka.protocol.messages.api_versions import ApiVersions
from tests.brokers import free_port_block
from tests.integration.cluster_helpers import Raw

__all__ = ["KafkaBroker", "kafka_unavailable"]


class KafkaBroker:
    """One Kafka broker under ``zookeeper_connect`` (a chroot of its own). ``start()`` returns
    once it answers ApiVersions."""

    def __init__(self, workdir: Path, zookeeper_connect: str, settings: dict[str, str]) -> None:
        self.workdir = workdir
        self.zookeeper_connect = zookeeper_connect
        self.settings = dict(settings)
        self.port = 0
        self.broker: ApacheKafka | None = None
        self.startup_seconds = 0.0

    def start(self, timeout: float = 120.0) -> KafkaBroker:
        self.port = free_port_block()
        self.broker = ApacheKafka(self.workdir, self.zookeeper_connect, self.port, self.settings)
        t0 = time.monotonic()
        proc = self.broker.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            if self._answers_api_versions():
                self.startup_seconds = time.monotonic() - t0
                return self
            time.sleep(0.2)
        tail = self.broker.log_tail()
        self.stop()
        raise RuntimeError(f"Apache Kafka {VERSION} did not start; see {self.workdir / 'server.log'}:\n{tail}")

    def _answers_api_versions(self) -> bool:
        try:
            raw = Raw(self.port)
        except OSError:
            return False
        try:
            resp, _ = raw.call_raw(ApiVersions, ApiVersions.Request(
                client_software_name="refka-oracle", client_software_version="0"), 3)
            return resp.error_code == 0
        except (TimeoutError, OSError, ConnectionError):
            return False
        finally:
            raw.close()

    def stop(self) -> None:
        if self.broker is not None:
            self.broker.stop()
