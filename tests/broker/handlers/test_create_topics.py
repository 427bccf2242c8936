"""CreateTopics and CreatePartitions refuse a request that would write more than
Kafka's 10000 metadata records (handlers/create_topics.py, create_partitions.py) before
anything is assigned: a partition count of 2^31-1 is an answer, not the broker's memory."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from refka.broker.config import BrokerConfig
from refka.broker.handlers.create_partitions import handle_create_partitions
from refka.broker.handlers.create_topics import EXCESSIVE_BATCH_MESSAGE, handle_create_topics
from refka.protocol import ErrorCode
from refka.protocol.messages.create_partitions import CreatePartitions
from refka.protocol.messages.create_topics import CreateTopics

INT32_MAX = 2**31 - 1
CT = CreateTopics.Request
CP = CreatePartitions.Request


def broker(calls: list, existing: dict[str, int] | None = None) -> SimpleNamespace:
    """A broker whose admin writes only record their arguments (and create nothing)."""
    existing = existing or {}

    async def create_topic(name, num_partitions, rf, assignment, configs, *, validate_only):
        calls.append((name, num_partitions))

    async def create_partitions(name, count, assignment, *, validate_only):
        calls.append((name, count))

    def topic(name):
        return SimpleNamespace(partitions=dict.fromkeys(range(existing[name]))) if name in existing else None

    return SimpleNamespace(config=BrokerConfig({}), metadata=SimpleNamespace(topic=topic),
                           controller_side=SimpleNamespace(create_topic=create_topic,
                                                           create_partitions=create_partitions))


def new_topic(name: str, partitions: int, configs: int = 0):
    return CT.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=[],
                             configs=[CT.CreatableTopic.CreatableTopicConfig(name=f"c{i}", value="1")
                                      for i in range(configs)])


async def create(*topics, existing=None):
    calls: list = []
    req = CT(topics=list(topics), timeout_ms=0, validate_only=True)
    resp = await handle_create_topics(SimpleNamespace(broker=broker(calls, existing), api_version=7), req)
    return [(t.name, t.error_code, t.error_message) for t in resp.topics], calls


async def test_a_topic_of_int32_max_partitions_is_a_policy_violation_and_nothing_is_assigned():
    answers, calls = await create(new_topic("huge", INT32_MAX), new_topic("small", 1))
    assert answers == [("huge", ErrorCode.POLICY_VIOLATION, EXCESSIVE_BATCH_MESSAGE),
                       ("small", ErrorCode.POLICY_VIOLATION, EXCESSIVE_BATCH_MESSAGE)]
    assert calls == []


@pytest.mark.parametrize("topics, refused", [
    ([new_topic("t", 9_999)], False),  # the topic record and 9999 partitions: 10000 records
    ([new_topic("t", 10_000)], True),
    ([new_topic("t", 9_998, configs=2)], True),  # config records count too
    ([new_topic("a", 5_000), new_topic("b", 5_000)], True),  # the bound is per request
    ([new_topic("t", 0), new_topic("u", -5)], False),  # refused anyway: no records
])
async def test_the_bound_is_kafkas_10000_records_per_request(topics, refused):
    answers, calls = await create(*topics)
    assert all(a[1] == ErrorCode.POLICY_VIOLATION for a in answers) is refused
    assert (calls == []) is refused


async def test_an_existing_topic_counts_too():
    """The store finds a topic exists only after its partitions are assigned."""
    answers, calls = await create(new_topic("old", INT32_MAX), existing={"old": 1})
    assert answers == [("old", ErrorCode.POLICY_VIOLATION, EXCESSIVE_BATCH_MESSAGE)] and calls == []


async def grow(*counts: tuple[str, int], existing: dict[str, int]):
    calls: list = []
    req = CP(topics=[CP.CreatePartitionsTopic(name=n, count=c, assignments=None) for n, c in counts],
             timeout_ms=0, validate_only=True)
    resp = await handle_create_partitions(SimpleNamespace(broker=broker(calls, existing), api_version=3), req)
    return [(r.name, r.error_code) for r in resp.results], calls


async def test_growing_a_topic_to_int32_max_partitions_is_a_policy_violation():
    answers, calls = await grow(("t", INT32_MAX), existing={"t": 3})
    assert answers == [("t", ErrorCode.POLICY_VIOLATION)] and calls == []


async def test_partitions_added_count_against_the_bound_not_the_total():
    answers, calls = await grow(("t", 10_003), existing={"t": 3})
    assert answers == [("t", ErrorCode.NONE)] and calls == [("t", 10_003)]
    answers, calls = await grow(("t", 10_004), existing={"t": 3})
    assert answers == [("t", ErrorCode.POLICY_VIOLATION)] and calls == []
