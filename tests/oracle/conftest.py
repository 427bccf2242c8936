"""The oracle pair: Apache Kafka 3.9.1 (tests/oracle/kafka.py) and refka (``refka serve``,
tests/brokers.py), each with broker id 0 under a ZooKeeper chroot of its own on the
session's private ZooKeeper, with the same broker settings (``SETTINGS``). One of each for
the whole session: the differential tests create their own topics and groups, named per
test, so they do not see each other's state."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.brokers import BrokerProcess
from tests.oracle.differential import Pair, Side
from tests.oracle.kafka import KafkaBroker, kafka_unavailable
from tests.zk import ZooKeeperServer

# The settings both brokers run with: refka's test brokers' (tests/conftest.py) made explicit,
# and the ones where refka's default differs from Kafka's pinned to one value for both.
SETTINGS = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}


@pytest.fixture(scope="session")
def oracle_pair(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    reason = kafka_unavailable()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("oracle")
    kafka = KafkaBroker(root / "kafka", f"{zookeeper.connect}/oracle-{uuid.uuid4().hex[:8]}",
                        {"broker.id": "0", **SETTINGS})
    refka = BrokerProcess(root / "refka" / "data", overrides=SETTINGS,
                          extra_args=["--zookeeper", f"{zookeeper.connect}/refka-{uuid.uuid4().hex[:8]}",
                                      "--broker-id", "0"])
    (root / "refka").mkdir()
    kafka.start()
    try:
        refka.start(timeout=60)
        try:
            pair = Pair(Side("kafka", kafka.port), Side("refka", refka.port))  # type: ignore[arg-type]
            pair.wait_ready()
            yield pair
            pair.close()
        finally:
            refka.stop()
    finally:
        kafka.stop()
