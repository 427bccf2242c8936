"""The idempotent producer against real ``refka serve`` processes.

- InitProducerId v0-v5 hands out producer ids that are unique across calls
  and across restarts of the broker; a transactional id is refused with
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
- On a raw connection: the same batch sent again is answered with its
  original base offset and the log holds it once; a sequence gap is
  OUT_OF_ORDER_SEQUENCE_NUMBER; an old epoch INVALID_PRODUCER_EPOCH; a retry
  older than the five batches kept DUPLICATE_SEQUENCE_NUMBER.
- confluent-kafka (enable.idempotence=true) and kafka-python
  (enable_idempotence=True) produce through tests/proxy.py, which swallows
  the response to every n-th Produce request and then drops every
  connection: the broker has the records, the client does not know and sends
  them again. Every record is in the log exactly once, in the order it was
  produced to its partition, at the offset its delivery report names.
- The producer state survives a restart, clean (SIGTERM: a snapshot at the
  log end offset) or not (kill -9: the snapshot of the last segment roll,
  then the batch headers after it): a resend after the restart is still
  deduplicated.

The logs are read back over refka's own wire client straight from the
broker's port (Fetch v12), not through the proxy.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from refka.client.connection import BrokerConnection, BrokerConnectionError
from refka.protocol import ErrorCode
from refka.protocol.messages.create_topics import CreateTopics
from refka.protocol.messages.fetch import Fetch
from refka.protocol.messages.init_producer_id import InitProducerId
from refka.protocol.messages.produce import Produce
from refka.protocol.records import build_batch, iter_records, parse_batches
from tests.brokers import BrokerProcess, free_port_block
from tests.proxy import KafkaProxy

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

# Generous: only there so that a broken broker fails a test instead of hanging it.
TIMEOUT = 60.0
RETRIABLE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE}


def unique(prefix: str) -> str:
    return f"idem-{prefix}-{uuid.uuid4().hex[:8]}"


# -- refka's wire client --------------------------------------------------------------


async def connect(port: int) -> BrokerConnection:
    return await BrokerConnection("127.0.0.1", port, client_id="idempotence-test").connect()


async def init_producer_id(conn: BrokerConnection, version: int = 5, transactional_id: str | None = None) -> Any:
    return await conn.request(InitProducerId, InitProducerId.Request(
        transactional_id=transactional_id, transaction_timeout_ms=60_000), version=version)


async def new_producer_id(conn: BrokerConnection) -> int:
    resp = await init_producer_id(conn)
    assert resp.error_code == ErrorCode.NONE and resp.producer_epoch == 0, resp
    return int(resp.producer_id)


async def create_topic(conn: BrokerConnection, name: str, partitions: int = 1,
                       configs: dict[str, str] | None = None) -> None:
    R = CreateTopics.Request
    resp = await conn.request(CreateTopics, R(
        topics=[R.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=[],
                                 configs=[R.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                                          for k, v in (configs or {}).items()])],
        timeout_ms=int(TIMEOUT * 1000)), version=7)
    assert resp.topics[0].error_code == ErrorCode.NONE, resp.topics[0]


async def produce(conn: BrokerConnection, topic: str, batch: bytes, partition: int = 0) -> tuple[int, int]:
    """(error code, base offset) of one batch, acks=all. Waits out the moments after
    a topic creation or a restart when the broker does not lead the partition yet."""
    P = Produce.Request
    req = P(transactional_id=None, acks=-1, timeout_ms=int(TIMEOUT * 1000), topic_data=[
        P.TopicProduceData(name=topic, partition_data=[
            P.TopicProduceData.PartitionProduceData(index=partition, records=bytes(batch))])])
    for _ in range(200):
        resp = await conn.request(Produce, req, version=11)
        p = resp.responses[0].partition_responses[0]
        if p.error_code not in RETRIABLE:
            return p.error_code, p.base_offset
        await asyncio.sleep(0.05)
    raise AssertionError(f"{topic}-{partition} never got a leader: {p.error_code}")


def idempotent_batch(pid: int, seq: int, values: list[bytes], epoch: int = 0) -> bytearray:
    return build_batch([(None, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq)


async def read_log(conn: BrokerConnection, topic: str, partition: int = 0) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record of a partition, from offset 0 to the high watermark."""
    R = Fetch.Request
    out: list[tuple[int, bytes | None]] = []
    offset = 0
    while True:
        req = R(max_wait_ms=0, min_bytes=0, max_bytes=64 << 20, session_id=0, session_epoch=-1,
                topics=[R.FetchTopic(topic=topic, partitions=[R.FetchTopic.FetchPartition(
                    partition=partition, fetch_offset=offset, partition_max_bytes=16 << 20)])],
                forgotten_topics_data=[])
        resp = await conn.request(Fetch, req, version=12)
        p = resp.responses[0].partitions[0]
        assert p.error_code == ErrorCode.NONE, p.error_code
        data = bytes(p.records or b"")
        headers = parse_batches(data) if data else []
        for h in headers:
            for r in iter_records(memoryview(data)[h.position:h.position + h.length]):
                out.append((h.base_offset + r.offset_delta, r.value))
        if not headers or headers[-1].next_offset >= p.high_watermark:
            return out
        offset = headers[-1].next_offset


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


