"""broker/recording.py: the per-connection ring, its bound, error codes found in answers,
closed connections kept and folded into per-client totals, and the --record file."""

from __future__ import annotations

import json

from refka.broker.recording import (
    ALL_TOPICS,
    BrokerRecordings,
    RecordFile,
    RecordingCursor,
    entries,
    error_codes,
)
from refka.protocol import EncodedArray, ErrorCode
from refka.protocol.messages import APIS
from refka.protocol.messages.api_versions import ApiVersions
from refka.protocol.messages.metadata import Metadata
from refka.protocol.messages.produce import Produce


def produce_answer(*codes: int):
    R = Produce.Response
    return R(responses=[R.TopicProduceResponse(name="t", partition_responses=[
        R.TopicProduceResponse.PartitionProduceResponse(index=i, error_code=c) for i, c in enumerate(codes)])])


def test_error_codes_are_the_distinct_non_zero_codes_at_every_level():
    assert error_codes(Produce, produce_answer(0, 3, 3, 6)) == (3, 6)
    assert error_codes(Produce, produce_answer(0, 0)) == ()
    R = Metadata.Response
    answer = R(topics=[R.MetadataResponseTopic(name="a", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                       R.MetadataResponseTopic(name="b", error_code=0)])
    assert error_codes(Metadata, answer) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,)
    assert error_codes(ApiVersions, ApiVersions.Response(error_code=ErrorCode.UNSUPPORTED_VERSION)) == (35,)


