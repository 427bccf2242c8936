"""The deployment's topology run for real on one machine (issue 15): three ZooKeeper
servers and three refka brokers, each a host of its own (a network namespace with its
address and rack on one bridge, tests/integration/netns.py), configured as the manifests
configure the pods (deploy/k8s/base: zoo.cfg from zookeeper.yaml's environment,
refka-start.sh with refka.yaml's, the brokers' names resolved as the headless Service's).
The client is confluent-kafka in the root namespace, through the brokers' advertised
EXTERNAL addresses.

An idempotent acks=all producer and a consumer run throughout, while, one after the other:

0. SIGTERM: a broker stopped as the kubelet stops a pod (a controlled shutdown within the
   pod's grace period), then started again;
1. kill -9: the active controller's broker is killed, then started again;
2. cut off: a broker that leads partitions is cut off the network (veth down, all packets
   lost) until the others have seen its ZooKeeper session expire and elected new leaders;
   from its own namespace its stale leadership is asked to acknowledge an acks=all Produce
   and to serve a Fetch at the new leader epoch (it must do neither); then it comes back;
3. ZooKeeper partition: the ZooKeeper leader loses the other two servers (the brokers still
   reach it), then gets them back;
4. latency: 200 ms more each way between hosts of different racks, for a while.

After each the cluster converges (one controller, live itself and the only one counting
itself active; every partition's leader live and in its ISR; the brokers agree; their own
leader counts add up, so nobody still leads what was given away; after a broker came back,
full ISRs), and every acknowledged record is consumed exactly once, in offset order per
partition, none lost. The figures (time to converge, the producer's longest stall,
records acknowledged / consumed / lost) are printed at the end and kept in
``netns-figures.json`` in the test's directory.

Skipped, with the reason, where network namespaces cannot be made (not root, no iptables,
``ip netns add`` refused) or ZooKeeper's package is missing.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.deploy.manifests import BASE, container, find, load, pod_env
from tests.integration.netns import (
    Broker,
    Host,
    Network,
    ZooKeeperServer,
    cluster_view,
    converged,
    netns_unavailable,
)
from tests.zk import zookeeper_unavailable

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

NAMESPACE = "refka"  # the Kubernetes namespace the names are made for
DOMAIN = "cluster.local"
RACKS = ("rack-a", "rack-b", "rack-c")
TOPIC = "netns-orders"
PARTITIONS = 6
RATE = 100  # records a second
LATENCY_MS = 200
SESSION_TIMEOUT_MS = 6000  # zookeeper.session.timeout.ms, short to keep the cut-off short
CONVERGE_TIMEOUT = 90.0


# -- the lab -----------------------------------------------------------------------------


class Lab:
    def __init__(self, workdir: Path, net: Network) -> None:
        self.workdir = workdir
        self.net = net
        zk_yaml = load(BASE / "zookeeper.yaml")
        refka_yaml = load(BASE / "refka.yaml")
        zk_sts = find(zk_yaml, "StatefulSet", "zookeeper")
        sts = find(refka_yaml, "StatefulSet", "refka")
        zk_service, service = zk_sts["spec"]["serviceName"], sts["spec"]["serviceName"]
        self.zk_hosts = [self.net.add_host(
            f"zk{i}", 11 + i, RACKS[i],
            [f"zookeeper-{i}.{zk_service}.{NAMESPACE}.svc.{DOMAIN}", f"zookeeper-{i}.{zk_service}"])
            for i in range(zk_sts["spec"]["replicas"])]
        self.broker_hosts = [self.net.add_host(f"b{i}", 21 + i, RACKS[i], [f"refka-{i}.{service}.{NAMESPACE}.svc.{DOMAIN}"])
                             for i in range(sts["spec"]["replicas"])]
        self.net.publish_names()
        # ZooKeeper: the pod's environment; a shorter tick so that losing the quorum shows in
        # seconds (syncLimit ticks) and the brokers' 6 s sessions are within its bounds.
        zk_env = {**pod_env(container(zk_sts, "zookeeper"), {}), "ZOO_TICK_TIME": "500"}
        self.zk = []
        for i, h in enumerate(self.zk_hosts):
            d = workdir / h.name
            d.mkdir()
            self.zk.append(ZooKeeperServer(h, i + 1, zk_env, d))
        self.brokers = []
        venv_bin = str(Path(sys.executable).parent)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("REFKA_")}
        base_env["PATH"] = venv_bin + os.pathsep + base_env.get("PATH", "")
        for i, h in enumerate(self.broker_hosts):
            d = workdir / h.name
            d.mkdir()
            (d / "rack").write_text(h.rack)  # what the node-zone init container writes
            env = pod_env(container(sts, "refka"), {"metadata.name": f"refka-{i}", "metadata.namespace": NAMESPACE,
                                                     "status.hostIP": h.ip})
            env.update(base_env)
            env.update({
                "RACK_FILE": str(d / "rack"),
                "REFKA_LOG_DIRS": str(d / "data"),  # the pod's volume
                "EXTERNAL_PORT": env["REFKA_LISTENERS"].rsplit(":", 1)[1],  # no NodePort here: the port itself
                "REFKA_ZOOKEEPER_SESSION_TIMEOUT_MS": str(SESSION_TIMEOUT_MS),
                "REFKA_REPLICA_LAG_TIME_MAX_MS": "10000",
                "REFKA_REPLICA_FETCH_BACKOFF_MS": "200",
                "REFKA_OFFSETS_TOPIC_NUM_PARTITIONS": "3",
            })
            self.brokers.append(Broker(h, i, env, BASE / "refka-start.sh", d))
        self.grace = float(sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"])
        self.bootstrap = ",".join(f"{h.ip}:{b.env['EXTERNAL_PORT']}" for h, b in zip(self.broker_hosts,
                                                                                     self.brokers, strict=True))

    def start(self) -> None:
        for z in self.zk:
            z.start()
        self.wait(lambda: self.zk_quorum(self.zk), 90, "the ZooKeeper ensemble's quorum")
        for b in self.brokers:
            b.start()
        self.wait(lambda: self.cluster_problem(set(range(len(self.brokers))), True) is None, 90,
                  "three brokers registered, one controller", lambda: self.cluster_problem(self.all, True))

    @property
    def all(self) -> set[int]:
        return set(range(len(self.brokers)))

    def zk_quorum(self, members: list[ZooKeeperServer]) -> bool:
        modes = [z.mode for z in members]
        return modes.count("leader") == 1 and modes.count("follower") == len(members) - 1

    def zk_leader(self) -> ZooKeeperServer:
        (leader,) = [z for z in self.zk if z.mode == "leader"]
        return leader

    def cluster_problem(self, live: set[int], full_isr: bool) -> str | None:
        return converged(cluster_view(b for b in self.brokers if b.ordinal in live), live, full_isr)

    def view(self) -> dict[str, Any]:
        return cluster_view(b for b in self.brokers if b.running)

    def wait(self, ok: Callable[[], Any], timeout: float, what: str,
             detail: Callable[[], Any] | None = None) -> float:
        """Seconds until ``ok()``; fails after ``timeout`` naming ``what`` and the last detail."""
        t0 = time.monotonic()
        while True:
            if ok():
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                logs = "\n".join(f"--- broker {b.ordinal}\n{b.log_tail(15)}" for b in self.brokers)
                raise AssertionError(f"timed out after {timeout:g}s waiting for {what}: "
                                     f"{detail() if detail else ''}\n{logs}")
            time.sleep(0.25)

    def wait_converged(self, live: set[int], full_isr: bool) -> float:
        return self.wait(lambda: self.cluster_problem(live, full_isr) is None, CONVERGE_TIMEOUT,
                         f"convergence over brokers {sorted(live)}", lambda: self.cluster_problem(live, full_isr))

    def controller(self) -> int:
        return int(next(v["controller"] for v in self.view().values() if "controller" in v))

    def leaders(self) -> dict[int, tuple[int, int]]:
        """partition -> (leader, leader epoch) of TOPIC, as the controller's broker says."""
        c = self.controller()
        parts = self.brokers[c].get(f"/api/topics/{TOPIC}")["partitions"]
        return {p["partition"]: (p["leader"], p["leader_epoch"]) for p in parts}

    def elect_preferred(self) -> None:
        import urllib.request

        req = urllib.request.Request(self.brokers[self.controller()].admin + f"/api/topics/{TOPIC}/elect-preferred",
                                     data=b"{}", method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30):
            pass



