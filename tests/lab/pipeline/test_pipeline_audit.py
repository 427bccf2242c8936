"""The Spark audit (lab/pipeline/audit.py) in this process's SparkSession: synthetic logs with
planted faults give exactly the planted counts, and logs written by hand pin each definition
(ties, first deliveries, losses against violations, producer errors, bad lines)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lab.pipeline import audit, sources
from lab.pipeline.audit import Inputs, percentile_of_histogram
from lab.scenarios.audit import audit as python_audit

pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed: make pipeline")
pytestmark = pytest.mark.timeout(300)


def table(out: Path, name: str) -> list[dict[str, Any]]:
    return pq.read_table(out / f"{name}.parquet").to_pylist()


def good_lines(directory: Path, fields: tuple[sources.Field, ...]) -> list[dict[str, Any]]:
    """The lines the audit must take as good, read in plain Python: the oracle's input."""
    kinds = {sources.STRING: str, sources.LONG: int}
    rows = []
    for path in sorted(directory.iterdir()):
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and all(type(row.get(f.name)) is kinds[f.kind] for f in fields):
                rows.append(row)
    return rows


def test_planted_faults_are_found_exactly(spark: Any, planted: tuple[Path, dict[str, Any]],
                                          tmp_path: Path) -> None:
    logs, expected = planted
    out = tmp_path / "audit"
    result = audit.run(spark, Inputs(str(logs / "deliveries"), str(logs / "acks"), str(logs / "timeline.jsonl"),
                                     str(logs / "recordings.jsonl")), out)
    s = result.summary
    assert tuple(s) == audit.SUMMARY_KEYS
    assert {k: v for k, v in s.items() if k != "bad_examples"} == expected["summary"]
    # Equal delivered_ms (a consumer's batch) were planted by the hundred, and are in order.
    assert expected["ties"] > 100
    assert len(s["bad_examples"]) == audit.EXAMPLES
    bad = table(out, "bad_lines")
    assert len(bad) == 15 and {b["input"] for b in bad} == {"deliveries"}
    assert sorted(b["problem"] for b in bad) == sorted(
        {"not JSON": "not JSON", "JSON array": "not a JSON object", "missing field": "missing seq",
         "wrong type (integer)": "seq is string, not an integer", "wrong type (string)": "key is bigint, not a string",
         "null field": "delivered_ms is null", "JSON scalar": "not a JSON object"}[k] for k in expected["bad_kinds"])

    violations = table(out, "violations")
    assert len(violations) == 23
    # Each planted violation: seq 3m+1, moved to the next partition, overtook seq 3m by 1 ms.
    assert all(v["seq"] % 3 == 1 and v["overtaken_seq"] == v["seq"] - 1 and v["ahead_ms"] == 1
               and v["overtaken_partition"] != v["partition"] for v in violations)
    assert all(r["seq"] % 3 == 1 for r in table(out, "losses"))
    assert len(table(out, "producer_errors")) == expected["producer_errors"]
    dups = table(out, "duplicates")
    assert len(dups) == 9 and all(d["deliveries"] == 2 and len(d["consumers"]) == 2 for d in dups)

    changes = table(out, "leader_changes")
    assert [{k: c[k] for k in expected["leader_changes"][0]} for c in changes] == expected["leader_changes"]
    assert all(c["gap_ms"] >= 300 for c in changes)  # synth's outage after each change
    clients = {c["client_id"]: c for c in table(out, "metadata_per_client")}
    for client, want in expected["recordings"].items():
        assert {k: clients[client][k] for k in want} == want
    assert sum(r["records"] for r in table(out, "latency_per_partition")) == 30_000 - 11 - 4

    # lab/scenarios/audit.py, the pure-Python audit, on the same good lines agrees.
    reference = python_audit(good_lines(logs / "deliveries", sources.DELIVERY), good_lines(logs / "acks", sources.ACK))
    assert (reference["violations"], reference["duplicates"], reference["losses"]) == (23, 9, 11)
    assert {k: reference["latency_ms"][k] for k in ("p50", "p99", "max")} == {
        k: s["latency_ms"][k] for k in ("p50", "p99", "max")}


