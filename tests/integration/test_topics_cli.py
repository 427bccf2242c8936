"""``refka topics create|list|describe|alter|delete|delete-records`` as a user runs it: ``python -m
refka topics ...`` subprocesses against a running broker, checked against what
kafka-python's admin client sees. Errors exit non-zero with one clear line
naming the topic and the Kafka error, never a traceback.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType

from tests.brokers import BrokerProcess, free_port_block
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

WAIT_S = 60  # only against hangs


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def topics(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "refka", "topics", "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=WAIT_S)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.fixture(scope="module")
def cli_broker(tmp_path_factory):
    """A broker whose defaults differ from Kafka's, to see -p/-r default to them (and whose
    controller looks for drained partitions every 200 ms)."""
    b = BrokerProcess(tmp_path_factory.mktemp("refka-cli") / "data", memory=True,
                      overrides={"num.partitions": "4", "partition.deletion.check.interval.ms": "200"}).start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def admin(cli_broker):
    a = KafkaAdminClient(bootstrap_servers=cli_broker.bootstrap)
    yield a
    a.close()


def describe_lines(out: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The topic line and partition lines of ``describe`` as field dicts."""
    lines = out.splitlines()
    head = dict(f.split(": ", 1) for f in lines[0].split("\t"))
    parts = [dict(f.split(": ", 1) for f in line.strip().split("\t")) for line in lines[1:]]
    assert all(line.startswith("\t") for line in lines[1:])
    return head, parts


def test_create_list_describe_delete(cli_broker, admin):
    t = _topic("cli")
    proc = topics(cli_broker.bootstrap, "create", t, "--partitions", "3", "--replication-factor", "1")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"created topic {t}\n", "")

    proc = topics(cli_broker.bootstrap, "list")
    assert proc.returncode == 0
    assert t in proc.stdout.splitlines()
    assert proc.stdout.splitlines() == sorted(proc.stdout.splitlines())

    proc = topics(cli_broker.bootstrap, "describe", t)
    assert proc.returncode == 0, proc.stderr
    head, parts = describe_lines(proc.stdout)
    (desc,) = admin.describe_topics([t])
    assert head == {"Topic": t, "TopicId": uuid.UUID(str(desc["topic_id"])).hex, "PartitionCount": "3",
                    "ReplicationFactor": "1"}
    assert re.fullmatch(r"[0-9a-f]{32}", head["TopicId"]) and int(head["TopicId"], 16) != 0
    assert parts == [{"Topic": t, "Partition": str(p), "Leader": "0", "LeaderEpoch": "0", "Replicas": "0",
                      "Isr": "0"} for p in range(3)]
    assert sorted((p["partition_index"], p["leader_id"], p["leader_epoch"]) for p in desc["partitions"]) == \
        [(p, 0, 0) for p in range(3)]

    proc = topics(cli_broker.bootstrap, "delete", t)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"deleted topic {t}\n", "")
    assert t not in topics(cli_broker.bootstrap, "list").stdout.splitlines()
    assert t not in admin.list_topics()

    proc = topics(cli_broker.bootstrap, "describe", t)
    assert proc.returncode != 0
    assert proc.stdout == ""
    assert f"{t}: UNKNOWN_TOPIC_OR_PARTITION" in proc.stderr


def test_create_defaults_and_configs(cli_broker, admin):
    t = _topic("cli-defaults")
    proc = topics(cli_broker.bootstrap, "create", t, "-c", "retention.ms=3600000", "-c", "cleanup.policy=compact")
    assert proc.returncode == 0, proc.stderr
    (desc,) = admin.describe_topics([t])
    assert len(desc["partitions"]) == 4  # the broker's num.partitions
    assert {len(p["replica_nodes"]) for p in desc["partitions"]} == {1}  # default.replication.factor
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)])["topic"][t]
    assert (configs["retention.ms"]["value"], configs["cleanup.policy"]["value"]) == ("3600000", "compact")

    head, parts = describe_lines(topics(cli_broker.bootstrap, "describe", t).stdout)
    assert (head["PartitionCount"], len(parts)) == ("4", 4)


