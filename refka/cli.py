"""The ``refka`` command.

``refka serve``            one broker (or ``--brokers N``) with the embedded store
``refka topics ...``       create / list / describe / alter / delete topics, delete records, on a running broker
``refka admin ...``        connections and request recordings from a running refka's admin API
``refka lab run PLAN``     a timed plan of operations and faults against a running cluster, under load
``refka api-versions``     the table of served APIs and versions (the README shows it)
``refka zookeeper``        a private ZooKeeper from Debian's package, for local clusters
``refka health``           exit 0 when a broker answers (a container's health check, a pod's probes)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def _add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run a broker (or a cluster of brokers in this process)")
    p.add_argument("--host", default=None, help="listen host (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="first broker's port (default 9092); broker i uses port+i")
    p.add_argument("--data-dir", default=None, help="data directory (default ./refka-data)")
    p.add_argument("--memory", action="store_true", help="keep logs and metadata in memory only")
    p.add_argument("--brokers", type=int, default=1, help="number of brokers in this process")
    p.add_argument("--zookeeper", default=None, help="ZooKeeper connect string host:port[/chroot]")
    p.add_argument("--broker-id", type=int, default=None, help="broker id (with --zookeeper)")
    p.add_argument("--config", type=Path, default=None, help="server.properties file")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="set a Kafka property (repeatable)")
    p.add_argument("--admin-port", type=int, default=None,
                   help="serve the admin HTTP API (connections, recordings, /metrics) on this port")
    p.add_argument("--admin-host", default="127.0.0.1", help="the admin API's host (default 127.0.0.1)")
    p.add_argument("--admin-token", default=os.environ.get("REFKA_ADMIN_TOKEN") or None,
                   help="require 'Authorization: Bearer TOKEN' on every call that changes something "
                        "(default $REFKA_ADMIN_TOKEN; none: a lab tool on 127.0.0.1)")
    p.add_argument("--record", default=None, metavar="FILE",
                   help="append every request of every connection to FILE as JSON lines")
    p.add_argument("--log-format", choices=("console", "json"), default="console")
    p.add_argument("--log-level", default=os.environ.get("REFKA_LOG_LEVEL", "info"))


def _add_topics(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topics", help="manage topics on a running broker",
                       description="Topics over the Kafka protocol, as kafka-topics.sh. -b/--bootstrap-server "
                                   "may come before or after the subcommand.")
    p.add_argument("--bootstrap-server", "-b", default="127.0.0.1:9092",
                   help="a broker to ask (default 127.0.0.1:9092)")
    tsub = p.add_subparsers(dest="action", required=True)

    def action(name: str, help: str, example: str) -> argparse.ArgumentParser:
        a = tsub.add_parser(name, help=help, description=f"{help}. example: refka topics {example}")
        # after the subcommand too, as Kafka's tools and people type it; the one given wins
        a.add_argument("--bootstrap-server", "-b", default=argparse.SUPPRESS, help="a broker to ask")
        return a

    c = action("create", "create a topic", "create orders -p 6 -r 3 -c cleanup.policy=compact -b 127.0.0.1:9092")
    c.add_argument("topic")
    c.add_argument("--partitions", "-p", type=int, default=-1)
    c.add_argument("--replication-factor", "-r", type=int, default=-1)
    c.add_argument("--config", "-c", action="append", default=[], metavar="KEY=VALUE")
    ls = action("list", "list the topics", "list -b 127.0.0.1:9092")
    d = action("describe", "describe topics (all by default): partitions, leaders, epochs, replicas, ISR",
               "describe orders -b 127.0.0.1:9092")
    d.add_argument("topic", nargs="*")
    for q in (ls, d):
        q.add_argument("--json", action="store_true", help="JSON instead of text")
    x = action("delete", "delete topics", "delete orders")
    x.add_argument("topic", nargs="+")
    a = action("alter", "grow or (KIP-253) shrink a topic's partition count", "alter orders -p 8")
    a.add_argument("topic")
    a.add_argument("--partitions", "-p", type=int, required=True, help="the new partition count")
    r = action("delete-records", "move log start offsets forward (DeleteRecords)", "delete-records orders:0:100")
    r.add_argument("offsets", nargs="+", metavar="TOPIC:PARTITION:OFFSET",
                   help="delete the records before OFFSET (-1: the high watermark)")


def _add_health(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "health", help="exit 0 when a broker answers (a container's health check, a pod's probes)",
        description="Asks a broker ApiVersions: it answers while its event loop runs (liveness). With "
                    "--ready, also a Metadata naming a controller: a broker answers client requests only "
                    "once the controller's first UpdateMetadata named it (readiness). The broker is "
                    "--bootstrap, else the first listener of the configuration `refka serve` reads here "
                    "(--config, REFKA_ environment variables), at 127.0.0.1 when it binds every address.")
    p.add_argument("--bootstrap", "-b", default=None, metavar="HOST:PORT")
    p.add_argument("--config", type=Path, default=None, help="server.properties file")
    p.add_argument("--ready", action="store_true", help="also ask Metadata: the broker serves clients")
    p.add_argument("--timeout", type=float, default=3.0, help="seconds for the whole check (default 3)")


def health(args: argparse.Namespace) -> int:
    """``refka health``: 0 when the broker answered, 1 (and why, on stderr) when it did not."""
    import asyncio

    from .broker.config import BrokerConfig
    from .client.connection import BrokerConnection
    from .protocol.messages.metadata import Metadata

    if args.bootstrap:
        host, _, port_text = args.bootstrap.rpartition(":")
    else:
        try:
            first = BrokerConfig.load(args.config).listeners[0]
        except (ValueError, IndexError, OSError) as e:
            print(f"refka health: no listener to ask: {e!r}", file=sys.stderr)
            return 1
        host, port_text = first.host, str(first.port)
    host = "127.0.0.1" if host in ("", "0.0.0.0") else "::1" if host == "::" else host.strip("[]")

    async def check() -> str:
        conn = await BrokerConnection(host, int(port_text), "refka-health").connect(args.timeout)
        try:
            if not args.ready:
                return "answers ApiVersions"
            md = await conn.request(Metadata, Metadata.Request(topics=[], allow_auto_topic_creation=False))
            if md.controller_id < 0:
                raise RuntimeError(f"no controller yet ({len(md.brokers)} brokers known)")
            return f"ready (controller {md.controller_id}, {len(md.brokers)} brokers)"
        finally:
            await conn.close()

    async def bounded() -> str:
        async with asyncio.timeout(args.timeout):
            return await check()

    try:
        what = asyncio.run(bounded())
    except TimeoutError:
        print(f"refka health: {host}:{port_text} did not answer within {args.timeout:g}s", file=sys.stderr)
        return 1
    except Exception as e:  # refused, reset, no controller: all "not healthy", said once
        print(f"refka health: {host}:{port_text}: {e}", file=sys.stderr)
        return 1
    print(f"refka health: {host}:{port_text} {what}")
    return 0


def parse_kv(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep:
            raise SystemExit(f"expected KEY=VALUE, got {item!r}")
        out[k.strip()] = v.strip()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="refka", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_serve(sub)
    _add_topics(sub)
    from .client.admin_cli import add_parser as _add_admin

    _add_admin(sub)
    from .client.lab.cli import add_parser as _add_lab

    _add_lab(sub)
    av = sub.add_parser("api-versions", help="print the served APIs and versions as a Markdown table")
    av.add_argument("--readme", type=Path, default=None,
                    help="rewrite the table between the api-versions markers of this file instead")
    z = sub.add_parser("zookeeper", help="run a private ZooKeeper (Debian's zookeeper package)")
    z.add_argument("--port", type=int, default=2181)
    z.add_argument("--data-dir", default="./refka-data/zookeeper")
    z.add_argument("--heap-mb", type=int, default=512,
                   help="the JVM's -Xmx in MB (Kafka's script gives ZooKeeper 512; ~6 KB a one-partition topic)")
    _add_health(sub)
    args = parser.parse_args(argv)

    if args.command == "serve":
        from .broker.server import serve

        return serve(args)
    if args.command == "topics":
        from .client.topics_cli import run

        return run(args)
    if args.command == "admin":
        from .client.admin_cli import run as run_admin

        return run_admin(args)
    if args.command == "lab":
        from .client.lab.cli import run as run_lab

        return run_lab(args)
    if args.command == "api-versions":
        from .broker.server import api_versions_table, replace_readme_table

        if args.readme is not None:
            args.readme.write_text(replace_readme_table(args.readme.read_text(), api_versions_table()))
            return 0
        print(api_versions_table())
        return 0
    if args.command == "zookeeper":
        from .zookeeper import run_zookeeper

        return run_zookeeper(args.port, Path(args.data_dir), args.heap_mb)
    if args.command == "health":
        return health(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
