"""Fixtures shared by the integration tests: a private ZooKeeper per module
(Debian's package, tests/zk.py; the module's tests skip, naming the reason,
where it is not installed)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.zk import ZooKeeperServer, zookeeper_unavailable


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    reason = zookeeper_unavailable()
    if reason:
        pytest.skip(reason)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()
