"""Hosts on one machine, each in a network namespace of its own (issue 15's lab, for real).

``Network`` is a bridge in the root namespace with an address of its own (the clients'
side) and ``Host``s on it: a namespace each, a veth pair (``eth0`` inside, the other end
on the bridge), an address ``10.77.N.x/24`` (N chosen free per run), a rack, and the DNS
names the host answers to, written into ``/etc/netns/<ns>/hosts``, which ``ip netns
exec`` mounts over ``/etc/hosts`` for what runs there: refka-0.refka-headless.refka.svc.
cluster.local resolves as it would in the pod. Processes run inside with ``ip netns exec``
under ``setpriv --pdeathsig KILL`` (none outlives the test process), and ``close()``
removes processes, namespaces, bridge and hosts files, whatever happened.

The servers are the manifests' (deploy/k8s/base): ``ZooKeeperServer`` writes the zoo.cfg
the official image's entrypoint writes from zookeeper.yaml's environment and runs
Debian's ZooKeeper jar; ``Broker`` runs deploy/k8s/base/refka-start.sh with refka.yaml's
environment, as the pod does, and the installed ``refka``.

Faults, each undone by its pair:

- ``Host.cut_off`` / ``reconnect``: the bridge end of the veth down, and every packet
  lost (``tc netem loss 100%`` where the kernel has netem; an iptables DROP of eth0's
  traffic in the namespace where it has not).
- ``Host.partition_from`` / ``heal``: iptables DROP of the traffic to and from some
  peers, in the namespace.
- ``Host.delay_to`` / ``undelay``: every packet this host sends to some peers held for a
  while before it leaves. netem would do it; without netem (this machine's kernel has
  none), iptables NFQUEUE hands those packets to ``Delayer`` (``python -m
  tests.integration.netns delay``, in the namespace), which gives each its verdict that
  long after it arrived: a netem delay in 120 lines of netlink.

``netns_unavailable()`` says why none of this can run here (not root, no ``ip``, no
iptables, ``ip netns add`` refused), or None.
"""

from __future__ import annotations

import argparse
import atexit
import collections
import json
import os
import random
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NETNS_ETC = Path("/etc/netns")


