"""The producer's batching, retry and re-hash logic against a scripted cluster: no broker,
no sockets. ``FakeCluster`` stands in for ``ClusterClient``: its Metadata answers are what
the test sets (``topic()``), and each Produce is answered by the test's ``answer``
function, which sees the request as the producer built it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from refka.client.connection import BrokerConnectionError
from refka.client.errors import KafkaError, KafkaTimeoutError
from refka.client.metadata import ClusterMetadata
from refka.client.partitioning import default_partition, murmur2, partition_for_key, to_positive
from refka.client.producer import Producer
from refka.protocol import ErrorCode
from refka.protocol.messages.describe_configs import DescribeConfigs
from refka.protocol.messages.init_producer_id import InitProducerId
from refka.protocol.messages.metadata import Metadata
from refka.protocol.messages.produce import Produce
from refka.protocol.records import iter_records, read_header

pytestmark = pytest.mark.timeout(30)

MR = Metadata.Response
MT = MR.MetadataResponseTopic
PR = Produce.Response
TPR = PR.TopicProduceResponse
PPR = TPR.PartitionProduceResponse


class FakeConnection:
    def __init__(self, cluster: FakeCluster, node_id: int) -> None:
        self.cluster, self.node_id, self.closed = cluster, node_id, False

    async def request(self, api: Any, body: Any, version: int | None = None, *,
                      expect_response: bool = True, timeout: float | None = None) -> Any:
        if api is InitProducerId:
            self.cluster.producer_ids += 1
            return InitProducerId.Response(error_code=0, producer_id=6 + self.cluster.producer_ids, producer_epoch=0)
        if api is DescribeConfigs:  # the compacted-topic tombstones ask (test_tombstones.py): no answer here
            return DescribeConfigs.Response(results=[])
        assert api is Produce
        return await self.cluster.produce(self.node_id, body)


class FakeCluster:
    def __init__(self) -> None:
        self.metadata = ClusterMetadata()
        self.topics: dict[str, tuple[list[tuple[int, int]], tuple[int, int] | None]] = {}
        self.refreshes = 0
        self.requests: list[tuple[int, Any]] = []  # (node, ProduceRequest)
        self.log: dict[tuple[str, int], list[tuple[bytes | None, bytes | None]]] = {}
        self.in_flight: set[tuple[str, int]] = set()
        self.answer: Callable[[int, str, Any, int], PPR] = self.append
        self.gate = asyncio.Event()
        self.gate.set()
        self.producer_ids = 0  # InitProducerId answered: 7, 8, ...

    def topic(self, name: str, leaders: list[tuple[int, int]], counts: tuple[int, int] | None = None) -> None:
        """The topic's (leader, leader epoch) per partition and (initial, undeleted), for the next Metadata."""
        self.topics[name] = (leaders, counts)

    async def refresh(self, topics: Any) -> bool:
        self.refreshes += 1
        out = []
        for name in topics:
            leaders, counts = self.topics[name]
            out.append(MT(error_code=0, name=name, partitions=[
                MT.MetadataResponsePartition(error_code=0, partition_index=i, leader_id=leader, leader_epoch=epoch)
                for i, (leader, epoch) in enumerate(leaders)],
                partition_counts=None if counts is None else MT.PartitionCounts(
                    initial_partition_count=counts[0], undeleted_partition_count=counts[1])))
        return self.metadata.apply(MR(brokers=[MR.MetadataResponseBroker(node_id=i, host="h", port=i)
                                               for i in range(3)], topics=out))

    async def connection(self, node_id: int) -> FakeConnection:
        return FakeConnection(self, node_id)

    async def close(self) -> None:
        pass

    async def produce(self, node_id: int, req: Any) -> Any:
        self.requests.append((node_id, req))
        for t in req.topic_data:
            for p in t.partition_data:
                assert (t.name, p.index) not in self.in_flight, "two Produce in flight for one partition"
                self.in_flight.add((t.name, p.index))
        await self.gate.wait()
        responses = []
        for t in req.topic_data:
            parts = []
            for p in t.partition_data:
                self.in_flight.discard((t.name, p.index))
                parts.append(self.answer(node_id, t.name, p, t.undeleted_partition_count))
            responses.append(TPR(name=t.name, partition_responses=parts))
        return PR(responses=responses)

    def append(self, node_id: int, topic: str, p: Any, undeleted: int) -> PPR:
        log = self.log.setdefault((topic, p.index), [])
        base = len(log)
        log.extend((r.key, r.value) for r in iter_records(p.records))
        return PPR(index=p.index, error_code=0, base_offset=base)


