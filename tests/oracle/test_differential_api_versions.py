"""ApiVersions, refka against Apache Kafka 3.9.1: the APIs and version ranges each serves."""

from __future__ import annotations

import pytest

from refka.protocol.kafka_apis import KAFKA_API_NAMES
from refka.protocol.messages.api_versions import ApiVersions
from tests.oracle.differential import Pair, assert_same, departure

departure("api-versions-finalized-features-epoch", "ApiVersions", "finalized_features_epoch", kafka=0, refka=-1,
          reason="Kafka's ZooKeeper-mode controller writes a /feature znode (epoch 0, no finalized features); "
                 "refka has none and answers the field's default, -1 ('no finalized features'); clients read "
                 "the epoch only alongside finalized features")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

# APIs Kafka 3.9.1 (ZooKeeper mode) serves that refka does not, by key, with the reason.
_TXN = "transactions are not served (README, Not yet served): a transactional id is refused"
_ACL = "no authorizer: ACLs are not served"
_SASL = "no SASL listeners (README, Not yet served)"
_TOKEN = "delegation tokens need SASL, which is not served"
_QUOTA = "no client quotas"
_SCRAM = "no SASL/SCRAM, hence no SCRAM credentials"
_KRAFT = "a KRaft (or ZooKeeper-migration) API; refka models ZooKeeper mode"
KAFKA_ONLY_APIS: dict[int, str] = {
    17: _SASL,  # SaslHandshake
    24: _TXN, 25: _TXN, 26: _TXN, 27: _TXN, 28: _TXN,  # AddPartitionsToTxn .. TxnOffsetCommit
    29: _ACL, 30: _ACL, 31: _ACL,  # DescribeAcls, CreateAcls, DeleteAcls
    34: "log directories cannot be moved: one log directory per broker (AlterReplicaLogDirs)",
    36: _SASL,  # SaslAuthenticate
    38: _TOKEN, 39: _TOKEN, 40: _TOKEN, 41: _TOKEN,  # Create/Renew/Expire/DescribeDelegationToken
    48: _QUOTA, 49: _QUOTA,  # DescribeClientQuotas, AlterClientQuotas
    50: _SCRAM, 51: _SCRAM,  # Describe/AlterUserScramCredentials
    56: "AlterPartition: refka's leaders write the ISR to the store themselves, as Kafka's did before KIP-497",
    57: "UpdateFeatures: no finalized features (KIP-584)",
    58: "Envelope: only a KRaft controller receives forwarded requests (KIP-590)",
    61: _TXN + "; DescribeProducers is not served either",
    65: _TXN, 66: _TXN,  # DescribeTransactions, ListTransactions
    67: _KRAFT,  # AllocateProducerIds
    68: "KIP-848's consumer group protocol is not served (README, Not yet served)",  # ConsumerGroupHeartbeat
    69: "KIP-848's consumer group protocol is not served (README, Not yet served)",  # ConsumerGroupDescribe
}

# APIs refka serves that Kafka does not.
REFKA_ONLY_APIS: dict[int, str] = {
    10253: "KIP-253's PartitionLeaderEpochsForPartitions, refka's extension (protocol/extensions.py)",
    10254: "KIP-253's ConsumerGroupPosition, refka's extension (protocol/extensions.py)",
}

# APIs both serve with different version ranges: key -> ((Kafka's min, max), (refka's min, max), reason).
_OLD = "the versions Kafka 4.0 removed (KIP-896) are not served"
VERSION_RANGE_DEPARTURES: dict[int, tuple[tuple[int, int], tuple[int, int], str]] = {
    1: ((0, 17), (0, 16), "Fetch v17 (KIP-853's replica directory ids, a KRaft feature) is not served"),
    2: ((0, 9), (1, 8), "ListOffsets: " + _OLD + " (v0); v9 (KIP-1005, the last tiered offset) is not served"),
    8: ((0, 9), (2, 9), "OffsetCommit: " + _OLD + " (v0-1)"),
    9: ((0, 9), (1, 9), "OffsetFetch: " + _OLD + " (v0)"),
    10: ((0, 6), (0, 4), "FindCoordinator v5-6 (KIP-890, KIP-932's share groups) are not served"),
    19: ((0, 7), (2, 7), "CreateTopics: " + _OLD + " (v0-1)"),
    20: ((0, 6), (1, 6), "DeleteTopics: " + _OLD + " (v0)"),
    32: ((0, 4), (1, 4), "DescribeConfigs: " + _OLD + " (v0)"),
    45: ((0, 0), (0, 1), "AlterPartitionReassignments v1 (KIP-860, allowReplicationFactorChange, Kafka 4.0) is served"),
    60: ((0, 1), (0, 2), "DescribeCluster v2 (include_fenced_brokers, Kafka 4.0) is served"),
}


VALID = ApiVersions.Request(client_software_name="refka-oracle", client_software_version="1.0")


def _ranges(resp) -> dict[int, tuple[int, int]]:
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def _name(key: int) -> str:
    return f"{KAFKA_API_NAMES.get(key, '?')} ({key})"


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_api_versions_answers_the_same_header_fields(oracle_pair: Pair, version: int) -> None:
    body = ApiVersions.Request(client_software_name="refka-oracle", client_software_version="1.0")
    kafka, refka = oracle_pair.call(ApiVersions, body, version)
    # The version ranges are compared by the tests below, API by API.
    kafka.api_keys, refka.api_keys = [], []
    assert_same("ApiVersions", kafka, refka, f"v{version}")


def test_the_apis_only_kafka_serves_are_the_documented_ones(oracle_pair: Pair) -> None:
    kafka, refka = oracle_pair.call(ApiVersions, VALID, 3)
    k, r = _ranges(kafka), _ranges(refka)
    assert {_name(key) for key in k.keys() - r.keys()} == {_name(key) for key in KAFKA_ONLY_APIS}
    assert {_name(key) for key in r.keys() - k.keys()} == {_name(key) for key in REFKA_ONLY_APIS}


def test_the_apis_both_serve_have_the_same_version_ranges_or_a_documented_departure(oracle_pair: Pair) -> None:
    kafka, refka = oracle_pair.call(ApiVersions, VALID, 3)
    k, r = _ranges(kafka), _ranges(refka)
    found = {key: (k[key], r[key]) for key in k.keys() & r.keys() if k[key] != r[key]}
    documented = {key: (kr, rr) for key, (kr, rr, _) in VERSION_RANGE_DEPARTURES.items()}
    assert {_name(key): v for key, v in found.items()} == {_name(key): v for key, v in documented.items()}


@pytest.mark.parametrize("name, version", [("", ""), ("bad name!", "1.0"), ("refka-oracle", "-1")])
def test_api_versions_v3_with_an_invalid_client_software_name_or_version(oracle_pair: Pair, name: str,
                                                                         version: str) -> None:
    kafka, refka = oracle_pair.call(ApiVersions, ApiVersions.Request(client_software_name=name,
                                                                     client_software_version=version), 3)
    kafka.api_keys = [k for k in kafka.api_keys if k.api_key in _ranges(refka)]
    refka.api_keys = [k for k in refka.api_keys if k.api_key in _ranges(kafka)]
    assert_same("ApiVersions", kafka, refka, f"client software {name!r} {version!r}")
