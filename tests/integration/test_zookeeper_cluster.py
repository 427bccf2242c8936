"""The ZooKeeper layout, read from outside with kazoo, while three ``refka serve``
processes (broker ids 0-2, racks zone-0..zone-2) run over a private ZooKeeper.

- Every znode refka writes, field by field, as Kafka writes it and as the seeds
  extend it (KIP-253: initial/undeleted_partition_count, partition_epoch,
  leaderEpochAfterCreation/BeforeDeletion; KIP-232: controller_epoch), and what a
  partition expansion (CreatePartitions 3 -> 4) writes.
- Controller fail-over after ``kill -9``: /controller moves, /controller_epoch is
  incremented, and Metadata v12's tagged controller_epochs carries the new epoch
  with a controller_metadata_epoch that restarted and grows with each broadcast;
  a controller request (StopReplica) from the old epoch is STALE_CONTROLLER_EPOCH.
- ZooKeeper session expiry of a non-controller broker (SIGSTOP longer than
  zookeeper.session.timeout.ms): its registration disappears, the controller moves
  leadership off it and shrinks ISRs; after SIGCONT it registers again (a new
  session) and rejoins the ISRs.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions
from kazoo.client import KazooClient

from refka.controller.znodes import topic_id_to_str
from refka.protocol import ErrorCode
from refka.protocol.messages.stop_replica import StopReplica
from tests.integration.cluster_helpers import TIMEOUT, Raw, ZkCluster, metadata
from tests.waiting import wait_until
from tests.zk import ZooKeeperServer, zookeeper_unavailable

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

SESSION_TIMEOUT_MS = 4000
ASSIGNMENT = [[0, 1, 2], [1, 2, 0], [2, 0, 1]]


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    reason = zookeeper_unavailable()
    if reason:
        pytest.skip(reason)
    # tickTime 500 ms: sessions may last 2..20 ticks (1 s .. 10 s), so 4 s is granted as asked.
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), tick_ms=500)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def zk3(zookeeper, tmp_path):
    c = ZkCluster(zookeeper, tmp_path,
                  overrides={"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)}).start()
    yield c
    for p in c.procs:  # never leave a stopped process behind: SIGTERM would wait on it
        if p.proc is not None and p.proc.poll() is None:
            os.kill(p.proc.pid, signal.SIGCONT)
    c.stop()


# ---- helpers ---------------------------------------------------------------------------------


def get_json(kz: KazooClient, path: str) -> tuple[dict[str, Any], Any]:
    data, stat = kz.get(path)
    return json.loads(data), stat


def states(kz: KazooClient, topic: str) -> dict[int, dict[str, Any]]:
    parts = sorted(int(p) for p in kz.get_children(f"/brokers/topics/{topic}/partitions"))
    return {p: get_json(kz, f"/brokers/topics/{topic}/partitions/{p}/state")[0] for p in parts}


def controller_of(kz: KazooClient) -> int:
    return int(get_json(kz, "/controller")[0]["brokerid"])


def controller_token(kz: KazooClient) -> int:
    """refka's controller_token in /controller: what lets a connection prove it is a broker's."""
    return int(get_json(kz, "/controller")[0]["controller_token"])


def controller_epoch(kz: KazooClient) -> int:
    data, _ = kz.get("/controller_epoch")
    return int(data.decode().strip())


def setup_topic(cluster: ZkCluster, kz: KazooClient) -> str:
    topic = f"zk-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, ASSIGNMENT)
    for p, replicas in enumerate(ASSIGNMENT):
        cluster.wait_leader(topic, p, replicas[0])
    # every state znode written, every ISR full
    wait_until(lambda: (s := states(kz, topic)) and len(s) == 3
               and all(sorted(v["isr"]) == [0, 1, 2] for v in s.values()),
               message="full ISRs", ignoring=(Exception,))
    return topic


def md_epochs(port: int) -> tuple[int, int]:
    ce = metadata(port).controller_epochs
    assert ce is not None, "Metadata v12 without the tagged controller_epochs"
    return ce.controller_epoch, ce.controller_metadata_epoch


# ---- 1. the znodes ---------------------------------------------------------------------------


def test_znodes_match_the_design(zk3, kz):
    topic = setup_topic(zk3, kz)

    # /brokers/ids/<id>: ephemeral, Kafka's version 5 registration with endpoints and rack
    assert sorted(int(b) for b in kz.get_children("/brokers/ids")) == [0, 1, 2]
    owners = set()
    for b in range(3):
        doc, stat = get_json(kz, f"/brokers/ids/{b}")
        assert stat.ephemeralOwner != 0, f"/brokers/ids/{b} is not ephemeral"
        owners.add(stat.ephemeralOwner)
        port = zk3.port(b)
        assert doc["version"] == 5
        assert doc["endpoints"] == [f"PLAINTEXT://127.0.0.1:{port}"]
        assert doc["host"] == "127.0.0.1" and doc["port"] == port
        assert doc["rack"] == f"zone-{b}"
        assert doc["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
        assert doc["jmx_port"] == -1 and int(doc["timestamp"]) > 0
    assert len(owners) == 3, "each broker has its own ZooKeeper session"

    # /controller (ephemeral) and /controller_epoch (a bare integer)
    ctl, stat = get_json(kz, "/controller")
    assert stat.ephemeralOwner != 0
    assert ctl["version"] == 2 and ctl["brokerid"] in (0, 1, 2) and int(ctl["timestamp"]) > 0
    assert ctl["controller_token"].isdigit(), "refka's token of the election, as text"
    owner_of = {get_json(kz, f"/brokers/ids/{b}")[1].ephemeralOwner: b for b in range(3)}
    assert owner_of[stat.ephemeralOwner] == ctl["brokerid"], "/controller belongs to the controller's session"
    epoch = controller_epoch(kz)
    assert epoch >= 1
    assert metadata(zk3.port(0)).controller_id == ctl["brokerid"]

    # /brokers/topics/<t>
    tdoc, _ = get_json(kz, f"/brokers/topics/{topic}")
    assert tdoc["version"] == 3
    assert tdoc["partitions"] == {str(p): r for p, r in enumerate(ASSIGNMENT)}
    assert tdoc["initial_partition_count"] == 3
    assert tdoc["undeleted_partition_count"] == 3
    md = metadata(zk3.port(1), topic)
    (mt,) = md.topics
    assert tdoc["topic_id"] == topic_id_to_str(mt.topic_id)
    assert len(tdoc["topic_id"]) == 22
    assert mt.partition_counts.initial_partition_count == 3
    assert mt.partition_counts.undeleted_partition_count == 3

    # /brokers/topics/<t>/partitions/<p> and .../state
    md_parts = {p.partition_index: p for p in mt.partitions}
    max_pe = int(kz.get("/partition_epoch")[0].decode())
    pes = []
    for p, replicas in enumerate(ASSIGNMENT):
        pdoc, _ = get_json(kz, f"/brokers/topics/{topic}/partitions/{p}")
        assert pdoc["version"] == 1
        assert isinstance(pdoc["partition_epoch"], int) and 0 <= pdoc["partition_epoch"] <= max_pe
        assert pdoc["leaderEpochAfterCreation"] == {}, "created with the topic, not by an expansion"
        assert pdoc["leaderEpochBeforeDeletion"] == {}
        assert md_parts[p].partition_epoch == pdoc["partition_epoch"]
        pes.append(pdoc["partition_epoch"])
        sdoc, _ = get_json(kz, f"/brokers/topics/{topic}/partitions/{p}/state")
        assert sdoc["version"] == 1
        assert sdoc["leader"] == replicas[0]
        assert sdoc["leader_epoch"] >= 0
        assert sorted(sdoc["isr"]) == [0, 1, 2]
        assert sdoc["controller_epoch"] == epoch
        assert md_parts[p].leader_id == sdoc["leader"] and md_parts[p].leader_epoch == sdoc["leader_epoch"]
    assert len(set(pes)) == 3, f"partition epochs come from one cluster-wide counter: {pes}"
    assert md.max_partition_epoch == max_pe

    # CreatePartitions 3 -> 4: the new partition records the old leader epochs (before the bump)
    before = {p: s["leader_epoch"] for p, s in states(kz, topic).items()}
    admin = AdminClient({"bootstrap.servers": zk3.bootstrap})
    admin.create_partitions([NewPartitions(topic, 4)], operation_timeout=TIMEOUT)[topic].result(TIMEOUT)

    new_doc = wait_until(lambda: get_json(kz, f"/brokers/topics/{topic}/partitions/3")[0],
                         message="partition znode 3", ignoring=(Exception,))
    assert new_doc["version"] == 1
    assert new_doc["leaderEpochAfterCreation"] == {str(p): e for p, e in before.items()}
    assert new_doc["leaderEpochBeforeDeletion"] == {}
    assert new_doc["partition_epoch"] > max(pes)
    tdoc, _ = get_json(kz, f"/brokers/topics/{topic}")
    assert tdoc["undeleted_partition_count"] == 4
    assert tdoc["initial_partition_count"] == 3
    assert len(tdoc["partitions"]) == 4 and sorted(tdoc["partitions"]["3"]) == [0, 1, 2]
    # KIP-253: each old partition's leader epoch bumped by one
    after = wait_until(lambda: (s := states(kz, topic)) and len(s) == 4
                       and all(s[p]["leader_epoch"] == before[p] + 1 for p in before) and s,
                       message="partition 3 state and bumped epochs", ignoring=(Exception,))
    assert all(after[p]["leader"] == ASSIGNMENT[p][0] for p in before), "expansion moves no leader"
    assert after[3]["leader"] in (0, 1, 2)

    # the brokers see the new counts
    def counts_everywhere():
        for b in range(3):
            (t,) = metadata(zk3.port(b), topic).topics
            if t.partition_counts is None or t.partition_counts.undeleted_partition_count != 4:
                return False
        return True
    wait_until(counts_everywhere,
               message="undeleted_partition_count 4 on every broker", ignoring=(Exception,))


# ---- 2. controller fail-over ------------------------------------------------------------------


def kill_controller(zk3: ZkCluster, kz: KazooClient, topic: str) -> dict[str, Any]:
    """kill -9 the controller; return once a survivor controls and both survivors serve
    Metadata under the new controller epoch (the failover broadcast is done)."""
    old_ctl = controller_of(kz)
    old_epoch = controller_epoch(kz)
    survivors = [b for b in range(3) if b != old_ctl]
    wait_until(lambda: all(md_epochs(zk3.port(b))[0] == old_epoch for b in range(3)),
               message="Metadata carrying the current controller epoch", ignoring=(Exception,))
    before = states(kz, topic)

    zk3.procs[old_ctl].kill(signal.SIGKILL)

    new_ctl = wait_until(lambda: kz.exists("/controller") and controller_of(kz) != old_ctl
                         and controller_of(kz),
                         message="a new controller", ignoring=(Exception,))
    new_epoch = controller_epoch(kz)
    wait_until(lambda: all(md_epochs(zk3.port(b))[0] == new_epoch for b in survivors),
               message="survivors on the new controller epoch", ignoring=(Exception,))
    return dict(old_ctl=old_ctl, old_epoch=old_epoch, new_ctl=new_ctl, new_epoch=new_epoch,
                survivors=survivors, before=before)


def test_controller_failover_bumps_controller_epoch(zk3, kz):
    topic = setup_topic(zk3, kz)
    f = kill_controller(zk3, kz, topic)
    old_ctl, new_epoch, survivors = f["old_ctl"], f["new_epoch"], f["survivors"]
    assert f["new_ctl"] in survivors
    assert new_epoch == f["old_epoch"] + 1
    assert int(kz.get("/controller_epoch")[0]) == new_epoch

    # Partitions the dead controller led move to survivors; their state znodes carry the new epoch.
    s = wait_until(lambda: (s := states(kz, topic)) and all(v["leader"] != old_ctl for v in s.values()) and s,
                   message="leadership off the dead controller", ignoring=(Exception,))
    for p, v in s.items():
        if f["before"][p]["leader"] == old_ctl:
            assert v["controller_epoch"] == new_epoch
            assert v["leader_epoch"] > f["before"][p]["leader_epoch"]
            assert old_ctl not in v["isr"]

    # Metadata v12 from a survivor: the new controller epoch, a metadata epoch that restarted.
    port = zk3.port(survivors[0])
    assert metadata(port).controller_id == f["new_ctl"]
    ce, me = md_epochs(port)
    assert ce == new_epoch
    assert 0 <= me < 20, f"controller_metadata_epoch should restart with the new controller, got {me}"

    # A later broadcast (a new topic) carries a larger controller_metadata_epoch, same controller epoch.
    zk3.create_topic(f"zk-after-{uuid.uuid4().hex[:6]}", [survivors])
    later = wait_until(lambda: (e := md_epochs(port)) and e[1] > me and e,
                       message="a later broadcast", ignoring=(Exception,))
    assert later[0] == new_epoch
    for b in survivors:
        assert md_epochs(zk3.port(b))[0] == new_epoch

    # A controller request from the old controller's epoch is fenced (an empty StopReplica changes
    # nothing either way); one from the current epoch is accepted. Only a broker's connection is
    # answered either (inter_broker.py): the first request proves it with the controller's
    # token from /controller, as only brokers can, and the old epoch comes after it.
    token = controller_token(kz)
    for b in survivors:
        raw = Raw(zk3.port(b))
        try:
            for epoch, want in ((new_epoch, ErrorCode.NONE), (f["old_epoch"], ErrorCode.STALE_CONTROLLER_EPOCH)):
                resp, _ = raw.call_raw(StopReplica, StopReplica.Request(
                    controller_id=old_ctl if epoch == f["old_epoch"] else f["new_ctl"],
                    controller_epoch=epoch, broker_epoch=-1, topic_states=[], controller_token=token), 3)
                assert resp.error_code == want, (b, epoch, resp)
        finally:
            raw.close()
    assert md_epochs(port)[0] == new_epoch, "a fenced request leaves the metadata alone"


def test_failover_removes_the_dead_controller_from_isrs(zk3, kz):
    topic = setup_topic(zk3, kz)
    f = kill_controller(zk3, kz, topic)
    # The failover broadcast is done (survivors serve the new epoch), so its ISR writes are made;
    # well before replica.lag.time.max.ms (30 s) could let a leader shrink an ISR itself.
    wait_until(lambda: all(v["leader"] != f["old_ctl"] for v in states(kz, topic).values()),
               message="leadership off the dead controller", ignoring=(Exception,))
    s = states(kz, topic)
    assert all(f["old_ctl"] not in v["isr"] for v in s.values()), s


def test_no_broker_ever_answers_older_controller_epochs(zk3, kz):
    """KIP-232 (seed 000): a client rejects metadata whose (controller_epoch,
    controller_metadata_epoch) is below what it has seen, so no broker may answer a
    smaller pair than one it answered before: polled on every broker while the
    controller is killed, comes back, the next one is stopped, and topics are made."""
    setup_topic(zk3, kz)
    seen: dict[int, list[tuple[int, int]]] = {b: [] for b in range(3)}
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            for b in range(3):
                try:
                    ce = metadata(zk3.port(b)).controller_epochs
                except Exception:  # a broker down or starting: nothing answered
                    continue
                if ce is not None:  # a broker that has no controller's metadata yet
                    seen[b].append((ce.controller_epoch, ce.controller_metadata_epoch))
            time.sleep(0.02)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        first = controller_of(kz)
        zk3.procs[first].kill(signal.SIGKILL)
        second = wait_until(lambda: kz.exists("/controller") and controller_of(kz) != first and controller_of(kz),
                            message="a second controller", ignoring=(Exception,))
        zk3.procs[first].start()
        zk3.create_topic(f"zk-mono-{uuid.uuid4().hex[:6]}", [[0, 1, 2]])
        second_epoch = controller_epoch(kz)
        zk3.procs[second].stop()  # a controlled shutdown: the controller moves a third time
        # To either of the other two: the first broker, back, may win this election too.
        wait_until(lambda: kz.exists("/controller") and controller_of(kz) != second
                   and controller_epoch(kz) > second_epoch, message="a third controller", ignoring=(Exception,))
        zk3.procs[second].start()
        zk3.create_topic(f"zk-mono-{uuid.uuid4().hex[:6]}", [[0, 1, 2]])
        last = controller_epoch(kz)
        wait_until(lambda: all(seen[b] and seen[b][-1][0] == last for b in range(3)),
                   message="every broker answering the last controller's epoch")
    finally:
        stop.set()
        poller.join(TIMEOUT)
    for b, pairs in seen.items():
        assert len({epoch for epoch, _ in pairs}) >= 2, (b, "saw no controller change")
        drops = [(a, c) for a, c in zip(pairs, pairs[1:], strict=False) if c < a]
        assert not drops, f"broker {b} answered an older pair after a newer one: {drops[:5]}"


# ---- 3. ZooKeeper session expiry ----------------------------------------------------------------


def test_session_expiry_of_a_follower_and_rejoin(zk3, kz):
    topic = setup_topic(zk3, kz)
    ctl = controller_of(kz)
    victim = next(b for b in range(3) if b != ctl)
    _, stat = kz.get(f"/brokers/ids/{victim}")
    old_owner, old_czxid = stat.ephemeralOwner, stat.czxid
    pid = zk3.procs[victim].proc.pid  # type: ignore[union-attr]

    os.kill(pid, signal.SIGSTOP)
    try:
        # The session expires after ~4 s without heartbeats: the registration goes.
        wait_until(lambda: kz.exists(f"/brokers/ids/{victim}") is None,
                   message=f"/brokers/ids/{victim} to disappear", ignoring=(Exception,))
        assert sorted(int(b) for b in kz.get_children("/brokers/ids")) == sorted({0, 1, 2} - {victim})

        # The controller moves leadership off it and shrinks the ISRs.
        def off():
            s = states(kz, topic)
            return all(v["leader"] != victim and victim not in v["isr"] for v in s.values()) and s
        s = wait_until(off, message="leadership and ISRs off the expired broker", ignoring=(Exception,))
        assert all(v["leader"] in ASSIGNMENT[p] for p, v in s.items())

        # Records written while it is away: the returning broker has to catch up to rejoin.
        producer = Producer({"bootstrap.servers": ",".join(zk3.procs[b].bootstrap for b in range(3) if b != victim),
                             "acks": "all"})
        for i in range(30):
            producer.produce(topic, key=str(i).encode(), value=b"v%d" % i, partition=i % 3)
        assert producer.flush(TIMEOUT) == 0
    finally:
        os.kill(pid, signal.SIGCONT)

    # A new session, a new registration.
    def back():
        st = kz.exists(f"/brokers/ids/{victim}")
        return st is not None and st.ephemeralOwner != old_owner and st
    st = wait_until(back, message=f"/brokers/ids/{victim} to come back", ignoring=(Exception,))
    assert st.ephemeralOwner != 0
    doc, _ = get_json(kz, f"/brokers/ids/{victim}")
    assert doc["rack"] == f"zone-{victim}" and doc["port"] == zk3.port(victim)

    # With replication it rejoins every ISR.
    wait_until(lambda: all(victim in v["isr"] for v in states(kz, topic).values()),
               message="the broker back in every ISR", timeout=45, ignoring=(Exception,))
    assert controller_of(kz) == ctl

    # Its broker epoch is the new registration's czxid (KIP-380): a controller request
    # addressed to the expired registration is STALE_BROKER_EPOCH; to this one, or to
    # no epoch in particular (-1), it is accepted. (Each proves it comes from the
    # controller with the token in /controller.)
    ctl_epoch = int(kz.get("/controller_epoch")[0])
    token = controller_token(kz)
    for broker_epoch, want in ((old_czxid, ErrorCode.STALE_BROKER_EPOCH), (st.czxid, ErrorCode.NONE),
                               (-1, ErrorCode.NONE)):
        raw = Raw(zk3.port(victim))
        try:
            resp, _ = raw.call_raw(StopReplica, StopReplica.Request(
                controller_id=ctl, controller_epoch=ctl_epoch, broker_epoch=broker_epoch, topic_states=[],
                controller_token=token), 3)
        finally:
            raw.close()
        assert resp.error_code == want, (broker_epoch, resp)
