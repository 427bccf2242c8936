"""refka.testing.RefkaCluster: the admin API's reads, operations and faults as Python calls on an
in-process cluster, and kfake-style interception, with a stock client (aiokafka) on the same loop."""

from __future__ import annotations

import time

import pytest
from aiokafka import AIOKafkaProducer

from refka.protocol import ErrorCode
from refka.testing import Delay, FaultError, Intercepted, OperationError, RefkaCluster, ViewError

pytestmark = pytest.mark.integration


def leader(cluster: RefkaCluster, topic: str, partition: int) -> int | None:
    p = cluster.partition(topic, partition)
    return None if p is None else p["leader"]


async def test_reads_and_operations_on_a_three_broker_cluster() -> None:
    async with RefkaCluster(brokers=3) as cluster:
        info = cluster.describe_cluster()
        assert [b["id"] for b in info["brokers"]] == [0, 1, 2]
        assert info["controller"]["id"] in (0, 1, 2) and info["controller"]["epoch"] >= 1
        await cluster.create_topic("moves", partitions=2, replication_factor=3)
        await cluster.wait_for(lambda: all(len(p["isr"]) == 3 for p in cluster.topic("moves")["partitions"]),
                               "a full ISR")
        view = cluster.topic("moves")
        assert view["partitions"][0]["replicas"] != [] and view["topic_epoch"] >= 0
        target = next(r for r in view["partitions"][0]["replicas"] if r != view["partitions"][0]["leader"])
        moved = await cluster.move_leader("moves", 0, target)
        assert moved["leader"] == target and leader(cluster, "moves", 0) == target
        await cluster.set_partition_count("moves", 3)
        await cluster.wait_for(lambda: len(cluster.topic("moves")["partitions"]) == 3, "a third partition")
        with pytest.raises(OperationError) as refused:
            await cluster.move_leader("moves", 7, 0)
        assert refused.value.status == 404
        with pytest.raises(OperationError) as exists:
            await cluster.create_topic("moves")
        assert exists.value.code == ErrorCode.TOPIC_ALREADY_EXISTS

        await cluster.stop_broker(1)
        assert cluster.broker_state(1) == "stopped"
        await cluster.wait_for(lambda: 1 not in {b["id"] for b in cluster.describe_cluster()["brokers"]},
                               "broker 1 to leave the metadata")
        assert all(p["leader"] != 1 for p in cluster.topic("moves")["partitions"])
        await cluster.start_broker(1)
        assert cluster.broker_state(1) == "running"
        with pytest.raises(ViewError):
            cluster.broker_state(9)
        types = {e["type"] for e in cluster.timeline()}
        assert {"topic_created", "leader_changed", "partition_created"} <= types


async def test_an_interception_answers_once_and_the_client_retries_through_to_the_broker() -> None:
    async with RefkaCluster(brokers=1) as cluster:
        await cluster.create_topic("held", partitions=1)
        seen: list[Intercepted] = []

        def not_leader(req: Intercepted):
            seen.append(req)
            R = req.response_type
            return req.answer(responses=[R.TopicProduceResponse(name=t.name, partition_responses=[
                R.TopicProduceResponse.PartitionProduceResponse(index=p.index, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                                                base_offset=-1)
                for p in t.partition_data]) for t in req.request.topic_data])

        fault = cluster.intercept("Produce", not_leader)  # once
        assert fault.kind == "intercept" and [f.id for f in cluster.faults()] == [fault.id]
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, client_id="held-producer",
                                    retry_backoff_ms=50)
        await producer.start()
        try:
            md = await producer.send_and_wait("held", b"v0")
        finally:
            await producer.stop()
        assert len(seen) == 1 and seen[0].client_id == "held-producer" and seen[0].api_key == 0
        assert cluster.faults() == []  # once: gone after the request it answered
        assert md.offset == 0  # the intercepted attempt was not appended; the retry was
        assert cluster.partition("held", 0)["log_end_offset"] == 1
        assert cluster.cluster.faults.fired_by_kind["intercept"] == 1


async def test_an_interception_kept_until_removed_delays_answers_and_lets_them_through() -> None:
    async with RefkaCluster(brokers=1) as cluster:
        await cluster.create_topic("slow", partitions=1)
        calls: list[int] = []

        async def slow(req: Intercepted):  # a coroutine function may be installed too
            calls.append(req.api_version)
            return Delay(0.3)

        fault = cluster.intercept("Produce", slow, once=False)
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap)
        await producer.start()
        try:
            t0 = time.monotonic()
            for i in range(3):
                await producer.send_and_wait("slow", b"%d" % i)
            held = time.monotonic() - t0
            assert len(calls) == 3 and held >= 0.9  # each answer held 0.3 s, each record written
            assert cluster.remove_fault(fault) and not cluster.remove_fault(fault)
            await producer.send_and_wait("slow", b"after")
            assert len(calls) == 3
        finally:
            await producer.stop()
        assert cluster.partition("slow", 0)["log_end_offset"] == 4


async def test_faults_are_validated_as_the_http_api_validates_them() -> None:
    async with RefkaCluster(brokers=1) as cluster:
        with pytest.raises(FaultError) as bad_code:
            cluster.add_fault("error", api="Produce", error_code="NO_SUCH_ERROR")
        assert bad_code.value.status == 400
        with pytest.raises(FaultError) as bad_broker:
            cluster.add_fault("latency", broker=5, latency_ms=10)
        assert bad_broker.value.status == 404
        with pytest.raises(FaultError):
            cluster.intercept("NoSuchApi", lambda req: None)
        with pytest.raises(FaultError):
            cluster.add_fault("intercept", api="Produce")  # a callable cannot come from JSON
        assert cluster.faults() == []
        f = cluster.add_fault("error", api="FindCoordinator", error_code="COORDINATOR_NOT_AVAILABLE", count=2)
        assert f.describe()["count_left"] == 2 and cluster.clear_faults() == 1
