"""KIP-232's topic epoch (seed 002) survives what a broker's life puts it through: a topic
deleted and created again under the same name gets a larger topic_epoch than any earlier
topic of that name, also when the broker (and its embedded metadata store, journaled under
its data dir) was stopped cleanly or killed -9 in between, and across a controller change
of three ZooKeeper-backed processes."""

from __future__ import annotations

import signal
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokers import BrokerProcess
from tests.integration.cluster_helpers import TIMEOUT, ZkCluster, metadata
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def topic_epoch(port: int, topic: str) -> int:
    (t,) = metadata(port, topic).topics
    return t.topic_epoch if t.error_code == 0 and t.partitions else -1


def create(bootstrap: str, port: int, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)],
                        operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
    return wait_until(lambda: topic_epoch(port, topic) if topic_epoch(port, topic) >= 0 else None,
                      message=f"{topic}'s topic_epoch", ignoring=(OSError,))


def delete(bootstrap: str, port: int, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
    wait_until(lambda: topic_epoch(port, topic) < 0, message=f"{topic} gone", ignoring=(OSError,))


def test_a_recreated_topic_has_a_larger_epoch_across_restarts_of_the_embedded_store(tmp_path):
    topic = f"epoch-{uuid.uuid4().hex[:6]}"
    b = BrokerProcess(tmp_path / "data").start()
    epochs = []
    try:
        for restart in ("stop", "kill -9", None):
            epochs.append(create(b.bootstrap, b.port, topic))
            delete(b.bootstrap, b.port, topic)
            if restart == "stop":
                b.stop()
            elif restart == "kill -9":
                b.kill(signal.SIGKILL)
            else:
                break
            b.start()
        epochs.append(create(b.bootstrap, b.port, topic))
    finally:
        b.stop()
    assert epochs == sorted(set(epochs)) and len(epochs) == 4, epochs


@pytest.fixture
def zk3(zookeeper, tmp_path):
    c = ZkCluster(zookeeper, tmp_path)
    c.start()
    yield c
    c.stop()


def test_a_recreated_topic_has_a_larger_epoch_after_the_controller_moved(zk3):
    topic = f"epoch-zk-{uuid.uuid4().hex[:6]}"
    port = zk3.port(0)
    first = create(zk3.bootstrap, port, topic)
    delete(zk3.bootstrap, port, topic)
    controller = metadata(port).controller_id
    zk3.procs[controller].kill(signal.SIGKILL)
    survivor = next(n for n in range(3) if n != controller)
    sport = zk3.port(survivor)
    wait_until(lambda: metadata(sport).controller_id not in (-1, controller), message="a new controller",
               ignoring=(OSError,))
    bootstrap = ",".join(f"127.0.0.1:{zk3.port(n)}" for n in range(3) if n != controller)
    second = create(bootstrap, sport, topic)
    assert second > first
