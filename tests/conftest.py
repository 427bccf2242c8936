from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.brokers import BrokerProcess
from tests.zk import ZooKeeperServer, zookeeper_unavailable


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One private ZooKeeper (Debian's package, tests/zk.py) for the whole run; every
    user works under a chroot of its own. Tests skip, naming the reason, where the
    package is not installed."""
    reason = zookeeper_unavailable()
    if reason:
        pytest.skip(reason)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One refka broker with durable storage, shared by a test module."""
    b = BrokerProcess(tmp_path_factory.mktemp("refka") / "data").start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def memory_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("refka-mem") / "data", memory=True).start()
    yield b
    b.stop()
