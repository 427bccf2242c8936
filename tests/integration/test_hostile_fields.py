"""Hostile values in well-formed requests, sent as exact bytes to a real ``refka serve``.

Every field below is one the declaration allows (the frame parses), but whose value a
handler once could not use: the broker logged ``handler_failed`` or
``response_encode_failed`` with a traceback and closed the connection without an
answer. The contract now (issue 16): such a value gets Kafka's answer, in a response
that decodes to its last byte, the connection stays usable, and the broker logs no
warning and no traceback for it. Frames that found a bug are kept byte for byte
(size prefix included); the others are built with our codec.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from refka.broker.group.coordinator import partition_for
from refka.broker.group.storage import OFFSETS_TOPIC, OffsetKey, decode_record
from refka.protocol import ErrorCode
from refka.protocol.messages.alter_configs import AlterConfigs
from refka.protocol.messages.create_topics import CreateTopics
from refka.protocol.messages.describe_configs import DescribeConfigs
from refka.protocol.messages.describe_groups import DescribeGroups
from refka.protocol.messages.fetch import Fetch
from refka.protocol.messages.find_coordinator import FindCoordinator
from refka.protocol.messages.join_group import JoinGroup
from refka.protocol.messages.list_groups import ListGroups
from refka.protocol.messages.metadata import Metadata
from refka.protocol.messages.offset_commit import OffsetCommit
from refka.protocol.messages.offset_fetch import OffsetFetch
from refka.protocol.records import iter_batches, iter_records
from tests.brokers import BrokerProcess
from tests.integration.test_bad_input import RawClient, request_bytes, warnings_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "fz-t0"  # the topic the recorded frames name
GROUP = "repro-g"
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
ZERO_UUID = b"\x00" * 16
LONG = "L" * 40_000  # longer than a non-flexible string (32767 bytes); flexible versions carry it
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions

# OffsetCommit v4, client "wirefuzz", correlation id 3: group repro-g, generation -1, no
# member, retention_time_ms 2^63-1, fz-t0 partition 0 at offset 1. The commit time plus
# that retention overflowed int64 in the __consumer_offsets value (struct.error).
OFFSET_COMMIT_V4_LONG_MAX_RETENTION = bytes.fromhex(
    "00000046000800040000000300087769726566757a7a0007726570726f2d67ffffffff00007fffffffffffffff"
    "000000010005667a2d7430000000010000000000000000000000010000"
)
# Metadata v11, client "wirefuzz", correlation id 4: one topic with the zero topic id and
# a null name. The UNKNOWN_TOPIC_ID answer carried a null name, which v11 cannot encode.
METADATA_V11_NULL_NAME = bytes.fromhex(
    "000000290003000b0000000400087769726566757a7a0002000000000000000000000000000000000000000000"
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """A durable broker (the commit must survive a restart) without topic auto-creation."""
    b = BrokerProcess(tmp_path_factory.mktemp("hostile-fields") / "data",
                      overrides={"auto.create.topics.enable": "false"}).start()
    with RawClient(b) as c:
        R = CreateTopics.Request
        resp = c.call(CreateTopics, R(topics=[R.CreatableTopic(
            name=TOPIC, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=15_000, validate_only=False), 7)
        assert resp.topics[0].error_code == ErrorCode.NONE
    yield b
    b.stop()


def log_size(b: BrokerProcess) -> int:
    return len(b.log_path.read_text())


def assert_quiet(b: BrokerProcess, c: RawClient, since: int) -> None:
    """No warning about this connection, and no failure of ours logged since ``since``."""
    assert warnings_for(b, c) == []
    log = b.log_path.read_text()[since:]
    for bad in ("Traceback", "handler_failed", "response_encode_failed"):
        assert bad not in log, log


def retry(call: Any, ok: Any, what: str, timeout: float = 30.0) -> Any:
    """``call()`` until ``ok(answer)``: the group coordinator loads after creation and restarts."""
    deadline = time.monotonic() + timeout
    while True:
        answer = call()
        if ok(answer):
            return answer
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: last answer {answer!r}")
        time.sleep(0.1)


def committed_offset(c: RawClient) -> Any:
    R = OffsetFetch.Request
    req = R(group_id=GROUP, topics=[R.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])])
    return retry(lambda: c.call(OffsetFetch, req, 7),
                 lambda r: r.error_code == ErrorCode.NONE and r.topics[0].partitions[0].error_code == 0,
                 "OffsetFetch").topics[0].partitions[0]


def stored_commits(c: RawClient) -> list[Any]:
    """The group's offset commit values in __consumer_offsets, read back with a Fetch."""
    R = Fetch.Request
    req = R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, topics=[
        R.FetchTopic(topic=OFFSETS_TOPIC, partitions=[R.FetchTopic.FetchPartition(
            partition=partition_for(GROUP, OFFSETS_PARTITIONS), fetch_offset=0, partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[], rack_id="")
    p = c.call(Fetch, req, 11).responses[0].partitions[0]
    assert p.error_code == ErrorCode.NONE
    out = []
    for h in iter_batches(p.records):
        for rec in iter_records(p.records[h.position:h.end]):
            key, value = decode_record(rec.key, rec.value)
            if key == OffsetKey(GROUP, TOPIC, 0):
                out.append(value)
    return out


def wait_for_coordinator(c: RawClient) -> None:
    retry(lambda: c.call(FindCoordinator, FindCoordinator.Request(key=GROUP), 2),
          lambda r: r.error_code == ErrorCode.NONE, "FindCoordinator")


def test_offset_commit_with_retention_long_max_is_stored_saturated_and_survives_a_restart(broker):
    since = log_size(broker)
    with RawClient(broker) as c:
        wait_for_coordinator(c)
        before = time.time_ns() // 1_000_000

        def commit() -> Any:
            c.send(OFFSET_COMMIT_V4_LONG_MAX_RETENTION)
            return c.read_response(OffsetCommit, 4, 3)

        resp = retry(commit, lambda r: r.topics[0].partitions[0].error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                     "OffsetCommit")
        assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in resp.topics] == [
            (TOPIC, [(0, ErrorCode.NONE)])]
        assert committed_offset(c).committed_offset == 1
        # Kafka's commit time + retention wraps past 2^63-1; refka stores what fits.
        [stored] = stored_commits(c)
        assert (stored.offset, stored.expire_timestamp) == (1, INT64_MAX)
        assert stored.commit_timestamp >= before
    assert_quiet(broker, c, since)

    broker.stop()
    broker.start()
    with RawClient(broker) as c:
        # Loaded back from __consumer_offsets (the v1 value decodes).
        assert committed_offset(c).committed_offset == 1
    assert_quiet(broker, c, since)


def test_metadata_v11_by_topic_id_with_a_null_name_is_an_invalid_request(broker):
    since = log_size(broker)
    with RawClient(broker) as c:
        c.send(METADATA_V11_NULL_NAME)
        md = c.read_response(Metadata, 11, 4)
        # Kafka 3.9 refuses IDs below v12; its error answer names the topic "" (v11
        # cannot carry null) and lists no brokers.
        assert [(t.error_code, t.name, t.topic_id, t.partitions) for t in md.topics] == [
            (ErrorCode.INVALID_REQUEST, "", ZERO_UUID, [])]
        assert md.brokers == []
        c.api_versions()
    assert_quiet(broker, c, since)


def test_metadata_v12_by_an_unknown_topic_id_answers_a_null_name(broker):
    R = Metadata.Request
    unknown = bytes(range(16))
    since = log_size(broker)
    with RawClient(broker) as c:
        md = c.call(Metadata, R(topics=[R.MetadataRequestTopic(name=None, topic_id=unknown)]), 12)
        assert [(t.error_code, t.name, t.topic_id) for t in md.topics] == [
            (ErrorCode.UNKNOWN_TOPIC_ID, None, unknown)]
        assert [b.port for b in md.brokers] == [broker.port]
    assert_quiet(broker, c, since)


# -- strings longer than a non-flexible string can carry -----------------------------------


def assert_groups_still_listed_and_described(c: RawClient) -> None:
    """Every client, at every version, can still list and describe the groups."""
    for v in (0, 2, 3):
        groups = c.call(ListGroups, ListGroups.Request(), v).groups
        assert all(len(g.group_id) < 1000 for g in groups)
    for v in (0, 4, 5):
        [d] = c.call(DescribeGroups, DescribeGroups.Request(groups=[GROUP]), v).groups
        assert d.error_code == ErrorCode.NONE


def test_offset_commit_with_a_group_id_too_long_to_store_is_invalid_group_id(broker):
    R = OffsetCommit.Request
    req = R(group_id=LONG, generation_id_or_member_epoch=-1, member_id="", topics=[R.OffsetCommitRequestTopic(
        name=TOPIC, partitions=[R.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=5)])])
    since = log_size(broker)
    with RawClient(broker) as c:
        wait_for_coordinator(c)
        for v in (8, 9):
            resp = c.call(OffsetCommit, req, v)
            assert [(p.partition_index, p.error_code) for p in resp.topics[0].partitions] == [
                (0, ErrorCode.INVALID_GROUP_ID)]
        assert_groups_still_listed_and_described(c)
    assert_quiet(broker, c, since)


def join_group(group: str = "fz-join", *, instance: str | None = None, protocol_type: str = "consumer",
               protocol: str = "range") -> Any:
    R = JoinGroup.Request
    return R(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
             group_instance_id=instance, protocol_type=protocol_type,
             protocols=[R.JoinGroupRequestProtocol(name=protocol, metadata=b"")])


@pytest.mark.parametrize("req, client_id, version, expected", [
    (join_group(LONG), "fz", 6, ErrorCode.INVALID_GROUP_ID),
    (join_group(instance=LONG), "fz", 6, ErrorCode.INVALID_REQUEST),
    (join_group(protocol_type=LONG), "fz", 6, ErrorCode.INVALID_REQUEST),
    (join_group(protocol=LONG), "fz", 6, ErrorCode.INVALID_REQUEST),
    # The member id would be "<client id>-<uuid>": past 32767 bytes, even in v5's answer.
    (join_group(), "c" * 32_767, 5, ErrorCode.INVALID_REQUEST),
], ids=["group_id", "group_instance_id", "protocol_type", "protocol_name", "client_id"])
def test_join_group_with_a_string_the_group_cannot_store_is_refused(broker, req, client_id, version, expected):
    since = log_size(broker)
    with RawClient(broker) as c:
        wait_for_coordinator(c)
        c.send(request_bytes(JoinGroup, req, version, 77, client_id=client_id))
        resp = c.read_response(JoinGroup, version, 77)
        assert (resp.error_code, resp.generation_id, resp.members) == (expected, -1, [])
        assert_groups_still_listed_and_described(c)
    assert_quiet(broker, c, since)


def alter_configs(name: str, configs: dict[str, str]) -> Any:
    R = AlterConfigs.Request
    return R(resources=[R.AlterConfigsResource(resource_type=2, resource_name=name, configs=[
        R.AlterConfigsResource.AlterableConfig(name=k, value=v) for k, v in configs.items()])], validate_only=True)


def create_topic_with(configs: dict[str, str]) -> Any:
    R = CreateTopics.Request
    return R(topics=[R.CreatableTopic(name="fz-configs", num_partitions=1, replication_factor=1, assignments=[],
                                      configs=[R.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                                               for k, v in configs.items()])],
             timeout_ms=5_000, validate_only=True)


MAX_NON_FLEXIBLE = "x" * 32_767
CONFIG_ANSWERS = {
    # name: (api, version, request, expected error) -- each answer once quoted the whole
    # name or value in an error message its version could not carry.
    "describe_unknown_topic_v1": (DescribeConfigs, 1, DescribeConfigs.Request(resources=[
        DescribeConfigs.Request.DescribeConfigsResource(resource_type=2, resource_name=MAX_NON_FLEXIBLE,
                                                         configuration_keys=None)]),
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    "alter_unknown_topic_v0": (AlterConfigs, 0, alter_configs(MAX_NON_FLEXIBLE, {}),
                               ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    "alter_unknown_config_v1": (AlterConfigs, 1, alter_configs(TOPIC, {MAX_NON_FLEXIBLE: "1"}),
                                ErrorCode.INVALID_CONFIG),
    "alter_bad_value_v1": (AlterConfigs, 1, alter_configs(TOPIC, {"retention.ms": MAX_NON_FLEXIBLE}),
                           ErrorCode.INVALID_CONFIG),
    "create_bad_value_v4": (CreateTopics, 4, create_topic_with({"retention.ms": MAX_NON_FLEXIBLE}),
                            ErrorCode.INVALID_CONFIG),
    # A value DescribeConfigs v1-v3 could not answer, for anyone, were it stored.
    "alter_free_text_value_v2": (AlterConfigs, 2, alter_configs(TOPIC, {"message.format.version": LONG}),
                                 ErrorCode.INVALID_CONFIG),
    "create_free_text_value_v5": (CreateTopics, 5, create_topic_with({"message.format.version": LONG}),
                                  ErrorCode.INVALID_CONFIG),
}


@pytest.mark.parametrize("case", CONFIG_ANSWERS)
def test_config_answers_quoting_a_long_name_or_value_still_encode(broker, case):
    api, version, req, expected = CONFIG_ANSWERS[case]
    since = log_size(broker)
    with RawClient(broker) as c:
        resp = c.call(api, req, version)
        [answer] = resp.results if api is DescribeConfigs else resp.topics if api is CreateTopics else resp.responses
        assert answer.error_code == expected
        assert len(answer.error_message) <= 1024
        c.api_versions()
    assert_quiet(broker, c, since)
