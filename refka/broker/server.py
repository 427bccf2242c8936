"""Running brokers: ``refka serve`` and the in-process clusters tests use.

``Cluster`` starts N brokers in this process over one metadata store (the
embedded store by default, ZooKeeper with ``zookeeper.connect``), each with its
own listener, data directory and store session; brokers and the controller
talk over real loopback connections. It prints one line when every broker
accepts connections and is known to the controller.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from refka.common import Endpoint

from .broker import Broker
from .config import BrokerConfig
from .controller_side import ControllerSide, open_store
from .faults import FaultTable
from .logging import configure, get_logger
from .recording import RecordFile
from .registry import HANDLERS, served_versions

if TYPE_CHECKING:
    from .admin_views import ServedBroker

log = get_logger("refka.server")


def broker_configs(base: BrokerConfig, n: int, host: str, port: int, data_dir: Path) -> list[BrokerConfig]:
    """Per-broker configs: ids base..base+n-1, ports port..port+n-1, data under data_dir/broker-<id>.
    One broker keeps the configured listeners (the first moved to host:port), so it can have
    an inter-broker listener of its own; each of several gets one PLAINTEXT listener."""
    first_id = base.broker_id
    out = []
    for i in range(n):
        bid = first_id + i
        listeners = f"PLAINTEXT://{host}:{port + i}"
        if n == 1 and "listeners" in base.raw:
            first, *others = base.listeners
            listeners = ",".join([str(Endpoint(first.listener, host, port)), *map(str, others)])
        props: dict[str, str] = {
            "broker.id": str(bid),
            "listeners": listeners,
            "log.dirs": str(data_dir / f"broker-{bid}"),
        }
        adv = base["advertised.listeners"]
        if adv and n == 1:
            props["advertised.listeners"] = adv
        out.append(base.with_overrides(**props))
    return out


class Cluster:
    def __init__(self, configs: list[BrokerConfig], *, memory: bool, data_dir: Path,
                 zookeeper: str | None = None, record_file: RecordFile | None = None) -> None:
        self.configs = configs
        self.record_file = record_file  # --record: every broker's requests as JSON lines
        self.memory = memory
        self.data_dir = data_dir
        self.zookeeper = zookeeper
        self.store: Any = None
        self.brokers: list[Broker] = []
        self.sides: list[ControllerSide] = []
        self.faults = FaultTable()  # the admin API's fault injection, shared by this process's brokers
        self.faults.on_fired.append(self._fault_fired)

    async def start(self, ready_timeout: float = 300.0) -> None:
        # ready_timeout: the controller's LeaderAndIsr for 100,000 partitions takes ~40 s.
        self.store = open_store(self.zookeeper, None if self.memory else self.data_dir / "metadata",
                                self.configs[0]["zookeeper.session.timeout.ms"])
        for cfg in self.configs:
            await self.start_broker(cfg)
        await self.wait_ready(ready_timeout)

    async def start_broker(self, cfg: BrokerConfig) -> Broker:
        b = Broker(cfg, memory=self.memory, record_file=self.record_file)
        b.faults = self.faults
        await b.start_listeners()
        side = ControllerSide(self.store, b.node_id, cfg, b.metadata, b.replicas, b.spawn)
        b.attach_controller_side(side)
        await side.start()
        b.spawn(b.replicas.retention_loop(cfg["log.retention.check.interval.ms"]))
        b.spawn(b.replicas.checkpoint_loop(cfg["replica.high.watermark.checkpoint.interval.ms"]))
        if cfg["log.cleaner.enable"]:
            b.spawn(b.replicas.cleaner_loop(cfg["log.cleaner.backoff.ms"]))
        self.brokers.append(b)
        self.sides.append(side)
        return b

    async def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for b in self.brokers:
            remaining = max(deadline - time.monotonic(), 0.01)
            await asyncio.wait_for(b.ready.wait(), remaining)

    def broker(self, node_id: int) -> Broker:
        return next(b for b in self.brokers if b.node_id == node_id)

    async def stop_broker(self, b: Broker, *, controlled: bool = True, max_retries: int | None = None) -> None:
        """Stops one broker; with ``controlled`` (and controlled.shutdown.enable) it first asks
        the controller to move its leadership away (ControlledShutdown, retried per
        controlled.shutdown.max.retries, or ``max_retries``)."""
        side = b.controller_side
        if side is not None and controlled and b.config["controlled.shutdown.enable"]:
            await side.controlled_shutdown(max_retries)
        if side is not None:
            await side.stop()
        await b.stop()
        if b in self.brokers:
            i = self.brokers.index(b)
            self.brokers.pop(i)
            self.sides.pop(i)

    async def stop(self) -> None:
        """Stops every broker of this process, each with a controlled shutdown while a broker
        outside the ones stopped so far is registered to take over; the last one of the
        cluster stops at once. When the whole cluster is going down a failed attempt is not
        retried (nobody may be left to lead)."""
        stopped: set[int] = set()
        for b in list(reversed(self.brokers)):
            others = set(b.metadata.brokers) - stopped - {b.node_id}
            ours_left = {x.node_id for x in self.brokers} - stopped - {b.node_id}
            await self.stop_broker(b, controlled=bool(others),
                                   max_retries=1 if others and others <= ours_left else None)
            stopped.add(b.node_id)

    def _fault_fired(self, fault: Any, broker_id: int, what: str) -> None:
        """A fault that fired goes into the timeline of the broker it fired on."""
        b = self._running(broker_id)
        if b is not None:
            b.metadata.event("fault_fired", fault=fault.id, fault_kind=fault.kind, request=what,
                             error_code=fault.error_code.name if fault.error_code is not None else None)

    # -- the admin API's broker operations (admin_http.BrokerControl)

    def _config(self, node_id: int) -> BrokerConfig | None:
        return next((c for c in self.configs if c.broker_id == node_id), None)

    def _running(self, node_id: int) -> Broker | None:
        return next((b for b in self.brokers if b.node_id == node_id), None)

    def control_state(self, node_id: int) -> str | None:
        """"running", "stopped", or None for a broker this process does not serve."""
        if self._config(node_id) is None:
            return None
        return "running" if self._running(node_id) is not None else "stopped"

    async def control_stop(self, node_id: int, *, kill: bool) -> None:
        """A controlled shutdown; ``kill``: none, connections cut at once (the broker's
        registration in the store goes with its session, as after kill -9's session timeout)."""
        b = self._running(node_id)
        if b is not None:
            await self.stop_broker(b, controlled=not kill)

    async def control_start(self, node_id: int) -> None:
        cfg = self._config(node_id)
        if cfg is not None and self._running(node_id) is None:
            b = await self.start_broker(cfg)
            await asyncio.wait_for(b.ready.wait(), 60.0)

    async def control_expire_session(self, node_id: int) -> None:
        """The broker's store session expires: its ephemeral registration goes, the controller
        sees it fail, and it registers again on its new session (a lab's ZooKeeper hiccup)."""
        b = self._running(node_id)
        if b is not None and b.controller_side is not None:
            await b.controller_side.session.expire_session()

    def served(self) -> list[ServedBroker]:
        """This process's brokers as the admin API sees them."""
        from .admin_views import ServedBroker

        return [ServedBroker(b.node_id, b.recordings, b.metadata, b.replicas.get, b.groups, b.metrics_snapshot)
                for b in self.brokers]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{ep.host}:{ep.port}" for b in self.brokers for ep in b.config.advertised_listeners[:1])


def _load_config(args: argparse.Namespace) -> BrokerConfig:
    overrides: dict[str, str] = {}
    for item in args.override:
        k, sep, v = item.partition("=")
        if not sep:
            raise SystemExit(f"--override expects KEY=VALUE, got {item!r}")
        overrides[k.strip()] = v.strip()
    if args.broker_id is not None:
        overrides["broker.id"] = str(args.broker_id)
    if args.zookeeper:
        overrides["zookeeper.connect"] = args.zookeeper
    if args.data_dir:
        overrides["log.dirs"] = args.data_dir
    return BrokerConfig.load(args.config, overrides=overrides)


def serve(args: argparse.Namespace) -> int:
    configure(args.log_format, args.log_level)
    try:
        base = _load_config(args)
    except ValueError as e:
        print(f"refka: {e}", file=sys.stderr)
        return 2
    listeners = base.listeners
    host = args.host or (listeners[0].host if "listeners" in base.raw else "127.0.0.1")
    port = args.port or (listeners[0].port if "listeners" in base.raw else 9092)
    data_dir = Path(str(base["log.dirs"]).split(",")[0])
    try:
        configs = broker_configs(base, args.brokers, host, port, data_dir)
    except ValueError as e:  # inter.broker.listener.name with --brokers N: one listener each
        print(f"refka: {e}", file=sys.stderr)
        return 2
    zk = base["zookeeper.connect"] or None
    import uvloop  # a dependency: the broker's event loop

    return uvloop.run(_serve(configs, args.memory, data_dir, zk, args))


async def _serve(configs: list[BrokerConfig], memory: bool, data_dir: Path, zk: str | None,
                 args: argparse.Namespace) -> int:
    started = time.monotonic()
    record_file = None
    if args.record:
        try:
            record_file = RecordFile(args.record)
        except OSError as e:
            print(f"refka: --record: {e}", file=sys.stderr)
            return 2
        record_file.start()
    cluster = Cluster(configs, memory=memory, data_dir=data_dir, zookeeper=zk, record_file=record_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await cluster.start()
    except Exception as e:
        log.error("start_failed", error=str(e))
        await cluster.stop()
        return 1
    admin = None
    if args.admin_port is not None:
        from . import admin_http  # aiohttp and prometheus-client only when asked for

        try:
            admin = await admin_http.start(cluster.served, args.admin_host, args.admin_port,
                                             token=args.admin_token, control=cluster, faults=cluster.faults)
        except OSError as e:
            log.error("admin_start_failed", host=args.admin_host, port=args.admin_port, error=str(e))
            await cluster.stop()
            return 1
        log.info("admin_listening", url=f"http://{args.admin_host}:{args.admin_port}")
    print(
        f"refka ready: {len(cluster.brokers)} broker(s) at {cluster.bootstrap} "
        f"({'memory' if memory else data_dir}, {'zookeeper ' + zk if zk else 'embedded store'}) "
        f"in {time.monotonic() - started:.3f}s",
        flush=True,
    )
    await stop.wait()
    log.info("shutting_down")
    if admin is not None:
        await admin.cleanup()
    await cluster.stop()
    if record_file is not None:
        await record_file.close()
    return 0


def api_versions_table() -> str:
    """The Markdown table of served APIs (README), built from the handler registry."""
    lines = ["| key | API | versions | handler |", "|---:|---|---|---|"]
    for key, name, lo, hi in served_versions():
        h = HANDLERS[key]
        mod = h.fn.__module__.replace("refka.", "").replace(".", "/") + ".py"
        lines.append(f"| {key} | {name} | {lo}-{hi} | `{mod}` |")
    return "\n".join(lines)


README_START = "<!-- api-versions:start -->"
README_END = "<!-- api-versions:end -->"


def replace_readme_table(text: str, table: str) -> str:
    """``text`` with the block between the api-versions markers replaced by ``table``."""
    head, sep, rest = text.partition(README_START)
    _old, sep2, tail = rest.partition(README_END)
    if not sep or not sep2:
        raise ValueError("the README has no api-versions markers")
    return f"{head}{README_START}\n{table}\n{README_END}{tail}"
