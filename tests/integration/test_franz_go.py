"""franz-go (github.com/twmb/franz-go v1.22.3, its admin package kadm v1.20.0), the Go
client, against refka.

``tests/go`` is one Go program, ``refka-franz`` (``make go-clients`` builds it into
.cache/bin; this module builds it too when it is missing or older than its sources and
Go is on PATH, and skips, naming the target, when neither). Its subcommands print JSON
lines of what they did and saw:

- ``produce``: records with keys (and a null key), values that are not UTF-8 (and a null
  value), headers with a repeated name, an empty and a null value, explicit timestamps;
  acks=all, idempotent (franz-go's defaults), one codec. confluent-kafka reads them back
  byte for byte, and refka's stored batches carry the codec and franz-go's producer id
  with gap-free sequences.
- ``consume-group``: one member (cooperative-sticky, franz-go's default; a commit after
  each poll). Two share a topic, every record is read once, the commits are what
  confluent-kafka's OffsetFetch then answers, and a third member resumes from them.
- ``admin``: a kadm round trip (topics, configs, partitions, groups, offsets, deleted
  records, deletions), each step's answer checked against what Kafka answers.

One 3-broker refka (``refka serve --brokers 3 --memory``) for the module.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import threading
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from refka.client.connection import connect
from refka.protocol import ErrorCode
from refka.protocol.messages.fetch import Fetch
from refka.protocol.records import Compression
from tests.brokers import BrokerProcess
from tests.integration.cluster_helpers import FAST, metadata, partition_metadata
from tests.integration.confluent_helpers import read_partition, served_batches
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GO_DIR = ROOT / "tests" / "go"
BINARY = ROOT / ".cache" / "bin" / "refka-franz"
TIMEOUT = 60.0  # against hangs only
CODECS = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
          "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


@pytest.fixture(scope="module")
def franz() -> str:
    """The refka-franz binary, built (as `make go-clients` does) when missing or stale."""
    sources = [*GO_DIR.glob("*.go"), GO_DIR / "go.mod", GO_DIR / "go.sum"]
    stale = not BINARY.exists() or BINARY.stat().st_mtime < max(s.stat().st_mtime for s in sources)
    go = shutil.which("go")
    if stale and go is not None:
        BINARY.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([go, "build", "-buildvcs=false", "-o", str(BINARY), "."], cwd=GO_DIR,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"go build in {GO_DIR} failed:\n{done.stderr}"
    if not BINARY.exists():
        pytest.skip(f"no {BINARY.relative_to(ROOT)}: `make go-clients` builds it from tests/go (needs Go)")
    return str(BINARY)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("refka-franz") / "data", brokers=3, memory=True,
                      overrides={**FAST, "group.initial.rebalance.delay.ms": "0",
                                 "offsets.topic.replication.factor": "3",
                                 "partition.deletion.check.interval.ms": "200"}).start()
    yield b
    b.stop()


def unique(prefix: str) -> str:
    return f"franz-{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(topic, partitions, 3, config=config or {})], operation_timeout=TIMEOUT)[topic].result(
        TIMEOUT)


def run(franz: str, *args: str) -> list[dict]:
    proc = subprocess.run([franz, *args, "--timeout", f"{TIMEOUT:.0f}s"], capture_output=True, text=True,
                          timeout=TIMEOUT + 30)
    assert proc.returncode == 0, f"refka-franz {args[0]} exited {proc.returncode}:\n{proc.stderr}"
    return [json.loads(line) for line in proc.stdout.splitlines()]


def b64(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


def produce(franz: str, bootstrap: str, topic: str, codec: str, count: int, base_ms: int = 0) -> tuple[list, dict]:
    """(the produced records' lines in the order produced, the producer id line); every
    record acknowledged."""
    lines = run(franz, "produce", "--brokers", bootstrap, "--topic", topic, "--codec", codec,
                "--count", str(count), "--base-timestamp-ms", str(base_ms))
    # In the order produced (franz-go reports in the order acknowledged): by the "seq" header.
    records = sorted((x for x in lines if x["event"] == "produced"), key=lambda r: int(b64(r["headers"][0]["value"])))
    (pid,) = [x for x in lines if x["event"] == "producer_id"]
    assert len(records) == count
    assert [r["error"] for r in records] == [None] * count
    return records, pid


def leader_addresses(bootstrap: str, topic: str) -> dict[int, str]:
    """partition -> its leader's host:port."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=TIMEOUT)
    brokers = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
    return {p: brokers[pm.leader] for p, pm in md.topics[topic].partitions.items()}


# -- produce: every codec, read back by confluent-kafka

@pytest.mark.parametrize("codec", list(CODECS))
def test_franz_go_records_read_back_by_confluent_kafka(franz, cluster, codec):
    topic = unique(f"produce-{codec}")
    create_topic(cluster.bootstrap, topic, 3)
    base_ms = 1_700_000_000_000
    records, pid = produce(franz, cluster.bootstrap, topic, codec, 30, base_ms)
    assert pid["error"] is None and pid["producer_id"] >= 0 and pid["producer_epoch"] >= 0  # idempotent

    by_partition: dict[int, list[dict]] = {}
    for r in records:
        by_partition.setdefault(r["partition"], []).append(r)
    assert len(by_partition) > 1, "franz-go's partitioner put every key on one partition"
    leaders = leader_addresses(cluster.bootstrap, topic)
    for p, sent in by_partition.items():
        # A partition's records are acknowledged at consecutive offsets from 0, in order.
        assert [r["offset"] for r in sent] == list(range(len(sent))), p
        got = read_partition(cluster.bootstrap, topic, p)
        assert [(m.offset(), m.key(), m.value(), m.headers() or [], m.timestamp()) for m in got] == [
            (r["offset"], b64(r["key"]), b64(r["value"]), [(h["key"], b64(h["value"])) for h in r["headers"]],
             (TIMESTAMP_CREATE_TIME, r["timestamp_ms"]))
            for r in sent]
        # As stored: compressed with the codec asked, under franz-go's producer id, with
        # sequences that run without a gap from 0.
        batches = served_batches(leaders[p], topic, p)
        assert {b.compression for b in batches} == {CODECS[codec]}, p
        assert {(b.producer_id, b.producer_epoch) for b in batches} == {(pid["producer_id"], pid["producer_epoch"])}
        assert [b.base_sequence for b in batches] == [
            sum(b.records_count for b in batches[:i]) for i in range(len(batches))]
    # The records' own shape made it through: a null key, a null value, a null header value.
    assert any(r["key"] is None for r in records) and records[-1]["value"] is None
    assert any(h["value"] is None for r in records for h in r["headers"])


# -- consumer groups

class Member:
    """A ``refka-franz consume-group`` process: its JSON lines, read by a thread as they come.
    It leaves the group when its stdin closes (``stop``) or after ``count`` records."""

    def __init__(self, franz: str, bootstrap: str, topic: str, group: str, name: str, count: int = 0) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            [franz, "consume-group", "--brokers", bootstrap, "--topic", topic, "--group", group, "--name", name,
             "--count", str(count), "--timeout", f"{TIMEOUT:.0f}s"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[dict] = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.lock:
                self.lines.append(json.loads(line))

    def events(self, kind: str) -> list[dict]:
        with self.lock:
            return [x for x in self.lines if x["event"] == kind]

    def owned(self) -> set[int]:
        """Its partitions, as its last assigned, revoked or lost callback left them."""
        with self.lock:
            changes = [x for x in self.lines if x["event"] in ("assigned", "revoked", "lost")]
        return set(changes[-1]["owned"]) if changes else set()

    def read(self) -> list[tuple[int, int]]:
        return [(x["partition"], x["offset"]) for x in self.events("record")]

    def wait(self) -> int:
        code = self.proc.wait(TIMEOUT + 30)
        self.reader.join(TIMEOUT)
        return code

    def stop(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.wait()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read()


def committed(bootstrap: str, group: str) -> dict[int, int]:
    """partition -> the group's committed offset, as confluent-kafka's OffsetFetch answers."""
    a = AdminClient({"bootstrap.servers": bootstrap})
    got = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT)[group]
    return {tp.partition: tp.offset for tp in got.result(TIMEOUT).topic_partitions}


def test_franz_go_group_members_share_partitions_and_commits_are_fetched(franz, cluster):
    topic, group = unique("group"), unique("g")
    partitions = set(range(4))
    create_topic(cluster.bootstrap, topic, len(partitions))
    members = [Member(franz, cluster.bootstrap, topic, group, "a")]
    try:
        wait_until(lambda: members[0].owned() == partitions, message="member a owning every partition")
        members.append(Member(franz, cluster.bootstrap, topic, group, "b"))

        def split() -> tuple[set[int], set[int]] | None:
            a, b = members[0].owned(), members[1].owned()
            return (a, b) if a and b and not a & b and a | b == partitions else None

        owned_a, owned_b = wait_until(split, message=lambda: f"a and b splitting the partitions: "
                                                             f"{members[0].owned()} {members[1].owned()}")
        records, _ = produce(franz, cluster.bootstrap, topic, "zstd", 40)
        sent = {(r["partition"], r["offset"]) for r in records}
        assert {p for p, _ in sent} == partitions, "every partition gets records"
        wait_until(lambda: set(members[0].read()) | set(members[1].read()) >= sent,
                   message="a and b reading every record")
        assert [m.stop() for m in members] == [0, 0], [m.stderr() for m in members]
    finally:
        for m in members:
            m.kill()

    a, b = members
    # Each read only its own partitions, and every record was read once.
    assert {p for p, _ in a.read()} <= owned_a and {p for p, _ in b.read()} <= owned_b
    assert Counter(a.read() + b.read()) == Counter(sent)
    # Cooperative-sticky: a gave up just the partitions b got, and kept the others.
    assert [x["partitions"] for x in a.events("revoked") if x["partitions"]][0] == sorted(owned_b)
    assert a.events("lost") == [] and b.events("lost") == []
    for m in members:
        assert [c["error"] for c in m.events("committed")] == [None] * len(m.events("committed")), m.name
        assert [x["error"] for x in m.events("left")] == [None], m.name
        assert m.events("fetch_error") == [], m.name
    ends = Counter(p for p, _ in sent)
    assert committed(cluster.bootstrap, group) == dict(ends)

    # A new member of the group resumes where the commits are: only later records.
    later, _ = produce(franz, cluster.bootstrap, topic, "lz4", 6)
    c = Member(franz, cluster.bootstrap, topic, group, "c", count=len(later))
    try:
        assert c.wait() == 0, c.stderr()
    finally:
        c.kill()
    assert sorted(c.read()) == sorted((r["partition"], r["offset"]) for r in later)
    assert committed(cluster.bootstrap, group) == dict(ends + Counter(r["partition"] for r in later))


def test_franz_go_member_keeps_consuming_when_kip253_removes_its_partition(franz, cluster):
    """A partition marked for deletion is removed once empty; the member it was assigned to
    keeps fetching it. Its broker's answer is UNKNOWN_TOPIC_OR_PARTITION, as Kafka's for a
    partition of a known topic; UNKNOWN_TOPIC_ID (refka's answer before) tells franz-go the
    topic was re-created, which it raised to the application on every poll."""
    topic, group = unique("kip253"), unique("g")
    create_topic(cluster.bootstrap, topic, 2)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_partitions([NewPartitions(topic, 3)], operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
    m = Member(franz, cluster.bootstrap, topic, group, "m")
    try:
        wait_until(lambda: m.owned() == {0, 1, 2}, message="the member owning all three partitions")
        admin.create_partitions([NewPartitions(topic, 2)], operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
        wait_until(lambda: sorted(partition_metadata(cluster.bootstrap, topic)) == [0, 1],
                   message="partition 2 removed")
        records, _ = produce(franz, cluster.bootstrap, topic, "none", 10)
        sent = {(r["partition"], r["offset"]) for r in records}
        wait_until(lambda: set(m.read()) >= sent, message="the member reading the records produced after")
        assert m.stop() == 0, m.stderr()
    finally:
        m.kill()
    assert m.events("fetch_error") == []


def test_fetch_by_topic_id_of_a_partition_the_topic_lacks_is_unknown_topic_or_partition(cluster):
    """The wire answer behind the test above (KafkaApis.handleFetchRequest: UNKNOWN_TOPIC_ID
    only for an ID that names no topic)."""
    topic = unique("fetch-id")
    create_topic(cluster.bootstrap, topic, 1)
    (t,) = metadata(cluster.port, topic).topics

    async def fetch(topic_id: bytes, partition: int) -> int:
        conn = await connect(cluster.bootstrap, "franz-test-oracle")
        try:
            R = Fetch.Request
            resp = await conn.request(Fetch, R(
                max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_id=0, session_epoch=-1,
                topics=[R.FetchTopic(topic_id=topic_id, partitions=[R.FetchTopic.FetchPartition(
                    partition=partition, fetch_offset=0, partition_max_bytes=1 << 20)])],
                forgotten_topics_data=[]), version=13)
        finally:
            await conn.close()
        ((p,),) = [r.partitions for r in resp.responses]
        return int(p.error_code)

    def answer(topic_id: bytes, partition: int) -> int:
        return int(asyncio.run(asyncio.wait_for(fetch(topic_id, partition), TIMEOUT)))

    assert answer(t.topic_id, 7) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert answer(uuid.uuid4().bytes, 0) == ErrorCode.UNKNOWN_TOPIC_ID


# -- kadm

@pytest.fixture(scope="module")
def kadm_steps(franz, cluster) -> dict[str, dict]:
    """step name -> what `refka-franz admin` printed for it."""
    topic, group = unique("kadm"), unique("g")
    steps = {x["step"]: x for x in run(franz, "admin", "--brokers", cluster.bootstrap, "--topic", topic,
                                       "--group", group)}
    steps["_names"] = {"topic": topic, "group": group}
    return steps


def test_kadm_cluster_and_topic_creation(kadm_steps, cluster):
    s, topic = kadm_steps, kadm_steps["_names"]["topic"]
    assert s["brokers"]["error"] is None
    assert [(b["node_id"], b["host"], b["port"]) for b in s["brokers"]["brokers"]] == [
        (i, "127.0.0.1", cluster.port + i) for i in range(3)]
    assert s["brokers"]["controller"] in (0, 1, 2) and s["brokers"]["cluster_id"]
    created = s["create_topic"]
    assert (created["error"], created["topic"], created["partitions"], created["replication_factor"]) == (
        None, topic, 2, 3)
    assert created["retention_ms"] == {"value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert s["create_topic_again"]["error"] == "TOPIC_ALREADY_EXISTS"
    assert topic in s["list_topics"]["topics"] and "__consumer_offsets" not in s["list_topics"]["topics"]
    described = s["describe_topic"]
    assert (described["error"], described["topic_error"], described["internal"]) == (None, None, False)
    assert described["id"] == created["id"]
    for p in described["partitions"]:
        assert p["error"] is None and sorted(p["replicas"]) == [0, 1, 2] and sorted(p["isr"]) == [0, 1, 2]
        assert p["leader"] == p["replicas"][0]
    assert [p["partition"] for p in described["partitions"]] == [0, 1]


def test_kadm_create_partitions(kadm_steps):
    s = kadm_steps
    assert (s["create_partitions"]["error"], s["create_partitions"]["topic_error"]) == (None, None)
    expanded = s["describe_topic_expanded"]["partitions"]
    assert [p["partition"] for p in expanded] == [0, 1, 2]
    assert all(sorted(p["replicas"]) == [0, 1, 2] and p["leader"] >= 0 for p in expanded)
    # Fewer partitions than the topic has (with refka's KIP-253 deletion off for it): refused, as Kafka does.
    fewer = s["create_partitions_fewer"]
    assert fewer["topic_error"] == "INVALID_PARTITIONS"
    assert "Topic currently has 3 partitions, which is higher than the requested 2." in fewer["message"]


def test_kadm_describe_and_alter_configs(kadm_steps):
    s = kadm_steps

    def config(step: str, name: str) -> tuple[str, str]:
        assert (s[step]["error"], s[step]["resource_error"]) == (None, None), step
        c = s[step]["configs"][name]
        return c["value"], c["source"]

    assert config("describe_configs", "retention.ms") == ("3600000", "DYNAMIC_TOPIC_CONFIG")
    assert config("describe_configs", "cleanup.policy") == ("delete", "DEFAULT_CONFIG")
    assert config("describe_configs", "max.message.bytes") == ("1048588", "DEFAULT_CONFIG")
    # IncrementalAlterConfigs: SET, DELETE (back to the default), APPEND to a list.
    assert (s["alter_configs"]["error"], s["alter_configs"]["resource_error"]) == (None, None)
    assert config("describe_configs_altered", "max.message.bytes") == ("2097152", "DYNAMIC_TOPIC_CONFIG")
    assert config("describe_configs_altered", "retention.ms") == ("604800000", "DEFAULT_CONFIG")
    assert config("describe_configs_altered", "cleanup.policy") == ("delete,compact", "DYNAMIC_TOPIC_CONFIG")
    # SUBTRACT from a list.
    assert config("describe_configs_subtracted", "cleanup.policy") == ("delete", "DYNAMIC_TOPIC_CONFIG")
    # A value of the wrong type and an unknown name: INVALID_CONFIG (LogConfig.validate).
    assert s["alter_configs_bad_value"]["resource_error"] == "INVALID_CONFIG"
    assert s["alter_configs_unknown_name"]["resource_error"] == "INVALID_CONFIG"
    # AlterConfigs replaces the whole set: what it does not name is back to its default.
    assert (s["alter_configs_state"]["error"], s["alter_configs_state"]["resource_error"]) == (None, None)
    assert config("describe_configs_state", "retention.ms") == ("86400000", "DYNAMIC_TOPIC_CONFIG")
    assert config("describe_configs_state", "max.message.bytes") == ("1048588", "DEFAULT_CONFIG")
    assert config("describe_configs_state", "cleanup.policy") == ("delete", "DEFAULT_CONFIG")


def test_kadm_groups_and_offsets(kadm_steps):
    s, topic, group = kadm_steps, kadm_steps["_names"]["topic"], kadm_steps["_names"]["group"]
    assert [r["error"] for r in s["produce"]["records"]] == [None] * 12
    ends = {"0": 4, "1": 4, "2": 4}
    assert {p: o["offset"] for p, o in s["list_end_offsets"]["offsets"].items()} == ends
    assert {p: o["offset"] for p, o in s["list_start_offsets"]["offsets"].items()} == {"0": 0, "1": 0, "2": 0}

    member = s["member_consumed"]
    assert (member["error"], member["records"], member["fetch_errors"]) == (None, 12, {})
    listed = {g["group"]: g for g in s["list_groups"]["groups"]}
    assert (listed[group]["state"], listed[group]["protocol_type"]) == ("Stable", "consumer")
    described = s["describe_group"]
    assert (described["error"], described["group_error"], described["state"], described["protocol_type"],
            described["protocol"]) == (None, None, "Stable", "consumer", "cooperative-sticky")
    assert described["coordinator"] == listed[group]["coordinator"]
    (m,) = described["members"]
    assert (m["member_id"], m["client_id"], m["client_host"], m["assigned"]) == (
        member["member_id"], "refka-franz-admin-member", "/127.0.0.1", {topic: [0, 1, 2]})
    # An admin commit (no member id, generation -1) to a group with members: Kafka's
    # GroupCoordinator answers UNKNOWN_MEMBER_ID.
    assert s["commit_offsets_member_active"]["offsets"]["0"]["error"] == "UNKNOWN_MEMBER_ID"

    assert s["member_left"]["error"] is None
    empty = s["describe_group_empty"]
    assert (empty["state"], empty["members"], empty["protocol_type"], empty["protocol"]) == (
        "Empty", [], "consumer", "")
    fetched = s["fetch_offsets"]
    assert fetched["error"] is None
    assert {p: (o["offset"], o["error"]) for p, o in fetched["offsets"].items()} == {
        p: (end, None) for p, end in ends.items()}
    assert {o["metadata"] for o in fetched["offsets"].values()} == {member["member_id"]}  # franz-go's commit metadata
    assert s["commit_offsets"]["offsets"]["0"]["error"] is None
    after = s["fetch_offsets_committed"]["offsets"]
    assert (after["0"]["offset"], after["0"]["metadata"], after["0"]["leader_epoch"]) == (1, "rewound by kadm", -1)
    assert (after["1"]["offset"], after["2"]["offset"]) == (4, 4)


def test_kadm_delete_records_groups_and_topics(kadm_steps):
    s, topic, group = kadm_steps, kadm_steps["_names"]["topic"], kadm_steps["_names"]["group"]
    deleted = s["delete_records"]
    assert (deleted["error"], deleted["partition_error"], deleted["low_watermark"]) == (None, None, 2)
    assert {p: o["offset"] for p, o in s["list_start_offsets_after_delete"]["offsets"].items()} == {
        "0": 2, "1": 0, "2": 0}
    past = s["delete_records_past_end"]
    assert (past["partition_error"], past["low_watermark"]) == ("OFFSET_OUT_OF_RANGE", -1)

    assert (s["delete_group"]["error"], s["delete_group"]["group"]) == (None, group)
    assert group not in {g["group"] for g in s["list_groups_after_delete"]["groups"] or []}
    assert s["delete_group_again"]["error"] == "GROUP_ID_NOT_FOUND"

    assert (s["delete_topic"]["error"], s["delete_topic"]["topic"]) == (None, topic)
    assert s["topic_gone"]["error"] is None and topic not in s["topic_gone"]["topics"]
    assert s["describe_configs_deleted"]["resource_error"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert s["delete_topic_again"]["error"] == "UNKNOWN_TOPIC_OR_PARTITION"

