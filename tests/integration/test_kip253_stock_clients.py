"""KIP-253 end to end on three ``refka serve`` processes over a private ZooKeeper, with
stock clients producing and consuming the whole time: a topic of 4 partitions (RF=2) is
expanded to 8, shrunk to 6, its partitions 6 and 7 drained (consumed, then DeleteRecords)
and removed by the controller's drain task, then expanded to 10.

After each step the znodes are read with kazoo field by field (the ZooKeeper form the
seed defines) and every broker must answer Metadata with the same partitions and the
same initial/undeleted counts (the znodes are the one source of truth).

Stock clients know nothing of KIP-253: they hash keys over every partition Metadata
lists, marked ones included, so a record they send to a marked partition is refused
(UNKNOWN_TOPIC_OR_PARTITION for a producer that sent no count, which it retries) and,
once its retries or its delivery timeout run out, not acknowledged. What must hold:
no producer meets an unrecoverable error (both are still acknowledged records after
the last step; kafka-python's idempotent producer, its default, would have gone fatal
on an error code it does not know), refusals happen only on the marked partitions, and
every acknowledged record is consumed by the confluent-kafka group consumer running
throughout (rebalancing at each change).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.errors import OutOfOrderSequenceNumberError
from kazoo.client import KazooClient

from tests.integration.cluster_helpers import FAST, TIMEOUT, ZkCluster, metadata
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REFRESH_MS = 500
# How long a stock producer keeps a record it cannot deliver (a marked partition's); see
# _kafka_python_producer for why short.
DELIVERY_TIMEOUT_MS = 15_000
# What confluent-kafka reports for a record keyed onto a marked partition: the broker's
# refusal it retries, its own timeout, or the partition gone from the metadata.
CK_EXPECTED = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._MSG_TIMED_OUT, KafkaError._UNKNOWN_PARTITION}  # the clients see partition changes within half a second


@pytest.fixture
def zk3(zookeeper, tmp_path):
    c = ZkCluster(zookeeper, tmp_path, overrides={**FAST, "partition.deletion.check.interval.ms": "300"})
    c.start()
    yield c
    c.stop()


def get_json(kz: KazooClient, path: str) -> dict[str, Any]:
    return json.loads(kz.get(path)[0])


def leader_epochs(kz: KazooClient, topic: str) -> dict[int, int]:
    doc = get_json(kz, f"/brokers/topics/{topic}")
    return {int(p): get_json(kz, f"/brokers/topics/{topic}/partitions/{p}/state")["leader_epoch"]
            for p in doc["partitions"]}


def partition_znode(kz: KazooClient, topic: str, p: int) -> dict[str, Any]:
    return get_json(kz, f"/brokers/topics/{topic}/partitions/{p}")


def every_broker_says(zk3: ZkCluster, topic: str, partitions: int, initial: int, undeleted: int) -> None:
    """Each broker's Metadata lists ``partitions`` partitions with these counts."""
    def agreed() -> bool:
        for node in zk3.running():
            (t,) = metadata(zk3.port(node), topic).topics
            counts = t.partition_counts
            if (len(t.partitions), counts.initial_partition_count if counts else None,
                    counts.undeleted_partition_count if counts else None) != (partitions, initial, undeleted):
                return False
        return True

    wait_until(agreed, message=f"every broker: {partitions} partitions, counts {initial}/{undeleted}",
               ignoring=(Exception,))