def write_lines(path: Path, rows: list[Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def d(producer: str, key: str, seq: int, delivered: int, *, consumer: str = "c0", partition: int = 0,
      offset: int = 0, sent: int = 0) -> dict[str, Any]:
    return {"consumer": consumer, "topic": "t", "partition": partition, "offset": offset, "key": key,
            "producer": producer, "seq": seq, "sent_ms": sent, "delivered_ms": delivered}


def a(producer: str, key: str, seq: int, **extra: Any) -> dict[str, Any]:
    return {"producer": producer, "key": key, "seq": seq, "topic": "t", "partition": 0, "offset": seq,
            "acked_ms": 1, **extra}


def test_hand_written_logs_follow_each_definition(spark: Any, tmp_path: Path) -> None:
    # Three files, each with its lines in no time order, a later file holding earlier records.
    deliveries = tmp_path / "deliveries"
    write_lines(deliveries / "c1.jsonl", [
        d("p", "A", 3, 12), d("p", "A", 2, 9),  # A2 at 9 after A0 and A1 at 10: overtook them
        d("p", "C", 0, 30, consumer="c1"),  # C0 again, later: a duplicate, not its first delivery
        "", "   ",  # blank lines are no lines
        '{"consumer": "c0", "topic": "t"',  # torn
    ])
    write_lines(deliveries / "c0.jsonl", [
        d("p", "A", 1, 10), d("p", "A", 0, 10),  # a tie: in order
        d("p", "C", 1, 28), d("p", "C", 0, 25),  # C0's first delivery is 25, so C1 at 28 is in order
        ["not", "an", "object"],
    ])
    write_lines(deliveries / "sub" / "q.jsonl", [
        d("q", "B", 0, 10), d("q", "B", 2, 15),  # B1 never delivered: a loss when acked, no violation
        d("q", "A", 0, 1),  # producer q's key A is another key
        {**d("q", "B", 3, 16), "seq": 3.5},
    ])
    acks = tmp_path / "acks.jsonl"
    write_lines(acks, [a("q", "B", 0), a("q", "B", 1), a("q", "B", 2), a("q", "B", 3), a("p", "C", 0),
                       {"producer": "p", "key": "C", "seq": 2, "topic": "t", "error": "KafkaTimeoutError"},
                       {k: v for k, v in a("p", "D", 0).items() if k != "acked_ms"}])
    out = tmp_path / "audit"
    s = audit.run(spark, Inputs(str(deliveries), str(acks)), out).summary
    assert {k: v for k, v in s.items() if k not in ("bad_examples", "latency_ms")} == {
        "records": 10, "bad_lines": 4, "keys": 4, "violations": 1, "losses": 2, "duplicates": 1}
    # B1 and B3 (its only line is bad) were acknowledged and never delivered; C2 was given up.
    assert sorted((r["key"], r["seq"]) for r in table(out, "losses")) == [("B", 1), ("B", 3)]
    assert [(v["key"], v["seq"], v["overtaken_seq"], v["overtaken_delivered_ms"]) for v in table(out, "violations")] \
        == [("A", 2, 0, 10)]
    [dup] = table(out, "duplicates")
    assert (dup["key"], dup["consumers"], dup["first_delivered_ms"], dup["last_delivered_ms"]) == ("C", ["c0", "c1"],
                                                                                                   25, 30)
    assert s["latency_ms"] == {"p50": 10, "p99": 28, "p999": 28, "max": 28}
    # The first bad lines, in file order, the deliveries' before the acks'.
    assert [(b["input"], Path(b["origin"]).name, b["problem"]) for b in s["bad_examples"]] == [
        ("deliveries", "c0.jsonl", "not a JSON object"), ("deliveries", "c1.jsonl", "not JSON"),
        ("deliveries", "q.jsonl", "seq is decimal(2,1), not an integer"),
        ("acks", "acks.jsonl", "missing acked_ms (and no error)")]

    # Without acks there is no telling a loss: null, not 0.
    s = audit.run(spark, Inputs(str(deliveries / "c0.jsonl")), tmp_path / "no-acks").summary
    assert (s["records"], s["losses"], s["violations"], s["bad_lines"]) == (4, None, 0, 1)


def test_parse_says_what_is_wrong_with_each_bad_line(spark: Any) -> None:
    good = d("p", "k", 1, 5)
    cases = {
        json.dumps(good): None,
        json.dumps({**good, "extra": [1]}): None,  # fields beyond the format's are allowed
        "nope": "not JSON",
        "[1, 2]": "not a JSON object",
        '"a string"': "not a JSON object",
        json.dumps({k: v for k, v in good.items() if k != "offset"}): "missing offset",
        json.dumps({**good, "partition": None}): "partition is null",
        json.dumps({**good, "seq": "1"}): "seq is string, not an integer",
        json.dumps({**good, "seq": 1.5}): "seq is decimal(2,1), not an integer",
        json.dumps({**good, "sent_ms": 2**64}): "sent_ms is decimal(20,0), not an integer",
        json.dumps({**good, "producer": 7}): "producer is bigint, not a string",
        json.dumps({**good, "key": {"k": 1}}): "key is object<k: bigint>, not a string",
        json.dumps(good) + " and more": "text after the JSON object",
    }
    lines = spark.createDataFrame([(line, "case", 0, i) for i, line in enumerate(cases)],
                                  "value string, origin string, block long, pos long")
    got = [r["problem"] for r in sources.parse(lines, sources.DELIVERY).orderBy("pos").collect()]
    assert got == list(cases.values())


def test_percentiles_are_nearest_rank_as_the_python_audit_has_them() -> None:
    hist = [(1, 1), (2, 1), (3, 1), (10, 97)]
    assert [percentile_of_histogram(hist, q) for q in (0.0, 0.01, 0.02, 0.5, 1.0)] == [1, 2, 3, 10, 10]
    assert percentile_of_histogram([], 0.5) is None
