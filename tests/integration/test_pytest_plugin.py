"""refka's pytest plugin (refka/pytest_plugin.py), as a project that installs refka uses it:
small test files run by pytest's own ``pytester``, with the ``refka_broker`` and
``refka_cluster`` fixtures the ``pytest11`` entry point brings, and stock clients
(confluent-kafka, kafka-python, aiokafka) producing and consuming through them."""

from __future__ import annotations

import socket
import threading

import pytest

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def assert_torn_down(pytester: pytest.Pytester, name: str) -> None:
    """The brokers a test file's test wrote down (``bootstrap_servers`` into NAME.bootstrap)
    refuse connections now, and their thread is gone."""
    addresses = (pytester.path / f"{name}.bootstrap").read_text().split(",")
    for address in addresses:
        host, port = address.rsplit(":", 1)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host, int(port)), timeout=2).close()
    assert [t.name for t in threading.enumerate() if t.name.startswith("refka-testing")] == []


# What every inner run is given: no cache files, pytest-asyncio's loop scope said (no warning).
INNER_OPTIONS = ("-p", "no:cacheprovider", "-o", "asyncio_default_fixture_loop_scope=function")


def test_refka_broker_serves_confluent_kafka_and_is_torn_down_after_the_test(pytester: pytest.Pytester):
    pytester.makepyfile(test_ck="""
        import pathlib

        from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

        def test_produce_then_consume(refka_broker):
            pathlib.Path(__file__).with_suffix(".bootstrap").write_text(refka_broker.bootstrap_servers)
            assert "," not in refka_broker.bootstrap_servers
            refka_broker.create_topic("events", partitions=1)
            producer = Producer({"bootstrap.servers": refka_broker.bootstrap_servers})
            producer.produce("events", b"hello", key=b"k")
            assert producer.flush(30) == 0
            consumer = Consumer({"bootstrap.servers": refka_broker.bootstrap_servers, "group.id": "g",
                                 "enable.auto.commit": False})
            consumer.assign([TopicPartition("events", 0, OFFSET_BEGINNING)])
            msg = None
            for _ in range(60):
                msg = consumer.poll(0.5)
                if msg is not None:
                    break
            consumer.close()
            assert msg is not None and msg.error() is None
            assert (msg.key(), msg.value(), msg.offset()) == (b"k", b"hello", 0)
            assert refka_broker.partition("events", 0)["log_end_offset"] == 1
        """)
    pytester.runpytest(*INNER_OPTIONS).assert_outcomes(passed=1)
    assert_torn_down(pytester, "test_ck")


def test_refka_broker_serves_kafka_python(pytester: pytest.Pytester):
    pytester.makepyfile(test_kp="""
        import pathlib

        from kafka import KafkaConsumer, KafkaProducer, TopicPartition

        def test_produce_then_consume(refka_broker):
            pathlib.Path(__file__).with_suffix(".bootstrap").write_text(refka_broker.bootstrap_servers)
            refka_broker.create_topic("events", partitions=2)
            producer = KafkaProducer(bootstrap_servers=refka_broker.bootstrap_servers)
            sent = producer.send("events", b"hello", partition=1).get(timeout=30)
            producer.close()
            assert (sent.partition, sent.offset) == (1, 0)
            consumer = KafkaConsumer(bootstrap_servers=refka_broker.bootstrap_servers, group_id=None,
                                     consumer_timeout_ms=30000)
            consumer.assign([TopicPartition("events", 1)])
            consumer.seek_to_beginning()
            record = next(consumer)
            consumer.close()
            assert (record.partition, record.offset, record.value) == (1, 0, b"hello")
        """)
    pytester.runpytest(*INNER_OPTIONS).assert_outcomes(passed=1)
    assert_torn_down(pytester, "test_kp")


def test_refka_broker_serves_aiokafka_in_an_asyncio_test(pytester: pytest.Pytester):
    pytester.makepyfile(test_aio="""
        import asyncio
        import pathlib

        import pytest
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        @pytest.mark.asyncio
        async def test_produce_then_consume(refka_broker):
            pathlib.Path(__file__).with_suffix(".bootstrap").write_text(refka_broker.bootstrap_servers)
            refka_broker.create_topic("events", partitions=1)  # blocking: the broker has a loop of its own
            producer = AIOKafkaProducer(bootstrap_servers=refka_broker.bootstrap_servers)
            await producer.start()
            try:
                sent = await producer.send_and_wait("events", b"hello")
            finally:
                await producer.stop()
            consumer = AIOKafkaConsumer("events", bootstrap_servers=refka_broker.bootstrap_servers,
                                        auto_offset_reset="earliest")
            await consumer.start()
            try:
                record = await asyncio.wait_for(consumer.getone(), 30)
            finally:
                await consumer.stop()
            assert sent.offset == 0 and (record.offset, record.value) == (0, b"hello")
        """)
    pytester.runpytest(*INNER_OPTIONS).assert_outcomes(passed=1)
    assert_torn_down(pytester, "test_aio")