async def started(cluster: FakeCluster, **config: Any) -> Producer:
    producer = Producer(bootstrap_servers="fake:1", **config)
    producer._cluster = cluster  # type: ignore[assignment]
    await producer.start()
    return producer


async def test_batches_per_partition_in_order_and_by_size():
    cluster = FakeCluster()
    cluster.topic("t", [(0, 0), (1, 0)])
    producer = await started(cluster, linger_ms=50, max_batch_size=200)
    futs = [await producer.send("t", b"v%03d" % i, partition=i % 2) for i in range(40)]
    await producer.flush()
    metas = [f.result() for f in futs]
    assert [(m.partition, m.offset) for m in metas] == [(i % 2, i // 2) for i in range(40)]
    for p in (0, 1):
        assert [v for _k, v in cluster.log[("t", p)]] == [b"v%03d" % i for i in range(p, 40, 2)]
    sizes = [len(list(iter_records(pd.records))) for _n, r in cluster.requests
             for t in r.topic_data for pd in t.partition_data]
    assert max(sizes) < 20 and len(sizes) > 2  # 200-byte batches, not one per partition
    assert all(node == p.index for node, r in cluster.requests for t in r.topic_data for p in t.partition_data)
    await producer.stop()


async def test_a_retriable_error_is_retried_with_the_same_bytes_after_a_metadata_refresh():
    cluster = FakeCluster()
    cluster.topic("t", [(0, 0)])
    producer = await started(cluster, enable_idempotence=True, retry_backoff_ms=20)
    refused = []

    def answer(node_id, topic, p, undeleted):
        if not refused:
            refused.append(bytes(p.records))
            return PPR(index=p.index, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER, base_offset=-1)
        return cluster.append(node_id, topic, p, undeleted)

    cluster.answer = answer
    refreshes = cluster.refreshes
    meta = await producer.send_and_wait("t", b"x")
    assert meta.offset == 0 and producer.retries == 1 and producer.hinted_retries == 0
    assert cluster.refreshes > refreshes
    payloads = [bytes(r.topic_data[0].partition_data[0].records) for _n, r in cluster.requests]
    assert payloads == [refused[0], refused[0]]
    h = read_header(payloads[0])
    assert (h.producer_id, h.base_sequence) == (7, 0)
    meta = await producer.send_and_wait("t", b"y")
    assert read_header(cluster.requests[-1][1].topic_data[0].partition_data[0].records).base_sequence == 1
    await producer.stop()


async def test_a_kip951_hint_moves_the_leader_and_skips_the_backoff():
    cluster = FakeCluster()
    cluster.topic("t", [(0, 3)])
    producer = await started(cluster, retry_backoff_ms=600_000)  # a back-off would outlast the test

    def answer(node_id, topic, p, undeleted):
        if node_id == 0:
            return PPR(index=p.index, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER, base_offset=-1,
                       current_leader=PPR.LeaderIdAndEpoch(leader_id=2, leader_epoch=4))
        return cluster.append(node_id, topic, p, undeleted)

    cluster.answer = answer
    meta = await producer.send_and_wait("t", b"x")
    assert meta.offset == 0 and producer.hinted_retries == 1
    assert [n for n, _r in cluster.requests] == [0, 2]
    # the next Metadata still names broker 0 at epoch 3: the hint's epoch 4 stays
    await cluster.refresh(["t"])
    assert cluster.metadata.leader_for("t", 0) == 2
    await producer.stop()


async def test_a_stale_hint_is_not_taken():
    metadata = ClusterMetadata()
    cluster = FakeCluster()
    cluster.metadata = metadata
    cluster.topic("t", [(0, 5)])
    await cluster.refresh(["t"])
    assert not metadata.update_leader("t", 0, 1, 5, None)
    assert not metadata.update_leader("t", 0, 1, 4, None)
    assert metadata.update_leader("t", 0, 1, 6, None)
    assert metadata.leader_for("t", 0) == 1


async def test_a_non_retriable_error_fails_the_batch_and_gives_its_sequences_back():
    cluster = FakeCluster()
    cluster.topic("t", [(0, 0)])
    producer = await started(cluster, enable_idempotence=True)
    cluster.answer = lambda n, t, p, u: PPR(index=p.index, error_code=ErrorCode.MESSAGE_TOO_LARGE, base_offset=-1)
    with pytest.raises(KafkaError) as e:
        await producer.send_and_wait("t", b"x" * 10)
    assert e.value.code == ErrorCode.MESSAGE_TOO_LARGE
    cluster.answer = cluster.append
    await producer.send_and_wait("t", b"y")
    assert read_header(cluster.requests[-1][1].topic_data[0].partition_data[0].records).base_sequence == 0
    await producer.stop()


def keys_moving(initial: int, before: int, after: int, n: int) -> list[bytes]:
    """``n`` keys whose partition changes between ``before`` and ``after`` undeleted partitions."""
    out = []
    i = 0
    while len(out) < n:
        k = b"key-%d" % i
        h = to_positive(murmur2(k))
        if partition_for_key(h, initial, before) != partition_for_key(h, initial, after):
            out.append(k)
        i += 1
    return out


async def test_invalid_partition_metadata_rehashes_unacknowledged_records_in_send_order():
    """A shrink 4 -> 3 (initial 2): partition 3 is refused; the producer re-hashes every record
    of the topic not yet acknowledged, and records sent meanwhile queue behind them."""
    cluster = FakeCluster()
    cluster.topic("t", [(0, 0), (1, 0), (2, 0), (0, 0)], counts=(2, 4))
    producer = await started(cluster, linger_ms=1000, retry_backoff_ms=10)
    moving = keys_moving(2, 4, 3, 3)
    staying = [b"stay-a", b"stay-b"]
    sent: list[tuple[bytes, bytes]] = []

    def answer(node_id, topic, p, undeleted):
        if undeleted != cluster.topics["t"][1][1] or p.index >= cluster.topics["t"][1][1]:
            return PPR(index=p.index, error_code=ErrorCode.INVALID_PARTITION_METADATA, base_offset=-1)
        return cluster.append(node_id, topic, p, undeleted)

    cluster.answer = answer
    futs = []
    for i in range(5):
        for k in moving + staying:
            sent.append((k, b"%d" % i))
            futs.append(await producer.send("t", b"%d" % i, key=k))
    cluster.topic("t", [(0, 0), (1, 0), (2, 0), (0, 0)], counts=(2, 3))  # the shrink
    cluster.gate.clear()
    flushing = asyncio.ensure_future(producer.flush())
    while not cluster.requests:
        await asyncio.sleep(0.001)
    for i in range(5, 8):  # sent while the first answers are outstanding or the topic is re-hashed
        for k in moving + staying:
            sent.append((k, b"%d" % i))
            futs.append(await producer.send("t", b"%d" % i, key=k))
    cluster.gate.set()
    await flushing
    await producer.flush()
    assert producer.rehashes >= 1
    for f in futs:
        assert f.result().partition < 3
    for k in moving + staying:
        p = default_partition(k, 2, 3)
        assert [v for kk, v in cluster.log[("t", p)] if kk == k] == [v for kk, v in sent if kk == k], k
        assert all(kk != k for q, log in cluster.log.items() if q[1] != p for kk, _v in log)
    assert ("t", 3) not in cluster.log
    await producer.stop()


async def test_unkeyed_records_stay_on_undeleted_partitions():
    cluster = FakeCluster()
    cluster.topic("t", [(0, 0)] * 6, counts=(2, 3))
    producer = await started(cluster, max_batch_size=100)
    futs = [await producer.send("t", b"v%d" % i) for i in range(200)]
    await producer.flush()
    assert {f.result().partition for f in futs} == {0, 1, 2}
    await producer.stop()


async def test_send_waits_for_room_in_buffer_memory_and_gives_up_after_max_block_ms():
    """Records of 124 bytes (100-byte values + 24 of overhead) in a 500-byte buffer: four fit,
    the fifth send waits until answers free room (what lingered is sent at once, so room
    comes without waiting out linger_ms); with the broker silent it raises after max_block_ms."""
    cluster = FakeCluster()
    cluster.topic("t", [(0, 0)])
    cluster.gate.clear()  # Produce answered only when the test says so
    producer = await started(cluster, linger_ms=10_000, buffer_memory=500, max_block_ms=200)
    futs = [await producer.send("t", b"x" * 100, partition=0) for _ in range(4)]
    fifth = asyncio.ensure_future(producer.send("t", b"y" * 100, partition=0))
    await asyncio.sleep(0.05)
    assert not fifth.done() and cluster.requests, "waiting for room, the lingering batch sent"
    cluster.gate.set()
    fut5 = await asyncio.wait_for(fifth, 1)
    await producer.flush()
    assert [f.result().offset for f in [*futs, fut5]] == [0, 1, 2, 3, 4]

    cluster.gate.clear()
    for _ in range(4):
        await producer.send("t", b"z" * 100, partition=0)
    with pytest.raises(KafkaTimeoutError):
        await producer.send("t", b"w" * 100, partition=0)
    cluster.gate.set()
    await producer.stop()
    assert [v for _k, v in cluster.log[("t", 0)]][5:] == [b"z" * 100] * 4  # the refused record was never sent


async def test_a_record_larger_than_buffer_memory_alone_goes_through():
    cluster = FakeCluster()
    cluster.topic("t", [(0, 0)])
    producer = await started(cluster, buffer_memory=50)
    meta = await producer.send_and_wait("t", b"v" * 1000, partition=0)
    assert meta.offset == 0
    await producer.stop()


def produced_headers(cluster: FakeCluster) -> list[tuple[int, int, int]]:
    """(partition, producer id, base sequence) of every batch the producer sent, in order."""
    out = []
    for _node, req in cluster.requests:
        for t in req.topic_data:
            for p in t.partition_data:
                h = read_header(p.records)
                out.append((p.index, h.producer_id, h.base_sequence))
    return out


def refka_leader(cluster: FakeCluster, lose: set[int], refuse: set[int]) -> Callable[[int, str, Any, int], PPR]:
    """Produce answered as refka's leader does after a shrink (handlers/produce.py): a batch it
    has (producer id, base sequence) is answered as its duplicate, with its offset, whatever
    the count; a batch of a partition in ``refuse`` is refused INVALID_PARTITION_METADATA
    once, and nothing appended; for a (partition, producer id) in ``lose`` the batch is
    appended and every answer lost (the connection breaks) while it stays in ``lose``."""
    appended: dict[tuple[int, int, int], int] = {}

    def answer(node_id: int, topic: str, p: Any, undeleted: int) -> PPR:
        h = read_header(p.records)
        key = (p.index, h.producer_id, h.base_sequence)
        if key in appended:
            if (p.index, h.producer_id) in lose:
                raise BrokerConnectionError("connection to the leader lost")
            return PPR(index=p.index, error_code=0, base_offset=appended[key])
        if p.index in refuse:
            refuse.discard(p.index)
            return PPR(index=p.index, error_code=ErrorCode.INVALID_PARTITION_METADATA)
        resp = cluster.append(node_id, topic, p, undeleted)
        appended[key] = resp.base_offset
        if (p.index, h.producer_id) in lose:
            raise BrokerConnectionError("connection to the leader lost")
        return resp

    return answer


async def lost_then_rehashed(lose_again: bool) -> tuple[FakeCluster, Producer, Any, Any]:
    """Partition 0's batch is appended and its answer lost; partition 1's is refused
    INVALID_PARTITION_METADATA, which re-hashes the topic before partition 0's batch is
    sent again (its retry waits out the back-off)."""
    cluster = FakeCluster()
    cluster.topic("t", [(0, 0), (1, 0)], counts=(2, 2))
    lose = {(0, 7)}  # the first producer id's
    cluster.answer = refka_leader(cluster, lose, refuse={1})
    producer = await started(cluster, enable_idempotence=True, linger_ms=1, retry_backoff_ms=200)
    first = await producer.send("t", b"first", partition=0)
    while not cluster.requests:
        await asyncio.sleep(0.005)
    if not lose_again:
        lose.clear()  # the leader answers again from now on
    other = await producer.send("t", b"other", partition=1)
    await asyncio.wait_for(asyncio.gather(first, other), 5)
    await producer.stop()
    return cluster, producer, first.result(), other.result()


async def test_a_batch_whose_answer_was_lost_is_resolved_as_a_duplicate_before_a_rehash():
    """A batch appended whose answer was lost, then a re-hash: the batch is sent once more as it
    was, answered as the duplicate it is (acknowledged at its offset, in the log once) and the
    producer keeps its id: no record is written twice."""
    cluster, producer, first, other = await lost_then_rehashed(lose_again=False)
    assert producer.resolved_unknown == 1 and cluster.producer_ids == 1
    assert [v for _k, v in cluster.log[("t", 0)]] == [b"first"]
    assert [v for _k, v in cluster.log[("t", 1)]] == [b"other"]
    assert (first.offset, other.offset) == (0, 0)
    # partition 1's refused batch gave its sequence back: sent again under sequence 0
    assert produced_headers(cluster) == [(0, 7, 0), (1, 7, 0), (0, 7, 0), (1, 7, 0)]


async def test_a_batch_still_of_unknown_fate_at_a_rehash_leaves_its_sequences_unused():
    """Under a controller kill the scenario saw it: a batch appended whose answer was lost, a
    re-hash, then other records sent with that batch's sequence, which the broker took for a
    duplicate and answered with the first batch's offset (acknowledged, never written). When
    sending it again before the re-hash brings no answer either, the re-hash takes a new
    producer id, and the records go under sequences that start over: the batch may then be in
    the log twice, never out of order."""
    cluster, producer, first, other = await lost_then_rehashed(lose_again=True)
    assert producer.resolved_unknown == 0 and cluster.producer_ids == 2
    assert [v for _k, v in cluster.log[("t", 0)]] == [b"first", b"first"]  # twice, never out of order
    assert (first.offset, other.offset) == (1, 0)
    assert produced_headers(cluster)[:3] == [(0, 7, 0), (1, 7, 0), (0, 7, 0)]
    assert set(produced_headers(cluster)[3:]) == {(0, 8, 0), (1, 8, 0)}


async def test_out_of_order_sequence_takes_a_new_producer_id_and_the_batch_goes_again():
    cluster = FakeCluster()
    cluster.topic("t", [(0, 0)])
    refused = {"n": 0}

    def answer(node_id: int, topic: str, p: Any, undeleted: int) -> PPR:
        if refused["n"] == 0:
            refused["n"] += 1
            return PPR(index=p.index, error_code=ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        return cluster.append(node_id, topic, p, undeleted)

    cluster.answer = answer
    producer = await started(cluster, enable_idempotence=True, linger_ms=1, retry_backoff_ms=10)
    meta = await asyncio.wait_for(producer.send_and_wait("t", b"v", partition=0), 5)
    await producer.stop()
    assert meta.offset == 0 and cluster.producer_ids == 2
    assert produced_headers(cluster) == [(0, 7, 0), (0, 8, 0)]
