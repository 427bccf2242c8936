"""broker/faults.py without sockets: a fault's checks (nothing half-installed), its matching
and lifetime, and the error answers built from Produce and Fetch requests (the partitions in
scope answered with the error, the others left for the handler), encodable at every version."""

from __future__ import annotations

import time

import pytest

import refka.broker.handlers  # noqa: F401  (the served APIs, which faults.py names)
from refka.broker.faults import FaultError, FaultTable, merge_errors, split
from refka.protocol import ErrorCode, join
from refka.protocol.messages.fetch import Fetch
from refka.protocol.messages.produce import Produce
from refka.protocol.records import build_batch


def fetch_request(topic_id: bytes = b"\x00" * 16):
    R = Fetch.Request
    return R(replica_id=-1, max_wait_ms=0, min_bytes=1, topics=[R.FetchTopic(
        topic="t", topic_id=topic_id, partitions=[R.FetchTopic.FetchPartition(partition=p, fetch_offset=0)
                                                  for p in (0, 1)])])


def produce_request():
    P = Produce.Request
    return P(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[P.TopicProduceData(
        name="t", partition_data=[P.TopicProduceData.PartitionProduceData(index=p, records=bytes(build_batch(
            [(None, b"v")]))) for p in (0, 1)])])


def test_a_fault_on_one_partition_splits_the_request_and_the_answer_encodes_at_every_version():
    table = FaultTable()
    f = table.add({"kind": "error", "api": "Fetch", "topic": "t", "partition": 0,
                   "error_code": "NOT_LEADER_OR_FOLLOWER"}, {0})
    req = fetch_request()
    assert table.match(0, Fetch.key, 12, "c", req) is f
    rest, hit = split(Fetch.key, req, f)
    assert [p.partition for t in rest.topics for p in t.partitions] == [1] and [i for _t, i in hit] == [0]
    assert [p.partition for t in req.topics for p in t.partitions] == [0, 1]  # the request itself untouched
    resp = merge_errors(Fetch.key, None, hit, f.error_code)
    (topic,) = resp.responses
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [(0, ErrorCode.NOT_LEADER_OR_FOLLOWER)]
    for v in range(4, 17):
        join(Fetch.encode_response(resp, v))
    pf = table.add({"kind": "error", "api": "Produce", "error_code": 6}, {0})  # no scope: every partition
    rest, hit = split(Produce.key, produce_request(), pf)
    assert rest is None and [i for _t, i in hit] == [0, 1]
    answer = merge_errors(Produce.key, None, hit, pf.error_code)
    assert [p.error_code for t in answer.responses for p in t.partition_responses] == [6, 6]
    for v in range(3, 12):
        join(Produce.encode_response(answer, v))


def test_lifetime_by_count_and_by_duration_and_the_scope():
    table = FaultTable()
    f = table.add({"kind": "latency", "api": "Produce", "latency_ms": 5, "count": 2, "client_id": "a",
                   "min_version": 7}, {0, 1})
    assert table.match(0, Produce.key, 9, "b", produce_request()) is None  # another client
    assert table.match(0, Produce.key, 6, "a", produce_request()) is None  # below min_version
    assert table.match(1, Produce.key, 9, "a", produce_request()) is f
    table.fired(f, 1, "Produce v9")
    table.fired(f, 1, "Produce v9")
    assert table.faults == {} and table.fired_by_kind["latency"] == 2
    d = table.add({"kind": "blackhole", "duration_ms": 1}, {0})
    assert d.until is not None
    time.sleep(0.01)
    assert table.match(0, 18, 3, None, None) is None and table.live() == []
    r = table.add({"kind": "replication-delay", "follower": 2, "latency_ms": 10}, {0})
    assert table.match(0, Fetch.key, 12, None, fetch_request(), follower=1) is None
    assert table.match(0, Fetch.key, 12, None, fetch_request(), follower=2) is r
    assert table.match(0, Fetch.key, 12, None, fetch_request(), follower=-1) is None  # consumers are not delayed


@pytest.mark.parametrize(("spec", "status"), [
    ({"kind": "error", "api": "Produce"}, 400),
    ({"kind": "error", "api": "Produce", "error_code": "NONE"}, 400),
    ({"kind": "error", "api": "Produce", "error_code": 99999}, 400),
    ({"kind": "latency", "latency_ms": 1, "broker": 3}, 404),
    ({"kind": "latency", "latency_ms": 1, "min_version": 5, "max_version": 2}, 400),
    ({"kind": "blackhole", "follower": 1}, 400),
    ({"kind": "drop-before", "latency_ms": 3}, 400),
    ({"kind": "latency", "latency_ms": True}, 400),
    ({"kind": "latency", "latency_ms": 1, "count": 0}, 400),
])
def test_refusals_install_nothing(spec, status):
    table = FaultTable()
    with pytest.raises(FaultError) as e:
        table.add(spec, {0})
    assert e.value.status == status and table.faults == {}
