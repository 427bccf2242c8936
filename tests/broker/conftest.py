from __future__ import annotations

import pytest

from refka.broker.log import LogConfig, PartitionLog


@pytest.fixture
def memory_log():
    """Opens in-memory partition logs (``memory_log()``), closed after the test."""
    opened = []

    def _open() -> PartitionLog:
        log = PartitionLog.open(None, LogConfig(), memory=True)
        opened.append(log)
        return log

    yield _open
    for log in opened:
        log.close()
