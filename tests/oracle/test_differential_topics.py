"""Metadata, CreateTopics and DescribeConfigs, refka against Apache Kafka 3.9.1."""

from __future__ import annotations

import pytest

from refka.protocol.messages.create_topics import CreateTopics
from refka.protocol.messages.describe_configs import DescribeConfigs
from refka.protocol.messages.metadata import Metadata
from tests.oracle.differential import (
    ANY,
    DEPARTURES,
    Pair,
    assert_same,
    create_topic,
    departure,
    split_configs,
    wait_for_leaders,
)

departure("create-topics-unknown-broker", "CreateTopics", "topics[].error_code", kafka=0, refka=39,
          reason="a manual assignment naming a broker that is not registered: Kafka 3.9 (ZooKeeper mode) accepts "
                 "it (and waits timeout_ms for a leader that never comes); refka refuses it with "
                 "INVALID_REPLICA_ASSIGNMENT")
departure("describe-configs-synonyms", "DescribeConfigs", "results[].configs[].synonyms*", kafka=ANY, refka=ANY,
          reason="refka lists each topic config's broker synonym with its default (DEFAULT_CONFIG) even where the "
                 "broker does not set it, and names the topic config itself where Kafka has no broker synonym "
                 "(e.g. retention.ms: Kafka [], refka [log.retention.ms=604800000]; "
                 "message.downconversion.enable: Kafka's synonym is log.message.downconversion.enable)")
departure("describe-configs-error-message", "DescribeConfigs", "results[].error_message", kafka=False, refka=True,
          reason="a resource answered without error: Kafka 3.9 sends an empty error message, refka null")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

MR = Metadata.Request
CR = CreateTopics.Request


def metadata(names: list[str] | None) -> object:
    return MR(topics=None if names is None else [MR.MetadataRequestTopic(name=n) for n in names],
              allow_auto_topic_creation=False)


def same_with_configs(pair: Pair, api: object, body: object, version: int, context: str = "") -> None:
    """As ``pair.same``, with each topic's configs split first (``split_configs``): the ones both
    report compared by name, the ones only one reports checked against the documented lists."""
    kafka, refka = pair.call(api, body, version)  # type: ignore[arg-type]
    outer = "topics" if api is CreateTopics else "results"
    for kt, rt in zip(getattr(kafka, outer), getattr(refka, outer), strict=True):
        if kt.configs is not None and rt.configs is not None:
            kt.configs, rt.configs = split_configs(kt.configs, rt.configs)
    assert_same(api.name, kafka, refka, context or f"v{version}")  # type: ignore[attr-defined]


# -- Metadata -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [4, 7, 9, 12])
def test_metadata_of_an_unknown_topic_with_auto_create_off(oracle_pair: Pair, version: int) -> None:
    oracle_pair.same(Metadata, metadata(["md-no-such-topic"]), version)


@pytest.mark.parametrize("version", [1, 4, 7, 9, 12])
def test_metadata_of_an_existing_topic(oracle_pair: Pair, version: int) -> None:
    create_topic(oracle_pair, "md-existing", partitions=3)
    oracle_pair.same(Metadata, metadata(["md-existing"]), version)


@pytest.mark.parametrize("version", [1, 9, 12])
def test_metadata_of_all_topics(oracle_pair: Pair, version: int) -> None:
    create_topic(oracle_pair, "md-all", partitions=2)
    oracle_pair.same(Metadata, metadata(None), version)


# -- CreateTopics -------------------------------------------------------------------------------------


def creatable(name: str, partitions: int = 1, replication: int = 1, configs: dict[str, str] | None = None,
              assignments: dict[int, list[int]] | None = None) -> object:
    return CR.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication,
        assignments=[CR.CreatableTopic.CreatableReplicaAssignment(partition_index=p, broker_ids=b)
                     for p, b in (assignments or {}).items()],
        configs=[CR.CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])


def create(*topics: object, validate_only: bool = False) -> object:
    return CR(topics=list(topics), timeout_ms=30_000, validate_only=validate_only)


@pytest.mark.parametrize("version", [2, 4, 5, 7])
def test_create_topics_valid(oracle_pair: Pair, version: int) -> None:
    name = f"ct-valid-v{version}"
    same_with_configs(oracle_pair, CreateTopics, create(creatable(name, 2, 1, {"retention.ms": "3600000"})), version)
    wait_for_leaders(oracle_pair, name, 2)


@pytest.mark.parametrize("version", [5, 7])
def test_create_topics_with_broker_defaults(oracle_pair: Pair, version: int) -> None:
    name = f"ct-defaults-v{version}"
    same_with_configs(oracle_pair, CreateTopics, create(creatable(name, -1, -1)), version)
    wait_for_leaders(oracle_pair, name, 1)