class Workload:
    """A confluent-kafka producer and a kafka-python producer sending keyed records,
    and a confluent-kafka group consumer, each in its own thread."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.lock = threading.Lock()
        self.acked: dict[tuple[int, int], bytes] = {}  # (partition, offset) -> value
        self.acks: Counter[str] = Counter()  # client -> records acknowledged
        self.refused: Counter[tuple[str, str]] = Counter()  # (client, error)
        self.refused_partitions: set[int] = set()  # where confluent-kafka's were refused
        self.unexpected: list[str] = []
        self.consumed: dict[tuple[int, int], bytes] = {}
        self.assigned: set[int] = set()  # the group consumer's partitions, as of its last rebalance
        self.threads = [threading.Thread(target=f, daemon=True)
                        for f in (self._confluent_producer, self._kafka_python_producer, self._consumer)]

    def start(self) -> Workload:
        for t in self.threads:
            t.start()
        return self

    def stop(self) -> None:
        self.stop_producing.set()
        self.threads[0].join(TIMEOUT)
        self.threads[1].join(TIMEOUT)

    def _ack(self, client: str, partition: int, offset: int, value: bytes) -> None:
        with self.lock:
            self.acked[(partition, offset)] = value
            self.acks[client] += 1

    def _refuse(self, client: str, error: str, expected: bool, text: str) -> None:
        with self.lock:
            self.refused[(client, error)] += 1
            if not expected:
                self.unexpected.append(f"{client}: {text}")

    def _confluent_producer(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5,
                      "topic.metadata.refresh.interval.ms": REFRESH_MS, "message.timeout.ms": DELIVERY_TIMEOUT_MS})

        def report(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                self._ack("confluent", msg.partition(), msg.offset(), msg.value())
            else:
                with self.lock:
                    self.refused_partitions.add(msg.partition())
                # Refused, retried until the partition went or message.timeout.ms ran out.
                self._refuse("confluent", err.name(), err.code() in CK_EXPECTED, str(err))

        i = 0
        while not self.stop_producing.is_set():
            key = b"key-%d" % (i % 97)
            try:
                p.produce(self.topic, key=key, value=b"ck-%d" % i, on_delivery=report)
            except BufferError:
                p.poll(0.05)
                continue
            i += 1
            p.poll(0.002)
        assert p.flush(60) == 0

    def _kafka_python_producer(self) -> None:
        # Its default is the idempotent producer, whose sequence numbers are per (topic, partition
        # index): a batch it still retries for the removed partition 6 when index 6 is created
        # again (step 4) goes there with the old partition's sequence and is refused
        # OUT_OF_ORDER_SEQUENCE_NUMBER, as Kafka would refuse it (Kafka never creates an index
        # twice; KIP-253 does). CI caught one. The short delivery timeout makes such a batch rare
        # (it expires first); the error is expected, and the producer must go on producing.
        p = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=5,
                          metadata_max_age_ms=REFRESH_MS, retries=5,
                          delivery_timeout_ms=DELIVERY_TIMEOUT_MS, request_timeout_ms=5000)
        i = 0
        while not self.stop_producing.is_set():
            fut = p.send(self.topic, key=b"kp-key-%d" % (i % 89), value=b"kp-%d" % i)
            value = b"kp-%d" % i

            def done(md: Any, value: bytes = value) -> None:
                self._ack("kafka-python", md.partition, md.offset, value)

            def failed(exc: BaseException) -> None:
                # Retriable errors whose retries ran out, or a batch for a removed partition
                # sent to its successor (above); anything else is unexpected.
                expected = bool(getattr(exc, "retriable", False)) or isinstance(exc, OutOfOrderSequenceNumberError)
                self._refuse("kafka-python", type(exc).__name__, expected, repr(exc))

            fut.add_callback(done)
            fut.add_errback(failed)
            i += 1
            time.sleep(0.004)
        p.flush(60)
        p.close(10)

    def _consumer(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"g-{self.topic}",
                      "auto.offset.reset": "earliest", "enable.auto.commit": True,
                      "auto.commit.interval.ms": 200, "topic.metadata.refresh.interval.ms": REFRESH_MS,
                      "session.timeout.ms": 10_000, "heartbeat.interval.ms": 500})
        def on_assign(_consumer: Any, partitions: list[Any]) -> None:
            with self.lock:
                self.assigned = {tp.partition for tp in partitions}

        c.subscribe([self.topic], on_assign=on_assign)
        try:
            while not self.stop_consuming.is_set():
                msg = c.poll(0.2)
                if msg is None or msg.error():
                    continue
                with self.lock:
                    self.consumed[(msg.partition(), msg.offset())] = msg.value()
        finally:
            c.close()

    def unconsumed(self, partitions: set[int] | None = None) -> dict[tuple[int, int], bytes]:
        with self.lock:
            return {k: v for k, v in self.acked.items()
                    if (partitions is None or k[0] in partitions) and self.consumed.get(k) != v}

    def acked_in(self, partition: int) -> int:
        with self.lock:
            return sum(1 for p, _ in self.acked if p == partition)


def test_expand_shrink_drain_expand_with_stock_clients(zk3, kz):
    topic = f"k253-{uuid.uuid4().hex[:8]}"
    zk3.create_topic(topic, [[0, 1], [1, 2], [2, 0], [0, 2]])
    every_broker_says(zk3, topic, 4, 4, 4)
    doc = get_json(kz, f"/brokers/topics/{topic}")
    assert (doc["initial_partition_count"], doc["undeleted_partition_count"]) == (4, 4)
    work = Workload(zk3.bootstrap, topic).start()
    ck_admin = AdminClient({"bootstrap.servers": zk3.bootstrap})
    kp_admin = KafkaAdminClient(bootstrap_servers=zk3.bootstrap)
    try:
        wait_until(lambda: all(work.acked_in(p) > 0 for p in range(4)), message="records in 0..3")

        # 1. Expand 4 -> 8 (confluent-kafka's create_partitions).
        before = leader_epochs(kz, topic)
        ck_admin.create_partitions([NewPartitions(topic, 8)], operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
        every_broker_says(zk3, topic, 8, 4, 8)
        doc = get_json(kz, f"/brokers/topics/{topic}")
        assert (doc["initial_partition_count"], doc["undeleted_partition_count"]) == (4, 8)
        assert sorted(map(int, doc["partitions"])) == list(range(8))
        after = leader_epochs(kz, topic)
        for p in range(4, 8):
            z = partition_znode(kz, topic, p)
            assert {int(k): v for k, v in z["leaderEpochAfterCreation"].items()} == before, (p, z)
            assert z["leaderEpochBeforeDeletion"] == {}
            assert after[p] == 0
        assert {p: after[p] for p in range(4)} == {p: e + 1 for p, e in before.items()}
        wait_until(lambda: all(work.acked_in(p) > 0 for p in range(8)), message="records in 0..7")

        # 2. Shrink 8 -> 6 (kafka-python's create_partitions): 6 and 7 marked.
        before = leader_epochs(kz, topic)
        kp_admin.create_partitions({topic: KpNewPartitions(total_count=6)}, timeout_ms=int(TIMEOUT * 1000))
        every_broker_says(zk3, topic, 8, 4, 6)  # marked partitions stay listed, for draining
        wait_until(lambda: all(partition_znode(kz, topic, p)["leaderEpochBeforeDeletion"] for p in (6, 7))
                   and leader_epochs(kz, topic)[0] == before[0] + 1, message="6 and 7 marked, 0..5 bumped")
        doc = get_json(kz, f"/brokers/topics/{topic}")
        assert (doc["initial_partition_count"], doc["undeleted_partition_count"]) == (4, 6)
        after = leader_epochs(kz, topic)
        for p in (6, 7):
            z = partition_znode(kz, topic, p)
            assert {int(k): v for k, v in z["leaderEpochBeforeDeletion"].items()} == \
                {q: before[q] for q in range(6)}, (p, z)
        assert {p: after[p] for p in range(6)} == {p: before[p] + 1 for p in range(6)}
        assert {p: after[p] for p in (6, 7)} == {p: before[p] for p in (6, 7)}

        # 3. Drain 6 and 7: no record lands there any more; once the group has consumed
        # every one, DeleteRecords empties them and the drain task removes them.
        time.sleep(1.0)  # anything in flight before the marks is acknowledged or refused by now
        ends = {p: work.acked_in(p) for p in (6, 7)}
        wait_until(lambda: not work.unconsumed({6, 7}), timeout=60, message="6 and 7 consumed")
        assert {p: work.acked_in(p) for p in (6, 7)} == ends, "records acknowledged in a marked partition"
        high = {p: ck_consumer_watermarks(zk3.bootstrap, topic, p)[1] for p in (6, 7)}
        futures = ck_admin.delete_records([CkTopicPartition(topic, p, h) for p, h in high.items()],
                                          operation_timeout=TIMEOUT)
        for f in futures.values():
            f.result(TIMEOUT)
        wait_until(lambda: sorted(map(int, get_json(kz, f"/brokers/topics/{topic}")["partitions"]))
                   == list(range(6)), timeout=60, message="6 and 7 removed from the assignment")
        wait_until(lambda: sorted(map(int, kz.get_children(f"/brokers/topics/{topic}/partitions")))
                   == list(range(6)), message="partition znodes 6 and 7 deleted")
        every_broker_says(zk3, topic, 6, 4, 6)
        # A stock consumer cannot tell a partition created later at index 6 from the one
        # removed (KIP-232's partition epoch is what would): until its group rebalances off
        # 6 and 7 it may go on committing, and fetching from, the old positions there.
        wait_until(lambda: work.assigned == set(range(6)), message=lambda: f"the group on 0..5: {work.assigned}")

        # 4. Expand again 6 -> 10: possible once nothing is marked.
        before = leader_epochs(kz, topic)
        ck_admin.create_partitions([NewPartitions(topic, 10)], operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
        every_broker_says(zk3, topic, 10, 4, 10)
        for p in range(6, 10):
            z = partition_znode(kz, topic, p)
            assert {int(k): v for k, v in z["leaderEpochAfterCreation"].items()} == before, (p, z)
        wait_until(lambda: all(work.acked_in(p) > 0 for p in range(6, 10)), message="records in 6..9")
        acks = Counter(work.acks)
        wait_until(lambda: all(work.acks[c] > acks[c] + 50 for c in ("confluent", "kafka-python")),
                   message=lambda: f"both producers still acknowledged after the last step: {work.acks}")
    except BaseException:
        work.stop_consuming.set()  # no consumer left polling brokers that are going away
        raise
    finally:
        work.stop()
        kp_admin.close()

    wait_until(lambda: not work.unconsumed(), timeout=60,
               message=lambda: f"{len(work.unconsumed())} acknowledged records not consumed, "
                               f"among them {sorted(work.unconsumed())[:5]}")
    work.stop_consuming.set()
    work.threads[2].join(TIMEOUT)
    assert not work.unexpected, work.unexpected[:5]
    assert len(work.acked) > 1000, len(work.acked)
    # Refused only where they hashed keys onto the marked partitions 6 and 7.
    assert work.refused_partitions <= {6, 7}, (work.refused_partitions, work.refused)


def ck_consumer_watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wm-{uuid.uuid4().hex[:6]}"})
    try:
        return c.get_watermark_offsets(CkTopicPartition(topic, partition), timeout=TIMEOUT)
    finally:
        c.close()
