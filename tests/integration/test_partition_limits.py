"""KIP-578's partition limits on a real ``refka serve``: a request that would take the
cluster past max.partitions, or a broker past max.broker.partitions, is refused
whole with POLICY_VIOLATION and creates nothing; below them it is served."""

from __future__ import annotations

import pytest

from refka.protocol import ErrorCode
from refka.protocol.messages.create_partitions import CreatePartitions
from refka.protocol.messages.create_topics import CreateTopics
from refka.protocol.messages.metadata import Metadata
from tests.brokers import BrokerProcess
from tests.integration.test_bad_input import RawClient

pytestmark = pytest.mark.integration

# CreatePartitions v3, topic fz-p3 to 32767 partitions (the frame the hostile-client report sent).
CREATE_PARTITIONS_32767 = bytes.fromhex(
    "00000026002500030000000100087769726566757a7a000206667a2d703300007fff0100000013880000")


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("kip578") / "data", memory=True,
                      overrides={"max.partitions": "60", "max.broker.partitions": "50"}).start()
    yield b
    b.stop()


def create_topic(c: RawClient, name: str, partitions: int) -> int:
    R = CreateTopics.Request
    resp = c.call(CreateTopics, R(topics=[R.CreatableTopic(name=name, num_partitions=partitions,
                                                           replication_factor=1, assignments=[], configs=[])],
                                  timeout_ms=30000), 5)
    return resp.topics[0].error_code


def partition_count(c: RawClient, name: str) -> int:
    R = Metadata.Request
    resp = c.call(Metadata, R(topics=[R.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False), 9)
    return len(resp.topics[0].partitions)


def test_create_partitions_past_the_limits_is_a_policy_violation_and_adds_nothing(limited):
    with RawClient(limited) as c:
        assert create_topic(c, "fz-p3", 2) == ErrorCode.NONE
        c.send(CREATE_PARTITIONS_32767)
        resp = c.read_response(CreatePartitions, 3, 1)
        assert resp.results[0].error_code == ErrorCode.POLICY_VIOLATION
        assert "max.partitions" in resp.results[0].error_message
        assert partition_count(c, "fz-p3") == 2


def test_create_topics_past_max_broker_partitions_is_refused_and_below_it_served(limited):
    with RawClient(limited) as c:
        assert create_topic(c, "too-many", 55) == ErrorCode.POLICY_VIOLATION  # 57 total, but 57 on one broker
        assert partition_count(c, "too-many") == 0
        assert create_topic(c, "enough", 40) == ErrorCode.NONE
        assert partition_count(c, "enough") == 40


def test_a_request_for_two_billion_partitions_is_refused_before_any_is_assigned(broker):
    """num_partitions 2^31-1 in 50 bytes: refused on the count (default max.partitions), not
    assigned in memory first (that grew a broker to 24 GB)."""
    with RawClient(broker) as c:
        assert create_topic(c, "two-billion", 2**31 - 1) == ErrorCode.POLICY_VIOLATION
        assert create_topic(c, "grows", 1) == ErrorCode.NONE
        R = CreatePartitions.Request
        resp = c.call(CreatePartitions, R(topics=[R.CreatePartitionsTopic(name="grows", count=2**31 - 1,
                                                                         assignments=None)],
                                          timeout_ms=5000, validate_only=False), 3)
        assert resp.results[0].error_code == ErrorCode.POLICY_VIOLATION
        assert partition_count(c, "grows") == 1


def test_one_request_counts_its_earlier_topics_against_the_limits(tmp_path):
    """Three topics of 20 partitions in one CreateTopics under max.broker.partitions 50: the
    first two are created, the third would be the 60th replica on the broker and is refused."""
    b = BrokerProcess(tmp_path / "data", memory=True,
                      overrides={"max.partitions": "100", "max.broker.partitions": "50"}).start()
    try:
        R = CreateTopics.Request
        with RawClient(b) as c:
            resp = c.call(CreateTopics, R(topics=[
                R.CreatableTopic(name=f"third-{i}", num_partitions=20, replication_factor=1, assignments=[],
                                 configs=[]) for i in range(3)], timeout_ms=30000), 5)
            assert [t.error_code for t in resp.topics] == [ErrorCode.NONE, ErrorCode.NONE,
                                                           ErrorCode.POLICY_VIOLATION]
            assert "max.broker.partitions" in resp.topics[2].error_message
            assert [partition_count(c, f"third-{i}") for i in range(3)] == [20, 20, 0]
    finally:
        b.stop()
