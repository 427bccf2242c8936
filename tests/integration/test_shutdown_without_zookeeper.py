"""A broker told to stop while its ZooKeeper is gone still stops: the goodbyes it owes the
store (giving up /controller, deleting its registration) are bounded, since the ephemeral
nodes go with the session anyway. Before, each waited for a reconnection that never came,
and the process ran on after SIGTERM for as long as it was left (an hour, once)."""

from __future__ import annotations

import signal
import subprocess

import pytest

from refka.zookeeper import ZooKeeperServer, zookeeper_unavailable
from tests.brokers import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.skipif(bool(zookeeper_unavailable()),
                                                          reason=zookeeper_unavailable() or "")]


def test_sigterm_stops_a_controller_whose_zookeeper_was_killed(tmp_path):
    zk = ZooKeeperServer(tmp_path / "zookeeper")
    zk.start()
    broker = BrokerProcess(tmp_path / "data", extra_args=["--zookeeper", zk.connect + "/gone", "--broker-id", "0"])
    try:
        broker.start()
        assert zk.proc is not None
        zk.proc.kill()  # the whole ensemble, gone for good
        zk.proc.wait()
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGTERM)
        try:
            code = broker.proc.wait(60)  # a hang check: it takes ~10 s (two bounded goodbyes of 5 s)
        except subprocess.TimeoutExpired:
            pytest.fail("refka serve still running 60 s after SIGTERM:\n" + broker.log_tail())
        assert code == 0, broker.log_tail()
        assert "controller_resign_delete_skipped" in broker.log_path.read_text()
    finally:
        broker.kill()
        zk.stop()