def test_create_existing_topic_fails_and_leaves_it_alone(cli_broker, admin):
    t = _topic("cli-exists")
    assert topics(cli_broker.bootstrap, "create", t, "-p", "2").returncode == 0
    proc = topics(cli_broker.bootstrap, "create", t, "-p", "5")
    assert proc.returncode != 0
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"refka topics: {t}: TOPIC_ALREADY_EXISTS")
    assert "already exists" in proc.stderr
    (desc,) = admin.describe_topics([t])
    assert len(desc["partitions"]) == 2


def test_delete_unknown_topic_fails(cli_broker, admin):
    missing = _topic("cli-missing")
    proc = topics(cli_broker.bootstrap, "delete", missing)
    assert proc.returncode != 0
    assert proc.stdout == ""
    assert proc.stderr.strip() == f"refka topics: {missing}: UNKNOWN_TOPIC_OR_PARTITION"

    # With one known and one unknown name: the known one is deleted, the exit is still non-zero.
    known = _topic("cli-known")
    assert topics(cli_broker.bootstrap, "create", known).returncode == 0
    proc = topics(cli_broker.bootstrap, "delete", known, missing)
    assert proc.returncode != 0
    assert proc.stdout == f"deleted topic {known}\n"
    assert f"{missing}: UNKNOWN_TOPIC_OR_PARTITION" in proc.stderr
    assert known not in admin.list_topics()


@pytest.mark.parametrize("args, error", [
    (["create", "bad name!"], "INVALID_TOPIC_EXCEPTION"),
    (["create", "{topic}", "-p", "0"], "INVALID_PARTITIONS"),
    (["create", "{topic}", "-r", "3"], "INVALID_REPLICATION_FACTOR"),
    (["create", "{topic}", "-c", "no.such.config=1"], "INVALID_CONFIG"),
], ids=["bad-name", "zero-partitions", "rf-above-brokers", "unknown-config"])
def test_create_refused(cli_broker, admin, args, error):
    t = _topic("cli-refused")
    proc = topics(cli_broker.bootstrap, *(a.format(topic=t) for a in args))
    assert proc.returncode != 0
    assert proc.stdout == ""
    name = args[1].format(topic=t)
    assert proc.stderr.startswith(f"refka topics: {name}: {error} ")
    assert len(proc.stderr.strip()) > len(f"refka topics: {name}: {error} ")  # the broker's explanation
    assert t not in admin.list_topics()


def test_unreachable_broker_is_a_clear_error():
    port = free_port_block(1)  # nothing listens there
    proc = topics(f"127.0.0.1:{port}", "list")
    assert proc.returncode != 0
    assert proc.stdout == ""
    assert proc.stderr.startswith("refka topics: ")
    assert f"127.0.0.1:{port}" in proc.stderr


def test_against_the_shared_disk_broker(broker):
    """The same commands on a durable broker (the conftest fixture)."""
    t = _topic("cli-disk")
    assert topics(broker.bootstrap, "create", t, "-p", "2").returncode == 0
    assert t in topics(broker.bootstrap, "list").stdout.splitlines()
    head, parts = describe_lines(topics(broker.bootstrap, "describe", t).stdout)
    assert (head["Topic"], head["PartitionCount"], [p["Partition"] for p in parts]) == (t, "2", ["0", "1"])
    assert topics(broker.bootstrap, "delete", t).returncode == 0
    assert t not in topics(broker.bootstrap, "list").stdout.splitlines()


def test_alter_grows_and_shrinks_and_delete_records_drains(cli_broker, admin):
    t = _topic("cli-alter")
    assert topics(cli_broker.bootstrap, "create", t, "-p", "2").returncode == 0
    proc = topics(cli_broker.bootstrap, "alter", t, "--partitions", "4")
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        0, f"altered topic {t}: partitions 2 -> 4; created partitions 2, 3\n", "")
    producer = KafkaProducer(bootstrap_servers=cli_broker.bootstrap)
    for p in (2, 3):
        for _ in range(3):
            producer.send(t, b"v", partition=p).get(timeout=WAIT_S)
    producer.close()

    proc = topics(cli_broker.bootstrap, "alter", t, "--partitions", "2")
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == (f"altered topic {t}: partitions 4 -> 2; "
                           "marked for deletion partitions 2, 3 (removed once drained)\n")
    # Marked partitions hold records: they stay (readable) until drained.
    head, parts = describe_lines(topics(cli_broker.bootstrap, "describe", t).stdout)
    assert [p["Partition"] for p in parts] == ["0", "1", "2", "3"]

    proc = topics(cli_broker.bootstrap, "delete-records", f"{t}:2:-1", f"{t}:3:1")
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == f"{t}:2: low watermark 3\n{t}:3: low watermark 1\n"
    proc = topics(cli_broker.bootstrap, "delete-records", f"{t}:3:3")
    assert proc.stdout == f"{t}:3: low watermark 3\n"
    # The controller's drain task removes both.
    wait_until(lambda: len(admin.describe_topics([t])[0]["partitions"]) == 2, message="partitions 2, 3 removed")
    proc = topics(cli_broker.bootstrap, "alter", t, "--partitions", "3")
    assert (proc.returncode, proc.stdout) == (0, f"altered topic {t}: partitions 2 -> 3; created partitions 2\n")