# -- InitProducerId and Produce on a raw connection -----------------------------------


async def test_init_producer_id_every_version_gives_a_new_id(broker):
    conn = await connect(broker.port)
    try:
        assert conn.versions[InitProducerId.key] == (0, 5)
        ids = []
        for v in range(6):
            resp = await init_producer_id(conn, v)
            assert (resp.error_code, resp.producer_epoch) == (ErrorCode.NONE, 0), (v, resp)
            ids.append(resp.producer_id)
        # v3+ carries the producer's current id and epoch (KIP-360): an idempotent
        # producer gets a new id all the same, as from Kafka.
        resp = await conn.request(InitProducerId, InitProducerId.Request(
            transactional_id=None, transaction_timeout_ms=-1, producer_id=ids[-1], producer_epoch=0), version=4)
        assert resp.error_code == ErrorCode.NONE
        ids.append(resp.producer_id)
        assert len(set(ids)) == len(ids) and min(ids) >= 0
    finally:
        await conn.close()


async def test_transactional_id_is_refused(broker):
    conn = await connect(broker.port)
    try:
        for v in range(6):
            resp = await init_producer_id(conn, v, transactional_id="tx-1")
            assert resp.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, v
            assert (resp.producer_id, resp.producer_epoch) == (-1, -1)
    finally:
        await conn.close()


async def test_resent_batch_gets_its_original_offset_and_is_stored_once(broker):
    topic = unique("resend")
    conn = await connect(broker.port)
    try:
        await create_topic(conn, topic)
        pid = await new_producer_id(conn)
        other = await new_producer_id(conn)
        first = idempotent_batch(pid, 0, [b"a0", b"a1"])
        assert await produce(conn, topic, first) == (ErrorCode.NONE, 0)
        assert await produce(conn, topic, idempotent_batch(other, 0, [b"b0"])) == (ErrorCode.NONE, 2)
        second = idempotent_batch(pid, 2, [b"a2"])
        assert await produce(conn, topic, second) == (ErrorCode.NONE, 3)
        # The same bytes again, twice, and the first batch after the second.
        assert await produce(conn, topic, second) == (ErrorCode.NONE, 3)
        assert await produce(conn, topic, second) == (ErrorCode.NONE, 3)
        assert await produce(conn, topic, first) == (ErrorCode.NONE, 0)
        assert await produce(conn, topic, idempotent_batch(pid, 3, [b"a3"])) == (ErrorCode.NONE, 4)
        assert await read_log(conn, topic) == [(0, b"a0"), (1, b"a1"), (2, b"b0"), (3, b"a2"), (4, b"a3")]
    finally:
        await conn.close()


