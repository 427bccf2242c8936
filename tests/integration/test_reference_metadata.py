"""The reference client's metadata against three brokers of this process: KIP-526's
working set counted on the brokers (refka records, per client id, how many Metadata
requests a client sent and which topics each named: broker/stats.py).

- A producer that uses 200 topics, then only 5 of them: each new topic is asked for when
  first used, never with every topic known (no request for all topics, none naming more
  than the target fetch size of 20 with one new topic at a time, a few hundred names in
  all where naming every known topic each time would be 20,100); once the 195 idle ones
  have left its cache (metadata_max_idle_ms), its refreshes name only the 5.
- KIP-232: a group consumer's commit carries the leader epoch of the last record it
  delivered (1, after an expansion bumped partition 0's epoch) and the topic's epoch from
  Metadata; OffsetFetch (asked by a fresh client) gives both back, and
  ``position_with_offset_epoch`` says the same; a second consumer handed that position
  with ``seek(tp, offset, offset_epoch)`` reads on from it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic

from refka.client.cluster import ClusterClient
from refka.client.consumer import Consumer
from refka.client.group import GroupMember
from refka.client.producer import Producer
from refka.client.structs import OffsetAndMetadata, TopicPartition
from refka.protocol import ErrorCode
from refka.protocol.messages.create_partitions import CreatePartitions
from tests.integration.cluster_helpers import InProcessCluster, Raw, metadata
from tests.integration.confluent_helpers import admin, create_topic
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

TIMEOUT = 120.0


def unique(prefix: str) -> str:
    return f"rm-{prefix}-{uuid.uuid4().hex[:8]}"


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = InProcessCluster(tmp_path_factory.mktemp("ref-metadata"), n=3, overrides={
        "auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0"})
    try:
        yield c
    finally:
        c.close()


def metadata_traffic(cluster: InProcessCluster, client_id: str) -> tuple[Counter, int, list[tuple[float, list[str]]]]:
    """Over every broker: the topics ``client_id`` named in Metadata requests (counted), how
    many requests asked for all topics, and the recent requests (time, topics), oldest first."""
    def read() -> tuple[Counter, int, list[tuple[float, list[str]]]]:
        named: Counter = Counter()
        every = 0
        recent: list[tuple[float, list[str]]] = []
        for b in cluster.cluster.brokers:
            t = b.stats.metadata_by_client.get(client_id)
            if t is not None:
                named.update(t.topics_named)
                every += t.all_topics_requests
                recent.extend((at, list(topics or ())) for at, topics in t.recent)
        return named, every, sorted(recent)
    return cluster.on_loop(read)


def create_topics(cluster: InProcessCluster, names: list[str]) -> None:
    a = admin(cluster.bootstrap)
    for f in a.create_topics([NewTopic(n, 1, 1) for n in names], operation_timeout=TIMEOUT).values():
        f.result(TIMEOUT)


def test_a_producer_names_only_the_topics_that_need_a_refresh_and_forgets_idle_ones(cluster):
    topics = [f"{unique('ws')}-{i:03d}" for i in range(200)]
    kept = topics[:5]
    create_topics(cluster, topics)
    client_id = unique("producer")
    max_age, max_idle = 8.0, 5.0

    async def go() -> tuple[float, float]:
        p = Producer(bootstrap_servers=cluster.bootstrap, client_id=client_id, linger_ms=0, retry_backoff_ms=10,
                     metadata_max_age_ms=int(max_age * 1000), metadata_max_idle_ms=int(max_idle * 1000))
        await p.start()
        try:
            for t in topics:
                await p.send_and_wait(t, b"first")
            used_all = time.monotonic()
            while set(p._cluster.metadata.topics) != set(kept):  # the 195 others go after max_idle
                for t in kept:
                    await p.send_and_wait(t, b"again")
                await asyncio.sleep(0.2)
            evicted = time.monotonic()
            while not any(at > evicted for at, _ in metadata_traffic(cluster, client_id)[2]):
                for t in kept:  # on until the 5 are refreshed again (they age past max_age)
                    await p.send_and_wait(t, b"again")
                await asyncio.sleep(0.2)
            return used_all, evicted
        finally:
            await p.stop()

    used_all, evicted = run(go())
    named, every, recent = metadata_traffic(cluster, client_id)
    assert every == 0
    assert set(named) == set(topics)
    assert sum(named.values()) < 3 * len(topics), named.most_common(5)
    assert max(len(ts) for _, ts in recent) <= 20
    later = [ts for at, ts in recent if at > evicted]
    assert later and all(set(ts) <= set(kept) for ts in later), later
    assert any(set(ts) == set(kept) for ts in later)  # the age refresh names all 5 together


# -- KIP-232 -----------------------------------------------------------------------------------


def first_port(cluster: InProcessCluster) -> int:
    return int(cluster.bootstrap.split(",")[0].rsplit(":", 1)[1])


def create_partitions(cluster: InProcessCluster, topic: str, count: int) -> None:
    C = CreatePartitions.Request
    raw = Raw(first_port(cluster))
    try:
        resp, _ = raw.call_raw(CreatePartitions, C(topics=[C.CreatePartitionsTopic(
            name=topic, count=count, assignments=None)], timeout_ms=15_000, validate_only=False), 3)
    finally:
        raw.close()
    assert resp.results[0].error_code == ErrorCode.NONE, resp


async def committed_as_fetched(bootstrap: str, group: str, tp: TopicPartition) -> OffsetAndMetadata | None:
    """The group's committed offset of ``tp`` as a fresh client's OffsetFetch reads it (another
    connection, another ClusterClient than the consumer's)."""
    cc = ClusterClient(bootstrap, "kip232-reader", request_timeout=10)
    member = GroupMember(cc, group)
    try:
        await cc.refresh(())
        return (await member.fetch_committed([tp])).get(tp)
    finally:
        await member.close()
        await cc.close()


def test_commits_carry_the_offset_epoch_and_a_position_with_it_is_handed_on(cluster):
    topic, group = unique("epochs"), unique("group")
    tp0 = TopicPartition(topic, 0)
    create_topic(cluster.bootstrap, topic, 1)
    port = first_port(cluster)

    async def produce(values: list[bytes]) -> None:
        p = Producer(bootstrap_servers=cluster.bootstrap, acks="all")
        await p.start()
        try:
            for v in values:
                await p.send_and_wait(topic, v, partition=0)
        finally:
            await p.stop()

    run(produce([b"a", b"b", b"c"]))
    create_partitions(cluster, topic, 2)  # bumps partition 0's leader epoch (KIP-253 expansion)
    wait_until(lambda: len(metadata(port, topic).topics[0].partitions) == 2
               and metadata(port, topic).topics[0].partitions[0].leader_epoch >= 1,
               timeout=TIMEOUT, message="the expansion in Metadata")
    run(produce([b"d", b"e"]))
    md = metadata(port, topic).topics[0]
    topic_epoch, leader_epoch = md.topic_epoch, md.partitions[0].leader_epoch
    assert topic_epoch >= 0 and leader_epoch >= 1

    async def consume_commit_and_hand_on() -> tuple[OffsetAndMetadata, OffsetAndMetadata | None, list[bytes]]:
        c = Consumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group, auto_offset_reset="earliest",
                     enable_auto_commit=False, heartbeat_interval_ms=200)
        await c.start()
        try:
            got: list[bytes] = []
            while len(got) < 5:
                for records in (await c.getmany(tp0, timeout_ms=1000)).values():
                    got.extend(r.value for r in records)
            await c.commit()
            om = await c.position_with_offset_epoch(tp0)
        finally:
            await c.stop()
        fetched = await committed_as_fetched(cluster.bootstrap, group, tp0)
        other = Consumer(bootstrap_servers=cluster.bootstrap)
        await other.start()
        try:
            other.assign([tp0])
            other.seek(tp0, 3, om.offset_epoch.encode())
            rest: list[bytes] = []
            while len(rest) < 2:
                for records in (await other.getmany(timeout_ms=1000)).values():
                    rest.extend(r.value for r in records)
        finally:
            await other.stop()
        return om, fetched, rest

    om, fetched, rest = run(consume_commit_and_hand_on())
    assert om == OffsetAndMetadata(5, "", leader_epoch, topic_epoch)
    assert fetched == OffsetAndMetadata(5, "", leader_epoch, topic_epoch)
    assert rest == [b"d", b"e"]
