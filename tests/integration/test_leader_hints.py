"""KIP-951 leader hints on the wire, byte for byte.

A Produce (v10+) or Fetch (v16+) answer with NOT_LEADER_OR_FOLLOWER or
FENCED_LEADER_EPOCH names the partition's current leader (CurrentLeader:
leader id and epoch, a tagged field of the partition) and that leader's
endpoint once per response (NodeEndpoints: node id, host, port, rack, a
tagged field of the response). Older versions carry no hints, and neither
does a broker started with ``leader.discovery.hints.enable=false``.

The brokers are three ``refka serve`` processes over a private ZooKeeper,
each with its own ``broker.rack`` (``zone-<id>``), so the rack in the hint is
checked to be the leader's own. Topics have one replica: no replication is
involved, only which broker leads. Every answer is checked three ways: our
codec decodes it to its last byte, kio (an independent implementation)
decodes it to the same hint, and the hint's bytes are built here by hand from
the wire rules (unsigned varints, compact strings) and found in the frame
where they must be.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_response_schema
from kio.serial import entity_reader

from refka.protocol import ErrorCode
from refka.protocol.api import Api
from refka.protocol.messages.fetch import Fetch
from refka.protocol.messages.metadata import Metadata
from refka.protocol.messages.produce import Produce
from refka.protocol.records import build_batch
from tests.brokers import BrokerProcess
from tests.integration.cluster_helpers import Raw, ZkCluster
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TIMEOUT = 30.0
NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER
FENCED = ErrorCode.FENCED_LEADER_EPOCH
_I32 = struct.Struct(">i")


# -- the wire rules, written out independently of refka's codec ---------------------


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def compact_string(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def tagged(tag: int, payload: bytes) -> bytes:
    return uvarint(tag) + uvarint(len(payload)) + payload


def current_leader_bytes(tag: int, leader_id: int, leader_epoch: int) -> bytes:
    """A partition's tag section holding only CurrentLeader (a struct with no tags of its own)."""
    return b"\x01" + tagged(tag, struct.pack(">ii", leader_id, leader_epoch) + b"\x00")


def node_endpoints_bytes(nodes: list[tuple[int, str, int, str | None]]) -> bytes:
    """The response's tag section holding only NodeEndpoints (tag 0)."""
    body = uvarint(len(nodes) + 1)
    for node_id, host, port, rack in nodes:
        body += _I32.pack(node_id) + compact_string(host) + _I32.pack(port) + compact_string(rack) + b"\x00"
    return b"\x01" + tagged(0, body)


def test_the_hand_written_wire_rules():
    assert uvarint(300) == b"\xac\x02"
    assert compact_string(None) == b"\x00" and compact_string("ab") == b"\x03ab"
    assert current_leader_bytes(0, 2, 5) == bytes.fromhex("01 00 09 00000002 00000005 00")


def kio_decode(api: Api, version: int, body: bytes) -> Any:
    entity, end = entity_reader(load_response_schema(api.key, version))(memoryview(body), 0)
    assert end == len(body)
    return entity


# -- requests ------------------------------------------------------------------------


def produce_request(topic: str, partition: int) -> Any:
    R = Produce.Request
    records = bytes(build_batch([(b"k", b"v")]))
    return R(transactional_id=None, acks=1, timeout_ms=10_000, topic_data=[
        R.TopicProduceData(name=topic, partition_data=[
            R.TopicProduceData.PartitionProduceData(index=partition, records=records)])])