async def test_sequence_and_epoch_errors(broker):
    topic = unique("errors")
    conn = await connect(broker.port)
    try:
        await create_topic(conn, topic)
        pid = await new_producer_id(conn)
        for seq in range(7):
            assert await produce(conn, topic, idempotent_batch(pid, seq, [b"s%d" % seq])) == (ErrorCode.NONE, seq)
        # A gap.
        assert await produce(conn, topic, idempotent_batch(pid, 8, [b"gap"])) == (
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
        # A retry older than the five batches kept (sequences 2-6).
        assert await produce(conn, topic, idempotent_batch(pid, 1, [b"s1"])) == (
            ErrorCode.DUPLICATE_SEQUENCE_NUMBER, -1)
        # Inside the kept range but not one of the kept batches.
        assert await produce(conn, topic, idempotent_batch(pid, 3, [b"s3", b"s4"])) == (
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
        # A new epoch starts at sequence 0, and fences the old one.
        assert await produce(conn, topic, idempotent_batch(pid, 7, [b"e1"], epoch=1)) == (
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
        assert await produce(conn, topic, idempotent_batch(pid, 0, [b"e1"], epoch=1)) == (ErrorCode.NONE, 7)
        assert await produce(conn, topic, idempotent_batch(pid, 7, [b"s7"], epoch=0)) == (
            ErrorCode.INVALID_PRODUCER_EPOCH, -1)
        # A producer the partition has no state for starts at any sequence (Kafka 2.5+).
        stranger = await new_producer_id(conn)
        assert await produce(conn, topic, idempotent_batch(stranger, 40, [b"x"])) == (ErrorCode.NONE, 8)
        assert [v for _, v in await read_log(conn, topic)] == [b"s%d" % i for i in range(7)] + [b"e1", b"x"]
    finally:
        await conn.close()


# -- real clients through a proxy that drops connections ------------------------------


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    """(proxy, broker): the broker advertises the proxy, so clients stay behind it."""
    port = free_port_block(1)
    proxy = KafkaProxy("127.0.0.1", port).start()
    broker = BrokerProcess(tmp_path_factory.mktemp("idem-proxy") / "data", port=port,
                           overrides=proxy.advertised()).start()
    yield proxy, broker
    broker.stop()
    proxy.stop()


PARTITIONS = 3
RECORDS = 3000


def expected_per_partition(tag: str) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for i in range(RECORDS):
        out[i % PARTITIONS].append(f"{tag}-{i}".encode())
    return out


def check_log_exactly_once(broker: BrokerProcess, topic: str, tag: str,
                           delivered: dict[int, list[tuple[bytes, int]]]) -> None:
    """Each partition holds its records once each, in produce order, at the offsets the
    delivery reports named."""
    expected = expected_per_partition(tag)

    async def read_all() -> dict[int, list[tuple[int, bytes | None]]]:
        conn = await connect(broker.port)  # type: ignore[arg-type]
        try:
            return {p: await read_log(conn, topic, p) for p in range(PARTITIONS)}
        finally:
            await conn.close()

    logs = run(read_all())
    for p in range(PARTITIONS):
        values = [v for _, v in logs[p]]
        assert len(values) == len(set(values)), f"partition {p}: duplicates"
        assert values == expected[p], f"partition {p}: lost or reordered records"
        offsets = {v: o for o, v in logs[p]}
        assert sorted(delivered[p], key=lambda d: d[1]) == [(v, offsets[v]) for v in expected[p]], (
            f"partition {p}: delivery reports do not name the offsets in the log")


def test_confluent_idempotent_producer_exactly_once_through_dropped_connections(proxied):
    from confluent_kafka import Producer

    proxy, broker = proxied
    topic = unique("ck")
    run(_create(broker.port, topic, PARTITIONS))
    swallowed, drops = proxy.responses_swallowed, proxy.drops
    delivered: dict[int, list[tuple[bytes, int]]] = {p: [] for p in range(PARTITIONS)}
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered[msg.partition()].append((msg.value(), msg.offset()))

    producer = Producer({
        "bootstrap.servers": proxy.bootstrap,
        "enable.idempotence": True,
        "linger.ms": 2,
        "batch.num.messages": 25,
        "reconnect.backoff.ms": 10,
        "reconnect.backoff.max.ms": 200,
        "retry.backoff.ms": 20,
        "message.timeout.ms": int(TIMEOUT * 1000 * 3),
    })
    proxy.drop_produce_responses(every=5)
    try:
        for i in range(RECORDS):
            producer.produce(topic, value=f"ck-{i}".encode(), partition=i % PARTITIONS, on_delivery=on_delivery)
            producer.poll(0)
        left = producer.flush(TIMEOUT * 3)
    finally:
        proxy.disarm()
    assert left == 0 and errors == []
    assert proxy.responses_swallowed - swallowed >= 3, "the proxy dropped too few produce responses"
    assert proxy.drops > drops
    check_log_exactly_once(broker, topic, "ck", delivered)


def test_kafka_python_idempotent_producer_exactly_once_through_dropped_connections(proxied):
    from kafka import KafkaProducer

    proxy, broker = proxied
    topic = unique("kp")
    run(_create(broker.port, topic, PARTITIONS))
    swallowed = proxy.responses_swallowed
    producer = KafkaProducer(
        bootstrap_servers=proxy.bootstrap,
        enable_idempotence=True,
        acks="all",
        linger_ms=2,
        batch_size=512,
        reconnect_backoff_ms=10,
        reconnect_backoff_max_ms=200,
        retry_backoff_ms=20,
        delivery_timeout_ms=int(TIMEOUT * 1000 * 3),
        request_timeout_ms=int(TIMEOUT * 1000),
    )
    proxy.drop_produce_responses(every=5)
    try:
        futures = [(i % PARTITIONS, f"kp-{i}".encode(),
                    producer.send(topic, value=f"kp-{i}".encode(), partition=i % PARTITIONS))
                   for i in range(RECORDS)]
        producer.flush(TIMEOUT * 3)
        delivered: dict[int, list[tuple[bytes, int]]] = {p: [] for p in range(PARTITIONS)}
        for p, value, fut in futures:
            meta = fut.get(TIMEOUT)
            assert meta.partition == p
            delivered[p].append((value, meta.offset))
    finally:
        proxy.disarm()
        producer.close(10)
    assert proxy.responses_swallowed - swallowed >= 3, "the proxy dropped too few produce responses"
    check_log_exactly_once(broker, topic, "kp", delivered)


async def _create(port: int, topic: str, partitions: int) -> None:
    conn = await connect(port)
    try:
        await create_topic(conn, topic, partitions)
    finally:
        await conn.close()


# -- restarts -------------------------------------------------------------------------


@pytest.mark.parametrize("stop", ["sigterm", "sigkill"])
def test_producer_state_survives_restart(tmp_path: Path, stop: str):
    """Twelve batches over segments of ~3 batches each (a snapshot at every roll),
    then the broker stops; after the restart the last five batches sent again are
    answered with their original offsets and nothing is appended twice."""
    topic = unique(stop)
    values = [b"r%02d-" % i + b"x" * 100 for i in range(12)]
    b = BrokerProcess(tmp_path / "data").start()

    async def before() -> tuple[int, list[int], int]:
        conn = await connect(b.port)  # type: ignore[arg-type]
        try:
            await create_topic(conn, topic, configs={"segment.bytes": "600"})
            pid = await new_producer_id(conn)
            offsets = []
            for seq, v in enumerate(values):
                err, off = await produce(conn, topic, idempotent_batch(pid, seq, [v]))
                assert err == ErrorCode.NONE
                offsets.append(off)
            return pid, offsets, await new_producer_id(conn)
        finally:
            await conn.close()

    pid, offsets, last_pid = run(before())
    assert offsets == list(range(12))
    partition_dir = tmp_path / "data" / "broker-0" / f"{topic}-0"
    assert sorted(p.name for p in partition_dir.glob("*.snapshot")), "no snapshot at the segment rolls"
    b.kill(signal.SIGTERM if stop == "sigterm" else signal.SIGKILL)
    if stop == "sigterm":
        assert b.proc is not None and b.proc.returncode == 0
        assert (partition_dir / f"{12:020d}.snapshot").exists(), "no snapshot at the log end offset"

    b = BrokerProcess(tmp_path / "data", port=b.port).start()
    try:
        async def after() -> None:
            conn = await connect(b.port)  # type: ignore[arg-type]
            try:
                for seq in range(7, 12):
                    assert await produce(conn, topic, idempotent_batch(pid, seq, [values[seq]])) == (
                        ErrorCode.NONE, offsets[seq]), seq
                assert await produce(conn, topic, idempotent_batch(pid, 2, [values[2]])) == (
                    ErrorCode.DUPLICATE_SEQUENCE_NUMBER, -1)
                assert await produce(conn, topic, idempotent_batch(pid, 13, [b"gap"])) == (
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
                assert await produce(conn, topic, idempotent_batch(pid, 12, [b"next"])) == (ErrorCode.NONE, 12)
                assert [v for _, v in await read_log(conn, topic)] == values + [b"next"]
                # Producer ids are never handed out twice, restarts included.
                assert await new_producer_id(conn) > last_pid
            finally:
                await conn.close()

        run(after())
    finally:
        b.stop()
    if stop == "sigkill":
        # Rebuilt from the snapshot of a segment roll, then the headers after it.
        loaded = [line for line in b.log_path.read_text().splitlines() if "producer_state_loaded" in line]
        assert loaded and "batches_replayed=0" not in loaded[-1], loaded


def test_proxy_drop_all_cuts_every_connection(proxied):
    """The proxy itself: a dropped connection is closed for the client, a new one works."""
    proxy, broker = proxied

    async def go() -> None:
        conn = await BrokerConnection("127.0.0.1", proxy.port, client_id="proxy-test").connect()
        assert await asyncio.to_thread(proxy.drop_all) >= 1
        with pytest.raises(BrokerConnectionError):
            await init_producer_id(conn)
        await conn.close()
        again = await BrokerConnection("127.0.0.1", proxy.port, client_id="proxy-test").connect()
        try:
            assert (await init_producer_id(again)).error_code == ErrorCode.NONE
        finally:
            await again.close()

    run(go())
