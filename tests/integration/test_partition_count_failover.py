"""KIP-253's fault tolerance with three ``refka serve`` processes over a private
ZooKeeper: the controller is killed (SIGKILL) right after a step of an expansion, of a
shrink and of a drained partition's removal (tests/integration/crashing_broker.py), and
the next controller finishes the operation from what the znodes say: every leader epoch
bumped exactly once, no partition half-marked, a removed partition gone from the znodes,
from every broker's metadata and from its replicas' disks.

The changes are written into the topic znode with kazoo, as the seed's
``kafka-topics.sh --zookeeper`` does, so no client waits on the process that dies. Each
topic lives on the two brokers that are not the controller, so killing the controller
moves no leader of it and its leader epochs change only through KIP-253's bumps.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from kazoo.client import KazooClient

from tests.integration.cluster_helpers import TIMEOUT, ZkCluster, metadata
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

STEPS = ("expansion.epochs_bumped", "shrink.marked", "removal.assignment_written")


@pytest.fixture
def zk3(zookeeper, tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    c = ZkCluster(zookeeper, tmp_path, overrides={"zookeeper.session.timeout.ms": "4000",
                                                  "partition.deletion.check.interval.ms": "300"})
    for p in c.procs:
        p.module = "tests.integration.crashing_broker"
        p.env = {"REFKA_TEST_CRASH_AT": ",".join(STEPS), "REFKA_TEST_CRASH_MARKERS": str(markers)}
    c.markers = markers  # type: ignore[attr-defined]
    c.start()
    yield c
    c.stop()


def get_json(kz: KazooClient, path: str) -> dict[str, Any]:
    return json.loads(kz.get(path)[0])


def controller_of(kz: KazooClient) -> int:
    return int(get_json(kz, "/controller")["brokerid"])


def epochs(kz: KazooClient, topic: str) -> dict[int, int]:
    doc = get_json(kz, f"/brokers/topics/{topic}")
    return {int(p): get_json(kz, f"/brokers/topics/{topic}/partitions/{p}/state")["leader_epoch"]
            for p in doc["partitions"]}


def marks(kz: KazooClient, topic: str) -> dict[int, dict[str, int]]:
    doc = get_json(kz, f"/brokers/topics/{topic}")
    return {int(p): get_json(kz, f"/brokers/topics/{topic}/partitions/{p}")["leaderEpochBeforeDeletion"]
            for p in doc["partitions"]}


def write_topic(kz: KazooClient, topic: str, change) -> None:
    """The admin's write, straight into the topic znode (at the version read)."""
    data, stat = kz.get(f"/brokers/topics/{topic}")
    doc = json.loads(data)
    change(doc)
    kz.set(f"/brokers/topics/{topic}", json.dumps(doc).encode(), version=stat.version)


def grow(kz: KazooClient, topic: str, new: dict[int, list[int]]) -> None:
    write_topic(kz, topic, lambda doc: doc["partitions"].update({str(p): r for p, r in new.items()}))


def shrink(kz: KazooClient, topic: str, count: int) -> None:
    write_topic(kz, topic, lambda doc: doc.update(undeleted_partition_count=count))


def settled(kz: KazooClient, topic: str, partitions: int) -> dict[int, int]:
    """Every partition of the topic znode has its state: its leader epochs."""
    return wait_until(lambda: (e := epochs(kz, topic)) and len(e) == partitions and e,
                      message=f"{topic}: {partitions} partition states", ignoring=(Exception,))


def new_topic(zk3: ZkCluster, kz: KazooClient) -> tuple[str, int, list[int]]:
    """A topic of 2 partitions on the brokers that are not the controller: (name, controller, others)."""
    controller = controller_of(kz)
    a, b = (i for i in range(3) if i != controller)
    topic = f"k253-{uuid.uuid4().hex[:8]}"
    zk3.create_topic(topic, [[a, b], [b, a]])
    settled(kz, topic, 2)
    return topic, controller, [a, b]