INVALID = {
    "bad-name-slash": creatable("bad/name"),
    "bad-name-dot": creatable("."),
    "bad-name-dotdot": creatable(".."),
    "bad-name-empty": creatable(""),
    "bad-name-too-long": creatable("x" * 250),
    "zero-partitions": creatable("ct-zero-partitions", 0),
    "negative-partitions": creatable("ct-negative-partitions", -2),
    "zero-replication": creatable("ct-zero-replication", 1, 0),
    "replication-above-brokers": creatable("ct-replication-3", 1, 3),
    "unknown-config": creatable("ct-unknown-config", configs={"no.such.config": "1"}),
    "bad-config-value": creatable("ct-bad-config-value", configs={"retention.ms": "soon"}),
    "bad-config-choice": creatable("ct-bad-config-choice", configs={"cleanup.policy": "shred"}),
    "assignment-and-count": creatable("ct-assignment-and-count", 1, -1, assignments={0: [0]}),
}


@pytest.mark.parametrize("version", [2, 7])
def test_create_topics_assigned_to_an_unknown_broker_validate_only(oracle_pair: Pair, version: int) -> None:
    # validate_only: Kafka 3.9 would create it and wait timeout_ms for a leader that never comes.
    # The documented departure create-topics-unknown-broker: Kafka accepts it (and, v5+, describes the
    # topic it would create), refka refuses it; nothing else of the two answers is comparable.
    kafka, refka = oracle_pair.call(CreateTopics, create(
        creatable(f"ct-unknown-broker-v{version}", -1, -1, assignments={0: [7]}), validate_only=True), version)
    assert (kafka.topics[0].error_code, refka.topics[0].error_code) == (0, 39)
    assert DEPARTURES["create-topics-unknown-broker"].covers("CreateTopics", "topics[].error_code", 0, 39)


@pytest.mark.parametrize("version", [2, 5, 7])
@pytest.mark.parametrize("case", sorted(INVALID))
def test_create_topics_invalid(oracle_pair: Pair, case: str, version: int) -> None:
    oracle_pair.same(CreateTopics, create(INVALID[case]), version, f"{case} v{version}")


@pytest.mark.parametrize("version", [2, 7])
def test_create_topics_existing_name(oracle_pair: Pair, version: int) -> None:
    create_topic(oracle_pair, "ct-existing")
    oracle_pair.same(CreateTopics, create(creatable("ct-existing")), version)


@pytest.mark.parametrize("version", [2, 7])
def test_create_topics_duplicate_name_in_one_request(oracle_pair: Pair, version: int) -> None:
    oracle_pair.same(CreateTopics, create(creatable(f"ct-twice-v{version}"), creatable(f"ct-twice-v{version}")),
                     version)


@pytest.mark.parametrize("version", [2, 7])
def test_create_topics_validate_only(oracle_pair: Pair, version: int) -> None:
    name = f"ct-validate-only-v{version}"
    same_with_configs(oracle_pair, CreateTopics, create(creatable(name, 3, 1, {"cleanup.policy": "compact"}),
                                                        validate_only=True), version)
    oracle_pair.same(Metadata, metadata([name]), 12, "validate_only created nothing")
    oracle_pair.same(CreateTopics, create(creatable(name, 0), validate_only=True), version, "invalid, validate_only")


# -- DescribeConfigs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2, 3, 4])
@pytest.mark.parametrize("synonyms", [False, True])
def test_describe_configs_of_a_topic(oracle_pair: Pair, version: int, synonyms: bool) -> None:
    create_topic(oracle_pair, "dc-topic", partitions=1,
                 configs={"retention.ms": "3600000", "cleanup.policy": "compact", "max.message.bytes": "200000"})
    R = DescribeConfigs.Request
    body = R(resources=[R.DescribeConfigsResource(resource_type=2, resource_name="dc-topic", configuration_keys=None)],
             include_synonyms=synonyms, include_documentation=version >= 3)
    same_with_configs(oracle_pair, DescribeConfigs, body, version, f"v{version} synonyms={synonyms}")


@pytest.mark.parametrize("version", [1, 4])
def test_describe_configs_of_named_keys_and_an_unknown_topic(oracle_pair: Pair, version: int) -> None:
    create_topic(oracle_pair, "dc-keys")
    R = DescribeConfigs.Request
    body = R(resources=[
        R.DescribeConfigsResource(resource_type=2, resource_name="dc-keys",
                                  configuration_keys=["retention.ms", "segment.bytes", "no.such.config"]),
        R.DescribeConfigsResource(resource_type=2, resource_name="dc-no-such-topic", configuration_keys=None)],
        include_synonyms=False, include_documentation=False)
    oracle_pair.same(DescribeConfigs, body, version)