@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    reason = netns_unavailable() or zookeeper_unavailable()
    if reason:
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp("netns")
    net = Network(workdir)
    try:  # whatever fails, from the bridge on, everything made goes
        net.start()
        lab = Lab(workdir, net)
        lab.start()
        yield lab
    finally:
        net.close()


# -- the load ----------------------------------------------------------------------------


class Load:
    """An idempotent acks=all producer (each record's value its sequence number, partitions
    in turn) and a consumer of every partition from the start, each on a thread."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int) -> None:
        self.bootstrap, self.topic, self.partitions, self.rate = bootstrap, topic, partitions, rate
        self.acked: list[tuple[float, int, int, int]] = []  # (time, partition, offset, sequence)
        self.failed: list[tuple[int, str]] = []
        self.consumed: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
        self.consumer_errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._produce, name="netns-producer", daemon=True),
                         threading.Thread(target=self._consume, name="netns-consumer", daemon=True)]
        self.sent = 0
        self._drain_until = 0.0
        self._produced = threading.Event()  # the producer flushed and closed: no more acks

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        """Stops producing; the consumer goes on until it read what was acknowledged (a
        minute at most). Both clients are closed when this returns (or abandoned after two
        minutes: Network's unreachable route keeps them off every other network)."""
        self._drain_until = time.monotonic() + 180  # the producer's flush (120 s at most), then a minute
        self._stop.set()
        for t in self._threads:
            t.join(120)

    def _produce(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 5, "message.timeout.ms": 600000, "request.timeout.ms": 10000,
                      "retry.backoff.ms": 100, "retry.backoff.max.ms": 1000, "reconnect.backoff.max.ms": 1000,
                      "topic.metadata.refresh.interval.ms": 5000, "client.id": "netns-producer"})

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                self.failed.append((int(msg.value()), str(err)))
            else:
                self.acked.append((time.monotonic(), msg.partition(), msg.offset(), int(msg.value())))

        interval = 1 / self.rate
        next_at = time.monotonic()
        limit = self.rate * 900  # bounded: at most the test's timeout's worth
        try:
            while not self._stop.is_set() and self.sent < limit:
                p.produce(self.topic, value=str(self.sent).encode(), key=str(self.sent).encode(),
                          partition=self.sent % self.partitions, on_delivery=delivered)
                self.sent += 1
                next_at += interval
                p.poll(max(0.0, next_at - time.monotonic()))
            p.flush(120)
            p.close()
        finally:
            self._produced.set()

    def _consume(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"netns-{uuid.uuid4().hex[:8]}",
                      "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                      "topic.metadata.refresh.interval.ms": 5000, "reconnect.backoff.max.ms": 1000,
                      "client.id": "netns-consumer"})
        c.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
        try:
            while not (self._produced.is_set() and (self.caught_up() or time.monotonic() > self._drain_until)):
                msg = c.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    self.consumer_errors.append(str(msg.error()))
                    continue
                self.consumed[msg.partition()].append((msg.offset(), msg.value()))
        finally:
            c.close()

    def caught_up(self) -> bool:
        ends: dict[int, int] = {}
        for _t, p, off, _s in list(self.acked):
            ends[p] = max(ends.get(p, -1), off)
        return all(self.consumed[p] and self.consumed[p][-1][0] >= end for p, end in ends.items())

    def longest_stall(self, since: float, until: float) -> float:
        """The longest time without an acknowledgement within [since, until]."""
        times = sorted(t for t, *_ in list(self.acked) if since <= t <= until)
        edges = [since, *times, until]
        return max(b - a for a, b in zip(edges, edges[1:], strict=False))

    def audit(self) -> dict[str, Any]:
        """Acknowledged records against consumed ones: each consumed once, at the offset it
        was acknowledged at, in offset order per partition."""
        acked = list(self.acked)
        consumed = {p: list(v) for p, v in self.consumed.items()}
        seen: dict[int, int] = defaultdict(int)
        foreign = []
        disorder = []
        at: dict[tuple[int, int], int] = {}
        for p, recs in consumed.items():
            offsets = [o for o, _ in recs]
            if offsets != sorted(set(offsets)):
                disorder.append(f"partition {p}: offsets not strictly increasing")
            for o, v in recs:
                try:
                    seq = int(v)
                except ValueError:
                    foreign.append((p, o, v[:40]))
                    continue
                seen[seq] += 1
                at[(p, o)] = seq
            seqs = [at[(p, o)] for o, v in recs if (p, o) in at]
            if seqs != sorted(seqs):
                disorder.append(f"partition {p}: sequence numbers out of order")
        lost = [s for _t, _p, _o, s in acked if seen.get(s, 0) == 0]
        misplaced = [(p, o, s) for _t, p, o, s in acked if at.get((p, o), s) != s]
        duplicated = [s for s, n in seen.items() if n > 1]
        return {"acknowledged": len(acked), "consumed": sum(seen.values()), "lost": len(lost),
                "duplicated": len(duplicated), "misplaced": len(misplaced), "disorder": disorder,
                "foreign": foreign, "failed": len(self.failed), "lost_sample": lost[:10],
                "misplaced_sample": misplaced[:10]}


