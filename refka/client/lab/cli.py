"""``refka lab run PLAN.yaml``: a plan of operations and faults (plan.py) run against a running
cluster's admin API (``refka serve --admin-port``), each step printed as it happens.

    refka lab run lab/plans/leader-ping-pong.yaml --url http://127.0.0.1:8080 --timeline run.jsonl
    refka lab --url http://127.0.0.1:8080 -b 127.0.0.1:9092 run PLAN.yaml --json

``--url``, ``-b/--bootstrap-server`` and ``--admin-token`` may come before or after ``run``.
Without ``--url``: ``REFKA_ADMIN_URL``, else http://127.0.0.1:8080; without ``-b``: the
brokers' endpoints as ``GET /api/cluster`` lists them; without ``--admin-token``:
``REFKA_ADMIN_TOKEN``. Exit status 0 when the plan ran and its load met its
expectations, 1 when a step failed or the load did not, 2 when the plan is refused
(before anything runs: the step and what is wrong).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

import structlog

DEFAULT_URL = "http://127.0.0.1:8080"


def _common(p: argparse.ArgumentParser, default: object) -> None:
    p.add_argument("--url", default=default,
                   help=f"the admin API's base URL (default $REFKA_ADMIN_URL, else {DEFAULT_URL})")
    p.add_argument("--bootstrap-server", "-b", default=default,
                   help="brokers for the setup and the load (default: the endpoints GET /api/cluster lists)")
    p.add_argument("--admin-token", default=default,
                   help="bearer token for the calls that change something (default $REFKA_ADMIN_TOKEN)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lab", help="run lab plans (operations and faults in time) against a running cluster",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(p, None)
    lsub = p.add_subparsers(dest="lab_action", required=True)
    r = lsub.add_parser(
        "run", help="run a plan: its setup, its load, its steps in time; print each step as it happens",
        description="The plan format is refka/client/lab/plan.py's docstring; lab/plans/ has examples. "
                    "example: refka lab run lab/plans/leader-ping-pong.yaml --url http://127.0.0.1:8080 "
                    "--timeline ping-pong.jsonl")
    r.add_argument("plan", help="the plan (YAML)")
    _common(r, argparse.SUPPRESS)  # after the subcommand too; the one given wins
    r.add_argument("--timeline", default=None, metavar="FILE",
                   help="write the plan's events and the cluster's timeline there, as JSON lines")
    r.add_argument("--json", action="store_true", help="print each event as a JSON line instead of text")
    r.add_argument("--log-level", default="warning",
                   help="the load's clients' logs, on stderr, from this level (default warning)")


def _quiet_clients(level: str) -> None:
    """The load's clients log with structlog: to stderr, from ``level``, so that stdout is
    the plan's steps (one JSON object a line with --json)."""
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso", utc=True),
                    structlog.dev.ConsoleRenderer(colors=False)],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper(), logging.WARNING)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr))


def run(args: argparse.Namespace) -> int:
    # Imported here: the load's clients are not what ``refka --help`` should load.
    from .api import AdminError
    from .plan import PlanError, load_plan
    from .runner import run_plan

    try:
        plan = load_plan(args.plan)
    except PlanError as e:
        print(f"refka lab: {args.plan}: {e}", file=sys.stderr)
        return 2
    _quiet_clients(args.log_level)
    url = args.url or os.environ.get("REFKA_ADMIN_URL") or DEFAULT_URL
    try:
        return asyncio.run(run_plan(plan, url, args.bootstrap_server, token=args.admin_token,
                                    timeline_path=args.timeline, as_json=args.json, file=args.plan))
    except AdminError as e:
        print(f"refka lab: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
