"""The reference consumer (refka/client/consumer.py) against three in-process brokers,
with records produced by the reference producer.

- Assigned partitions: every record back as produced (key, value, headers, timestamp),
  in offset order; auto_offset_reset earliest and latest; seek, position, seek to
  the beginning and the end.
- A group: two consumers split the partitions, and once one stops the other has them
  all, every record delivered once; committed offsets are where a restarted consumer
  resumes.
- A leader move (the leader stopped, then a preferred election back): followed, the
  second one from the KIP-951 hint in the Fetch answer, nothing lost or duplicated.
- An expansion (CreatePartitions 2 -> 3) while a group consumes: its next Fetch is
  answered INVALID_PARTITION_METADATA (the KIP-253 count it carries is stale), the
  consumer refreshes and the group rebalances onto the new partition, although no
  periodic metadata refresh would come within the test.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from confluent_kafka import ElectionType
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import NewPartitions, NewTopic

from refka.client.consumer import Consumer
from refka.client.producer import Producer, RecordMetadata
from refka.client.structs import ConsumerRecord, TopicPartition
from tests.integration.cluster_helpers import InProcessCluster, metadata
from tests.integration.confluent_helpers import admin, create_topic
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TIMEOUT = 60.0
FAST_GROUP = {"heartbeat_interval_ms": 200, "session_timeout_ms": 10000}


def unique(prefix: str) -> str:
    return f"rc-{prefix}-{uuid.uuid4().hex[:8]}"


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = InProcessCluster(tmp_path_factory.mktemp("ref-consumer"), n=3,
                         overrides={"auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0"})
    PORTS[:] = [int(hp.rsplit(":", 1)[1]) for hp in c.bootstrap.split(",")]  # bootstrap drops stopped brokers
    try:
        yield c
    finally:
        c.close()


PORTS: list[int] = []


async def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes, int | None]],
                  **kw: Any) -> list[RecordMetadata]:
    """(key, value, partition) records, acks=all; their metadata in send order."""
    p = Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=2, **kw)
    await p.start()
    try:
        futs = [await p.send(topic, v, key=k, partition=part, headers=[("i", b"%d" % i)],
                             timestamp_ms=1_700_000_000_000 + i)
                for i, (k, v, part) in enumerate(records)]
        await p.flush()
        return [f.result() for f in futs]
    finally:
        await p.stop()


async def consume(c: Consumer, n: int) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    while len(out) < n:
        got = await c.getmany(timeout_ms=1000)
        for records in got.values():
            out.extend(records)
    return out


def by_partition(records: list[ConsumerRecord]) -> dict[int, list[ConsumerRecord]]:
    out: dict[int, list[ConsumerRecord]] = {}
    for r in records:
        out.setdefault(r.partition, []).append(r)
    return out


# -- assigned partitions -------------------------------------------------------------------------


def test_assigned_partitions_give_back_every_record_as_produced_in_offset_order(cluster):
    topic = unique("assign")
    create_topic(cluster.bootstrap, topic, 3)
    sent = [(b"k%d" % (i % 11), b"value-%d" % i, None) for i in range(900)]

    async def go() -> tuple[list[RecordMetadata], list[ConsumerRecord]]:
        metas = await produce(cluster.bootstrap, topic, sent, compression_type="lz4")
        c = Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign([TopicPartition(topic, p) for p in range(3)])
            return metas, await consume(c, len(sent))
        finally:
            await c.stop()

    metas, got = run(go())
    assert len(got) == len(sent)
    where = {(r.partition, r.offset): r for r in got}
    for i, ((k, v, _p), m) in enumerate(zip(sent, metas, strict=True)):
        r = where[(m.partition, m.offset)]
        assert (r.key, r.value, list(r.headers), r.timestamp) == (k, v, [("i", b"%d" % i)], 1_700_000_000_000 + i)
    for records in by_partition(got).values():
        assert [r.offset for r in records] == list(range(len(records)))
        assert all(r.leader_epoch >= 0 for r in records)


def test_earliest_and_latest_and_seeks(cluster):
    topic = unique("reset")
    create_topic(cluster.bootstrap, topic, 1)
    tp = TopicPartition(topic, 0)

    async def go() -> None:
        await produce(cluster.bootstrap, topic, [(None, b"old-%d" % i, 0) for i in range(20)])
        latest = Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="latest")
        earliest = Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
        await latest.start()
        await earliest.start()
        try:
            latest.assign([tp])
            earliest.assign([tp])
            assert await latest.position(tp) == 20
            assert await earliest.position(tp) == 0
            await produce(cluster.bootstrap, topic, [(None, b"new-%d" % i, 0) for i in range(5)])
            assert [r.value for r in await consume(latest, 5)] == [b"new-%d" % i for i in range(5)]
            assert [r.offset for r in await consume(earliest, 25)] == list(range(25))
            assert earliest.highwater(tp) == 25

            earliest.seek(tp, 12)
            got = await consume(earliest, 13)
            assert [r.offset for r in got] == list(range(12, 25)) and await earliest.position(tp) == 25
            assert await earliest.seek_to_beginning(tp) and await earliest.position(tp) == 0
            assert (await earliest.getone()).offset == 0
            assert await earliest.seek_to_end(tp) and await earliest.position(tp) == 25
        finally:
            await latest.stop()
            await earliest.stop()

    run(go())


# -- groups -----------------------------------------------------------------------------------------


def test_two_members_split_the_partitions_and_one_takes_all_when_the_other_stops(cluster):
    topic, group = unique("split"), unique("group")
    create_topic(cluster.bootstrap, topic, 4)
    everything = [TopicPartition(topic, p) for p in range(4)]

    async def go() -> list[ConsumerRecord]:
        await produce(cluster.bootstrap, topic, [(b"k%d" % i, b"a-%d" % i, None) for i in range(200)])
        a = Consumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group, auto_offset_reset="earliest",
                     **FAST_GROUP)
        b = Consumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group, auto_offset_reset="earliest",
                     **FAST_GROUP)
        await a.start()
        await b.start()
        delivered: list[ConsumerRecord] = []
        try:
            async def split() -> bool:
                for c in (a, b):
                    for records in (await c.getmany(timeout_ms=100)).values():
                        delivered.extend(records)
                return (len(a.assignment()) == 2 and len(b.assignment()) == 2
                        and a.assignment() | b.assignment() == set(everything))

            await _until(split)
            while len(delivered) < 200:
                for c in (a, b):
                    for records in (await c.getmany(timeout_ms=100)).values():
                        delivered.extend(records)
            await a.stop()  # commits what it delivered, leaves the group
            await produce(cluster.bootstrap, topic, [(b"k%d" % i, b"b-%d" % i, None) for i in range(200)])

            async def took_over() -> bool:
                for records in (await b.getmany(timeout_ms=100)).values():
                    delivered.extend(records)
                return b.assignment() == set(everything) and len(delivered) >= 400

            await _until(took_over)
            return delivered
        finally:
            await a.stop()
            await b.stop()

    delivered = run(go())
    values = sorted(r.value for r in delivered)
    assert values == sorted([b"a-%d" % i for i in range(200)] + [b"b-%d" % i for i in range(200)])
    for records in by_partition(delivered).values():
        assert [r.offset for r in records] == sorted(r.offset for r in records)


def test_committed_offsets_are_where_a_restarted_member_resumes(cluster):
    topic, group = unique("resume"), unique("group")
    create_topic(cluster.bootstrap, topic, 2)
    tps = [TopicPartition(topic, p) for p in range(2)]

    async def go() -> None:
        await produce(cluster.bootstrap, topic, [(None, b"v-%d-%d" % (p, i), p) for i in range(30) for p in (0, 1)])
        first = Consumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group, auto_offset_reset="earliest",
                         enable_auto_commit=False, **FAST_GROUP)
        await first.start()
        try:
            got = by_partition(await consume(first, 60))
            assert all(len(got[p]) == 30 for p in (0, 1))
            await first.commit({tps[0]: 10, tps[1]: 25})
            assert [await first.committed(tp) for tp in tps] == [10, 25]
        finally:
            await first.stop()
        second = Consumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group, auto_offset_reset="latest",
                          **FAST_GROUP)
        await second.start()
        try:
            got = by_partition(await consume(second, 25))
            assert [r.offset for r in got[0]] == list(range(10, 30))
            assert [r.offset for r in got[1]] == list(range(25, 30))
        finally:
            await second.stop()  # auto-commit: its positions
        third = Consumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group, **FAST_GROUP)
        await third.start()
        try:
            await _until(lambda: bool(third.assignment()))
            assert [await third.committed(tp) for tp in tps] == [30, 30]
            assert [await third.position(tp) for tp in tps] == [30, 30]
        finally:
            await third.stop()

    run(go())


def test_an_expansion_rebalances_the_group_onto_the_new_partition(cluster):
    topic, group = unique("grow"), unique("group")
    create_topic(cluster.bootstrap, topic, 2)

    async def go() -> tuple[list[ConsumerRecord], int]:
        await produce(cluster.bootstrap, topic, [(None, b"before-%d" % p, p) for p in (0, 1)])
        c = Consumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group, auto_offset_reset="earliest",
                     metadata_max_age_ms=600_000, **FAST_GROUP)  # no periodic refresh within the test
        await c.start()
        try:
            delivered = await consume(c, 2)
            a = admin(cluster.bootstrap)  # kept alive until the answer
            await asyncio.to_thread(lambda: a.create_partitions([NewPartitions(topic, 3)])[topic].result(TIMEOUT))
            await asyncio.to_thread(wait_until, lambda: all(
                len(metadata(port, topic).topics[0].partitions) == 3 for port in PORTS), message="3 partitions")
            await produce(cluster.bootstrap, topic, [(None, b"after-%d" % p, p) for p in (0, 1, 2)])
            delivered += await consume(c, 3)
            return delivered, c._group.rebalances  # type: ignore[union-attr]
        finally:
            await c.stop()

    delivered, rebalances = run(go())
    assert sorted((r.partition, r.value) for r in delivered) == [
        (0, b"after-0"), (0, b"before-0"), (1, b"after-1"), (1, b"before-1"), (2, b"after-2")]
    assert rebalances >= 2


# -- a leader move ------------------------------------------------------------------------------------


def test_a_leader_move_is_followed_without_losing_or_duplicating_records(cluster):
    topic = unique("move")
    tp = TopicPartition(topic, 0)
    a = admin(cluster.bootstrap)
    a.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2]])],
                    operation_timeout=TIMEOUT)[topic].result(TIMEOUT)

    def leader_is(leader: int, nodes: tuple[int, ...] = (0, 1, 2)) -> bool:
        return all(metadata(PORTS[n], topic).topics[0].partitions[0].leader_id == leader for n in nodes)

    wait_until(lambda: leader_is(1), message="broker 1 leads")

    async def go() -> tuple[list[ConsumerRecord], int]:
        c = Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
        await c.start()
        c.assign([tp])
        try:
            await produce(cluster.bootstrap, topic, [(None, b"one-%d" % i, 0) for i in range(50)])
            delivered = await consume(c, 50)
            await asyncio.to_thread(cluster.stop_broker, 1)
            await asyncio.to_thread(wait_until, lambda: leader_is(2, (0, 2)), message="broker 2 leads")
            await produce(cluster.bootstrap, topic, [(None, b"two-%d" % i, 0) for i in range(50)])
            delivered += await consume(c, 50)
            await asyncio.to_thread(cluster.start_broker, 1)
            await asyncio.to_thread(wait_until, lambda: 1 in metadata(PORTS[0], topic).topics[0].partitions[0].isr_nodes,
                                    message="broker 1 back in the ISR", ignoring=(Exception,))
            result = await asyncio.to_thread(
                lambda: a.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition(topic, 0)]).result(TIMEOUT))
            assert all(e is None for e in result.values()), result
            await asyncio.to_thread(wait_until, lambda: leader_is(1), message="broker 1 leads again")
            await produce(cluster.bootstrap, topic, [(None, b"three-%d" % i, 0) for i in range(50)])
            delivered += await consume(c, 50)
            return delivered, c._fetcher.hinted_moves
        finally:
            await c.stop()

    delivered, hinted = run(go())
    assert [r.offset for r in delivered] == list(range(150))
    assert [r.value for r in delivered] == ([b"one-%d" % i for i in range(50)] + [b"two-%d" % i for i in range(50)]
                                            + [b"three-%d" % i for i in range(50)])
    assert hinted >= 1  # the move back was taken from the Fetch answer's current_leader (KIP-951)


async def _until(condition: Any) -> None:
    """Awaits ``condition()`` (a coroutine function or a plain one) until true."""
    async def check() -> bool:
        result = condition()
        return bool(await result) if asyncio.iscoroutine(result) else bool(result)

    while not await check():
        await asyncio.sleep(0.05)
