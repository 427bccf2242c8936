"""The names of Apache Kafka's API keys (its ``ApiKeys``, through Kafka 4.0), including
the ones refka does not serve, so that a refusal can say what a client asked for
("ConsumerGroupHeartbeat (key 68)") rather than a number. Served APIs have their
declarations in ``messages/``; this table is only their names.
"""

from __future__ import annotations

KAFKA_API_NAMES: dict[int, str] = dict(enumerate((
    "Produce", "Fetch", "ListOffsets", "Metadata", "LeaderAndIsr", "StopReplica", "UpdateMetadata",
    "ControlledShutdown", "OffsetCommit", "OffsetFetch", "FindCoordinator", "JoinGroup", "Heartbeat",
    "LeaveGroup", "SyncGroup", "DescribeGroups", "ListGroups", "SaslHandshake", "ApiVersions",
    "CreateTopics", "DeleteTopics", "DeleteRecords", "InitProducerId", "OffsetForLeaderEpoch",
    "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "WriteTxnMarkers", "TxnOffsetCommit",
    "DescribeAcls", "CreateAcls", "DeleteAcls", "DescribeConfigs", "AlterConfigs", "AlterReplicaLogDirs",
    "DescribeLogDirs", "SaslAuthenticate", "CreatePartitions", "CreateDelegationToken",
    "RenewDelegationToken", "ExpireDelegationToken", "DescribeDelegationToken", "DeleteGroups",
    "ElectLeaders", "IncrementalAlterConfigs", "AlterPartitionReassignments", "ListPartitionReassignments",
    "OffsetDelete", "DescribeClientQuotas", "AlterClientQuotas", "DescribeUserScramCredentials",
    "AlterUserScramCredentials", "Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "DescribeQuorum",
    "AlterPartition", "UpdateFeatures", "Envelope", "FetchSnapshot", "DescribeCluster", "DescribeProducers",
    "BrokerRegistration", "BrokerHeartbeat", "UnregisterBroker", "DescribeTransactions", "ListTransactions",
    "AllocateProducerIds", "ConsumerGroupHeartbeat", "ConsumerGroupDescribe", "ControllerRegistration",
    "GetTelemetrySubscriptions", "PushTelemetry", "AssignReplicasToDirs", "ListClientMetricsResources",
    "DescribeTopicPartitions", "ShareGroupHeartbeat", "ShareGroupDescribe", "ShareFetch", "ShareAcknowledge",
)))


def kafka_api_name(key: int) -> str:
    """Kafka's name for ``key``, or "unknown" for a key Kafka does not define."""
    return KAFKA_API_NAMES.get(key, "unknown")
