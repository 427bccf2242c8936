"""Consumer groups of unmodified aiokafka consumers against refka.

Two AIOKafkaConsumers share a 6-partition topic on one event loop, process,
commit (with metadata), and stop (LeaveGroup). Two new ones in the same group
resume from the committed offsets: they see only what was produced after.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import OffsetAndMetadata

from tests.brokers import BrokerProcess
from tests.waiting import wait_until_async

pytestmark = pytest.mark.integration

PARTITIONS = 6


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("refka-aio-groups") / "data", memory=True,
                      overrides={"group.initial.rebalance.delay.ms": "0"}).start()
    yield b
    b.stop()


async def produce(bootstrap: str, topic: str, n: int, tag: str) -> None:
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False)
    await p.start()
    try:
        for i in range(n):
            await p.send(topic, value=f"{tag}-{i}".encode(), partition=i % PARTITIONS)
        await p.flush()
    finally:
        await p.stop()


class Member:
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
            enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=1000,
        )
        self.records: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
        self.committed: dict[int, int] = {}
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> Member:
        await self.consumer.start()
        self.task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        while True:
            batch = await self.consumer.getmany(timeout_ms=200)
            offsets = {}
            for tp, msgs in batch.items():
                self.records[tp.partition].extend((m.offset, m.value) for m in msgs)
                offsets[tp] = OffsetAndMetadata(msgs[-1].offset + 1, f"by-{id(self)}")
            if offsets:
                await self.consumer.commit(offsets)  # after processing
                self.committed.update({tp.partition: o.offset for tp, o in offsets.items()})

    def values(self) -> list[bytes]:
        return [v for recs in self.records.values() for _o, v in recs]

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
        await self.consumer.stop()  # LeaveGroup


async def test_two_members_commit_stop_and_new_members_resume(group_broker):
    bootstrap = group_broker.bootstrap
    topic = f"aio-grp-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        await admin.close()
    await produce(bootstrap, topic, 60, "first")

    a = await Member(bootstrap, topic, group).start()
    b = await Member(bootstrap, topic, group).start()
    try:
        await wait_until_async(lambda: len(a.assignment()) == 3 and len(b.assignment()) == 3,
                               message="three partitions each")
        await wait_until_async(lambda: {**a.committed, **b.committed} == dict.fromkeys(range(PARTITIONS), 10),
                               message="the first 60 records consumed and committed")
    finally:
        await a.stop()
        await b.stop()
    assert sorted(a.values() + b.values()) == sorted(f"first-{i}".encode() for i in range(60))

    check = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await check.start()
    try:
        committed = {p: await check.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        await check.stop()
    assert committed == dict.fromkeys(range(PARTITIONS), 10)

    await produce(bootstrap, topic, 30, "second")
    c = await Member(bootstrap, topic, group).start()
    d = await Member(bootstrap, topic, group).start()
    try:
        await wait_until_async(lambda: len(c.values()) + len(d.values()) >= 30,
                               message="the 30 new records consumed")
        await wait_until_async(lambda: c.assignment() and d.assignment(),
                               message="both new members own partitions")
    finally:
        await c.stop()
        await d.stop()
    assert sorted(c.values() + d.values()) == sorted(f"second-{i}".encode() for i in range(30))
    for m in (c, d):
        for p, recs in m.records.items():
            assert recs[0][0] >= 10, (p, recs[:3])
