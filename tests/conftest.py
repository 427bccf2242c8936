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


# -- each test's outcome, for the README's compatibility matrix (tests/compat.py)

_OUTCOMES: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A test's outcome: its call's, or its setup's or teardown's when that one did not pass
    (a skip or an error there is the test's outcome)."""
    if report.when == "call" or report.outcome != "passed":
        if _OUTCOMES.get(report.nodeid) != "failed":
            _OUTCOMES[report.nodeid] = report.outcome


def pytest_sessionfinish(session: pytest.Session) -> None:
    import json
    import time
    from pathlib import Path

    if not _OUTCOMES:
        return
    out = Path(__file__).resolve().parent.parent / ".cache" / "test-outcomes.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                               "args": list(session.config.args), "outcomes": _OUTCOMES}, indent=0))
