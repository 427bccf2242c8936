"""refka.testing.Broker and Cluster, a broker for a test: the ``with`` form (the brokers' loop
in a thread, every call blocking, for blocking clients) and the ``async with`` form (the
RefkaCluster on the caller's loop); each leaves no thread, port or task behind."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import warnings

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from refka.testing import Broker, Cluster, Intercepted, OperationError, RefkaCluster

pytestmark = pytest.mark.integration

TIMEOUT = 30.0  # only there so that a broken broker fails a test instead of hanging it


def refuses_connections(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def brokers_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("refka-testing")]


def produce(bootstrap: str, topic: str, value: bytes, partition: int = 0, client_id: str = "ck") -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id})
    producer.produce(topic, value, partition=partition)
    assert producer.flush(TIMEOUT) == 0, "a record was not acknowledged"


def consume(bootstrap: str, topic: str, partition: int, count: int) -> list[bytes]:
    """``count`` values of the partition from its start (assigned: no group to wait for)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_the_sync_broker_serves_a_blocking_client_and_leaves_no_thread_port_or_task():
    threads_before = set(threading.enumerate())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        with Broker() as b:
            assert brokers_threads() == ["refka-testing-1-broker"]
            address = b.bootstrap_servers
            assert address == b.address(0) and "," not in address
            b.create_topic("sync", partitions=2)  # a coroutine of RefkaCluster's, called synchronously
            produce(address, "sync", b"v0", partition=1)
            assert consume(address, "sync", 1, 1) == [b"v0"]
            assert b.partition("sync", 1)["log_end_offset"] == 1
            assert "sync" in {t["name"] for t in b.topics()}
            with pytest.raises(RuntimeError, match="running already"):
                b.__enter__()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
    assert set(threading.enumerate()) == threads_before
    assert refuses_connections(address)
    with pytest.raises(RuntimeError, match="not running"):
        b.topics()


def test_the_sync_cluster_moves_a_leader_and_raises_what_the_operations_raise():
    with Cluster(3) as c:
        assert len(c.bootstrap_servers.split(",")) == 3
        assert [b["id"] for b in c.describe_cluster()["brokers"]] == [0, 1, 2]
        c.create_topic("moves", partitions=1, replication_factor=3)
        # the condition runs on the brokers' thread, where the reads are called directly
        c.wait_for(lambda: len(c.partition("moves", 0)["isr"]) == 3, "a full ISR")
        before = c.partition("moves", 0)
        target = next(r for r in before["replicas"] if r != before["leader"])
        moved = c.move_leader("moves", 0, target)
        assert moved["leader"] == target and c.partition("moves", 0)["leader"] == target
        assert c.partition("moves", 0)["leader_epoch"] > before["leader_epoch"]
        with pytest.raises(OperationError) as refused:
            c.move_leader("moves", 7, 0)
        assert refused.value.status == 404
        with pytest.raises(RuntimeError, match="brokers' thread"):
            c.wait_for(lambda: c.create_topic("from-the-loop") is None)  # would wait on its own loop
        with pytest.raises(OperationError) as timed_out:
            c.wait_for(lambda: False, "nothing", timeout=0.2)
        assert timed_out.value.status == 504

        c.stop_broker(target)
        assert c.broker_state(target) == "stopped"
        c.start_broker(target)
        assert c.broker_state(target) == "running"


def test_a_sync_interceptor_runs_on_the_brokers_thread_and_a_call_is_bounded():
    with Broker() as b:
        b.create_topic("held")
        seen: list[tuple[str, str]] = []

        def observe(req: Intercepted) -> None:
            seen.append((req.client_id, threading.current_thread().name))
            return None  # handled as usual

        fault = b.intercept("Produce", observe)
        assert [f.id for f in b.faults()] == [fault.id]
        produce(b.bootstrap_servers, "held", b"v", client_id="intercepted")
        assert seen == [("intercepted", "refka-testing-1-broker")]
        assert b.faults() == []  # once
        assert b.call(lambda c: c.cluster.faults.fired_by_kind["intercept"]) == 1

        with pytest.raises(TimeoutError, match="within 0.2 s"):
            b.call(lambda c: asyncio.sleep(5), timeout=0.2)
        assert b.partition("held", 0)["log_end_offset"] == 1  # the loop serves on


def test_a_start_that_fails_raises_in_the_caller_and_leaves_no_thread():
    threads_before = set(threading.enumerate())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match="address already in use"):
            with Broker(port=port):
                pytest.fail("the block ran without a broker")
    assert set(threading.enumerate()) == threads_before
    with pytest.raises(ValueError):
        Cluster(0)


async def test_the_async_broker_is_the_refka_cluster_on_the_callers_loop():
    tasks_before = asyncio.all_tasks()
    async with Broker() as b:
        assert isinstance(b, RefkaCluster) and brokers_threads() == []
        address = b.bootstrap_servers
        await b.create_topic("async", partitions=1)
        producer = AIOKafkaProducer(bootstrap_servers=address)
        await producer.start()
        try:
            await producer.send_and_wait("async", b"v0")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("async", bootstrap_servers=address, auto_offset_reset="earliest")
        await consumer.start()
        try:
            record = await asyncio.wait_for(consumer.getone(), TIMEOUT)
        finally:
            await consumer.stop()
        assert record.value == b"v0" and b.partition("async", 0)["log_end_offset"] == 1
    assert asyncio.all_tasks() <= tasks_before
    assert refuses_connections(address)


async def test_the_async_cluster_awaits_its_operations():
    async with Cluster(2) as c:
        assert len(c.bootstrap_servers.split(",")) == 2
        await c.create_topic("moves", partitions=1, replication_factor=2)
        await c.wait_for(lambda: len(c.partition("moves", 0)["isr"]) == 2, "a full ISR")
        p = c.partition("moves", 0)
        target = next(r for r in p["replicas"] if r != p["leader"])
        assert (await c.move_leader("moves", 0, target))["leader"] == target
        addresses = c.bootstrap_servers.split(",")
    assert all(refuses_connections(a) for a in addresses)