def wait_caught_up(load: Load, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not load.caught_up():
        assert time.monotonic() < deadline, f"the consumer did not catch up: {load.audit()}"
        time.sleep(0.2)


def check_delivery(load: Load) -> dict[str, Any]:
    wait_caught_up(load)
    a = load.audit()
    assert a["lost"] == 0 and a["duplicated"] == 0 and a["misplaced"] == 0 and not a["disorder"], a
    assert not a["foreign"], f"records nobody acknowledged were consumed: {a['foreign']}"
    assert a["failed"] == 0, load.failed[:5]
    return a


# -- the scenario ------------------------------------------------------------------------


def connect_time(host: Host, ip: str, port: int) -> float:
    """Seconds for a TCP connect from ``host`` to ``ip:port`` (one round trip)."""
    code = ("import socket, sys, time\n"
            "t = time.monotonic(); socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10).close()\n"
            "print(time.monotonic() - t)")
    done = host.run([sys.executable, "-c", code, ip, str(port)], timeout=30)
    assert done.returncode == 0, done.stderr
    return float(done.stdout)


def create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # gone (closed) when this returns
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[TOPIC].result(30)


def test_faults_on_the_deployed_topology_lose_no_acknowledged_record(lab: Lab) -> None:
    create_topic(lab.bootstrap)
    lab.wait_converged(lab.all, full_isr=True)
    # Each broker registered the rack refka-start.sh read from its file, as a pod's from its node.
    for v in lab.view().values():
        assert v["racks"] == {i: RACKS[i] for i in lab.all}, v

    load = Load(lab.bootstrap, TOPIC, PARTITIONS, RATE)
    load.start()
    figures: dict[str, dict[str, Any]] = {}
    try:
        time.sleep(5)
        assert load.acked, f"nothing acknowledged in 5 s: {load.failed[:3]}"

        # 0. SIGTERM, as the kubelet stops a pod (a rolling restart): a controlled shutdown
        # (leadership moved first) within the grace period, then the broker back.
        victim = next(b for b in sorted(lab.all) if b != lab.controller())
        t0 = time.monotonic()
        code, took = lab.brokers[victim].terminate(lab.grace)
        assert code == 0 and took < lab.grace, (code, took)
        assert "controlled_shutdown_succeeded" in (lab.brokers[victim].workdir / "broker.log").read_text()
        failover = lab.wait_converged(lab.all - {victim}, full_isr=True)
        lab.brokers[victim].start()
        t1 = time.monotonic()
        rejoin = lab.wait_converged(lab.all, full_isr=True)
        figures["SIGTERM (pod stopped)"] = {"broker": victim, "shutdown_s": took, "held_s": t1 - t0,
                                           "converged_s": failover, "rejoined_s": rejoin,
                                           "stall_s": load.longest_stall(t0, time.monotonic()),
                                           **check_delivery(load)}

        # 1. kill -9 of the active controller's broker.
        victim = lab.controller()
        t0 = time.monotonic()
        lab.brokers[victim].kill()
        failover = lab.wait_converged(lab.all - {victim}, full_isr=True)
        lab.brokers[victim].start()
        t1 = time.monotonic()
        rejoin = lab.wait_converged(lab.all, full_isr=True)
        figures["kill -9"] = {"broker": victim, "held_s": t1 - t0, "converged_s": failover, "rejoined_s": rejoin,
                              "stall_s": load.longest_stall(t0, time.monotonic()), **check_delivery(load),
                              "restart_to_rejoin_s": time.monotonic() - t1}

        # 2. A broker that leads partitions cut off the network until its session expired.
        lab.elect_preferred()
        lab.wait_converged(lab.all, full_isr=True)
        controller = lab.controller()
        leaders = lab.leaders()
        victim = next(b for b in sorted(lab.all) if b != controller and any(leader == b for leader, _ in leaders.values()))
        led = sorted(p for p, (leader, _) in leaders.items() if leader == victim)
        host = lab.broker_hosts[victim]
        t0 = time.monotonic()
        host.cut_off()
        loss_by = host.loss_by
        try:
            failover = lab.wait_converged(lab.all - {victim}, full_isr=False)
            now = lab.leaders()
            p = led[0]
            assert now[p][0] != victim and now[p][1] > leaders[p][1], (leaders[p], now[p])
            # Its INTERNAL listener, by its advertised name, from inside its own namespace.
            internal = f"{host.names[0]}:{lab.brokers[victim].env['INTERNAL_PORT']}"
            probe = host.run([sys.executable, "-m", "tests.integration.netns", "fence-probe", "--broker", internal,
                              "--topic", TOPIC, "--partition", str(p), "--epoch", str(now[p][1]),
                              "--value", "fence-probe"], timeout=60)
            assert probe.returncode == 0, probe.stderr
            fenced = json.loads(probe.stdout)
        finally:
            t1 = time.monotonic()
            host.reconnect()
        # Its stale leadership was there (it still called itself leader at the old epoch) and
        # answered nothing a client accepts: no acknowledgement, no records at the new epoch.
        assert fenced["metadata"] == {"leader": victim, "leader_epoch": leaders[p][1]}, fenced
        assert fenced["produce"] != "NONE", fenced
        assert fenced["fetch"] in ("UNKNOWN_LEADER_EPOCH", "FENCED_LEADER_EPOCH", "NOT_LEADER_OR_FOLLOWER"), fenced
        rejoin = lab.wait_converged(lab.all, full_isr=True)
        figures["cut off"] = {"broker": victim, "loss_by": loss_by,
                              "held_s": t1 - t0, "converged_s": failover, "rejoined_s": rejoin,
                              "fence_probe": fenced, "stall_s": load.longest_stall(t0, time.monotonic()),
                              **check_delivery(load)}

        # 3. The ZooKeeper leader partitioned from the other two servers.
        old = lab.zk_leader()
        others = [z for z in lab.zk if z is not old]
        t0 = time.monotonic()
        old.host.partition_from([z.host for z in others])
        try:
            zk_failover = lab.wait(lambda: lab.zk_quorum(others), 60, "a new ZooKeeper leader among the majority",
                                   lambda: [z.mode for z in lab.zk])
            failover = lab.wait_converged(lab.all, full_isr=True)
            time.sleep(5)  # the load runs on while the old leader is away
            assert lab.cluster_problem(lab.all, True) is None
        finally:
            t1 = time.monotonic()
            old.host.heal()
        rejoin = lab.wait(lambda: lab.zk_quorum(lab.zk), 60, "the old ZooKeeper leader back as a follower",
                          lambda: [z.mode for z in lab.zk])
        lab.wait_converged(lab.all, full_isr=True)
        figures["ZooKeeper leader partitioned"] = {
            "zookeeper": old.my_id, "zk_new_leader_s": zk_failover, "converged_s": failover, "held_s": t1 - t0,
            "rejoined_s": rejoin, "stall_s": load.longest_stall(t0, time.monotonic()), **check_delivery(load)}

        # 4. 200 ms more each way between hosts of different racks.
        hosts = [*lab.zk_hosts, *lab.broker_hosts]
        t0 = time.monotonic()
        for h in hosts:
            h.delay_to([o for o in hosts if o.rack != h.rack], LATENCY_MS)
        try:
            # The delay is there: a TCP handshake to another rack takes a round trip of it.
            rtt = {"other rack": connect_time(lab.broker_hosts[0], lab.broker_hosts[1].ip,
                                               int(lab.brokers[1].env["ADMIN_PORT"])),
                   "same rack": connect_time(lab.broker_hosts[0], lab.zk_hosts[0].ip, 2181)}
            assert rtt["other rack"] >= 2 * LATENCY_MS / 1000 * 0.9 > 10 * rtt["same rack"], rtt
            time.sleep(15)
            during = lab.wait_converged(lab.all, full_isr=True)
        finally:
            t1 = time.monotonic()
            for h in hosts:
                h.undelay()
        after = lab.wait_converged(lab.all, full_isr=True)
        figures[f"{LATENCY_MS} ms between racks"] = {
            "held_s": t1 - t0, "connect_s": rtt, "converged_s": during, "converged_after_s": after,
            "stall_s": load.longest_stall(t0, time.monotonic()), **check_delivery(load)}
    finally:
        load.stop()
        (lab.workdir / "netns-figures.json").write_text(json.dumps(figures, indent=2, default=str))
    final = check_delivery(load)
    print_figures(figures, final)


def print_figures(figures: dict[str, dict[str, Any]], final: dict[str, Any]) -> None:
    """One line per fault: how long it lasted, seconds from the fault to a converged cluster
    (for the ZooKeeper partition: to a new ZooKeeper leader), from its end to the cluster
    whole again, the producer's longest wait for an acknowledgement over the fault and
    recovery, and the records acknowledged / consumed / lost so far."""
    print("\nnetns lab | fault s | converged s | rejoined s | longest stall s | acknowledged / consumed / lost")
    for name, f in figures.items():
        held = f.get("held_s", f.get("converged_s", 0.0))
        converged_s = f.get("zk_new_leader_s", f["converged_s"])
        rejoined = f.get("rejoined_s", f.get("converged_after_s", 0.0))
        print(f"  {name:30} | {held:6.2f} | {converged_s:6.2f} | {rejoined:6.2f} | {f['stall_s']:6.2f} | "
              f"{f['acknowledged']} / {f['consumed']} / {f['lost']}")
    print(f"  at the end: {final['acknowledged']} acknowledged, {final['consumed']} consumed once, "
          f"{final['lost']} lost, {final['duplicated']} duplicated, {final['failed']} failed")
