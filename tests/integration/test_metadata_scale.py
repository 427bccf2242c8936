"""KIP-526 on a real ``refka serve`` with 10,000 topics (issue 12; the 100,000-topic figures
are lab/bench/metadata.py's): a Metadata request naming topics answers exactly those, with
their partitions and leaders; one for all topics lists every topic; and both stay right
after topics are created, deleted and expanded (the broker keeps encoded answers per topic:
none may outlive the topic it encodes). Behaviour only, never a time."""

from __future__ import annotations

import random
import time

import pytest

from refka.protocol import ErrorCode
from refka.protocol.messages.create_partitions import CreatePartitions
from refka.protocol.messages.create_topics import CreateTopics
from refka.protocol.messages.delete_topics import DeleteTopics
from refka.protocol.messages.metadata import Metadata
from tests.brokers import BrokerProcess
from tests.integration.test_bad_input import RawClient

pytestmark = pytest.mark.integration

TOPICS = 10_000
BATCH = 1_000
NODE = 0  # refka serve's broker id
M = Metadata.Request


def name(i: int) -> str:
    return f"scale-{i:05d}"


def create(c: RawClient, names: list[str], partitions: int = 1) -> None:
    R = CreateTopics.Request
    resp = c.call(CreateTopics, R(topics=[R.CreatableTopic(name=n, num_partitions=partitions, replication_factor=1,
                                                            assignments=[], configs=[]) for n in names],
                                  timeout_ms=120_000, validate_only=False), 7)
    assert [(t.name, t.error_code) for t in resp.topics] == [(n, ErrorCode.NONE) for n in names]


def metadata(c: RawClient, names: list[str] | None, version: int = 12):
    req = M(topics=None if names is None else [M.MetadataRequestTopic(name=n) for n in names],
            allow_auto_topic_creation=False)
    return c.call(Metadata, req, version)


def shape(resp) -> dict[str, tuple[int, list[tuple[int, int, list[int]]]]]:
    """topic -> (error, [(partition, leader, replicas)])"""
    return {t.name: (t.error_code, sorted((p.partition_index, p.leader_id, list(p.replica_nodes))
                                          for p in t.partitions)) for t in resp.topics}


def one_partition(n: int = 1) -> tuple[int, list[tuple[int, int, list[int]]]]:
    return ErrorCode.NONE, [(p, NODE, [NODE]) for p in range(n)]


def eventually(check, what: str, timeout: float = 60.0):
    """Polls ``check`` until it returns something true (the controller's UpdateMetadata
    reaches the cache a moment after an admin answer); fails with ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"never: {what}")
        time.sleep(0.05)
    return value


@pytest.fixture(scope="module")
def crowded(tmp_path_factory):
    limit = str(TOPICS + 100)  # max.broker.partitions is 4,000 by default (KIP-578)
    b = BrokerProcess(tmp_path_factory.mktemp("kip526") / "data", memory=True,
                      overrides={"max.partitions": limit, "max.broker.partitions": limit}).start()
    try:
        with RawClient(b) as c:
            for start in range(0, TOPICS, BATCH):
                create(c, [name(i) for i in range(start, start + BATCH)])
        yield b
    finally:
        b.stop()


def test_a_subset_request_answers_exactly_the_topics_asked_with_partitions_and_leaders(crowded):
    rng = random.Random(526)
    with RawClient(crowded) as c:
        for k in (1, 20, 300):
            asked = [name(i) for i in rng.sample(range(TOPICS), k)]
            for version in (1, 9, 12):
                resp = metadata(c, asked, version)
                assert [t.name for t in resp.topics] == asked  # in the order asked, nothing else
                assert shape(resp) == {n: one_partition() for n in asked}
                assert [b.node_id for b in resp.brokers] == [NODE]
        mixed = [name(7), "scale-missing", name(TOPICS - 1)]
        assert shape(metadata(c, mixed)) == {name(7): one_partition(), name(TOPICS - 1): one_partition(),
                                             "scale-missing": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])}


def test_an_all_topics_request_lists_every_topic(crowded):
    with RawClient(crowded) as c:
        for version in (1, 12, 12):  # the second v12 answer from the encoded topics
            resp = metadata(c, None, version)
            assert len(resp.topics) == TOPICS
            assert shape(resp) == {name(i): one_partition() for i in range(TOPICS)}


def test_answers_follow_topics_created_deleted_and_expanded(crowded):
    with RawClient(crowded) as c:
        watched = [name(1), name(2), name(3), "scale-new-a", "scale-new-b"]
        metadata(c, None)  # every topic encoded now, by the answers of both kinds
        metadata(c, watched)

        create(c, ["scale-new-a", "scale-new-b"], partitions=2)
        R = DeleteTopics.Request
        resp = c.call(DeleteTopics, R(topics=[R.DeleteTopicState(name=name(2))], timeout_ms=60_000), 6)
        assert resp.responses[0].error_code == ErrorCode.NONE
        C = CreatePartitions.Request
        resp = c.call(CreatePartitions, C(topics=[C.CreatePartitionsTopic(name=name(3), count=3, assignments=None)],
                                          timeout_ms=60_000, validate_only=False), 3)
        assert resp.results[0].error_code == ErrorCode.NONE

        expected = {name(1): one_partition(), name(2): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []),
                    name(3): one_partition(3), "scale-new-a": one_partition(2), "scale-new-b": one_partition(2)}
        eventually(lambda: shape(metadata(c, watched)) == expected, f"the subset answer {expected}")
        everything = {name(i): one_partition() for i in range(TOPICS) if i != 2}
        everything.update({name(3): one_partition(3), "scale-new-a": one_partition(2),
                           "scale-new-b": one_partition(2)})
        assert shape(metadata(c, None)) == everything
        assert shape(metadata(c, None, 9)) == everything
