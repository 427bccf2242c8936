"""Apache Kafka's Java client, kafka-clients 3.9.1 and 4.1.1, against refka.

The programs of ``tests/java/`` (each one file, its header says what it does) run with the
JDK's source launcher on the jars ``make java-clients`` copies into
``.cache/java/kafka-clients-<version>/``, and print JSON of what they did and what the client
answered. The tests here assert on that, and look at the other side with clients and oracles
that are not Java: confluent-kafka reads the records back and reads the group's commits,
refka's wire client reads the batches the broker stores, and refka's recordings (admin API)
say which broker each request went to and what it was answered.

- ``Produce.java``: acks 0, 1 and all, the idempotent producer, every codec, headers.
- ``Consume.java``: assign, seek, offsetsForTimes, commitSync and committed.
- ``Group.java``: two members of a classic group, eager (range) then cooperative-sticky; then
  ``group.protocol=consumer`` (KIP-848), which refka does not serve.
- ``Admin.java``: the AdminClient's topic, config, partition, record, group, reassignment and
  election calls, with the refusals Kafka gives.
- ``Failover.java``: a producer and a consumer that keep going while the test moves the
  partition's leader with every broker's Metadata frozen, so only KIP-951's hints can tell
  them where it went.

One ``refka serve --brokers 3 --memory --admin-port`` for the module; each test runs once per
client version, and skips, naming ``make java-clients``, when that version's jars are missing.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition
from prometheus_client.parser import text_string_to_metric_families

from refka.client.connection import connect
from refka.protocol.records import Compression
from tests.brokers import BrokerProcess, admin_call, free_port_block
from tests.integration.cluster_helpers import metadata, partition_metadata
from tests.integration.confluent_helpers import (
    Rec,
    create_topic,
    produce,
    producer,
    read_partition,
    served_batches,
    wait_for_high_watermark,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
JAVA_DIR = ROOT / "tests" / "java"
VERSIONS = ("3.9.1", "4.1.1")
WAIT_S = 180  # only against a hang of a Java program
# Short-lived JVMs: C1 only and the serial collector start faster and use less CPU; slf4j-simple at WARN.
JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]
TIMEOUT = 60.0


# -- the Java client and the cluster --------------------------------------------------------


class JavaClient:
    """One kafka-clients version: runs a program of tests/java/ on its jars."""

    def __init__(self, version: str, jars: Path) -> None:
        self.version = version
        self.jars = jars
        self.tag = version.replace(".", "")  # for topic and group names

    def command(self, program: str, *args: str) -> list[str]:
        return ["java", *JVM_FLAGS, "-cp", f"{self.jars}/*", str(JAVA_DIR / program), *args]

    def run(self, program: str, *args: str) -> dict[str, Any]:
        """The JSON object the program printed last; it must exit 0."""
        proc = subprocess.run(self.command(program, *args), capture_output=True, text=True, timeout=WAIT_S,
                              cwd=ROOT)
        assert proc.returncode == 0, f"{program} exited {proc.returncode}:\n{proc.stderr[-5000:]}"
        out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        assert out["client_version"] == self.version, "the wrong kafka-clients jar is on the class path"
        return out


def _jdk_missing() -> str | None:
    if shutil.which("java") is None:
        return "no java on PATH (a JDK, e.g. Debian's default-jdk-headless)"
    modules = subprocess.run(["java", "--list-modules"], capture_output=True, text=True, timeout=60).stdout
    if "jdk.compiler" not in modules:
        return "java has no jdk.compiler module: the source launcher needs a JDK, not a JRE (default-jdk-headless)"
    return None


@pytest.fixture(scope="module", params=VERSIONS)
def java(request) -> JavaClient:
    version = request.param
    reason = _jdk_missing()
    if reason:
        pytest.skip(reason)
    jars = ROOT / ".cache" / "java" / f"kafka-clients-{version}"
    if not (jars / ".refka-installed").exists() or not (jars / f"kafka-clients-{version}.jar").exists():
        pytest.skip(f"no kafka-clients {version} jars in {jars.relative_to(ROOT)}: run `make java-clients`")
    return JavaClient(version, jars)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three brokers in one ``refka serve`` process, with the admin API; rebalances start at
    once (no initial delay) and each connection's recording keeps every request of a test."""
    admin_port = free_port_block()
    b = BrokerProcess(tmp_path_factory.mktemp("java") / "data", brokers=3, memory=True, overrides={
        "auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0",
        "refka.recording.ring.size": "50000"}, extra_args=["--admin-port", str(admin_port)]).start()
    try:
        yield SimpleNamespace(bootstrap=b.bootstrap, ports=[b.port + i for i in range(3)],  # type: ignore[operator]
                              url=f"http://127.0.0.1:{admin_port}")
    finally:
        b.stop()