def killed_and_replaced(zk3: ZkCluster, kz: KazooClient, controller: int, step: str) -> int:
    """Waits for the controller to have died after ``step`` and another to take over; starts
    the dead one again (its crash marker is spent); returns the new controller."""
    proc = zk3.procs[controller].proc
    assert proc is not None
    wait_until(lambda: proc.poll() is not None, message=f"broker {controller} killed after {step}")
    assert (zk3.markers / step).exists()  # type: ignore[attr-defined]
    def successor() -> tuple[int] | None:
        now = controller_of(kz) if kz.exists("/controller") else controller
        return (now,) if now != controller else None

    (new,) = wait_until(successor, message="a new controller", ignoring=(Exception,))
    zk3.restart(controller)
    return new


def counts_everywhere(zk3: ZkCluster, topic: str, undeleted: int, partitions: list[int]) -> None:
    def agreed() -> bool:
        for b in range(3):
            (t,) = metadata(zk3.port(b), topic).topics
            if t.partition_counts is None or t.partition_counts.undeleted_partition_count != undeleted:
                return False
            if sorted(p.partition_index for p in t.partitions) != partitions:
                return False
        return True
    wait_until(agreed, message=f"{topic}: every broker with count {undeleted} and partitions {partitions}",
               ignoring=(Exception,))


def test_the_next_controller_finishes_what_a_killed_one_started(zk3, kz):
    # An expansion, the controller killed after bumping the old partitions' epochs (E3).
    topic, controller, (a, b) = new_topic(zk3, kz)
    before = epochs(kz, topic)
    grow(kz, topic, {2: [a, b], 3: [b, a]})
    killed_and_replaced(zk3, kz, controller, "expansion.epochs_bumped")
    after = settled(kz, topic, 4)
    assert after == {0: before[0] + 1, 1: before[1] + 1, 2: 0, 3: 0}
    for p in (2, 3):
        assert get_json(kz, f"/brokers/topics/{topic}/partitions/{p}")["leaderEpochAfterCreation"] == \
            {str(q): e for q, e in before.items()}
    assert get_json(kz, f"/brokers/topics/{topic}")["undeleted_partition_count"] == 4
    counts_everywhere(zk3, topic, 4, [0, 1, 2, 3])

    # A shrink, the controller killed once it marked the partitions (S1), before the bump.
    topic, controller, (a, b) = new_topic(zk3, kz)
    grow(kz, topic, {2: [a, b], 3: [b, a]})
    settled(kz, topic, 4)
    producer = Producer({"bootstrap.servers": zk3.bootstrap, "acks": "all"})
    for p in (2, 3):
        producer.produce(topic, b"keeps it from being drained", partition=p)
    assert producer.flush(TIMEOUT) == 0
    before = epochs(kz, topic)
    shrink(kz, topic, 2)
    killed_and_replaced(zk3, kz, controller, "shrink.marked")
    recorded = {"0": before[0], "1": before[1]}
    wait_until(lambda: epochs(kz, topic) == {0: before[0] + 1, 1: before[1] + 1, 2: before[2], 3: before[3]},
               message="p0 and p1 bumped once", ignoring=(Exception,))
    assert marks(kz, topic) == {0: {}, 1: {}, 2: recorded, 3: recorded}
    counts_everywhere(zk3, topic, 2, [0, 1, 2, 3])

    # A drained partition's removal, the controller killed once the assignment lost it (R1).
    topic, controller, (a, b) = new_topic(zk3, kz)
    grow(kz, topic, {2: [a, b], 3: [b, a]})
    settled(kz, topic, 4)
    shrink(kz, topic, 2)  # 2 and 3 are empty: the drain task removes them at once
    killed_and_replaced(zk3, kz, controller, "removal.assignment_written")
    wait_until(lambda: sorted(kz.get_children(f"/brokers/topics/{topic}/partitions")) == ["0", "1"],
               message="partition znodes 2 and 3 deleted", ignoring=(Exception,))
    assert sorted(get_json(kz, f"/brokers/topics/{topic}")["partitions"]) == ["0", "1"]
    counts_everywhere(zk3, topic, 2, [0, 1])
    for i in (a, b):  # StopReplica(delete) reached the replicas
        wait_until(lambda i=i: not [d for p in (2, 3) for d in zk3.procs[i].data_dir.rglob(f"{topic}-{p}")],
                   message=f"broker {i} deleted the logs of partitions 2 and 3")
    # Nothing is marked any more: the topic grows again.
    grow(kz, topic, {2: [a, b]})
    settled(kz, topic, 3)
    counts_everywhere(zk3, topic, 3, [0, 1, 2])