def fetch_request(topic: str, topic_id: bytes, partition: int, current_leader_epoch: int = -1) -> Any:
    R = Fetch.Request
    return R(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=[R.FetchTopic(topic=topic, topic_id=topic_id, partitions=[
            R.FetchTopic.FetchPartition(partition=partition, current_leader_epoch=current_leader_epoch,
                                        fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                                        partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[], rack_id="",
    )


# -- the cluster ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    c = ZkCluster(zookeeper, tmp_path_factory.mktemp("kip951")).start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def led_by_2(cluster):
    """A one-replica topic whose only partition broker 2 leads: (name, topic id, leader epoch)."""
    topic = f"hints-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, [2])
    topic_id, epoch = cluster.wait_leader(topic, 0, 2)
    return topic, topic_id, epoch


# -- Produce ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", [10, 11])
def test_produce_to_a_follower_names_the_leader_and_its_endpoint(cluster, led_by_2, version):
    topic, _topic_id, epoch = led_by_2
    raw = Raw(cluster.port(0))
    try:
        resp, body = raw.call_raw(Produce, produce_request(topic, 0), version)
    finally:
        raw.close()
    (t,) = resp.responses
    (p,) = t.partition_responses
    assert p.error_code == NOT_LEADER
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (2, epoch)
    assert [(n.node_id, n.host, n.port, n.rack) for n in resp.node_endpoints] == [
        (2, "127.0.0.1", cluster.port(2), "zone-2")]

    # The whole body, from the wire rules: nothing more, nothing less.
    name = topic.encode()
    expected = (
        b"\x02" + uvarint(len(name) + 1) + name           # responses[1], name
        + b"\x02" + _I32.pack(0) + struct.pack(">h", NOT_LEADER)   # partition_responses[1]
        + struct.pack(">qqq", -1, -1, -1)                 # base_offset, log_append_time_ms, log_start_offset
        + b"\x01" + b"\x00"                               # record_errors [], error_message null
        + current_leader_bytes(0, 2, epoch)               # partition tags: CurrentLeader (tag 0)
        + b"\x00"                                         # topic tags: none
        + _I32.pack(0)                                    # throttle_time_ms
        + node_endpoints_bytes([(2, "127.0.0.1", cluster.port(2), "zone-2")])
    )
    assert body == expected

    k = kio_decode(Produce, version, body)
    kp = k.responses[0].partition_responses[0]
    assert (kp.current_leader.leader_id, kp.current_leader.leader_epoch) == (2, epoch)
    assert [(n.node_id, n.host, n.port, n.rack) for n in k.node_endpoints] == [
        (2, "127.0.0.1", cluster.port(2), "zone-2")]


def test_produce_v9_carries_no_hints(cluster, led_by_2):
    topic, _topic_id, _epoch = led_by_2
    raw = Raw(cluster.port(1))
    try:
        resp, body = raw.call_raw(Produce, produce_request(topic, 0), 9)
    finally:
        raw.close()
    (p,) = resp.responses[0].partition_responses
    assert p.error_code == NOT_LEADER
    # v9 is flexible but has no KIP-951 tags: every tag section is empty.
    assert body.endswith(b"\x00" + b"\x00" + b"\x00" + _I32.pack(0) + b"\x00")


def test_produce_to_the_leader_carries_no_hints(cluster, led_by_2):
    topic, _topic_id, _epoch = led_by_2
    raw = Raw(cluster.port(2))
    try:
        resp, body = raw.call_raw(Produce, produce_request(topic, 0), 11)
    finally:
        raw.close()
    (p,) = resp.responses[0].partition_responses
    assert p.error_code == ErrorCode.NONE
    assert p.current_leader is None and resp.node_endpoints == []
    assert body.endswith(_I32.pack(0) + b"\x00")


# -- Fetch -------------------------------------------------------------------------------


def test_fetch_v16_from_a_follower_names_the_leader_and_its_endpoint(cluster, led_by_2):
    topic, topic_id, epoch = led_by_2
    raw = Raw(cluster.port(1))
    try:
        resp, body = raw.call_raw(Fetch, fetch_request(topic, topic_id, 0), 16)
    finally:
        raw.close()
    (t,) = resp.responses
    (p,) = t.partitions
    assert p.error_code == NOT_LEADER
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (2, epoch)
    assert [(n.node_id, n.host, n.port, n.rack) for n in resp.node_endpoints] == [
        (2, "127.0.0.1", cluster.port(2), "zone-2")]

    head = (
        _I32.pack(0) + struct.pack(">h", 0) + _I32.pack(0)    # throttle_time_ms, error_code, session_id
        + b"\x02" + bytes(topic_id)                            # responses[1], topic_id
        + b"\x02" + _I32.pack(0) + struct.pack(">h", NOT_LEADER)
        + struct.pack(">qqq", -1, -1, -1)                      # high watermark, LSO, log start offset
    )
    tail = (
        current_leader_bytes(1, 2, epoch)                    # partition tags: CurrentLeader (tag 1)
        + b"\x00"                                              # topic tags
        + node_endpoints_bytes([(2, "127.0.0.1", cluster.port(2), "zone-2")])
    )
    # Between them: aborted_transactions and records, each null or empty, and preferred_read_replica -1.
    assert body.startswith(head) and body.endswith(tail)
    middle = body[len(head):-len(tail)]
    assert len(middle) == 6 and middle[0] in (0, 1) and middle[1:5] == _I32.pack(-1) and middle[5] in (0, 1)
    assert (p.high_watermark, p.last_stable_offset, p.log_start_offset) == (-1, -1, -1)

    k = kio_decode(Fetch, 16, body)
    kp = k.responses[0].partitions[0]
    assert (kp.current_leader.leader_id, kp.current_leader.leader_epoch) == (2, epoch)
    assert [(n.node_id, n.host, n.port, n.rack) for n in k.node_endpoints] == [
        (2, "127.0.0.1", cluster.port(2), "zone-2")]


def test_fetch_v15_carries_no_hints(cluster, led_by_2):
    topic, topic_id, _epoch = led_by_2
    raw = Raw(cluster.port(0))
    try:
        resp, body = raw.call_raw(Fetch, fetch_request(topic, topic_id, 0), 15)
    finally:
        raw.close()
    (p,) = resp.responses[0].partitions
    assert p.error_code == NOT_LEADER
    assert p.current_leader is None
    # preferred_read_replica -1, records (empty), then partition, topic and response tags all empty.
    assert body.endswith(_I32.pack(-1) + b"\x01" + b"\x00" + b"\x00" + b"\x00")


def test_one_endpoint_per_leader_for_many_partitions(cluster):
    """Partitions led by 1 and 2, asked of 0: one CurrentLeader each, two endpoints sorted by id."""
    topic = f"hints-many-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, [2, 1, 2])
    for part, leader in enumerate([2, 1, 2]):
        cluster.wait_leader(topic, part, leader)
    R = Produce.Request
    records = bytes(build_batch([(b"k", b"v")]))
    req = R(transactional_id=None, acks=1, timeout_ms=10_000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(index=i, records=records)
                                    for i in range(3)])])
    raw = Raw(cluster.port(0))
    try:
        resp, body = raw.call_raw(Produce, req, 11)
    finally:
        raw.close()
    leaders = [(p.index, p.error_code, p.current_leader.leader_id) for p in resp.responses[0].partition_responses]
    assert leaders == [(0, NOT_LEADER, 2), (1, NOT_LEADER, 1), (2, NOT_LEADER, 2)]
    eps = [(1, "127.0.0.1", cluster.port(1), "zone-1"), (2, "127.0.0.1", cluster.port(2), "zone-2")]
    assert body.endswith(_I32.pack(0) + node_endpoints_bytes(eps))


def test_fetch_v16_fenced_leader_epoch_carries_the_hint(cluster, tmp_path):
    """A stale current_leader_epoch at the leader: FENCED_LEADER_EPOCH, naming the leader and its epoch.

    The epoch is moved on by restarting the leader's process: its one-replica
    partition goes offline (epoch + 1) and comes back (epoch + 1).
    """
    topic = f"hints-fenced-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, [1])
    _, first_epoch = cluster.wait_leader(topic, 0, 1)
    proc = cluster.procs[1]
    proc.stop()  # a clean stop closes its ZooKeeper session, so the id is free at once
    proc.start()
    topic_id, epoch = cluster.wait_leader(topic, 0, 1, min_epoch=first_epoch + 1)
    raw = Raw(cluster.port(1))
    try:
        resp, body = raw.call_raw(Fetch, fetch_request(topic, topic_id, 0, current_leader_epoch=first_epoch), 16)
    finally:
        raw.close()
    (p,) = resp.responses[0].partitions
    assert p.error_code == FENCED
    assert body.endswith(current_leader_bytes(1, 1, epoch) + b"\x00"
                         + node_endpoints_bytes([(1, "127.0.0.1", cluster.port(1), "zone-1")]))


# -- hints switched off ------------------------------------------------------------------


@pytest.fixture(scope="module")
def no_hints(tmp_path_factory):
    """One process, three brokers, no rack, leader.discovery.hints.enable=false."""
    b = BrokerProcess(tmp_path_factory.mktemp("kip951-off") / "data", brokers=3, memory=True,
                      overrides={"leader.discovery.hints.enable": "false"}).start()
    yield b
    b.stop()


def test_hints_disabled_by_config(no_hints):
    topic = f"hints-off-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": no_hints.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[2]])],
                        operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
    answered: list[int] = []

    def not_leader() -> Any:
        raw = Raw(no_hints.port)
        try:
            md, _ = raw.call_raw(Metadata, Metadata.Request(
                topics=[Metadata.Request.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False), 12)
            resp, body = raw.call_raw(Produce, produce_request(topic, 0), 11)
        finally:
            raw.close()
        (p,) = resp.responses[0].partition_responses
        answered.append(p.error_code)
        return p.error_code == NOT_LEADER and (md, resp, body, p)

    md, resp, body, p = wait_until(not_leader, timeout=TIMEOUT, interval=0.05,
                                   message=lambda: f"NOT_LEADER_OR_FOLLOWER; broker 0 answers {answered[-1:]}")
    assert p.current_leader is None and resp.node_endpoints == []
    assert body.endswith(b"\x00" + b"\x00" + _I32.pack(0) + b"\x00")
    (t,) = md.topics
    raw = Raw(no_hints.port)
    try:
        resp, body = raw.call_raw(Fetch, fetch_request(topic, t.topic_id, 0), 16)
    finally:
        raw.close()
    (p,) = resp.responses[0].partitions
    assert p.error_code == NOT_LEADER and p.current_leader is None and resp.node_endpoints == []