def name(java: JavaClient, what: str) -> str:
    return f"java{java.tag}-{what}-{uuid.uuid4().hex[:6]}"


def b64(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


def get(cluster: SimpleNamespace, path: str) -> str:
    with urllib.request.urlopen(cluster.url + path, timeout=TIMEOUT) as r:
        return r.read().decode()  # type: ignore[no-any-return]


def recordings(cluster: SimpleNamespace, client_id: str) -> list[dict[str, Any]]:
    """Every request of that client id the brokers recorded (admin API), oldest first per connection."""
    return [json.loads(line) for line in get(cluster, f"/api/recordings?client_id={client_id}").splitlines()]


def served_api_keys(bootstrap: str) -> set[int]:
    """The API keys a broker's ApiVersions answer lists."""

    async def go() -> set[int]:
        conn = await connect(bootstrap, "java-client-test")
        try:
            return set(conn.versions)
        finally:
            await conn.close()

    return asyncio.run(asyncio.wait_for(go(), TIMEOUT))


def leader_address(cluster: SimpleNamespace, topic: str, partition: int) -> str:
    leader = partition_metadata(cluster.bootstrap, topic)[partition].leader_id
    return f"127.0.0.1:{cluster.ports[leader]}"


# -- the producer ---------------------------------------------------------------------------

CASES = ["acks=0", "acks=1", "acks=all", "idempotent", "gzip", "snappy", "lz4", "zstd", "headers"]
CODECS = {"gzip": Compression.GZIP, "snappy": Compression.SNAPPY, "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


@pytest.fixture(scope="module")
def produced(java, cluster):
    topic = name(java, "produce")
    create_topic(cluster.bootstrap, topic, partitions=len(CASES))
    return topic, java.run("Produce.java", cluster.bootstrap, topic)


def test_every_producer_setting_is_acknowledged_and_read_back_byte_for_byte(java, cluster, produced):
    topic, out = produced
    assert [c["name"] for c in out["cases"]] == CASES
    for c in out["cases"]:
        p, sent = c["partition"], c["records"]
        assert c["errors"] == [], c
        assert [r["partition"] for r in sent] == [p] * len(sent)
        # acks=0: no answer, so no offset; every other case: 0, 1, 2, ... in send order.
        assert [r["offset"] for r in sent] == ([None] * len(sent) if c["name"] == "acks=0" else list(range(len(sent))))
        assert [r["reported_timestamp"] for r in sent] == [r["timestamp"] for r in sent]
        wait_for_high_watermark(cluster.bootstrap, topic, p, len(sent))
        got = read_partition(cluster.bootstrap, topic, p)
        assert [(m.offset(), m.key(), m.value(), m.headers() or [], m.timestamp()) for m in got] == [
            (i, b64(r["key"]), b64(r["value"]), [(h, b64(v)) for h, v in r["headers"]],
             (TIMESTAMP_CREATE_TIME, r["timestamp"])) for i, r in enumerate(sent)], c["name"]
    headers = out["cases"][CASES.index("headers")]["records"][0]["headers"]
    assert [(h, b64(v)) for h, v in headers] == [("trace", b"id-0"), ("trace", b"again"), ("nullable", None),
                                                 ("empty", b""), ("bin", b"\x00\x01\x80\xff"), ("clé", "été".encode())]


def test_the_broker_stores_each_codec_and_the_idempotent_producers_sequences(java, cluster, produced):
    topic, out = produced
    for c in out["cases"]:
        p, n = c["partition"], len(c["records"])
        batches = served_batches(leader_address(cluster, topic, p), topic, p)
        assert sum(b.records_count for b in batches) == n
        assert {b.compression for b in batches} == {CODECS.get(c["name"], Compression.NONE)}, c["name"]
        if c["settings"].get("enable.idempotence") == "false":
            assert {(b.producer_id, b.base_sequence) for b in batches} == {(-1, -1)}, c["name"]
    (idempotent,) = [c for c in out["cases"] if c["name"] == "idempotent"]
    batches = served_batches(leader_address(cluster, topic, idempotent["partition"]), topic, idempotent["partition"])
    assert len({(b.producer_id, b.producer_epoch) for b in batches}) == 1 and batches[0].producer_id >= 0
    # Each batch's sequence follows the previous batch's records (InitProducerId gave the id).
    assert [b.base_sequence for b in batches] == [b.base_offset for b in batches]


# -- the consumer: assign, seek, offsetsForTimes, commits -----------------------------------


def test_assign_seek_offsets_for_times_and_commits(java, cluster):
    topic, group = name(java, "consume"), name(java, "consume-group")
    create_topic(cluster.bootstrap, topic, partitions=2)
    base = int(time.time() * 1000) - 60_000  # recent: an old timestamp is the retention's to delete
    sent = {p: [Rec(b"k%d-%d" % (p, j), b"v%d-%d" % (p, j), [("h", b"%d" % j)], base + 1000 * j) for j in range(10)]
            for p in (0, 1)}
    pr = producer(cluster.bootstrap)
    for p, recs in sent.items():
        produce(pr, topic, recs, partition=p)
    queries = [base + 3500, base + 3000, base - 1, base + 9000]
    out = java.run("Consume.java", cluster.bootstrap, topic, group, "20", *map(str, queries))

    epochs = {p: m.leader_epoch for p, m in partition_metadata(cluster.bootstrap, topic).items()}

    def as_sent(records: list[dict]) -> dict[int, list[tuple]]:
        by: dict[int, list[tuple]] = {}
        for r in records:
            assert r["timestamp_type"] == "CreateTime" and r["leader_epoch"] == epochs[r["partition"]]
            by.setdefault(r["partition"], []).append(
                (r["offset"], b64(r["key"]), b64(r["value"]), [(h, b64(v)) for h, v in r["headers"]], r["timestamp"]))
        return by

    expected = {p: [(j, r.key, r.value, r.headers, r.timestamp) for j, r in enumerate(recs)] for p, recs in sent.items()}
    assert as_sent(out["records"]) == expected
    assert out["beginning_offsets"] == {"0": 0, "1": 0} and out["end_offsets"] == {"0": 10, "1": 10}
    # The first offset whose timestamp is at or after the one asked; none after the last.
    assert out["offsets_for_times_p0"] == [[4, base + 4000], [3, base + 3000], [0, base], [9, base + 9000]]
    assert out["offsets_for_future_time_p1"] is None
    assert as_sent(out["after_seek_p1"]) == {1: expected[1][5:]}
    assert out["committed"] == {"0": [7, "seven"], "1": [3, "three"]}
    assert out["positions_from_commits"] == {"0": 7, "1": 3}
    assert as_sent(out["records_from_commits"]) == {0: expected[0][7:], 1: expected[1][3:]}

    # Read back by kafka-python (librdkafka reads past the end of a committed metadata string
    # that has no NUL, confluentinc/librdkafka#4649).
    k = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        committed = [k.committed(KTopicPartition(topic, p), metadata=True) for p in (0, 1)]
    finally:
        k.close()
    assert [(c.offset, c.metadata) for c in committed] == [(7, "seven"), (3, "three")]


# -- groups: the classic protocol's two assignors, and KIP-848's protocol -------------------


@pytest.fixture(scope="module")
def groups(java, cluster):
    prefix = name(java, "group")
    for strategy in ("range", "cooperative-sticky"):
        create_topic(cluster.bootstrap, f"{prefix}-{strategy}", partitions=4)
    return prefix, java.run("Group.java", cluster.bootstrap, prefix)


def calls(events: list[dict], member: str) -> list[tuple[str, list[int]]]:
    """A member's rebalance listener calls until the partitions were shared."""
    until = next(i for i, e in enumerate(events) if e["member"] == "main")
    assert events[until]["call"] == "shared", events
    return [(e["call"], e["partitions"]) for e in events[:until] if e["member"] == member]


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_two_members_share_the_partitions_and_commit(java, cluster, groups, strategy):
    prefix, out = groups
    run = out[strategy]
    topic = group = f"{prefix}-{strategy}"
    assert run["failures"] == {"a": None, "b": None}
    assert run["a_alone_owned"] == [0, 1, 2, 3]
    owned_a, owned_b = run["owned"]["a"], run["owned"]["b"]
    assert owned_a and owned_b and sorted(owned_a + owned_b) == [0, 1, 2, 3]

    a, b = calls(run["events"], "a"), calls(run["events"], "b")
    if strategy == "range":
        # Eager: a gives up everything when b joins, then gets its share back.
        assert a == [("assigned", [0, 1, 2, 3]), ("revoked", [0, 1, 2, 3]), ("assigned", owned_a)]
        assert b == [("assigned", owned_b)]
    else:
        # Incremental: a revokes only what moves to b, and keeps the rest throughout; b gets it
        # in the second rebalance.
        assert a[0] == ("assigned", [0, 1, 2, 3])
        assert [p for call, p in a if call == "revoked"] == [owned_b]
        assert all(p == [] for call, p in a[1:] if call == "assigned")
        assert [p for call, p in b if p] == [owned_b] and all(call == "assigned" for call, _ in b)

    for member, owned in (("a", owned_a), ("b", owned_b)):
        got = sorted(tuple(r) for r in run["records"][member])
        assert got == [(p, j, f"{group}-{p}-{j}") for p in owned for j in range(8)], member

    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        committed = c.committed([TopicPartition(topic, p) for p in range(4)], timeout=TIMEOUT)
    finally:
        c.close()
    assert [(tp.partition, tp.offset) for tp in committed] == [(p, 8) for p in range(4)]


KIP848_MESSAGES = {
    "3.9.1": "The node does not support CONSUMER_GROUP_HEARTBEAT",
    "4.1.1": "The cluster does not support the new CONSUMER group protocol. Set group.protocol=classic on the "
             "consumer configs to revert to the CLASSIC protocol until the cluster is upgraded.",
}


def test_group_protocol_consumer_fails_at_the_first_poll_without_reaching_the_broker(java, cluster, groups):
    """KIP-848's protocol needs ConsumerGroupHeartbeat (key 68), which refka's ApiVersions does
    not list: the client refuses to send it and poll throws UnsupportedVersionException. refka
    never sees the request, so it neither logs nor counts it as unserved."""
    prefix, out = groups
    failed = out["group.protocol=consumer"]
    assert (failed.get("exception"), failed.get("message")) == (
        "org.apache.kafka.common.errors.UnsupportedVersionException", KIP848_MESSAGES[java.version]), failed
    sent = recordings(cluster, f"{prefix}-kip848")
    assert sent and {r["software_name"] for r in sent} == {"apache-kafka-java"}
    assert {r["software_version"] for r in sent} == {java.version}
    assert {r["api"] for r in sent} <= {"ApiVersions", "Metadata", "FindCoordinator"}
    assert 68 not in {r["api_key"] for r in sent}
    keys = served_api_keys(cluster.bootstrap)  # what the client saw in ApiVersions: JoinGroup, not 68
    assert 11 in keys and 68 not in keys
    families = {f.name: f for f in text_string_to_metric_families(get(cluster, "/metrics"))}
    assert not [s for s in families["refka_unserved_requests"].samples if s.labels["client_id"] == f"{prefix}-kip848"]


# -- the AdminClient ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def admin_run(java, cluster):
    prefix = name(java, "admin")
    return prefix, java.run("Admin.java", cluster.bootstrap, prefix)


def ok(out: dict, step: str) -> Any:
    assert "ok" in out[step], (step, out[step])
    return out[step]["ok"]


def refused(out: dict, step: str) -> str:
    """The simple class name of the exception a step's call raised."""
    assert "error" in out[step], (step, out[step])
    return out[step]["error"]  # type: ignore[no-any-return]


def java_uuid(raw: bytes) -> str:
    """A topic id as Java's Uuid.toString() writes it: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_admin_creates_lists_and_describes_topics(cluster, admin_run):
    prefix, out = admin_run
    a, b = f"{prefix}-a", f"{prefix}-b"
    (md_b,) = metadata(cluster.ports[0], b).topics
    assert ok(out, "describe_cluster") == {"cluster_id": metadata(cluster.ports[0]).cluster_id,
                                           "controller": metadata(cluster.ports[0]).controller_id,
                                           "nodes": [0, 1, 2]}
    created = ok(out, "create_topics")
    assert {k: v for k, v in created.items() if k != "a_topic_id"} == {
        "a_partitions": 2, "a_replication_factor": 2, "a_retention_ms": "3600000", "b_partitions": 2}
    assert refused(out, "create_existing_topic") == "TopicExistsException"
    assert ok(out, "list_topics") == [a, b]
    described = ok(out, "describe_topics")
    assert described[a]["topic_id"] == created["a_topic_id"]
    assert described[b] == {
        "internal": False, "topic_id": java_uuid(md_b.topic_id),
        "partitions": [{"partition": 0, "leader": 0, "replicas": [0, 1]}, {"partition": 1, "leader": 1, "replicas": [1, 2]}],
        "isr": [[0, 1], [1, 2]]}
    for p, part in enumerate(described[a]["partitions"]):
        assert part["partition"] == p and len(set(part["replicas"])) == 2
        assert part["leader"] == part["replicas"][0] and described[a]["isr"][p] == sorted(part["replicas"])


def test_admin_describes_and_alters_topic_configs(admin_run):
    _prefix, out = admin_run

    def entry(value: str, source: str) -> dict:
        return {"value": value, "source": source, "read_only": False, "sensitive": False}

    assert ok(out, "describe_configs") == {
        "cleanup.policy": entry("delete", "DEFAULT_CONFIG"), "max.message.bytes": entry("1048588", "DEFAULT_CONFIG"),
        "min.insync.replicas": entry("1", "DEFAULT_CONFIG"), "retention.ms": entry("3600000", "DYNAMIC_TOPIC_CONFIG")}
    # SET, DELETE (back to the default) and APPEND (to the default list) in one call.
    assert ok(out, "incremental_alter_configs") == {
        "cleanup.policy": entry("delete,compact", "DYNAMIC_TOPIC_CONFIG"),
        "max.message.bytes": entry("2000000", "DYNAMIC_TOPIC_CONFIG"),
        "min.insync.replicas": entry("1", "DEFAULT_CONFIG"), "retention.ms": entry("604800000", "DEFAULT_CONFIG")}
    assert refused(out, "incremental_alter_configs_bad_value") == "InvalidConfigurationException"


def test_admin_grows_partitions_and_deletes_records(admin_run):
    _prefix, out = admin_run
    assert ok(out, "create_partitions") == 4
    assert refused(out, "create_partitions_below_the_initial_count") == "InvalidPartitionsException"
    assert ok(out, "delete_records") == {"low_watermark": 4, "earliest": 4, "latest": 10}
    assert refused(out, "delete_records_past_the_end") == "OffsetOutOfRangeException"
    # Fewer partitions than the topic has, but not fewer than it was created with: Kafka
    # answers INVALID_PARTITIONS; refka shrinks the topic (KIP-253, README "KIP-253 in refka").
    assert ok(out, "create_partitions_fewer") is None


def test_admin_lists_describes_alters_and_deletes_a_consumer_group(cluster, admin_run):
    prefix, out = admin_run
    a, group = f"{prefix}-a", f"{prefix}-g"
    assert ok(out, "join_and_commit") == [0, 1, 2, 3]
    assert ok(out, "list_consumer_groups") == {group: {"simple": False, "state": "Stable"}}
    stable = ok(out, "describe_consumer_groups")
    assert stable["coordinator"] in (0, 1, 2)
    assert stable == {"state": "Stable", "assignor": "range", "simple": False, "coordinator": stable["coordinator"],
                      "members": [{"client_id": f"{prefix}-member", "partitions": [f"{a}-{p}" for p in range(4)]}]}
    assert ok(out, "list_consumer_group_offsets") == {f"{a}-0": [6, "six"]}
    # With a member: Kafka refuses to delete the group, and refuses an offset commit without
    # a member id or generation (the admin's) unless the group is empty.
    assert refused(out, "delete_consumer_groups_with_a_member") == "GroupNotEmptyException"
    assert refused(out, "alter_consumer_group_offsets_with_a_member") == "UnknownMemberIdException"
    assert ok(out, "describe_consumer_groups_empty") == {
        "state": "Empty", "assignor": "", "simple": False, "coordinator": stable["coordinator"], "members": []}
    assert ok(out, "alter_consumer_group_offsets") == {f"{a}-0": [2, ""], f"{a}-1": [1, ""]}
    # Deleted: no longer listed; described as Kafka describes an unknown group (Dead, no protocol type).
    assert ok(out, "delete_consumer_groups") == {"listed": {}, "described": {
        "state": "Dead", "assignor": "", "simple": True, "coordinator": stable["coordinator"], "members": []}}


def test_admin_reassigns_replicas_and_elects_preferred_leaders(cluster, admin_run):
    prefix, out = admin_run
    b = f"{prefix}-b"
    moved = ok(out, "alter_partition_reassignments")
    # b-0 [0,1] -> [1,0]: the same replicas, broker 0 still leads; b-1 [1,2] -> [2,0]: broker 1
    # left, so broker 2 leads. Nothing is still moving afterwards.
    assert moved["described"]["partitions"] == [{"partition": 0, "leader": 0, "replicas": [1, 0]},
                                                {"partition": 1, "leader": 2, "replicas": [2, 0]}]
    assert moved["described"]["isr"] == [[0, 1], [0, 2]] and moved["ongoing_after"] == []
    assert refused(out, "alter_partition_reassignments_unknown_broker") == "InvalidReplicaAssignmentException"
    assert refused(out, "cancel_partition_reassignment_none_ongoing") == "NoReassignmentInProgressException"
    elected = ok(out, "elect_leaders")
    assert elected["results"] == {f"{b}-0": "elected", f"{b}-1": "ElectionNotNeededException"}
    assert elected["described"]["partitions"] == [{"partition": 0, "leader": 1, "replicas": [1, 0]},
                                                  {"partition": 1, "leader": 2, "replicas": [2, 0]}]
    md = {p.partition_index: p for p in metadata(cluster.ports[2], b).topics[0].partitions}
    assert [(md[p].leader_id, md[p].replica_nodes) for p in (0, 1)] == [(1, [1, 0]), (2, [2, 0])]


def test_admin_deletes_a_topic(cluster, admin_run):
    prefix, out = admin_run
    assert ok(out, "delete_topics") == [f"{prefix}-b"]
    assert refused(out, "describe_deleted_topic") == "UnknownTopicOrPartitionException"
    assert refused(out, "delete_deleted_topic") == "UnknownTopicOrPartitionException"
    assert metadata(cluster.ports[1], f"{prefix}-a").topics[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION


# -- failover: a leader move that only KIP-951's hints reveal -------------------------------


class Running:
    """A Java program in the background: its JSON lines as they come, its stderr kept."""

    def __init__(self, command: list[str]) -> None:
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, cwd=ROOT)
        self.lines: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self._readers = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for t in self._readers:
            t.start()

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.append(json.loads(line))

    def _read_stderr(self) -> None:
        self.stderr.extend(self.proc.stderr)  # type: ignore[arg-type]

    def progress(self) -> dict[str, Any]:
        return self.lines[-1] if self.lines else {"acked": 0, "consumed": 0}

    def stop(self) -> dict[str, Any]:
        """Says stop; the program's last JSON object once it exited 0."""
        self.proc.stdin.write("stop\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        self.proc.wait(WAIT_S)
        for t in self._readers:
            t.join(10)
        assert self.proc.returncode == 0, "".join(self.stderr)[-5000:]
        return self.lines[-1]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def test_producer_and_consumer_follow_a_leader_move_from_kip951_hints_alone(java, cluster):
    """Broker 0 leads partition 0 of replicas [2, 0, 1] while the Java producer and consumer
    run; every broker's Metadata is frozen; a preferred election makes broker 2 the leader (one
    leader epoch later). A Metadata answer names broker 0 still, so only the hints of
    NOT_LEADER_OR_FOLLOWER answers (Produce v10+, Fetch v16) can send the clients to broker 2.

    The replicas are reordered before the clients start: a reordering alone bumps the leader
    epoch (broker 0 still leading), and a consumer that learnt that epoch from a
    FENCED_LEADER_EPOCH hint just before the election would validate its position with
    OffsetForLeaderEpoch at broker 0, whose answers carry no hint (Kafka's as well): with frozen
    metadata it could not recover, which would be a limit of KIP-951, not of the broker."""
    topic = name(java, "failover")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # alive until the answer
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[0, 1, 2]])])[topic].result(TIMEOUT)
    status, answer = admin_call(cluster.url, f"/api/topics/{topic}/reassign", "POST", {"assignments": {"0": [2, 0, 1]}})
    assert status == 200, answer

    def led_by_0_everywhere() -> bool:
        parts = [metadata(port, topic).topics[0].partitions[0] for port in cluster.ports]
        return all((p.leader_id, p.replica_nodes, sorted(p.isr_nodes)) == (0, [2, 0, 1], [0, 1, 2]) for p in parts) \
            and len({p.leader_epoch for p in parts}) == 1

    wait_until(led_by_0_everywhere, message="broker 0 leading replicas [2, 0, 1] on every broker", ignoring=(Exception,))
    before = metadata(cluster.ports[0], topic).topics[0].partitions[0]

    running = Running(java.command("Failover.java", cluster.bootstrap, topic))
    frozen: list[int] = []
    try:
        wait_until(lambda: running.progress()["acked"] >= 100 and running.progress()["consumed"] >= 100,
                   timeout=TIMEOUT, message=lambda: f"records before the election; {running.stderr[-5:]}")
        for broker in range(3):
            assert admin_call(cluster.url, f"/api/brokers/{broker}/metadata/freeze", "POST")[0] == 200
            frozen.append(broker)
        status, elected = admin_call(cluster.url, f"/api/topics/{topic}/elect-preferred", "POST", {"partitions": [0]})
        assert (status, elected) == (200, {"results": {"0": "elected"}})
        at_move = running.progress()["acked"]
        wait_until(lambda: running.progress()["acked"] >= at_move + 200 and running.progress()["consumed"] >= at_move + 200,
                   timeout=TIMEOUT, message=lambda: f"records after the election; {running.stderr[-5:]}")
        # Still frozen: a Metadata request, to any broker, would have named broker 0 at the old epoch.
        for port in cluster.ports:
            p = metadata(port, topic).topics[0].partitions[0]
            assert (p.leader_id, p.leader_epoch) == (0, before.leader_epoch)
        out = running.stop()
    finally:
        running.kill()
        for broker in frozen:
            admin_call(cluster.url, f"/api/brokers/{broker}/metadata/thaw", "POST")
    after = metadata(cluster.ports[0], topic).topics[0].partitions[0]
    assert (after.leader_id, after.leader_epoch) == (2, before.leader_epoch + 1)

    # Every record acknowledged, once, in the order sent; the consumer read them all in that order.
    assert out["errors"] == [] and out["sent"] > at_move + 200
    assert out["acked_offsets"] == list(range(out["sent"]))
    assert out["consumed"] == [[i, f"r{i:06d}"] for i in range(out["sent"])]
    assert [m.value() for m in read_partition(cluster.bootstrap, topic)] == [b"r%06d" % i for i in range(out["sent"])]

    # The producer: broker 0 refused what was in flight at the election (Produce v10+ answers
    # name the new leader), then everything went to broker 2 and was acknowledged there; it
    # never went back to broker 0 although every Metadata answer named it: at most one refusal
    # per request in flight (max.in.flight.requests.per.connection, 5).
    produce = [r for r in recordings(cluster, f"{topic}-producer") if r["api"] == "Produce"]
    assert {r["api_version"] for r in produce} <= set(range(10, 12))
    refused_by_0 = [r for r in produce if r["broker"] == 0 and r["error_codes"]]
    assert refused_by_0 and {tuple(r["error_codes"]) for r in refused_by_0} == {("NOT_LEADER_OR_FOLLOWER",)}
    assert len(refused_by_0) <= 5
    assert {r["broker"] for r in produce} == {0, 2}
    assert_led_by_2(produce)

    # The consumer: refused by broker 0 once it no longer led (Fetch v16 answers name the new
    # leader), then fetching from broker 2. (Kafka answers a fetch with an older leader epoch
    # FENCED_LEADER_EPOCH even at a follower; refka NOT_LEADER_OR_FOLLOWER: both carry the hint.)
    fetch = [r for r in recordings(cluster, f"{topic}-consumer") if r["api"] == "Fetch"]
    assert {r["api_version"] for r in fetch} == {16}
    refused_by_0 = [r for r in fetch if r["broker"] == 0 and r["error_codes"]]
    assert refused_by_0 and all(set(r["error_codes"]) <= {"NOT_LEADER_OR_FOLLOWER", "FENCED_LEADER_EPOCH"}
                                for r in refused_by_0)
    assert_led_by_2(fetch)


def assert_led_by_2(requests: list[dict[str, Any]]) -> None:
    """Broker 2 answered requests with no error; any refusal there was of the moment a hint
    can arrive before broker 2 itself learnt it leads (its LeaderAndIsr still on its way)."""
    at_2 = [r for r in requests if r["broker"] == 2]
    assert [r for r in at_2 if r["error_codes"] == []]
    assert {c for r in at_2 for c in r["error_codes"]} <= {"NOT_LEADER_OR_FOLLOWER", "UNKNOWN_LEADER_EPOCH"}
