"""Fixtures the integration tests over ZooKeeper share."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from tests.integration.cluster_helpers import TIMEOUT


@pytest.fixture
def kz(zk3):
    """Our own ZooKeeper session, chrooted where the module's ``zk3`` cluster lives."""
    client = KazooClient(hosts=zk3.connect, timeout=10.0)
    client.start(timeout=TIMEOUT)
    yield client
    client.stop()
    client.close()