def test_refka_cluster_moves_a_leader_while_confluent_kafka_consumes(pytester: pytest.Pytester):
    pytester.makepyfile(test_move="""
        import pathlib

        import pytest
        from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

        def read(consumer, count):
            values = []
            for _ in range(120):
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    values.append(msg.value())
                if len(values) == count:
                    break
            return values

        @pytest.mark.refka_cluster(brokers=3)
        def test_a_consumer_follows_the_moved_leader(refka_cluster):
            pathlib.Path(__file__).with_suffix(".bootstrap").write_text(refka_cluster.bootstrap_servers)
            assert len(refka_cluster.bootstrap_servers.split(",")) == 3
            refka_cluster.create_topic("moving", partitions=1, replication_factor=3)
            refka_cluster.wait_for(lambda: len(refka_cluster.partition("moving", 0)["isr"]) == 3, "a full ISR")
            producer = Producer({"bootstrap.servers": refka_cluster.bootstrap_servers, "acks": "all"})
            consumer = Consumer({"bootstrap.servers": refka_cluster.bootstrap_servers, "group.id": "g",
                                 "enable.auto.commit": False})
            consumer.assign([TopicPartition("moving", 0, OFFSET_BEGINNING)])
            for i in range(5):
                producer.produce("moving", b"before-%d" % i)
            assert producer.flush(30) == 0
            assert read(consumer, 5) == [b"before-%d" % i for i in range(5)]

            old = refka_cluster.partition("moving", 0)
            new_leader = next(r for r in old["replicas"] if r != old["leader"])
            assert refka_cluster.move_leader("moving", 0, new_leader)["leader"] == new_leader

            for i in range(5):
                producer.produce("moving", b"after-%d" % i)
            assert producer.flush(30) == 0
            assert read(consumer, 5) == [b"after-%d" % i for i in range(5)]
            consumer.close()
            now = refka_cluster.partition("moving", 0)
            assert now["leader"] == new_leader and now["leader_epoch"] > old["leader_epoch"]
            assert now["log_end_offset"] == 10
        """)
    pytester.runpytest(*INNER_OPTIONS).assert_outcomes(passed=1)
    assert_torn_down(pytester, "test_move")


def test_the_marker_sets_the_broker_count_and_its_options_and_is_registered(pytester: pytest.Pytester):
    pytester.makepyfile(test_marker="""
        import pytest

        def test_three_without_the_marker(refka_cluster):
            assert len(refka_cluster.bootstrap_servers.split(",")) == 3
            assert [b["id"] for b in refka_cluster.describe_cluster()["brokers"]] == [0, 1, 2]

        @pytest.mark.refka_cluster(brokers=2, overrides={"num.partitions": "4"})
        def test_two_with_an_override(refka_cluster):
            assert [b["id"] for b in refka_cluster.describe_cluster()["brokers"]] == [0, 1]
            assert refka_cluster.call(lambda c: [cfg["num.partitions"] for cfg in c.configs]) == [4, 4]

        @pytest.mark.refka_cluster(brokers=0)
        def test_no_brokers(refka_cluster):
            pass
        """)
    result = pytester.runpytest(*INNER_OPTIONS, "--strict-markers")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*refka_cluster(brokers=...) must be a positive int, got 0*"])
    markers = pytester.runpytest(*INNER_OPTIONS, "--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.refka_cluster(brokers=3, **options):*"])


def test_the_entry_point_loads_the_plugin_without_importing_the_broker(pytester: pytest.Pytester):
    pytester.makepyfile(test_cheap="""
        import sys

        def test_loaded_and_cheap(request):
            assert request.config.pluginmanager.has_plugin("refka")
            assert sorted(m for m in sys.modules if m == "refka" or m.startswith("refka.")) == [
                "refka", "refka.pytest_plugin"]
        """)
    # a fresh interpreter: what a project's own pytest run imports
    pytester.runpytest_subprocess(*INNER_OPTIONS).assert_outcomes(passed=1)
    fixtures = pytester.runpytest_subprocess(*INNER_OPTIONS, "--fixtures")
    fixtures.stdout.fnmatch_lines(["refka_broker -- *pytest_plugin.py*", "refka_cluster -- *pytest_plugin.py*"])
