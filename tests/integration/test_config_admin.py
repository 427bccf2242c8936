"""Topic config administration with real admin clients, and its effect on running brokers.

confluent-kafka's AdminClient (alter_configs = AlterConfigs, incremental_alter_configs
= IncrementalAlterConfigs, describe_configs) and kafka-python's KafkaAdminClient
(both APIs, describe_log_dirs) against ``refka serve``. A change must reach every
broker hosting the topic (the /config/changes notification): retention.ms lowered
at runtime deletes old segments, max.message.bytes raised lets a bigger batch in on
every broker of a three-broker cluster.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KPConfigResource

from refka.client.connection import connect
from refka.protocol.messages.describe_log_dirs import DescribeLogDirs
from tests.brokers import BrokerProcess
from tests.integration.confluent_helpers import (
    TIMEOUT,
    Rec,
    admin,
    consumer,
    create_topic,
    produce,
    producer,
    unique_topic,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three brokers in one process, on disk, retention checked every 200 ms."""
    b = BrokerProcess(tmp_path_factory.mktemp("refka-cfg") / "data", brokers=3,
                      overrides={"log.retention.check.interval.ms": "200"}).start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def memory_single(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("refka-cfg-mem") / "data", memory=True).start()
    yield b
    b.stop()


def topic_resource(name: str, **configs: str) -> ConfigResource:
    return ConfigResource(ResourceType.TOPIC, name, set_config=configs)


def alter(bootstrap: str, res: ConfigResource, validate_only: bool = False) -> None:
    a = admin(bootstrap)
    a.alter_configs([res], validate_only=validate_only, request_timeout=TIMEOUT)[res].result(TIMEOUT)


def incremental(bootstrap: str, name: str, *entries: ConfigEntry, validate_only: bool = False) -> None:
    a = admin(bootstrap)
    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=list(entries))
    a.incremental_alter_configs([res], validate_only=validate_only, request_timeout=TIMEOUT)[res].result(TIMEOUT)


def op(name: str, value: str | None, kind: AlterConfigOpType) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=kind)


def describe(bootstrap: str, name: str) -> dict:
    a = admin(bootstrap)
    res = ConfigResource(ResourceType.TOPIC, name)
    return a.describe_configs([res], request_timeout=TIMEOUT)[res].result(TIMEOUT)


def error_of(call) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        call()
    return info.value.args[0]


