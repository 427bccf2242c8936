from __future__ import annotations

import pytest

from tests.brokers import BrokerProcess


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
