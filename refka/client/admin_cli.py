"""``refka admin``: a command line over the admin HTTP API (``refka serve --admin-port``),
exactly what the API offers, nothing more.

    refka admin --url http://127.0.0.1:8080 connections [--broker N] [--json]
    refka admin recordings [--client-id X] [--broker N] [--limit K] [--json] --url http://127.0.0.1:8080
    refka admin stale-metadata --broker N [--freeze | --thaw] [--json]
    refka admin cluster [--broker N] [--json]
    refka admin topics [TOPIC] [--broker N] [--json]
    refka admin groups [GROUP] [--json]
    refka admin move-leader TOPIC PARTITION --to N      (reorders the replicas, then a preferred election)
    refka admin elect-preferred TOPIC [--partitions 0,1]
    refka admin reassign TOPIC --replicas 0=1,2 [--replicas 1=2,0 ...]
    refka admin partition-count TOPIC --count N         (expand; with KIP-253 also shrink)
    refka admin stop-broker|kill-broker|start-broker|expire-session N   (this process's brokers)
    refka admin faults                                   (installed faults)
    refka admin fault-add --kind error --api Produce --error-code NOT_LEADER_OR_FOLLOWER --count 3 [scope]
    refka admin fault-remove ID | --all
    refka admin timeline [--since SEQ] [--limit K] [--broker N]

``--url`` may come before or after the subcommand; without it ``REFKA_ADMIN_URL``,
else http://127.0.0.1:8080. A call that changes something sends ``REFKA_ADMIN_TOKEN``
as a bearer token when it is set (``refka serve --admin-token``). A table by default, the API's JSON with ``--json``
(JSON lines for recordings). Exit status 0 when the API answered, 1 when it refused
(its JSON error is printed) or could not be reached.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.parse
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8080"


class AdminError(Exception):
    """The API refused (``status`` its HTTP status) or could not be reached (``status`` None)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _url_arg(p: argparse.ArgumentParser, default: Any) -> None:
    p.add_argument("--url", default=default,
                   help=f"the admin API's base URL (default $REFKA_ADMIN_URL, else {DEFAULT_URL})")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("admin", help="read a running refka's admin HTTP API (refka serve --admin-port)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _url_arg(p, None)
    asub = p.add_subparsers(dest="action", required=True)
    c = asub.add_parser("connections", help="open connections: identity and requests per API",
                        description="example: refka admin connections --url http://127.0.0.1:8080")
    r = asub.add_parser("recordings", help="recorded requests, newest last",
                        description="example: refka admin recordings --client-id my-app --limit 20")
    r.add_argument("--client-id", default=None, help="only this client id's requests")
    r.add_argument("--limit", type=int, default=None, help="only the newest LIMIT requests")
    for q in (c, r):
        q.add_argument("--broker", type=int, default=None, help="only this broker's")
    m = asub.add_parser(
        "stale-metadata", help="freeze or thaw what a broker answers to Metadata (stale-metadata mode)",
        description="With --freeze broker N answers Metadata from its cache as it is now (epochs "
                    "included) until --thaw, while the cluster moves on; without either, the state. "
                    "example: refka admin stale-metadata --broker 1 --freeze")
    m.add_argument("--broker", type=int, required=True, help="the broker (one this process serves)")
    how = m.add_mutually_exclusive_group()
    how.add_argument("--freeze", action="store_true", help="answer Metadata as it is now from now on")
    how.add_argument("--thaw", action="store_true", help="answer Metadata from the current cache again")
    cl = asub.add_parser("cluster", help="brokers, racks, endpoints, the controller and its epochs",
                         description="example: refka admin cluster --url http://127.0.0.1:8080")
    tp = asub.add_parser("topics", help="topics, or one topic's partitions",
                         description="example: refka admin topics orders   (leader, epochs, ISR, offsets)")
    tp.add_argument("topic", nargs="?", default=None, help="one topic: its partitions")
    for q in (cl, tp):
        q.add_argument("--broker", type=int, default=None, help="whose view (default the lowest id served)")
    gr = asub.add_parser("groups", help="groups, or one group's members, offsets and lag",
                         description="example: refka admin groups my-group")
    gr.add_argument("group", nargs="?", default=None, help="one group: members, assignments, offsets, lag")
    mv = asub.add_parser("move-leader", help="a partition's leadership to a broker of its ISR",
                         description="The replicas are reordered with the broker first (a reassignment), then "
                                     "a preferred election. example: refka admin move-leader orders 0 --to 2")
    mv.add_argument("topic")
    mv.add_argument("partition", type=int)
    mv.add_argument("--to", type=int, required=True, dest="broker", help="the new leader")
    el = asub.add_parser("elect-preferred", help="preferred leader elections",
                         description="example: refka admin elect-preferred orders --partitions 0,3")
    el.add_argument("topic")
    el.add_argument("--partitions", default=None, help="comma-separated (default every partition)")
    ra = asub.add_parser("reassign", help="new replicas for partitions (AlterPartitionReassignments)",
                         description="example: refka admin reassign orders --replicas 0=2,1 --replicas 1=0,2")
    ra.add_argument("topic")
    ra.add_argument("--replicas", action="append", required=True, metavar="P=B1,B2",
                    help="partition P's replicas, preferred leader first (repeat per partition)")
    pc = asub.add_parser("partition-count", help="expand a topic, or with KIP-253 shrink it",
                         description="example: refka admin partition-count orders --count 8")
    pc.add_argument("topic")
    pc.add_argument("--count", type=int, required=True)
    ops = []
    for action, what in (("stop-broker", "a controlled shutdown (leadership moved away first)"),
                         ("kill-broker", "stop at once: connections cut, no controlled shutdown"),
                         ("start-broker", "start a stopped broker again"),
                         ("expire-session", "expire its metadata-store session (it registers again)")):
        op = asub.add_parser(action, help=f"a broker of the admin API's process: {what}",
                             description=f"example: refka admin {action} 1")
        op.add_argument("broker", type=int)
        ops.append(op)
    fl = asub.add_parser("faults", help="the faults installed, and how often each kind fired",
                         description="example: refka admin faults")
    fa = asub.add_parser("fault-add", help="install a fault (scope and lifetime options below)",
                         description="Kinds: error (answer --error-code instead of handling: Produce and Fetch per "
                                     "partition, group and coordinator APIs whole), latency, drop-before, drop-after, "
                                     "blackhole, replication-delay, throttle. example: refka admin fault-add --kind error "
                                     "--api Produce --topic orders --partition 0 --error-code "
                                     "NOT_LEADER_OR_FOLLOWER --count 3")
    fa.add_argument("--kind", required=True)
    for name, kind in (("--broker", int), ("--api", str), ("--api-key", int), ("--min-version", int),
                       ("--max-version", int), ("--client-id", str), ("--topic", str), ("--partition", int),
                       ("--follower", int), ("--error-code", str), ("--latency-ms", float),
                       ("--bytes-per-second", int), ("--count", int),
                       ("--duration-ms", float)):
        fa.add_argument(name, type=kind, default=None)
    fr = asub.add_parser("fault-remove", help="remove a fault, or every fault with --all",
                         description="example: refka admin fault-remove 3")
    fr.add_argument("fault", type=int, nargs="?", default=None)
    fr.add_argument("--all", action="store_true")
    tl = asub.add_parser("timeline", help="the cluster's changes (leaders, ISR, topics, controller, faults fired)",
                         description="example: refka admin timeline --since 120 --json")
    tl.add_argument("--since", type=int, default=None)
    tl.add_argument("--limit", type=int, default=None)
    tl.add_argument("--broker", type=int, default=None)
    for q in (c, r, m, cl, tp, gr, mv, el, ra, pc, *ops, fl, fa, fr, tl):
        _url_arg(q, argparse.SUPPRESS)  # after the subcommand too; the one given wins
        q.add_argument("--json", action="store_true", help="the API's JSON instead of a table")


def call(base: str, path: str, query: dict[str, Any] | None = None, method: str = "GET",
         payload: dict[str, Any] | None = None, token: str | None = None) -> tuple[str, str]:
    """GET (or ``method``) base+path?query; the body and content type, or AdminError with the
    API's message and status. A call that changes something carries ``token`` (default
    $REFKA_ADMIN_TOKEN) as a bearer token when there is one (refka serve --admin-token).
    Blocking (urllib): ``refka lab run`` calls it from a thread."""
    # Here, not at the top: `refka serve` builds this module's parser too, and urllib.request
    # (http.client, email) is ~35 ms of its start-up.
    import urllib.error
    import urllib.request

    q = urllib.parse.urlencode({k: v for k, v in (query or {}).items() if v is not None})
    url = base.rstrip("/") + path + ("?" + q if q else "")
    headers = {}
    token = token or os.environ.get("REFKA_ADMIN_TOKEN")
    if method != "GET" and token:
        headers["Authorization"] = f"Bearer {token}"
    data = None
    if payload is not None:
        data = json.dumps(payload).encode()
        headers["Content-Type"] = "application/json"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method, headers=headers),
                                    timeout=60) as resp:
            return resp.read().decode(), resp.headers.get_content_type()
    except urllib.error.HTTPError as e:
        body = e.read().decode(errors="replace")
        try:
            message = json.loads(body)["error"]
        except (ValueError, KeyError, TypeError):
            message = body.strip() or e.reason
        raise AdminError(f"{e.code}: {message}", e.code) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise AdminError(f"cannot reach {url}: {reason}") from None


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [headers, *[["" if v is None else str(v) for v in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells)


def _software(d: dict[str, Any]) -> str:
    name, version = d.get("software_name"), d.get("software_version")
    return f"{name} {version}" if name and version else (name or "")


def connections_table(conns: list[dict[str, Any]]) -> str:
    rows = [[c["broker"], c["peer"], c["listener"], c["client_id"], _software(c), c["requests_total"],
             " ".join(f"{api}={n}" for api, n in c["requests"].items())] for c in conns]
    return table(["BROKER", "PEER", "LISTENER", "CLIENT_ID", "SOFTWARE", "REQUESTS", "PER_API"], rows)


def recordings_table(entries: list[dict[str, Any]]) -> str:
    rows = []
    for e in entries:
        t = e["time_ms"] / 1000
        when = time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"
        topics = e.get("topics")
        rows.append([when, e["broker"], e["client_id"], f"{e['api']} v{e['api_version']}", e["correlation_id"],
                     "" if topics is None else (topics if isinstance(topics, str) else ",".join(topics)),
                     e["request_bytes"], e["response_bytes"], f"{e['latency_ms']:.2f}",
                     ",".join(e["error_codes"])])
    return table(["TIME", "BROKER", "CLIENT_ID", "API", "CORR", "TOPICS", "REQ_B", "RESP_B", "MS", "ERRORS"], rows)


def metadata_state_table(state: dict[str, Any]) -> str:
    def row(name: str, e: dict[str, Any]) -> list[Any]:
        return [state["broker"], name, e["controller_id"], e["controller_epoch"], e["controller_metadata_epoch"],
                e["topics"]]

    frozen = state["frozen_at_ms"]
    since = "" if frozen is None else time.strftime(" since %H:%M:%S", time.localtime(frozen / 1000))
    head = f"broker {state['broker']}: Metadata {'FROZEN' + since if state['frozen'] else 'current'}"
    return head + "\n" + table(
        ["BROKER", "VIEW", "CONTROLLER", "CONTROLLER_EPOCH", "METADATA_EPOCH", "TOPICS"],
        [row("answering", state["answering"]), row("current", state["current"])])


def cluster_table(c: dict[str, Any]) -> str:
    ctl = c["controller"]
    head = (f"cluster {c['cluster_id']} (broker {c['view_of_broker']}'s view): controller {ctl['id']}, "
            f"epoch {ctl['epoch']}, metadata epoch {ctl['metadata_epoch']}; {c['topics']} topics, "
            f"{c['partitions']} partitions")
    rows = [[b["id"], b["rack"], " ".join(f"{k}={v}" for k, v in b["endpoints"].items()),
             "yes" if b["served_here"] else ""] for b in c["brokers"]]
    return head + "\n" + table(["BROKER", "RACK", "ENDPOINTS", "SERVED_HERE"], rows)


def topics_table(topics: list[dict[str, Any]]) -> str:
    rows = [[t["name"], t["partitions"], t["topic_epoch"], t["initial_partition_count"],
             t["undeleted_partition_count"], t["topic_id"]] for t in topics]
    return table(["TOPIC", "PARTITIONS", "TOPIC_EPOCH", "INITIAL", "UNDELETED", "TOPIC_ID"], rows)


def topic_table(t: dict[str, Any]) -> str:
    head = (f"{t['name']}: {len(t['partitions'])} partitions, topic epoch {t['topic_epoch']}, "
            f"KIP-253 counts {t['initial_partition_count']}/{t['undeleted_partition_count']}")
    ints = ",".join
    rows = [[p["partition"], p["leader"], p["leader_epoch"], p["partition_epoch"], ints(map(str, p["replicas"])),
             ints(map(str, p["isr"])), p["log_start_offset"], p["log_end_offset"], p["high_watermark"],
             "marked" if p["marked_for_deletion"] else ""] for p in t["partitions"]]
    return head + "\n" + table(["PARTITION", "LEADER", "EPOCH", "P_EPOCH", "REPLICAS", "ISR", "LOG_START",
                                "LOG_END", "HIGH_WATERMARK", "DELETION"], rows)


def groups_table(g: dict[str, Any]) -> str:
    out = table(["GROUP", "STATE", "PROTOCOL_TYPE", "COORDINATOR"],
                [[x["group_id"], x["state"], x["protocol_type"], x["coordinator"]] for x in g["groups"]])
    if g.get("loading"):
        out += "\n(still loading groups: brokers " + ", ".join(map(str, g["loading"])) + ")"
    return out


def group_table(g: dict[str, Any]) -> str:
    head = (f"{g['group_id']}: {g['state']}, protocol {g['protocol'] or '-'}, coordinator {g['coordinator']}, "
            f"{len(g['members'])} members, lag {g['lag']}")
    owner = {(t, p): m["client_id"] or m["member_id"] for m in g["members"]
             for t, ps in m["assignment"].items() for p in ps}
    rows = [[o["topic"], o["partition"], o["current_offset"], o["log_end_offset"], o["lag"],
             owner.get((o["topic"], o["partition"]), "")] for o in g["offsets"]]
    return head + "\n" + table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER"], rows)


def _q(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _replicas(specs: list[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for spec in specs:
        p, sep, ids = spec.partition("=")
        try:
            out[str(int(p))] = [int(x) for x in ids.split(",")]
        except ValueError:
            raise AdminError(f"--replicas {spec!r}: expected PARTITION=BROKER,BROKER,...") from None
        if not sep:
            raise AdminError(f"--replicas {spec!r}: expected PARTITION=BROKER,BROKER,...")
    return out


def _partitions(raw: str | None) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        return {"partitions": [int(x) for x in raw.split(",")]}
    except ValueError:
        raise AdminError(f"--partitions {raw!r}: expected comma-separated partition numbers") from None


_FAULT_FIELDS = ("kind", "broker", "api", "api_key", "min_version", "max_version", "client_id", "topic", "partition",
                 "follower", "error_code", "latency_ms", "bytes_per_second", "count", "duration_ms")

# action -> (its POST path, its JSON body)
OPERATIONS: dict[str, Any] = {
    "move-leader": lambda a: (f"/api/topics/{_q(a.topic)}/partitions/{a.partition}/leader", {"broker": a.broker}),
    "elect-preferred": lambda a: (f"/api/topics/{_q(a.topic)}/elect-preferred", _partitions(a.partitions)),
    "reassign": lambda a: (f"/api/topics/{_q(a.topic)}/reassign", {"assignments": _replicas(a.replicas)}),
    "partition-count": lambda a: (f"/api/topics/{_q(a.topic)}/partition-count", {"count": a.count}),
    "stop-broker": lambda a: (f"/api/brokers/{a.broker}/stop", None),
    "kill-broker": lambda a: (f"/api/brokers/{a.broker}/kill", None),
    "start-broker": lambda a: (f"/api/brokers/{a.broker}/start", None),
    "expire-session": lambda a: (f"/api/brokers/{a.broker}/expire-session", None),
}


def run(args: argparse.Namespace) -> int:
    base = args.url or os.environ.get("REFKA_ADMIN_URL") or DEFAULT_URL
    try:
        if args.action == "faults":
            body, _ = call(base, "/api/faults", {})
            data = json.loads(body)
            if args.json:
                print(json.dumps(data, indent=2))
            else:
                rows = [[f["id"], f["kind"], f.get("api", ""), f.get("error_code", f.get("latency_ms", "")),
                         " ".join(f"{k}={f[k]}" for k in ("broker", "client_id", "topic", "partition", "follower")
                                  if k in f), f["fired"], f["count_left"]] for f in data["faults"]]
                print(table(["ID", "KIND", "API", "ERROR/MS", "SCOPE", "FIRED", "LEFT"], rows))
        elif args.action == "fault-add":
            spec = {k: v for k, v in vars(args).items() if k in _FAULT_FIELDS and v is not None}
            body, _ = call(base, "/api/faults", {}, method="POST", payload=spec)
            print(body if args.json else f"fault {json.loads(body)['id']} installed: {body}")
        elif args.action == "fault-remove":
            if args.all == (args.fault is not None):
                raise AdminError("give a fault id or --all")
            path = "/api/faults" if args.all else f"/api/faults/{args.fault}"
            body, _ = call(base, path, {}, method="DELETE")
            print(body)
        elif args.action == "timeline":
            body, _ = call(base, "/api/timeline", {"since": args.since, "limit": args.limit, "broker": args.broker})
            if args.json:
                sys.stdout.write(body)
            else:
                for line in body.splitlines():
                    e = json.loads(line)
                    t = e["time_ms"] / 1000
                    when = time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"
                    rest = " ".join(f"{k}={v}" for k, v in e.items() if k not in ("seq", "time_ms", "type"))
                    print(f"{e['seq']:>6} {when} {e['type']:<18} {rest}")
        elif args.action in OPERATIONS:
            path, payload = OPERATIONS[args.action](args)
            out, _ = call(base, path, {}, method="POST", payload=payload)
            result = json.loads(out)
            print(json.dumps(result, indent=None if not args.json else 2))
        elif args.action in ("cluster", "topics", "groups"):
            name = getattr(args, "topic", None) if args.action == "topics" else getattr(args, "group", None)
            path = f"/api/{args.action}" + ("/" + urllib.parse.quote(name, safe="") if name else "")
            body, _ = call(base, path, {"broker": getattr(args, "broker", None)})
            data = json.loads(body)
            if args.json:
                print(json.dumps(data, indent=2))
            elif args.action == "cluster":
                print(cluster_table(data))
            elif args.action == "topics":
                print(topic_table(data) if name else topics_table(data["topics"]))
            else:
                print(group_table(data) if name else groups_table(data))
        elif args.action == "stale-metadata":
            path = f"/api/brokers/{args.broker}/metadata"
            if args.freeze or args.thaw:
                body, _ = call(base, path + ("/freeze" if args.freeze else "/thaw"), {}, method="POST")
            else:
                body, _ = call(base, path, {})
            state = json.loads(body)
            print(json.dumps(state, indent=2) if args.json else metadata_state_table(state))
        elif args.action == "connections":
            body, _ = call(base, "/api/connections", {"broker": args.broker})
            conns = json.loads(body)["connections"]
            print(json.dumps(conns, indent=2) if args.json else connections_table(conns))
        else:
            body, _ = call(base, "/api/recordings",
                           {"broker": args.broker, "client_id": args.client_id, "limit": args.limit})
            if args.json:
                sys.stdout.write(body)
            else:
                print(recordings_table([json.loads(line) for line in body.splitlines() if line]))
    except AdminError as e:
        print(f"refka admin: {e}", file=sys.stderr)
        return 1
    except (ValueError, KeyError) as e:
        print(f"refka admin: {base} did not answer as refka's admin API: {e}", file=sys.stderr)
        return 1
    return 0
