"""Stale-metadata mode (issue 12, KIP-232 seed 000) end to end: ``refka admin
stale-metadata --freeze`` over the admin API of a three-broker cluster makes broker 0
answer Metadata as it was (leader, brokers, controller epochs) while the leader of a
partition fails over; the reference producer, which asks every broker in turn,
refuses broker 0's answers once it has seen newer ones (older controller epochs), so it
never goes back to the dead leader, and every record it was acknowledged is in the log,
in order. ``--thaw`` and broker 0 answers the cluster as it is again.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka.admin import NewTopic

from refka.broker import admin_http
from refka.client.producer import Producer
from tests.brokers import free_port_block
from tests.integration.cluster_helpers import InProcessCluster, metadata
from tests.integration.confluent_helpers import admin, read_partition
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TIMEOUT = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = InProcessCluster(tmp_path_factory.mktemp("stale"), n=3, overrides={"auto.create.topics.enable": "false"})
    c.ports = [int(hp.rsplit(":", 1)[1]) for hp in c.bootstrap.split(",")]
    port = free_port_block()
    runner = c.call(admin_http.start(c.cluster.served, "127.0.0.1", port))
    c.admin_url = f"http://127.0.0.1:{port}"
    try:
        yield c
    finally:
        c.call(runner.cleanup())
        c.close()


def refka_admin(cluster, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "refka.cli", "admin", "--url", cluster.admin_url, *args],
                         capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr
    return out.stdout


def pair(md) -> tuple[int, int]:
    return md.controller_epochs.controller_epoch, md.controller_epochs.controller_metadata_epoch


def test_the_reference_producer_refuses_a_frozen_brokers_metadata_and_never_returns_to_the_dead_leader(cluster):
    topic = f"stale-{uuid.uuid4().hex[:8]}"
    a = admin(cluster.bootstrap)
    a.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2]])],
                    operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
    wait_until(lambda: all(metadata(cluster.ports[n], topic).topics[0].partitions[0].leader_id == 1
                           for n in range(3)), message="broker 1 leads everywhere")

    async def go() -> tuple[list[int], int, list[int]]:
        p = Producer(bootstrap_servers=cluster.bootstrap, metadata_max_age_ms=100, retry_backoff_ms=50)
        await p.start()
        offsets, leaders = [], []
        try:
            offsets.append((await p.send_and_wait(topic, b"0", partition=0)).offset)
            frozen = json.loads(await asyncio.to_thread(refka_admin, cluster, "stale-metadata", "--broker", "0",
                                                        "--freeze", "--json"))
            assert frozen["frozen"] and frozen["answering"] == frozen["current"]
            await asyncio.to_thread(cluster.stop_broker, 1)  # the leader fails: broker 2 leads
            seen_new = None
            deadline = time.monotonic() + TIMEOUT
            # records keep flowing until broker 0's frozen answers have been refused a few times
            # after the producer learned the new leader
            for i in range(1, 10_000):
                offsets.append((await p.send_and_wait(topic, str(i).encode(), partition=0)).offset)
                leaders.append(p._cluster.metadata.leader_for(topic, 0))
                if seen_new is None and leaders[-1] == 2:
                    seen_new = p._cluster.metadata.stale_answers
                if seen_new is not None and p._cluster.metadata.stale_answers >= seen_new + 3:
                    break
                assert time.monotonic() < deadline, "no frozen answer refused"
                await asyncio.sleep(0.02)
            return offsets, p._cluster.metadata.stale_answers, leaders
        finally:
            await p.stop()

    try:
        offsets, stale, leaders = asyncio.run(asyncio.wait_for(go(), TIMEOUT * 2))
        # broker 0 still answers the old leader and the older controller epochs
        frozen_md = metadata(cluster.ports[0], topic)
        fresh_md = metadata(cluster.ports[2], topic)
        assert frozen_md.topics[0].partitions[0].leader_id == 1
        assert fresh_md.topics[0].partitions[0].leader_id == 2
        assert pair(frozen_md) < pair(fresh_md)
        state = json.loads(refka_admin(cluster, "stale-metadata", "--broker", "0", "--json"))
        assert state["frozen"] and state["answering"]["controller_metadata_epoch"] == \
            frozen_md.controller_epochs.controller_metadata_epoch
        table = refka_admin(cluster, "stale-metadata", "--broker", "0")
        assert "FROZEN" in table and "answering" in table
    finally:
        thawed = json.loads(refka_admin(cluster, "stale-metadata", "--broker", "0", "--thaw", "--json"))
        cluster.start_broker(1)
    assert stale >= 3
    # once learned, the new leader is never replaced by the frozen broker's old one
    assert leaders[leaders.index(2):] == [2] * (len(leaders) - leaders.index(2))
    assert offsets == list(range(len(offsets)))
    assert [m.value() for m in read_partition(cluster.bootstrap, topic, 0)] == \
        [str(i).encode() for i in range(len(offsets))]
    assert not thawed["frozen"] and thawed["answering"] == thawed["current"]
    thawed_md = metadata(cluster.ports[0], topic)
    assert thawed_md.topics[0].partitions[0].leader_id in (1, 2)  # 1 again, if its preferred election ran
    assert pair(thawed_md) >= pair(fresh_md)