@pytest.mark.parametrize("count, message", [
    (3, "Topic already has 3 partitions."),
    (1, "initial_partition_count"),
    (5, "marked for deletion"),
], ids=["same-count", "below-initial", "grow-while-marked"])
def test_alter_refused(cli_broker, admin, count, message):
    t = _topic("cli-alter-refused")
    assert topics(cli_broker.bootstrap, "create", t, "-p", "2").returncode == 0
    assert topics(cli_broker.bootstrap, "alter", t, "-p", "4").returncode == 0
    producer = KafkaProducer(bootstrap_servers=cli_broker.bootstrap)
    producer.send(t, b"v", partition=3).get(timeout=WAIT_S)  # so partition 3 is not drained
    producer.close()
    assert topics(cli_broker.bootstrap, "alter", t, "-p", "3").returncode == 0
    proc = topics(cli_broker.bootstrap, "alter", t, "-p", str(count))
    assert proc.returncode != 0
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"refka topics: {t}: INVALID_PARTITIONS ")
    assert message in proc.stderr


def test_delete_records_refused(cli_broker, admin):
    t = _topic("cli-delrec")
    assert topics(cli_broker.bootstrap, "create", t, "-p", "1").returncode == 0
    proc = topics(cli_broker.bootstrap, "delete-records", f"{t}:0:5")
    assert proc.returncode != 0
    assert proc.stderr.strip() == f"refka topics: {t}:0: OFFSET_OUT_OF_RANGE"
    proc = topics(cli_broker.bootstrap, "delete-records", f"{t}:7:0")
    assert proc.stderr.strip() == f"refka topics: {t}:7: UNKNOWN_TOPIC_OR_PARTITION"
    proc = topics(cli_broker.bootstrap, "delete-records", f"{t}-0")
    assert proc.returncode == 2 and "TOPIC:PARTITION:OFFSET" in proc.stderr


def test_bootstrap_server_after_the_subcommand_json_output_and_help_examples(cli_broker):
    t = _topic("cli-b")
    proc = subprocess.run([sys.executable, "-m", "refka", "topics", "create", t, "-p", "2", "-b",
                           cli_broker.bootstrap], capture_output=True, text=True, timeout=WAIT_S)
    assert (proc.returncode, proc.stdout) == (0, f"created topic {t}\n"), proc.stderr
    proc = subprocess.run([sys.executable, "-m", "refka", "topics", "describe", t, "--json",
                           "--bootstrap-server", cli_broker.bootstrap], capture_output=True, text=True, timeout=WAIT_S)
    assert proc.returncode == 0, proc.stderr
    (d,) = json.loads(proc.stdout)
    assert d["topic"] == t and [p["partition"] for p in d["partitions"]] == [0, 1]
    assert all(p["leader"] == 0 and p["isr"] == [0] for p in d["partitions"])
    listed = subprocess.run([sys.executable, "-m", "refka", "topics", "list", "--json", "-b", cli_broker.bootstrap],
                            capture_output=True, text=True, timeout=WAIT_S)
    assert t in json.loads(listed.stdout)
    # the one after the subcommand wins over the one before it
    wrong = f"127.0.0.1:{free_port_block()}"
    proc = topics(wrong, "list", "-b", cli_broker.bootstrap)
    assert proc.returncode == 0 and t in proc.stdout.splitlines()
    for action in ("create", "list", "describe", "delete", "alter", "delete-records"):
        helped = subprocess.run([sys.executable, "-m", "refka", "topics", action, "--help"],
                                capture_output=True, text=True, timeout=WAIT_S)
        assert helped.returncode == 0 and "example: refka topics" in helped.stdout, action