def dynamic(configs: dict) -> dict[str, str]:
    return {k: e.value for k, e in configs.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


# -- AlterConfigs / IncrementalAlterConfigs / DescribeConfigs (confluent-kafka)


def test_alter_configs_replaces_the_topics_overrides(memory_single):
    bs = memory_single.bootstrap
    topic = unique_topic("alter")
    create_topic(bs, topic, config={"retention.ms": "3600000", "segment.bytes": "100000"})
    alter(bs, topic_resource(topic, **{"max.message.bytes": "2000000", "cleanup.policy": "compact"}))
    configs = describe(bs, topic)
    # Legacy AlterConfigs is a replacement: overrides not named are gone.
    assert dynamic(configs) == {"max.message.bytes": "2000000", "cleanup.policy": "compact"}
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    # validate_only changes nothing.
    alter(bs, topic_resource(topic, **{"retention.ms": "1000"}), validate_only=True)
    assert dynamic(describe(bs, topic)) == {"max.message.bytes": "2000000", "cleanup.policy": "compact"}


def test_incremental_alter_configs_set_delete_append_subtract(memory_single):
    bs = memory_single.bootstrap
    topic = unique_topic("incr")
    create_topic(bs, topic, config={"retention.ms": "3600000"})
    incremental(bs, topic, op("segment.bytes", "200000", AlterConfigOpType.SET),
                op("retention.ms", None, AlterConfigOpType.DELETE))
    assert dynamic(describe(bs, topic)) == {"segment.bytes": "200000"}
    # APPEND starts from the broker's value (delete) and adds an item once.
    incremental(bs, topic, op("cleanup.policy", "compact", AlterConfigOpType.APPEND))
    incremental(bs, topic, op("cleanup.policy", "compact", AlterConfigOpType.APPEND))
    assert describe(bs, topic)["cleanup.policy"].value == "delete,compact"
    incremental(bs, topic, op("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT))
    assert dynamic(describe(bs, topic)) == {"segment.bytes": "200000", "cleanup.policy": "compact"}
    # validate_only changes nothing; the other overrides always stay.
    incremental(bs, topic, op("segment.bytes", "300000", AlterConfigOpType.SET), validate_only=True)
    assert dynamic(describe(bs, topic))["segment.bytes"] == "200000"


@pytest.mark.parametrize("entries, code", [
    ([op("no.such.config", "1", AlterConfigOpType.SET)], KafkaError.INVALID_CONFIG),
    ([op("retention.ms", "soon", AlterConfigOpType.SET)], KafkaError.INVALID_CONFIG),
    ([op("cleanup.policy", "forever", AlterConfigOpType.APPEND)], KafkaError.INVALID_CONFIG),
    ([op("retention.ms", "1", AlterConfigOpType.APPEND)], KafkaError.INVALID_CONFIG),  # not a LIST
])
def test_incremental_alter_configs_errors(memory_single, entries, code):
    bs = memory_single.bootstrap
    topic = unique_topic("bad")
    create_topic(bs, topic)
    err = error_of(lambda: incremental(bs, topic, *entries))
    assert err.code() == code, err
    assert dynamic(describe(bs, topic)) == {}


def test_alter_configs_errors(memory_single):
    bs = memory_single.bootstrap
    missing = unique_topic("missing")
    assert error_of(lambda: alter(bs, topic_resource(missing, **{"retention.ms": "1"}))).code() == \
        KafkaError.UNKNOWN_TOPIC_OR_PART
    topic = unique_topic("bad")
    create_topic(bs, topic)
    err = error_of(lambda: alter(bs, topic_resource(topic, **{"retention.ms": "-7"})))
    assert err.code() == KafkaError.INVALID_CONFIG and "retention.ms" in err.str()
    # A static broker property, a value the topic config refuses, a property refka does not
    # implement: INVALID_REQUEST with the reason (Kafka's ZooKeeper mode answers so).
    for configs, reason in [({"num.partitions": "3"}, "Cannot update these configs dynamically: num.partitions"),
                            ({"log.retention.ms": "-7"}, "log.retention.ms"),
                            ({"log.cleaner.threads": "2"}, "Not dynamic broker configs refka implements")]:
        res = ConfigResource(ResourceType.BROKER, "0", set_config=configs)
        err = error_of(lambda res=res: alter(bs, res))
        assert err.code() == KafkaError.INVALID_REQUEST and reason in err.str(), err


# -- the change reaches the running brokers


def test_max_message_bytes_raised_at_runtime_on_every_broker(cluster):
    bs = cluster.bootstrap
    topic = unique_topic("mmb")
    create_topic(bs, topic, partitions=3, config={"max.message.bytes": "1000"})
    p = producer(bs, **{"linger.ms": 0, "message.max.bytes": 100_000})
    big = [Rec(b"k", b"x" * 5000, [], int(time.time() * 1000))]
    for part in range(3):
        (rep,) = produce(p, topic, big, partition=part)
        assert rep.error is not None and rep.error.code() == KafkaError.MSG_SIZE_TOO_LARGE
    alter(bs, topic_resource(topic, **{"max.message.bytes": "100000"}))
    # Every broker applies the change when the notification reaches it (no restart).
    accepted: set[int] = set()

    def all_accept() -> bool:
        for part in sorted({0, 1, 2} - accepted):
            (rep,) = produce(p, topic, big, partition=part)
            if rep.error is None:
                accepted.add(part)
        return accepted == {0, 1, 2}

    wait_until(all_accept, timeout=TIMEOUT, interval=0.05,
               message=lambda: f"every partition to accept the batch; only partitions {accepted} do")
    assert describe(bs, topic)["max.message.bytes"].value == "100000"


def test_retention_ms_lowered_at_runtime_deletes_old_segments(cluster):
    bs = cluster.bootstrap
    topic = unique_topic("ret")
    create_topic(bs, topic, config={"segment.bytes": "1024", "retention.ms": "3600000"})
    p = producer(bs, **{"linger.ms": 0})
    produce(p, topic, [Rec(b"k%d" % i, b"v" * 300, [], int(time.time() * 1000)) for i in range(20)])
    c = consumer(bs)
    try:
        tp = TopicPartition(topic, 0)
        time.sleep(0.6)  # three retention checks: an hour's retention keeps everything
        assert c.get_watermark_offsets(tp, timeout=TIMEOUT) == (0, 20)
        incremental(bs, topic, op("retention.ms", "100", AlterConfigOpType.SET))
        low, high = wait_until(lambda: (w := c.get_watermark_offsets(tp, timeout=TIMEOUT))[0] > 0 and w,
                               timeout=TIMEOUT, message="retention.ms=100 to delete old segments")
        assert high == 20 and low <= 20
    finally:
        c.close()
    assert describe(bs, topic)["retention.ms"].value == "100"


# -- dynamic broker configs (/config/brokers/<default> and /config/brokers/<id>)


def broker_resource(name: str, *entries: ConfigEntry) -> ConfigResource:
    return ConfigResource(ResourceType.BROKER, name, incremental_configs=list(entries))


def incremental_broker(bootstrap: str, name: str, *entries: ConfigEntry) -> None:
    """confluent-kafka's IncrementalAlterConfigs on broker ``name``; the cluster-wide default
    entity (""), which librdkafka does not name, through refka's client to the first broker."""
    if name:
        a = admin(bootstrap)
        res = broker_resource(name, *entries)
        a.incremental_alter_configs([res], request_timeout=TIMEOUT)[res].result(TIMEOUT)
        return
    from refka.protocol.messages.incremental_alter_configs import IncrementalAlterConfigs as IAC

    R = IAC.Request
    codes = {AlterConfigOpType.SET: 0, AlterConfigOpType.DELETE: 1}

    async def send() -> None:
        conn = await connect(bootstrap.split(",")[0])
        try:
            resp = await conn.request(IAC, R(validate_only=False, resources=[R.AlterConfigsResource(
                resource_type=4, resource_name="", configs=[R.AlterConfigsResource.AlterableConfig(
                    name=e.name, config_operation=codes[e.incremental_operation], value=e.value)
                    for e in entries])]), 1)
        finally:
            await conn.close()
        (r,) = resp.responses
        assert r.error_code == 0, r

    asyncio.run(send())


def describe_broker(bootstrap: str, name: str) -> dict:
    """DescribeConfigs of broker ``name`` as confluent-kafka gives it; the default entity
    (""), through refka's client: {name: (value, source, read_only)}."""
    if name:
        a = admin(bootstrap)
        res = ConfigResource(ResourceType.BROKER, name)
        return {n: (e.value, e.source, e.is_read_only)
                for n, e in a.describe_configs([res], request_timeout=TIMEOUT)[res].result(TIMEOUT).items()}
    from refka.protocol.messages.describe_configs import DescribeConfigs as DC

    R = DC.Request

    async def ask() -> dict:
        conn = await connect(bootstrap.split(",")[0])
        try:
            resp = await conn.request(DC, R(resources=[R.DescribeConfigsResource(
                resource_type=4, resource_name="", configuration_keys=None)], include_synonyms=False,
                include_documentation=False), 4)
        finally:
            await conn.close()
        (r,) = resp.results
        assert r.error_code == 0, r
        return {c.name: (c.value, c.config_source, c.read_only) for c in r.configs}

    return asyncio.run(ask())


def test_a_dynamic_cluster_default_reaches_every_broker_and_a_broker_of_its_own_overrides_it(cluster):
    bs = cluster.bootstrap
    topic = unique_topic("dyn")
    create_topic(bs, topic, partitions=3)  # no override: the brokers' defaults apply
    p = producer(bs, **{"linger.ms": 0, "message.max.bytes": 100_000})
    big = [Rec(b"k", b"x" * 5000, [], int(time.time() * 1000))]
    refused: set[int] = set()

    def sizes_refused(parts: set[int]) -> bool:
        for part in sorted(parts - refused):
            (rep,) = produce(p, topic, big, partition=part)
            if rep.error is not None and rep.error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
                refused.add(part)
        return refused >= parts

    try:
        incremental_broker(bs, "", op("message.max.bytes", "1000", AlterConfigOpType.SET))
        # Every broker applies the new default to the logs it has, at once (no restart).
        wait_until(lambda: sizes_refused({0, 1, 2}), timeout=TIMEOUT, interval=0.05,
                   message=lambda: f"every partition to refuse the batch; only {refused} do")
        described = describe(bs, topic)["max.message.bytes"]
        assert (described.value, described.source) == ("1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        for node in ("0", "1", "2"):
            configs = describe_broker(bs, node)
            assert configs["message.max.bytes"] == ("1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value, False)
            assert configs["num.partitions"][2], "a static property is read-only"
        # The default entity lists the cluster-wide dynamic configs only.
        assert describe_broker(bs, "") == {
            "message.max.bytes": ("1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value, False)}

        # Broker 1's own value wins over the default, on broker 1 only.
        leader_of = {pm.id: pm.leader for pm in admin(bs).list_topics(topic, timeout=TIMEOUT).topics[topic]
                     .partitions.values()}
        incremental_broker(bs, "1", op("message.max.bytes", "100000", AlterConfigOpType.SET))
        assert describe_broker(bs, "1")["message.max.bytes"][:2] == (
            "100000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        assert describe_broker(bs, "0")["message.max.bytes"][0] == "1000"
        on_1 = [part for part, leader in leader_of.items() if leader == 1]
        wait_until(lambda: all(produce(p, topic, big, partition=part)[0].error is None for part in on_1),
                   timeout=TIMEOUT, interval=0.05, message="broker 1 to take the batch again")
        for part in set(leader_of) - set(on_1):
            (rep,) = produce(p, topic, big, partition=part)
            assert rep.error is not None and rep.error.code() == KafkaError.MSG_SIZE_TOO_LARGE
    finally:
        incremental_broker(bs, "1", op("message.max.bytes", None, AlterConfigOpType.DELETE))
        incremental_broker(bs, "", op("message.max.bytes", None, AlterConfigOpType.DELETE))
    wait_until(lambda: all(produce(p, topic, big, partition=part)[0].error is None for part in range(3)),
               timeout=TIMEOUT, interval=0.05, message="the static default back on every broker")
    assert describe_broker(bs, "0")["message.max.bytes"][1] == ConfigSource.DEFAULT_CONFIG.value


def test_another_brokers_id_and_a_name_that_is_no_id_are_refused(cluster):
    from refka.protocol.messages.incremental_alter_configs import IncrementalAlterConfigs as IAC

    R = IAC.Request

    async def ask(name: str) -> tuple[int, str]:
        conn = await connect(cluster.bootstrap.split(",")[0])  # broker 0
        try:
            resp = await conn.request(IAC, R(validate_only=False, resources=[R.AlterConfigsResource(
                resource_type=4, resource_name=name, configs=[R.AlterConfigsResource.AlterableConfig(
                    name="log.retention.ms", config_operation=0, value="1000")])]), 1)
        finally:
            await conn.close()
        (r,) = resp.responses
        return r.error_code, r.error_message

    assert asyncio.run(ask("2")) == (KafkaError.INVALID_REQUEST, "Unexpected broker id, expected 0, but received 2")
    assert asyncio.run(ask("me")) == (KafkaError.INVALID_REQUEST, "Broker id must be an integer, but it is: me")


def test_dynamic_broker_configs_survive_a_restart(tmp_path):
    b = BrokerProcess(tmp_path / "data").start()
    try:
        incremental_broker(b.bootstrap, "", op("log.retention.ms", "4242", AlterConfigOpType.SET))
        incremental_broker(b.bootstrap, "0", op("log.segment.bytes", "2000000", AlterConfigOpType.SET))
    finally:
        b.stop()
    b = BrokerProcess(tmp_path / "data").start()
    try:
        configs = describe_broker(b.bootstrap, "0")
        assert configs["log.retention.ms"][:2] == ("4242", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        assert configs["log.segment.bytes"][:2] == ("2000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        topic = unique_topic("restart")
        create_topic(b.bootstrap, topic)
        assert describe(b.bootstrap, topic)["segment.bytes"].value == "2000000"
    finally:
        b.stop()


# -- kafka-python's KafkaAdminClient


def test_kafka_python_alter_and_describe_configs(memory_single):
    bs = memory_single.bootstrap
    topic = unique_topic("kp")
    create_topic(bs, topic)
    a = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=int(TIMEOUT * 1000))
    try:
        # IncrementalAlterConfigs (the default: refka serves it).
        a.alter_configs([KPConfigResource("TOPIC", topic, configs={"retention.ms": "123456"})])
        # Legacy AlterConfigs: the client re-sends the other overrides itself.
        a.alter_configs([KPConfigResource("TOPIC", topic, configs={"segment.bytes": "654321"})], incremental=False)
        described = a.describe_configs([KPConfigResource("TOPIC", topic)])
    finally:
        a.close()
    flat = str(described)
    assert "123456" in flat and "654321" in flat
    assert dynamic(describe(bs, topic)) == {"retention.ms": "123456", "segment.bytes": "654321"}


# -- DescribeLogDirs


def test_describe_log_dirs_with_kafka_python(cluster):
    bs = cluster.bootstrap
    topic = unique_topic("dirs")
    create_topic(bs, topic, partitions=3)
    p = producer(bs)
    for part in range(3):
        # Timestamps of now: the cluster's 200 ms retention checks would delete week-old records.
        produce(p, topic, [Rec(b"k", b"v" * 100, [], int(time.time() * 1000))] * (part + 1), partition=part)
    a = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=int(TIMEOUT * 1000))
    try:
        answers = a.describe_log_dirs()
    finally:
        a.close()
    assert sorted(x["broker"] for x in answers) == [0, 1, 2]
    sizes = {}
    for x in answers:
        (log_dir,) = x["log_dirs"]
        assert log_dir["error_code"] == 0
        assert Path(log_dir["log_dir"]).is_absolute() and log_dir["log_dir"].endswith(f"broker-{x['broker']}")
        for t in log_dir["topics"]:
            if t["name"] == topic:
                for part in t["partitions"]:
                    assert part["offset_lag"] == 0 and part["is_future_key"] is False
                    sizes[part["partition_index"]] = part["partition_size"]
    assert sorted(sizes) == [0, 1, 2]
    assert sizes[0] < sizes[1] < sizes[2]


async def _describe_log_dirs(host: str, port: int, version: int, topics=None):
    conn = await connect(f"{host}:{port}", "log-dirs-test")
    try:
        return await conn.request(DescribeLogDirs, DescribeLogDirs.Request(topics=topics), version=version)
    finally:
        await conn.close()


@pytest.mark.parametrize("version", [0, 3, 4])
def test_describe_log_dirs_versions_and_memory_mode(cluster, memory_single, version):
    port = cluster.port
    resp = asyncio.run(_describe_log_dirs("127.0.0.1", port, version))
    (result,) = resp.results
    assert result.error_code == 0
    if version >= 4:
        assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes
    mem = asyncio.run(_describe_log_dirs("127.0.0.1", memory_single.port, version, topics=[]))
    (result,) = mem.results
    assert result.log_dir == "(memory)" and result.topics == []
    if version >= 4:
        assert (result.total_bytes, result.usable_bytes) == (-1, -1)


# -- across processes: two brokers sharing a ZooKeeper


def test_a_change_made_through_one_process_reaches_a_broker_in_another(zookeeper, tmp_path):
    connect_string = f"{zookeeper.connect}/cfg{uuid.uuid4().hex[:8]}"
    procs = [BrokerProcess(tmp_path / f"data{i}", extra_args=["--zookeeper", connect_string, "--broker-id", str(i)])
             for i in range(2)]
    try:
        for b in procs:
            b.start()
        first, second = procs
        topic = unique_topic("zk")
        # Both partitions on the second process; the change goes through the first.
        a = admin(first.bootstrap)
        fut = a.create_topics([NewTopic(topic, num_partitions=2, replica_assignment=[[1], [1]],
                                        config={"max.message.bytes": "1000"})],
                              operation_timeout=TIMEOUT)[topic]
        fut.result(TIMEOUT)
        p = producer(second.bootstrap, **{"linger.ms": 0, "message.max.bytes": 100_000})
        big = [Rec(b"k", b"x" * 5000, [], int(time.time() * 1000))]
        (rep,) = produce(p, topic, big, partition=0)
        assert rep.error is not None and rep.error.code() == KafkaError.MSG_SIZE_TOO_LARGE
        incremental(first.bootstrap, topic, op("max.message.bytes", "100000", AlterConfigOpType.SET))
        wait_until(lambda: produce(p, topic, big, partition=0)[0].error is None,
                   timeout=TIMEOUT, interval=0.05, message="the second process to apply the change")
        assert describe(second.bootstrap, topic)["max.message.bytes"].value == "100000"
    finally:
        for b in procs:
            b.stop()
