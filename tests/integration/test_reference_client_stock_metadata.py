"""The reference client where Metadata carries none of refka's KIP tags, as a stock Kafka
broker answers (``refka.protocol.extensions=never``): its KIP parts switch off and it is
a plain client. A topic created with 4 partitions and expanded to 6 has KIP-253 counts
(4, 6) in the znodes; a client that saw them would hash by linear hashing (h mod 4, or h
mod 8 below the split pointer 2). Without them the producer hashes as Java's default
partitioner (murmur2 mod 6) and the group consumer delivers every record, holding none."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka.admin import NewPartitions

from refka.client.consumer import Consumer
from refka.client.partitioning import default_partition, murmur2, to_positive
from refka.client.producer import Producer
from tests.integration.cluster_helpers import InProcessCluster
from tests.integration.confluent_helpers import admin, create_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TIMEOUT = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = InProcessCluster(tmp_path_factory.mktemp("stock-metadata"), n=3, overrides={
        "auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0",
        "refka.protocol.extensions": "never"})
    try:
        yield c
    finally:
        c.close()


def test_without_kip_tags_keys_are_hashed_as_java_does_and_nothing_is_held(cluster):
    topic = f"stock-md-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, topic, partitions=4)
    a = admin(cluster.bootstrap)
    a.create_partitions([NewPartitions(topic, 6)])[topic].result(TIMEOUT)
    keys = [b"key-%d" % i for i in range(300)]
    # The keys this test is about: where linear hashing over (4, 6) would put them elsewhere.
    assert sum(default_partition(k, 4, 6) != to_positive(murmur2(k)) % 6 for k in keys) > 50

    async def go() -> tuple[list[int], dict[bytes, int]]:
        p = Producer(bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True)
        await p.start()
        try:
            futs = [await p.send(topic, b"v", key=k) for k in keys]
            await p.flush()
            partitions = [f.result().partition for f in futs]
        finally:
            await p.stop()
        c = Consumer(topic, bootstrap_servers=cluster.bootstrap, group_id=f"g-{topic}",
                     auto_offset_reset="earliest", heartbeat_interval_ms=200)
        await c.start()
        got: dict[bytes, int] = {}
        try:
            while len(got) < len(keys):
                for tp, records in (await c.getmany(timeout_ms=500)).items():
                    got.update({r.key: tp.partition for r in records if r.key is not None})
        finally:
            await c.stop()
        return partitions, got

    partitions, delivered = asyncio.run(asyncio.wait_for(go(), TIMEOUT))
    assert partitions == [to_positive(murmur2(k)) % 6 for k in keys]
    assert delivered == dict(zip(keys, partitions, strict=True))
