"""refka's smoke check from inside the cluster (the Job of deploy/k8s/smoke, run by
`make kind-up`): a topic of 3 partitions and 3 replicas (min.insync.replicas=2), RECORDS
records produced through the bootstrap servers by an idempotent acks=all producer, then
consumed from the start of every partition; every record must come back once, in the
order it was produced in its partition. Clients reach the brokers at their advertised
INTERNAL names, so this also checks that those resolve and answer.

    python smoke.py --bootstrap refka-headless.refka.svc.cluster.local:9092 [--records 300]

Exit 0 and one line of figures when it holds, 1 and what went wrong otherwise.
Only refka's own client: it runs in refka's image.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from refka.client.connection import connect
from refka.client.consumer import Consumer
from refka.client.producer import Producer
from refka.client.structs import TopicPartition
from refka.protocol import ErrorCode
from refka.protocol.messages.create_topics import CreateTopics

PARTITIONS = 3


async def create_topic(bootstrap: str, topic: str, replication_factor: int, timeout_ms: int) -> None:
    conn = await connect(bootstrap, "refka-smoke")
    try:
        R = CreateTopics.Request
        resp = await conn.request(CreateTopics, R(
            topics=[R.CreatableTopic(name=topic, num_partitions=PARTITIONS, replication_factor=replication_factor,
                                     configs=[R.CreatableTopic.CreatableTopicConfig(name="min.insync.replicas",
                                                                                    value="2")])],
            timeout_ms=timeout_ms))
    finally:
        await conn.close()
    (t,) = resp.topics
    if t.error_code != ErrorCode.NONE:
        raise RuntimeError(f"CreateTopics {topic}: {ErrorCode(t.error_code).name} {t.error_message or ''}")


async def smoke(bootstrap: str, records: int, replication_factor: int, timeout: float) -> str:
    started = time.monotonic()
    topic = f"refka-smoke-{int(time.time())}"
    await create_topic(bootstrap, topic, replication_factor, int(timeout * 1000))
    producer = Producer(bootstrap_servers=bootstrap, client_id="refka-smoke", enable_idempotence=True,
                        linger_ms=5)
    await producer.start()
    try:
        futures = [await producer.send(topic, f"smoke-{i}".encode(), key=str(i).encode(), partition=i % PARTITIONS)
                   for i in range(records)]
        await producer.flush()
        acked = [f.result() for f in futures]
    finally:
        await producer.stop()
    produced = time.monotonic()
    expected: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for i, meta in enumerate(acked):
        expected[meta.partition].append(f"smoke-{i}".encode())
    consumer = Consumer(bootstrap_servers=bootstrap, client_id="refka-smoke", auto_offset_reset="earliest")
    await consumer.start()
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout
        while sum(map(len, got.values())) < records and time.monotonic() < deadline:
            for tp, batch in (await consumer.getmany(timeout_ms=500)).items():
                got[tp.partition].extend(r.value for r in batch if r.value is not None)
    finally:
        await consumer.stop()
    for p in range(PARTITIONS):
        if got[p] != expected[p]:
            missing = len(set(expected[p]) - set(got[p]))
            raise RuntimeError(f"partition {p}: {len(expected[p])} records acknowledged, {len(got[p])} consumed, "
                               f"{missing} missing, order {'kept' if not missing else 'unknown'}")
    return (f"smoke ok: topic {topic}, {records} records acknowledged (idempotent, acks=all) and consumed once, "
            f"in order, through {bootstrap}; produce {produced - started:.2f}s, "
            f"consume {time.monotonic() - produced:.2f}s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--records", type=int, default=300)
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for each step")
    args = parser.parse_args(argv)
    try:
        print(asyncio.run(smoke(args.bootstrap, args.records, args.replication_factor, args.timeout)), flush=True)
    except Exception as e:  # the Job's log says what failed, once
        print(f"smoke FAILED: {e!r}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
