"""The ``refka`` command.

``refka serve``            one broker (or ``--brokers N``) with the embedded store
``refka topics ...``       create / list / describe / alter / delete topics, delete records, on a running broker
``refka admin ...``        connections and request recordings from a running refka's admin API
``refka lab run PLAN``     a timed plan of operations and faults against a running cluster, under load
``refka api-versions``     the table of served APIs and versions (the README shows it)
``refka zookeeper``        a private ZooKeeper from Debian's package, for local clusters
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
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