def test_an_answer_of_elements_already_encoded_gives_the_codes_it_carries():
    """Metadata's topics come encoded from the metadata cache (EncodedArray): their codes are
    the array's, not found by walking it."""
    R = Metadata.Response
    resp = R(brokers=[], topics=EncodedArray(2, [b"", b""], (ErrorCode.LEADER_NOT_AVAILABLE,
                                                         ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
    assert error_codes(Metadata, resp) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE)
    assert error_codes(Metadata, R(brokers=[], topics=EncodedArray(1, [b""]))) == ()


def test_every_apis_answer_can_be_searched_for_error_codes():
    for api in APIS.values():
        assert error_codes(api, api.Response()) == (), api.name


def test_an_entry_says_what_was_asked_and_answered():
    recs = BrokerRecordings(7, ring_size=4)
    rec = recs.opened("PLAINTEXT", "127.0.0.1:5555")
    rec.software_name, rec.software_version = "kafka-python", "3.0"
    rec.add(Metadata, 12, 41, "app", ["a", "b"], 40, None, 0, received=10.0, now=10.0025)
    rec.add(Produce, 9, 42, "app", None, 120, produce_answer(0, 3), 60, received=11.0, now=11.001)
    meta, prod = rec.entries()
    assert meta["topics"] == ["a", "b"] and meta["api"] == "Metadata" and meta["api_version"] == 12
    assert meta["correlation_id"] == 41 and meta["latency_ms"] == 2.5 and meta["error_codes"] == []
    assert "topics" not in prod and prod["error_codes"] == ["UNKNOWN_TOPIC_OR_PARTITION"]
    assert (prod["request_bytes"], prod["response_bytes"]) == (120, 60)
    assert {k: prod[k] for k in ("broker", "listener", "peer", "client_id", "software_name",
                                 "software_version")} == {
        "broker": 7, "listener": "PLAINTEXT", "peer": "127.0.0.1:5555", "client_id": "app",
        "software_name": "kafka-python", "software_version": "3.0"}
    assert meta["time_ms"] <= prod["time_ms"]


def test_the_ring_keeps_the_newest_requests_and_the_counts_all_of_them():
    recs = BrokerRecordings(0, ring_size=3)
    rec = recs.opened("PLAINTEXT", "p")
    for corr in range(10):
        rec.add(Produce, 9, corr, "c", None, 100, produce_answer(0), 50, received=0.0, now=0.0)
    assert [e["correlation_id"] for e in rec.entries()] == [7, 8, 9]
    assert rec.describe()["requests"] == {"Produce": 10}
    assert recs.request_counts() == {("c", "", Produce.key): [10, 1000, 500]}


def test_a_cursor_gives_what_came_after_it_and_counts_what_a_ring_overwrote():
    recs = BrokerRecordings(0, ring_size=3)
    a, b = recs.opened("PLAINTEXT", "p1"), recs.opened("PLAINTEXT", "p2")
    a.add(Produce, 9, 0, "a", None, 100, produce_answer(0), 50, received=0.0, now=0.0)
    cursor = RecordingCursor([recs])
    assert cursor.new([recs]) == []  # what was there before it is not new
    a.add(Produce, 9, 1, "a", None, 100, produce_answer(0), 50, received=0.0, now=0.0)
    b.add(Metadata, 12, 7, "b", ["t"], 30, None, 0, received=0.0, now=0.0)
    assert sorted((e["client_id"], e["correlation_id"]) for e in cursor.new([recs])) == [("a", 1), ("b", 7)]
    for corr in range(2, 7):  # five more on a ring of three: two are gone before the next read
        a.add(Produce, 9, corr, "a", None, 100, produce_answer(0), 50, received=0.0, now=0.0)
    assert [e["correlation_id"] for e in cursor.new([recs])] == [4, 5, 6] and cursor.missed == 2
    c = recs.opened("PLAINTEXT", "p3")  # a connection opened after the cursor: all of it is new
    c.add(Metadata, 12, 1, "c", ALL_TOPICS, 30, None, 0, received=0.0, now=0.0)
    only_c = RecordingCursor([recs], client_id="a")
    a.add(Produce, 9, 99, "a", None, 100, produce_answer(0), 50, received=0.0, now=0.0)
    assert sorted(e["client_id"] for e in cursor.new([recs])) == ["a", "c"]
    assert [e["correlation_id"] for e in only_c.new([recs])] == [99]


def test_ring_size_zero_records_nothing_per_request():
    recs = BrokerRecordings(0, ring_size=0)
    rec = recs.opened("PLAINTEXT", "p")
    assert not rec.active
    assert rec.entries() == []


def test_closed_connections_are_kept_bounded_and_their_counts_stay_in_the_totals():
    recs = BrokerRecordings(0, ring_size=8, closed_kept=2)
    for i in range(3):
        rec = recs.opened("PLAINTEXT", f"p{i}")
        rec.add(Metadata, 12, i, f"c{i}", ALL_TOPICS, 30, None, 0, received=0.0, now=0.0)
        rec.add(Metadata, 12, i, f"c{i}", ["x", "y"], 30, None, 0, received=0.0, now=0.0)
        recs.closed_connection(rec)
    assert not recs.open
    assert [r.peer for r in recs.recordings()] == ["p1", "p2"]
    assert all(r.closed_ms is not None for r in recs.closed)
    counts = recs.request_counts()
    assert {k[0] for k in counts} == {"c0", "c1", "c2"}
    assert all(v[0] == 2 for v in counts.values())
    assert recs.metadata_counts() == {(f"c{i}", ""): [2, 1] for i in range(3)}


def test_entries_filter_by_client_and_come_oldest_first_over_brokers():
    a, b = BrokerRecordings(0), BrokerRecordings(1)
    ra, rb = a.opened("L", "pa"), b.opened("L", "pb")
    rb.add(Produce, 9, 1, "x", None, 1, None, 0, received=0.0, now=0.0)
    ra.add(Produce, 9, 2, "y", None, 1, None, 0, received=0.0, now=0.0)
    rb.add(Produce, 9, 3, "x", None, 1, None, 0, received=0.0, now=0.0)
    assert [e["correlation_id"] for e in entries([a, b])] == [1, 2, 3]
    assert [e["correlation_id"] for e in entries([a, b], "x")] == [1, 3]


async def test_the_record_file_gets_every_entry_as_a_json_line(tmp_path):
    path = tmp_path / "rec.jsonl"
    sink = RecordFile(str(path), flush_interval=0.01)
    recs = BrokerRecordings(3, ring_size=1, sink=sink)
    rec = recs.opened("PLAINTEXT", "p")
    for corr in range(5):
        rec.add(Metadata, 12, corr, "app", ["t"], 30, None, 0, received=0.0, now=0.0)
    await sink.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [d["correlation_id"] for d in lines] == [0, 1, 2, 3, 4]  # all of them, not just the ring's one
    assert all(d["broker"] == 3 and d["client_id"] == "app" and d["topics"] == ["t"] for d in lines)
