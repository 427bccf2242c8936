"""Controlled shutdown on SIGTERM (ControlledShutdown, key 7).

Three ``refka serve`` processes over a private ZooKeeper. A broker that gets
SIGTERM first asks the controller to move leadership away from it
(ControllerSide.controlled_shutdown, handlers/controlled_shutdown.py), then
stops: the partitions it led are led by others, with the leader epoch bumped
once, and its log shows the shutdown succeeded before the broker stopped.
"""

from __future__ import annotations

import re
import signal
import uuid

import pytest

from tests.integration.cluster_helpers import ZkCluster, metadata
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture
def zk3(zookeeper, tmp_path):
    c = ZkCluster(zookeeper, tmp_path, overrides={"controlled.shutdown.retry.backoff.ms": "200"}).start()
    yield c
    c.stop()


def state(port: int, topic: str) -> dict[int, tuple[int, int, list[int]]]:
    (t,) = metadata(port, topic).topics
    return {p.partition_index: (p.leader_id, p.leader_epoch, sorted(p.isr_nodes)) for p in t.partitions}


def events(cluster: ZkCluster, node_id: int) -> list[str]:
    """The structlog event names of one broker's log, in order."""
    out = []
    for line in cluster.procs[node_id].log_path.read_text().splitlines():
        m = re.search(r"\[\w+\s*\] (\w+)", line)
        if m:
            out.append(m.group(1))
    return out


def controller_id(cluster: ZkCluster, via: int) -> int:
    return metadata(cluster.port(via)).controller_id


def sigterm_and_wait(cluster: ZkCluster, node_id: int) -> int:
    proc = cluster.procs[node_id].proc
    assert proc is not None
    proc.send_signal(signal.SIGTERM)
    return proc.wait(60)


@pytest.mark.parametrize("stopped_is_controller", [False, True])
def test_sigterm_moves_leadership_off_the_broker_before_it_exits(zk3, stopped_is_controller):
    cid = controller_id(zk3, 0)
    victim = cid if stopped_is_controller else next(i for i in range(3) if i != cid)
    others = [i for i in range(3) if i != victim]
    topic = f"cs-{uuid.uuid4().hex[:6]}"
    elsewhere = f"cs-elsewhere-{uuid.uuid4().hex[:6]}"
    # Two partitions the victim leads, one it follows; a topic it does not host.
    zk3.create_topic(topic, [[victim, *others], [victim, *reversed(others)], [others[0], victim, others[1]]])
    zk3.create_topic(elsewhere, [[others[1], others[0]]])
    for p, leader in enumerate([victim, victim, others[0]]):
        zk3.wait_leader(topic, p, leader)
    zk3.wait_leader(elsewhere, 0, others[1])
    before = state(zk3.port(others[0]), topic)
    before_elsewhere = state(zk3.port(others[0]), elsewhere)

    assert sigterm_and_wait(zk3, victim) == 0
    ev = events(zk3, victim)
    assert "controlled_shutdown_succeeded" in ev and "broker_stopped" in ev
    assert ev.index("controlled_shutdown_succeeded") < ev.index("broker_stopped")
    assert "controlled_shutdown_attempt_failed" not in ev

    # The new leaders were elected by the controlled shutdown: each led partition moved to the next
    # live replica in its assignment, its epoch bumped. (The victim may be back in the ISR for a
    # moment: it followed until it stopped, as in Kafka's ZooKeeper mode; the controller takes it out
    # once its registration is gone.) The topic it does not host is untouched.
    for node in others:
        zk3.wait_leader(topic, 0, others[0], min_epoch=before[0][1] + 1)
        zk3.wait_leader(topic, 1, others[1], min_epoch=before[1][1] + 1)

        def victim_left_the_isrs(node: int = node) -> bool:
            return not any(victim in isr for _l, _e, isr in state(zk3.port(node), topic).values())

        wait_until(victim_left_the_isrs, timeout=30, interval=0.05,
                   message=lambda node=node: f"{victim} out of the ISRs: {state(zk3.port(node), topic)}")
        after = state(zk3.port(node), topic)
        assert after[0][0] == others[0] and after[1][0] == others[1] and after[2][0] == others[0]
        assert state(zk3.port(node), elsewhere) == before_elsewhere
    if not stopped_is_controller:
        assert "controlled_shutdown_done" in events(zk3, cid)


def test_retries_while_a_partition_cannot_move_then_exits(zk3):
    """Assignment [victim, other]: the other replica stops first, so nobody can take over.
    The stopping broker tries controlled.shutdown.max.retries times, backoff apart, then exits."""
    cid = controller_id(zk3, 0)
    victim, follower = [i for i in range(3) if i != cid]
    topic = f"cs-stuck-{uuid.uuid4().hex[:6]}"
    single = f"cs-single-{uuid.uuid4().hex[:6]}"
    zk3.create_topic(topic, [[victim, follower]])
    zk3.create_topic(single, [victim])  # a one-replica partition never counts as remaining
    zk3.wait_leader(topic, 0, victim)
    zk3.wait_leader(single, 0, victim)
    assert sigterm_and_wait(zk3, follower) == 0
    assert sigterm_and_wait(zk3, victim) == 0
    ev = events(zk3, victim)
    assert ev.count("controlled_shutdown_attempt_failed") == 3  # controlled.shutdown.max.retries default
    assert "controlled_shutdown_failed" in ev
    assert ev.index("controlled_shutdown_failed") < ev.index("broker_stopped")
    log = zk3.procs[victim].log_path.read_text()
    assert "1 partitions still led" in log


def test_disabled_by_config(zookeeper, tmp_path):
    c = ZkCluster(zookeeper, tmp_path, overrides={"controlled.shutdown.enable": "false"}).start()
    try:
        cid = controller_id(c, 0)
        victim = next(i for i in range(3) if i != cid)
        assert sigterm_and_wait(c, victim) == 0
        assert not any(e.startswith("controlled_shutdown") for e in events(c, victim))
    finally:
        c.stop()
