"""The audit's throughput on synthetic logs (synth.py).

    python -m lab.pipeline.bench [--records 1000000] [--master URL] [--shuffle-partitions N]
        [--no-acks] [--timeline] [--dir DIR] [--json PATH]

Writes N records' logs (deliveries, and acks unless --no-acks; 100 planted violations,
losses and duplicates each, 20 bad lines) into DIR (a temporary directory by default, or
reused when DIR already holds logs of N records; a temporary one is removed), starts a session, runs the audit
without the report, checks its summary against synth's expected one, and prints
delivery records per second of the audit (session start apart) and each step's
seconds. Figures, not a test; 10^7 and 10^8 records are for a machine with the disk
and the hours (the logs take ~250 bytes per record with acks).

    python -m lab.pipeline.bench --watch-lag HOST:PORT [--probes 20] [--trigger-seconds 1]

Instead: the streaming figure of ``watch`` (watch.py) against a running refka: the query
over a new topic, its output to another; one delivery line at a time is produced (after
a random pause, so that it lands anywhere in a trigger's interval), and the time from its
produce call to the output record of its minute that counts it is its lag; prints the
lags' p50 and max (the first line, the warm-up, apart; confluent-kafka's producer and consumer, `make test`'s).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lab.pipeline import audit, synth


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.pipeline.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--master")
    ap.add_argument("--shuffle-partitions", type=int)
    ap.add_argument("--no-acks", action="store_true", help="deliveries only")
    ap.add_argument("--timeline", action="store_true", help="10 leader changes, and their table")
    ap.add_argument("--dir", type=Path, help="where the logs go (kept); default: a temporary directory")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--watch-lag", metavar="BOOTSTRAP", help="instead: watch's end-to-end lag against this refka")
    ap.add_argument("--probes", type=int, default=20, help="--watch-lag: lines produced one at a time")
    ap.add_argument("--trigger-seconds", type=float, default=1.0, help="--watch-lag: the query's trigger")
    a = ap.parse_args(argv)

    if a.watch_lag:
        return watch_lag(a)

    if a.dir:
        return run(a, a.dir)
    with tempfile.TemporaryDirectory(prefix="refka-pipeline-bench-") as tmp:
        return run(a, Path(tmp))


def run(a: argparse.Namespace, work: Path) -> int:
    logs = work / "logs"
    t0 = time.monotonic()
    expected_path = logs / "expected.json"
    expected = json.loads(expected_path.read_text()) if expected_path.exists() else None
    if expected is None or expected["plan"]["records"] != a.records:
        expected = synth.generate(synth.Plan(records=a.records, violations=100, losses=100, duplicates=100,
                                             bad_lines=20, leader_changes=10, keys=500, partitions=12), logs)
    synth_s = time.monotonic() - t0
    size = sum(f.stat().st_size for f in logs.rglob("*.jsonl"))

    from lab.pipeline.session import session

    t0 = time.monotonic()
    spark = session(a.master, app_name="refka-pipeline-bench", shuffle_partitions=a.shuffle_partitions)
    session_s = time.monotonic() - t0
    try:
        t0 = time.monotonic()
        result = audit.run(spark, audit.Inputs(str(logs / "deliveries"), None if a.no_acks else str(logs / "acks"),
                                               str(logs / "timeline.jsonl") if a.timeline else None),
                           work / "audit")
        audit_s = time.monotonic() - t0
    finally:
        spark.stop()
    want = {**expected["summary"], **({"losses": None} if a.no_acks else {})}
    got = {k: v for k, v in result.summary.items() if k != "bad_examples"}
    figures: dict[str, Any] = {
        "records": result.summary["records"], "input_bytes": size, "acks": not a.no_acks,
        "master": a.master or "local[*]", "cores": os.cpu_count(), "synth_s": round(synth_s, 1),
        "session_start_s": round(session_s, 1), "audit_s": round(audit_s, 1),
        "records_per_s": round(result.summary["records"] / audit_s), "steps_s": result.timings_s,
        "summary_as_planted": got == want,
    }
    print(f"audit of {figures['records']:,} delivery lines ({size / 1e6:.0f} MB of logs"
          f"{'' if a.no_acks else ' with acks'}) on {figures['master']}: {audit_s:.1f} s, "
          f"{figures['records_per_s']:,} records/s (session start {session_s:.1f} s apart)")
    for step, s in result.timings_s.items():
        print(f"  {step:28s} {s:8.1f} s")
    print(f"summary as planted: {figures['summary_as_planted']}")
    if a.json:
        a.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if figures["summary_as_planted"] else 1


if __name__ == "__main__":
    sys.exit(main())


def watch_lag(a: argparse.Namespace) -> int:
    """``--watch-lag`` (module docstring)."""
    import random
    import uuid

    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from lab.pipeline import watch
    from lab.pipeline.session import session

    run_id = uuid.uuid4().hex[:8]
    topic, out = f"watch-lag-{run_id}", f"watch-lag-{run_id}-out"
    admin = AdminClient({"bootstrap.servers": a.watch_lag})
    for f in admin.create_topics([NewTopic(topic, 1, 1), NewTopic(out, 1, 1)]).values():
        f.result(30)
    spark = session(a.master, app_name="refka-watch-lag", shuffle_partitions=a.shuffle_partitions)
    consumer = Consumer({"bootstrap.servers": a.watch_lag, "group.id": f"watch-lag-{run_id}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([out])
    producer = Producer({"bootstrap.servers": a.watch_lag, "linger.ms": 0})
    with tempfile.TemporaryDirectory(prefix="refka-watch-lag-") as ckpt:
        o = watch.Options(a.watch_lag, topic, output_topic=out, checkpoint=ckpt, trigger_seconds=a.trigger_seconds,
                          starting_offsets="earliest")
        q = watch.start(spark, o, ckpt)
        lags: list[float] = []
        counted: dict[int, int] = {}  # window start -> lines produced into it
        try:
            for seq in range(a.probes + 1):  # line 0 is the warm-up: the query's first batches, the group's join
                time.sleep(random.uniform(0, a.trigger_seconds))
                now = int(time.time() * 1000)
                minute = now - now % 60_000
                counted[minute] = counted.get(minute, 0) + 1
                line = {"consumer": "lag", "topic": topic, "partition": 0, "offset": seq, "key": "k",
                        "producer": "lag", "seq": seq, "sent_ms": now, "delivered_ms": now}
                t0 = time.monotonic()
                producer.produce(topic, value=json.dumps(line).encode())
                producer.flush(30)
                deadline = t0 + 120
                while time.monotonic() < deadline:
                    m = consumer.poll(0.05)
                    value = None if m is None or m.error() else m.value()
                    if value is None:
                        continue
                    w = json.loads(value)
                    if w["window_start_ms"] == minute and w["records"] >= counted[minute]:
                        if seq:
                            lags.append(time.monotonic() - t0)
                        break
                else:
                    print(f"watch lag: line {seq} not counted within 120 s", file=sys.stderr)
                    return 1
        finally:
            q.stop()
            consumer.close()
            spark.stop()
    lags.sort()
    p50, worst = lags[round(0.5 * (len(lags) - 1))], lags[-1]
    print(f"watch lag over {len(lags)} lines (trigger {a.trigger_seconds:g} s): p50 {p50:.2f} s, max {worst:.2f} s")
    if a.json:
        a.json.write_text(json.dumps({"probes": len(lags), "trigger_s": a.trigger_seconds,
                                      "lag_p50_s": round(p50, 3), "lag_max_s": round(worst, 3),
                                      "lags_s": [round(x, 3) for x in lags]}, indent=2) + "\n")
    return 0
