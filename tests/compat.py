"""The README's client compatibility matrix, generated from a test run.

    python -m tests.compat [--outcomes .cache/test-outcomes.json] [--readme README.md]

Every pytest run writes each test's outcome to ``.cache/test-outcomes.json`` (tests/conftest.py);
this reads the file of the last run, attributes each client test to its client (CLIENTS: the
test files of each client, and for a client tested at several versions the version in the
test's id), and prints the table: client, version (as installed or pinned here), what its
tests exercise, and their outcomes. ``--readme`` writes it into README.md between the
``compat:start`` / ``compat:end`` markers. A client whose tests did not run in that run (a
partial run) says so, rather than keeping an older result.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTCOMES = ROOT / ".cache" / "test-outcomes.json"
START, END = "<!-- compat:start -->", "<!-- compat:end -->"


def _package(name: str) -> Callable[[], str]:
    def version() -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"
    return version


def _npm(name: str) -> Callable[[], str]:
    def version() -> str:
        try:
            lock = json.loads((ROOT / "tests" / "js" / "package-lock.json").read_text())
            return str(lock["packages"][f"node_modules/{name}"]["version"])
        except (OSError, KeyError, ValueError):
            return "unknown"
    return version


def _go(module: str) -> Callable[[], str]:
    def version() -> str:
        try:
            m = re.search(rf"^\s*{re.escape(module)} (v\S+)", (ROOT / "tests" / "go" / "go.mod").read_text(), re.M)
        except OSError:
            return "unknown"
        return m.group(1) if m else "unknown"
    return version


def _kcat() -> str:
    try:
        out = subprocess.run(["kcat", "-V"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "not installed"
    m = re.search(r"^Version (\S+)", out, re.M)
    lib = re.search(r"librdkafka (\S+)", out)
    return (m.group(1) if m else "?") + (f" (librdkafka {lib.group(1)})" if lib else "")


def _fixed(v: str) -> Callable[[], str]:
    return lambda: v


@dataclass(frozen=True)
class Client:
    name: str
    version: Callable[[], str]
    files: tuple[str, ...]  # fnmatch patterns of test file paths (from the repository root)
    tested: str
    id_part: str | None = None  # only tests whose id contains this (one version of several)


def _java_versions() -> list[str]:
    """The kafka-clients versions the Java tests run (tests/java/pom-<version>.xml)."""
    return sorted(p.stem.removeprefix("pom-") for p in (ROOT / "tests" / "java").glob("pom-*.xml"))


CLIENTS: list[Client] = [
    Client("confluent-kafka (librdkafka)", _package("confluent-kafka"),
           ("tests/integration/test_confluent_kafka.py", "tests/integration/test_groups_confluent.py",
            "tests/integration/test_admin_clients.py", "tests/integration/test_config_admin.py",
            "tests/integration/test_idempotence.py", "tests/integration/test_leader_hints.py"),
           "produce/consume (acks, codecs, headers), idempotence, groups, admin (topics, configs, records, "
           "groups, offsets), KIP-951 hints"),
    Client("kafka-python", _package("kafka-python"),
           ("tests/integration/test_kafka_python.py", "tests/integration/test_groups_kafka_python.py",
            "tests/integration/test_replication_kafka_python.py"),
           "produce/consume, groups, admin, replication"),
    Client("aiokafka", _package("aiokafka"),
           ("tests/integration/test_aiokafka.py", "tests/integration/test_groups_aiokafka.py"),
           "produce/consume, groups"),
    Client("kcat", _kcat, ("tests/integration/test_kcat.py", "tests/integration/test_groups_kcat.py"),
           "produce/consume, metadata, groups"),
    Client("KafkaJS", _npm("kafkajs"), ("tests/integration/test_kafkajs.py", "tests/integration/test_groups_kafkajs.py"),
           "produce/consume, groups, admin offsets"),
    Client("@platformatic/kafka", _npm("@platformatic/kafka"), ("tests/integration/test_platformatic.py",),
           "produce/consume round trip"),
    Client("franz-go + kadm", _go("github.com/twmb/franz-go"), ("tests/integration/test_franz_go.py",),
           "produce (every codec), cooperative-sticky group, kadm admin round trip"),
    *(Client("Java kafka-clients", _fixed(v), ("tests/integration/test_java_client*.py",),
             "producer (acks, idempotence, codecs, headers), consumer (assign/seek/offsetsForTimes, groups, "
             "cooperative-sticky, commits), AdminClient, KIP-951 failover", id_part=v)
      for v in _java_versions()),
    Client("old protocol: kafka-python api_version 0.9-0.10, librdkafka fallback 0.8.2/0.9.0",
           _package("kafka-python"), ("tests/integration/test_legacy_versions.py",),
           "Produce v0-v2 and Fetch v0-v3 (message formats 0/1, each codec), both directions across formats"),
    Client("Spark Kafka source/sink (Java client inside Spark)", _package("pyspark"),
           ("tests/lab/pipeline/test_pipeline_kafka*.py",),
           "batch and streaming reads (offsets, timestamps), writes, a leader move and a broker restart mid-query"),
]


def _matches(client: Client, nodeid: str) -> bool:
    path = nodeid.split("::", 1)[0]
    return any(fnmatch.fnmatch(path, pattern) for pattern in client.files) and (
        client.id_part is None or client.id_part in nodeid)


def _result(counts: Counter[str]) -> str:
    if not counts:
        return "not run in this run"
    parts = [f"{counts[k]} {k}" for k in ("passed", "failed", "skipped") if counts[k]]
    return ", ".join(parts)


def table(outcomes: dict[str, str]) -> str:
    lines = ["| client | version | tested | result |", "|---|---|---|---|"]
    for client in CLIENTS:
        counts = Counter(outcome for nodeid, outcome in outcomes.items() if _matches(client, nodeid))
        lines.append(f"| {client.name} | {client.version()} | {client.tested} | {_result(counts)} |")
    return "\n".join(lines)


def write_readme(readme: Path, text: str) -> None:
    content = readme.read_text()
    start, end = content.find(START), content.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{readme}: no {START} ... {END} markers")
    readme.write_text(content[:start + len(START)] + "\n" + text + "\n" + content[end:])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.compat", description=__doc__.split("\n\n")[0])
    ap.add_argument("--outcomes", type=Path, default=OUTCOMES)
    ap.add_argument("--readme", type=Path, help="write the table into this README between the markers")
    a = ap.parse_args(argv)
    try:
        run = json.loads(a.outcomes.read_text())
    except (OSError, ValueError) as e:
        print(f"no test outcomes to read ({e}): run `make test` first", file=sys.stderr)
        return 1
    text = table(run["outcomes"])
    note = f"From the test run of {run['finished']} ({len(run['outcomes'])} tests)."
    if a.readme:
        write_readme(a.readme, f"{text}\n\n{note}")
    print(text)
    print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
