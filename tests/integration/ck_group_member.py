"""One confluent-kafka group member, run as its own process by test_groups_confluent.py.

``python ck_group_member.py '<json config>'``: subscribes, consumes in
batches, and after processing each batch commits it synchronously (commits
after processing). Prints one JSON object per line on stdout, flushed at once
so a SIGKILL loses nothing that was printed:

    {"ev": "assigned", "partitions": [..]}     rebalance callbacks (incremental
    {"ev": "revoked", "partitions": [..]}      with cooperative-sticky)
    {"ev": "rec", "p": 3, "o": 41}             a record processed
    {"ev": "commit", "offsets": {"3": 42}}     a commit that succeeded
    {"ev": "commit_failed", "error": "..."}
    {"ev": "closed"}

A line "close" on stdin makes it close the consumer (LeaveGroup, unless it is
a static member) and exit.
"""

from __future__ import annotations

import json
import sys
import threading

from confluent_kafka import Consumer, KafkaException, TopicPartition


def emit(**ev) -> None:
    sys.stdout.write(json.dumps(ev) + "\n")
    sys.stdout.flush()


def main() -> None:
    cfg = json.loads(sys.argv[1])
    conf = {
        "bootstrap.servers": cfg["bootstrap"],
        "group.id": cfg["group"],
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "partition.assignment.strategy": cfg.get("assignor", "range"),
        "session.timeout.ms": cfg.get("session_timeout_ms", 6000),
        "heartbeat.interval.ms": cfg.get("heartbeat_interval_ms", 1000),
        "max.poll.interval.ms": cfg.get("max_poll_interval_ms", 20000),
        "client.id": cfg.get("client_id", "ck-member"),
    }
    if cfg.get("instance"):
        conf["group.instance.id"] = cfg["instance"]
    stop = threading.Event()

    def read_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "close":
                break
        stop.set()

    threading.Thread(target=read_stdin, daemon=True).start()

    c = Consumer(conf)
    c.subscribe([cfg["topic"]],
                on_assign=lambda _c, ps: emit(ev="assigned", partitions=sorted(p.partition for p in ps)),
                on_revoke=lambda _c, ps: emit(ev="revoked", partitions=sorted(p.partition for p in ps)),
                on_lost=lambda _c, ps: emit(ev="lost", partitions=sorted(p.partition for p in ps)))
    while not stop.is_set():
        msgs = c.consume(num_messages=cfg.get("batch", 20), timeout=0.2)
        done = {}
        for m in msgs:
            if m.error():
                continue
            emit(ev="rec", p=m.partition(), o=m.offset())
            done[m.partition()] = m.offset() + 1
        if done:
            tps = [TopicPartition(cfg["topic"], p, o) for p, o in done.items()]
            try:
                result = c.commit(offsets=tps, asynchronous=False)
            except KafkaException as e:
                emit(ev="commit_failed", error=str(e))
                continue
            ok = {str(tp.partition): tp.offset for tp in result if tp.error is None}
            if ok:
                emit(ev="commit", offsets=ok)
            if len(ok) < len(result):
                emit(ev="commit_failed", error=str([str(tp.error) for tp in result if tp.error]))
    c.close()
    emit(ev="closed")


if __name__ == "__main__":
    main()