def sh(*argv: str, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


def netns_unavailable(iptables: bool = True) -> str | None:
    if os.geteuid() != 0:
        return f"network namespaces need root (CAP_NET_ADMIN); this test runs as uid {os.geteuid()}"
    for tool in ("ip", "setpriv", *(["iptables"] if iptables else [])):
        if shutil.which(tool) is None:
            return f"no {tool} on PATH (iproute2, iptables, util-linux)"
    probe = f"rkprobe-{os.getpid()}"
    try:
        sh("ip", "netns", "add", probe)
    except (RuntimeError, OSError) as e:
        return f"cannot create a network namespace here: {e}"
    try:
        done = sh("ip", "netns", "exec", probe, *(["iptables", "-L", "OUTPUT", "-n"] if iptables else ["true"]),
                  check=False)
        if done.returncode != 0:
            return f"cannot run {'iptables' if iptables else 'a command'} in a network namespace here: {done.stderr.strip()}"
    finally:
        sh("ip", "netns", "del", probe, check=False)
    return None


def netem_available() -> bool:
    """Whether the kernel has tc's netem qdisc (many minimal kernels do not)."""
    dummy = f"rknetem{os.getpid() % 10000}"
    if sh("ip", "link", "add", dummy, "type", "dummy", check=False).returncode != 0:
        return False
    try:
        return sh("tc", "qdisc", "add", "dev", dummy, "root", "netem", "loss", "100%",
                  check=False).returncode == 0
    finally:
        sh("ip", "link", "del", dummy, check=False)


def _free_prefix() -> str:
    """10.77.N, with N used by no route or address here."""
    used = sh("ip", "-4", "route", "show").stdout + sh("ip", "-4", "addr", "show").stdout
    choices = [n for n in range(1, 255) if f"10.77.{n}." not in used]
    if not choices:
        raise RuntimeError("no free 10.77.N.0/24 here")
    return f"10.77.{random.choice(choices)}"


class Host:
    """One namespace on the bridge. ``run``/``popen`` run a command there."""

    def __init__(self, network: Network, name: str, index: int, ip: str, rack: str, names: list[str]) -> None:
        self.network = network
        self.name = name
        self.ns = f"rk{network.tag}-{name}"
        self.veth = f"rk{network.tag}h{index}"  # the bridge's end (<= 15 characters)
        self.ip = ip
        self.rack = rack
        self.names = names
        self.procs: list[subprocess.Popen[bytes]] = []
        self._delayer: subprocess.Popen[bytes] | None = None
        self.loss_by = ""  # how the last cut_off lost packets: "netem" or "iptables"

    def __repr__(self) -> str:
        return f"Host({self.name} {self.ip} {self.rack})"

    def _setup(self, index: int) -> None:
        peer = f"rk{self.network.tag}p{index}"
        sh("ip", "netns", "add", self.ns)
        sh("ip", "link", "add", self.veth, "type", "veth", "peer", "name", peer)
        sh("ip", "link", "set", peer, "netns", self.ns)
        sh("ip", "-n", self.ns, "link", "set", peer, "name", "eth0")
        sh("ip", "-n", self.ns, "addr", "add", f"{self.ip}/24", "dev", "eth0")
        sh("ip", "-n", self.ns, "link", "set", "eth0", "up")
        sh("ip", "-n", self.ns, "link", "set", "lo", "up")
        sh("ip", "link", "set", self.veth, "master", self.network.bridge)
        sh("ip", "link", "set", self.veth, "up")

    def argv(self, argv: list[str]) -> list[str]:
        # pdeathsig: the process dies with the test process (its parent), even by SIGKILL.
        return ["ip", "netns", "exec", self.ns, "setpriv", "--pdeathsig", "KILL", "--", *argv]

    def popen(self, argv: list[str], *, env: Mapping[str, str], log: Path, cwd: Path = ROOT
              ) -> subprocess.Popen[bytes]:
        """Starts ``argv`` here (from the calling thread: the main thread, for pdeathsig)."""
        with open(log, "ab") as out:
            proc = subprocess.Popen(self.argv(argv), env=dict(env), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=cwd)
        self.procs.append(proc)
        return proc

    def run(self, argv: list[str], *, env: Mapping[str, str] | None = None, timeout: float = 30.0,
            cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(argv), env=dict(env) if env is not None else None, capture_output=True,
                              text=True, timeout=timeout, cwd=cwd)

    def iptables(self, *args: str) -> None:
        sh("ip", "netns", "exec", self.ns, "iptables", "-w", *args)

    # -- faults ------------------------------------------------------------------------

    def cut_off(self) -> None:
        """The host off the network: its veth's bridge end down, and 100% loss."""
        sh("ip", "link", "set", self.veth, "down")
        if self.network.netem:
            sh("tc", "qdisc", "add", "dev", self.veth, "root", "netem", "loss", "100%")
            self.loss_by = "netem"
        else:
            self.iptables("-N", "RKCUT")
            self.iptables("-A", "RKCUT", "-j", "DROP")
            self.iptables("-I", "INPUT", "-i", "eth0", "-j", "RKCUT")
            self.iptables("-I", "OUTPUT", "-o", "eth0", "-j", "RKCUT")
            self.loss_by = "iptables"

    def reconnect(self) -> None:
        if self.loss_by == "netem":
            sh("tc", "qdisc", "del", "dev", self.veth, "root")
        elif self.loss_by == "iptables":
            self.iptables("-D", "INPUT", "-i", "eth0", "-j", "RKCUT")
            self.iptables("-D", "OUTPUT", "-o", "eth0", "-j", "RKCUT")
            self.iptables("-F", "RKCUT")
            self.iptables("-X", "RKCUT")
        self.loss_by = ""
        sh("ip", "link", "set", self.veth, "up")

    def partition_from(self, peers: Iterable[Host]) -> None:
        """No packet between this host and ``peers`` (everyone else still reaches it)."""
        self.iptables("-N", "RKPART")
        for p in peers:
            self.iptables("-A", "RKPART", "-s", p.ip, "-j", "DROP")
            self.iptables("-A", "RKPART", "-d", p.ip, "-j", "DROP")
        self.iptables("-I", "INPUT", "-j", "RKPART")
        self.iptables("-I", "OUTPUT", "-j", "RKPART")

    def heal(self) -> None:
        self.iptables("-D", "INPUT", "-j", "RKPART")
        self.iptables("-D", "OUTPUT", "-j", "RKPART")
        self.iptables("-F", "RKPART")
        self.iptables("-X", "RKPART")

    def delay_to(self, peers: Iterable[Host], ms: int) -> None:
        """Every packet from here to ``peers`` leaves ``ms`` later (one way)."""
        log = self.network.workdir / f"{self.name}-delayer.log"
        with open(log, "ab") as out:
            self._delayer = subprocess.Popen(
                self.argv([sys.executable, "-m", "tests.integration.netns", "delay", "--queue", "0",
                           "--ms", str(ms)]), stdout=subprocess.PIPE, stderr=out, cwd=ROOT)
        assert self._delayer.stdout is not None
        line = self._delayer.stdout.readline().decode()
        if not line.startswith("ready"):
            raise RuntimeError(f"the delayer of {self.name} did not start: {line!r}; see {log}")
        self.iptables("-N", "RKDELAY")
        for p in peers:
            self.iptables("-A", "RKDELAY", "-d", p.ip, "-j", "NFQUEUE", "--queue-num", "0", "--queue-bypass")
        self.iptables("-I", "OUTPUT", "-j", "RKDELAY")

    def undelay(self) -> None:
        self.iptables("-D", "OUTPUT", "-j", "RKDELAY")
        self.iptables("-F", "RKDELAY")
        self.iptables("-X", "RKDELAY")
        proc, self._delayer = self._delayer, None
        if proc is not None:
            proc.send_signal(signal.SIGTERM)  # it lets what it holds go, then exits
            proc.wait(10)


class Network:
    """A bridge, its address in the root namespace (``gateway``) and the hosts on it."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.tag = os.urandom(2).hex()
        self.bridge = f"rk{self.tag}br"
        self.prefix = _free_prefix()
        self.gateway = f"{self.prefix}.1"
        self.hosts: dict[str, Host] = {}
        self.netem = netem_available()
        self._closed = False

    def start(self) -> Network:
        # First, the guard: when the bridge and its route are gone, a client still trying a
        # host's address (librdkafka reconnects until it is destroyed) is told "unreachable"
        # here, rather than sent down the default route. It stays until this process exits.
        sh("ip", "route", "add", "unreachable", f"{self.prefix}.0/24", "metric", "4000")
        atexit.register(sh, "ip", "route", "del", "unreachable", f"{self.prefix}.0/24", "metric", "4000",
                        check=False)
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        return self

    def add_host(self, name: str, octet: int, rack: str, names: list[str]) -> Host:
        host = Host(self, name, len(self.hosts), f"{self.prefix}.{octet}", rack, names)
        self.hosts[name] = host
        host._setup(len(self.hosts) - 1)
        return host

    def publish_names(self) -> None:
        """Every host's names, in every host's /etc/hosts (as the cluster's DNS would)."""
        lines = ["127.0.0.1 localhost"] + [f"{h.ip} {' '.join(h.names)}" for h in self.hosts.values() if h.names]
        for h in self.hosts.values():
            d = NETNS_ETC / h.ns
            d.mkdir(parents=True, exist_ok=True)
            (d / "hosts").write_text("\n".join(lines) + "\n")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for h in self.hosts.values():
            _remove_namespace(h.ns, [*h.procs, *([h._delayer] if h._delayer else [])])
            sh("ip", "link", "del", h.veth, check=False)  # gone with the namespace, unless set-up stopped early
        sh("ip", "link", "del", self.bridge, check=False)


def _remove_namespace(ns: str, procs: Iterable[subprocess.Popen[Any]]) -> None:
    """Kills ``procs`` and whatever else runs in ``ns`` (we started it there), then deletes
    the namespace and its /etc/netns directory."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    sh("ip", "netns", "del", ns, check=False)
    shutil.rmtree(NETNS_ETC / ns, ignore_errors=True)


class Namespace:
    """A namespace with its loopback only: one pod or container by itself, which can reach
    nothing but itself (no port of it clashes with this machine's), its /etc/hosts mapping
    ``names`` to 127.0.0.1. ``run``/``popen`` as ``user`` (a uid, its gid the same) when given."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.name = f"rk{os.urandom(2).hex()}-pod"
        sh("ip", "netns", "add", self.name)
        sh("ip", "-n", self.name, "link", "set", "lo", "up")
        d = NETNS_ETC / self.name
        d.mkdir(parents=True, exist_ok=True)
        (d / "hosts").write_text("127.0.0.1 localhost " + " ".join(names) + "\n")
        self.procs: list[subprocess.Popen[bytes]] = []

    def argv(self, argv: list[str], user: int | None = None) -> list[str]:
        as_user = [] if user is None else ["--reuid", str(user), "--regid", str(user), "--clear-groups"]
        return ["ip", "netns", "exec", self.name, "setpriv", *as_user, "--pdeathsig", "KILL", "--", *argv]

    def popen(self, argv: list[str], *, env: Mapping[str, str], log: Path, user: int | None = None,
              cwd: Path = ROOT) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            proc = subprocess.Popen(self.argv(argv, user), env=dict(env), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=cwd)
        self.procs.append(proc)
        return proc

    def run(self, argv: list[str], *, env: Mapping[str, str] | None = None, user: int | None = None,
            timeout: float = 30.0, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(argv, user), env=dict(env) if env is not None else None,
                              capture_output=True, text=True, timeout=timeout, cwd=cwd)

    def http_get(self, url: str, timeout: float = 5.0) -> tuple[int, str]:
        """(status, body) of a GET from inside; (0, the error) when it failed."""
        code = ("import sys, urllib.request\n"
                "try:\n"
                "    r = urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2]))\n"
                "    print(r.status); print(r.read().decode())\n"
                "except Exception as e:\n"
                "    print(0); print(repr(e))\n")
        done = self.run([sys.executable, "-c", code, url, str(timeout)], timeout=timeout + 10)
        status, _, body = done.stdout.partition("\n")
        return int(status or 0), body or done.stderr

    def close(self) -> None:
        _remove_namespace(self.name, self.procs)


# -- the servers, as the manifests run them ---------------------------------------------


def four_letter(host: str, word: str, port: int = 2181, timeout: float = 1.0) -> str:
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode())
        chunks = []
        while b := s.recv(4096):
            chunks.append(b)
    return b"".join(chunks).decode(errors="replace")


def zookeeper_mode(host: Host) -> str | None:
    """"leader", "follower", ... as ``srvr`` says, None when it does not answer as a member."""
    try:
        out = four_letter(host.ip, "srvr")
    except OSError:
        return None
    for line in out.splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return None


def zoo_cfg(env: Mapping[str, str], data_dir: Path) -> str:
    """The zoo.cfg the official image's docker-entrypoint.sh writes from its environment."""
    lines = [f"dataDir={data_dir}", f"dataLogDir={data_dir / 'datalog'}",
             f"tickTime={env.get('ZOO_TICK_TIME', '2000')}", f"initLimit={env.get('ZOO_INIT_LIMIT', '5')}",
             f"syncLimit={env.get('ZOO_SYNC_LIMIT', '2')}",
             f"autopurge.snapRetainCount={env.get('ZOO_AUTOPURGE_SNAPRETAINCOUNT', '3')}",
             f"autopurge.purgeInterval={env.get('ZOO_AUTOPURGE_PURGEINTERVAL', '0')}",
             f"maxClientCnxns={env.get('ZOO_MAX_CLIENT_CNXNS', '60')}",
             f"standaloneEnabled={env.get('ZOO_STANDALONE_ENABLED', 'true')}",
             f"admin.enableServer={env.get('ZOO_ADMINSERVER_ENABLED', 'true')}"]
    lines += env.get("ZOO_SERVERS", "").split()
    if env.get("ZOO_4LW_COMMANDS_WHITELIST"):
        lines.append(f"4lw.commands.whitelist={env['ZOO_4LW_COMMANDS_WHITELIST']}")
    lines += env.get("ZOO_CFG_EXTRA", "").split()
    return "\n".join(lines) + "\n"


class ZooKeeperServer:
    """One server of the ensemble: Debian's jar, zoo.cfg from zookeeper.yaml's environment."""

    def __init__(self, host: Host, my_id: int, env: Mapping[str, str], workdir: Path, heap_mb: int = 128) -> None:
        from refka.zookeeper import MAIN, SLF4J_NOP, ZOOKEEPER_JAR

        self.host = host
        self.my_id = my_id
        self.workdir = workdir
        data = workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        (data / "myid").write_text(f"{my_id}\n")
        self.cfg = workdir / "zoo.cfg"
        self.cfg.write_text(zoo_cfg(env, data))
        cp = [str(ZOOKEEPER_JAR)] + ([str(SLF4J_NOP)] if SLF4J_NOP.exists() else [])
        self.argv = ["java", f"-Xmx{heap_mb}m", "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError",
                     "-cp", ":".join(cp), MAIN, str(self.cfg)]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = self.host.popen(self.argv, env=os.environ, log=self.workdir / "zookeeper.log")

    @property
    def mode(self) -> str | None:
        return zookeeper_mode(self.host)


class Broker:
    """One broker: refka-start.sh with the pod's environment, in its host."""

    def __init__(self, host: Host, ordinal: int, env: Mapping[str, str], start_script: Path, workdir: Path) -> None:
        self.host = host
        self.ordinal = ordinal
        self.env = dict(env)
        self.start_script = start_script
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None
        self.admin = f"http://{host.ip}:{env['ADMIN_PORT']}"

    def start(self) -> None:
        self.proc = self.host.popen(["/bin/sh", str(self.start_script)], env=self.env,
                                    log=self.workdir / "broker.log")

    def terminate(self, grace: float) -> tuple[int, float]:
        """SIGTERM, as the kubelet stops a pod: (exit code, seconds it took), SIGKILL after ``grace``."""
        assert self.proc is not None
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(10)
        return code, time.monotonic() - t0

    def kill(self) -> None:
        """kill -9 of the broker's process (the one ``refka serve`` in its host)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def get(self, path: str, timeout: float = 2.0) -> Any:
        with urllib.request.urlopen(self.admin + path, timeout=timeout) as r:
            body = r.read()
        return body.decode() if path == "/metrics" else json.loads(body)

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join((self.workdir / "broker.log").read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def metric(text: str, name: str) -> float:
    """The sum of a metric's samples in Prometheus text."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def cluster_view(brokers: Iterable[Broker]) -> dict[str, Any]:
    """What each reachable broker's admin API says: controller, live brokers, every topic's
    partitions, the leaders it holds itself (LeaderCount) and whether it is the active
    controller (ActiveControllerCount)."""
    out: dict[str, Any] = {}
    for b in brokers:
        try:
            cluster = b.get("/api/cluster")
            metrics = b.get("/metrics")
            topics = [t["name"] for t in b.get("/api/topics")["topics"]]
            parts = {t: b.get(f"/api/topics/{t}")["partitions"] for t in topics}
        except (OSError, urllib.error.URLError, ValueError, KeyError) as e:
            out[str(b.ordinal)] = {"error": repr(e)}
            continue
        out[str(b.ordinal)] = {
            "controller": cluster["controller"]["id"],
            "brokers": sorted(x["id"] for x in cluster["brokers"]),
            "racks": {x["id"]: x["rack"] for x in cluster["brokers"]},
            "partitions": {t: [(p["partition"], p["leader"], p["leader_epoch"], sorted(p["isr"])) for p in ps]
                           for t, ps in parts.items()},
            "leader_count": metric(metrics, "kafka_server_replicamanager_leadercount"),
            "active_controller": metric(metrics, "kafka_controller_kafkacontroller_activecontrollercount"),
        }
    return out


def converged(view: dict[str, Any], live: set[int], full_isr: bool) -> str | None:
    """None when the cluster has converged over ``live``; else what is not yet so.

    Converged: every live broker answers and they agree on one controller, live itself,
    the only one counting itself active; on the live brokers and on each partition's
    leader and epoch; every leader is live and in its ISR, the ISR holds only live
    brokers (all of them with ``full_isr``), and the brokers' own leader counts add up
    to the partitions (no broker still leading what the others gave away)."""
    answers = {int(k): v for k, v in view.items()}
    for k in sorted(live):
        if k not in answers or "error" in answers[k]:
            return f"broker {k} does not answer: {answers.get(k)}"
    views = [answers[k] for k in sorted(live)]
    controllers = {v["controller"] for v in views}
    if len(controllers) != 1 or next(iter(controllers)) not in live:
        return f"controllers seen: {controllers}"
    active = [k for k in sorted(live) if answers[k]["active_controller"] == 1]
    if active != list(controllers):
        return f"active controller by metrics: {active}, by the cluster view: {controllers}"
    if any(set(v["brokers"]) != live for v in views):
        return f"live brokers seen: {[v['brokers'] for v in views]}, expected {sorted(live)}"
    partitions = views[0]["partitions"]
    if any(v["partitions"] != partitions for v in views):
        return "brokers disagree on leaders or ISRs"
    total = 0
    for topic, ps in partitions.items():
        for index, leader, _epoch, isr in ps:
            total += 1
            if leader not in live or leader not in isr:
                return f"{topic}-{index}: leader {leader}, ISR {isr}"
            if not set(isr) <= live or (full_isr and set(isr) != live):
                return f"{topic}-{index}: ISR {isr} over live {sorted(live)}"
    if sum(answers[k]["leader_count"] for k in live) != total:
        return f"leader counts {[answers[k]['leader_count'] for k in sorted(live)]} for {total} partitions"
    return None


# -- run in a namespace: the delayer and the fencing probe ------------------------------

NETLINK_NETFILTER = 12
_NFQNL_MSG_PACKET, _NFQNL_MSG_CONFIG, _NFQNL_MSG_VERDICT_BATCH = 0, 2, 3
_NFNL_SUBSYS_QUEUE = 3
_NF_ACCEPT = 1
_NLM_F_REQUEST, _NLM_F_ACK = 1, 4


def _nla(kind: int, payload: bytes) -> bytes:
    size = 4 + len(payload)
    return struct.pack("=HH", size, kind) + payload + b"\0" * (-size % 4)


def _nfq_message(msg: int, queue: int, attrs: list[bytes], flags: int = _NLM_F_REQUEST) -> bytes:
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + b"".join(attrs)
    return struct.pack("=IHHII", 16 + len(body), (_NFNL_SUBSYS_QUEUE << 8) | msg, flags, 0, 0) + body


class Delayer:
    """netem's delay over NFQUEUE: each queued packet gets its NF_ACCEPT ``delay`` seconds
    after it arrived, in arrival order (one batch verdict for all that are due). Copy
    mode "meta": only the packet ids cross to us. Fail-open: a full queue lets packets
    through rather than drop them."""

    def __init__(self, queue: int, delay: float) -> None:
        self.queue = queue
        self.delay = delay
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE (root)
        self.sock.bind((0, 0))
        self._config(_nla(1, struct.pack("!BBH", 1, 0, socket.AF_INET)))  # NFQA_CFG_CMD: BIND
        self._config(_nla(2, struct.pack("!IB", 0, 1) + b"\0\0\0"),  # NFQA_CFG_PARAMS: COPY_META
                     _nla(3, struct.pack("!I", 65536)),  # NFQA_CFG_QUEUE_MAXLEN
                     _nla(4, struct.pack("!I", 1)), _nla(5, struct.pack("!I", 1)))  # FLAGS: FAIL_OPEN
        self.pending: collections.deque[tuple[float, int]] = collections.deque()
        self.stopping = False

    def _config(self, *attrs: bytes) -> None:
        self.sock.send(_nfq_message(_NFQNL_MSG_CONFIG, self.queue, list(attrs), _NLM_F_REQUEST | _NLM_F_ACK))
        answer = self.sock.recv(65536)
        (error,) = struct.unpack_from("=i", answer, 16)
        if error != 0:
            raise OSError(-error, f"nfqueue config: {os.strerror(-error)}")

    def _accept_through(self, packet_id: int) -> None:
        self.sock.send(_nfq_message(_NFQNL_MSG_VERDICT_BATCH, self.queue,
                                    [_nla(2, struct.pack("!II", _NF_ACCEPT, packet_id))]))

    def _received(self, data: bytes, now: float) -> None:
        off = 0
        while off + 16 <= len(data):
            size, kind = struct.unpack_from("=IH", data, off)
            if kind == (_NFNL_SUBSYS_QUEUE << 8) | _NFQNL_MSG_PACKET:
                a = off + 20
                while a + 4 <= off + size:
                    alen, atype = struct.unpack_from("=HH", data, a)
                    if atype & 0x3FFF == 1:  # NFQA_PACKET_HDR: the packet id first
                        self.pending.append((now + self.delay, struct.unpack_from("!I", data, a + 4)[0]))
                    a += (alen + 3) & ~3
            off += (size + 3) & ~3

    def run(self) -> None:
        while not self.stopping:
            wait = max(0.0, self.pending[0][0] - time.monotonic()) if self.pending else 0.5
            try:
                ready, _, _ = select.select([self.sock], [], [], wait)
            except InterruptedError:
                ready = []
            if ready:
                self._received(self.sock.recv(1 << 20), time.monotonic())
            now = time.monotonic()
            due = None
            while self.pending and self.pending[0][0] <= now:
                due = self.pending.popleft()[1]
            if due is not None:
                self._accept_through(due)
        if self.pending:  # stopping: let everything held go now
            self._accept_through(self.pending[-1][1])


def _delay_main(args: argparse.Namespace) -> int:
    d = Delayer(args.queue, args.ms / 1000)
    signal.signal(signal.SIGTERM, lambda *_: setattr(d, "stopping", True))
    print("ready", flush=True)
    d.run()
    return 0


def _fence_probe_main(args: argparse.Namespace) -> int:
    """From the isolated broker's own namespace: what its stale leadership answers. Metadata
    (does it still call itself leader, at which epoch), an acks=all Produce (is anything
    acknowledged) and a Fetch at the cluster's current leader epoch (does a KIP-320 client
    get records from it). One JSON line."""
    import asyncio

    from refka.client.connection import BrokerConnection
    from refka.protocol import ErrorCode
    from refka.protocol.messages.fetch import Fetch
    from refka.protocol.messages.metadata import Metadata
    from refka.protocol.messages.produce import Produce
    from refka.protocol.records import build_batch

    host, _, port = args.broker.rpartition(":")

    async def probe() -> dict[str, Any]:
        out: dict[str, Any] = {}
        conn = await BrokerConnection(host, int(port), "fence-probe").connect(5.0)
        try:
            md = await conn.request(Metadata, Metadata.Request(
                topics=[Metadata.Request.MetadataRequestTopic(name=args.topic)], allow_auto_topic_creation=False),
                version=12, timeout=5.0)
            (t,) = md.topics
            p = next(p for p in t.partitions if p.partition_index == args.partition)
            out["metadata"] = {"leader": p.leader_id, "leader_epoch": p.leader_epoch}
            P = Produce.Request
            produce = P(transactional_id=None, acks=-1, timeout_ms=args.timeout_ms, topic_data=[
                P.TopicProduceData(name=args.topic, partition_data=[P.TopicProduceData.PartitionProduceData(
                    index=args.partition, records=bytes(build_batch([(None, args.value.encode())])))])])
            try:
                resp = await conn.request(Produce, produce, version=9, timeout=args.timeout_ms / 1000 + 5)
                code = resp.responses[0].partition_responses[0].error_code
                out["produce"] = ErrorCode(code).name
            except (TimeoutError, ConnectionError) as e:
                out["produce"] = f"no answer ({type(e).__name__})"
            F = Fetch.Request
            fetch = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                      session_id=0, session_epoch=-1, topics=[F.FetchTopic(
                          topic=args.topic, topic_id=bytes(16), partitions=[F.FetchTopic.FetchPartition(
                              partition=args.partition, current_leader_epoch=args.epoch, fetch_offset=0,
                              last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)])],
                      forgotten_topics_data=[], rack_id="")
            resp = await conn.request(Fetch, fetch, version=12, timeout=10.0)
            out["fetch"] = ErrorCode(resp.responses[0].partitions[0].error_code).name
        finally:
            await conn.close()
        return out

    print(json.dumps(asyncio.run(probe())), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.integration.netns")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("delay", help="hold NFQUEUE's packets, then accept them")
    d.add_argument("--queue", type=int, default=0)
    d.add_argument("--ms", type=float, required=True)
    f = sub.add_parser("fence-probe", help="what a stale leader answers")
    f.add_argument("--broker", required=True)
    f.add_argument("--topic", required=True)
    f.add_argument("--partition", type=int, required=True)
    f.add_argument("--epoch", type=int, required=True, help="the cluster's current leader epoch")
    f.add_argument("--value", default="fence-probe")
    f.add_argument("--timeout-ms", type=int, default=4000)
    args = parser.parse_args(argv)
    return _delay_main(args) if args.command == "delay" else _fence_probe_main(args)


if __name__ == "__main__":
    sys.exit(main())

