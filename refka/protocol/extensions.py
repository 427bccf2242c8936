"""The one place where refka's additions to the Kafka protocol are numbered.

Extensions ride on tagged fields in flexible versions, so stock clients skip
them. Numbers sit outside Kafka's ranges (Kafka's error codes and API keys are
below 200, its tags below 100) so a future Kafka cannot clash with them. The
table in shared/DESIGN.md must change together with this file.

A tag number is unique within one struct; the same number may name different
fields in different structs.
"""

# error codes
ERROR_INVALID_INTERNAL_METADATA = 10232  # OffsetCommit (KIP-232), not retriable
ERROR_INVALID_PARTITION_METADATA = 10253  # Produce, Fetch (KIP-253), retriable

# API keys
API_PARTITION_LEADER_EPOCHS_FOR_PARTITIONS = 10253  # KIP-253
API_CONSUMER_GROUP_POSITION = 10254  # KIP-253

# tags
# MetadataRequest, OffsetFetchRequest, top level: refka_extensions, a bool the client sets
# when it reads refka's tagged fields. Without it the answer carries none of them: what
# Kafka 3.9 sends, byte for byte in structure, since a stock client may mis-read tagged
# fields it does not know (@platformatic/kafka 1.35 cannot parse Metadata v12 with them).
# The broker property refka.protocol.extensions (requested | always | never) overrides
# that for labs.
TAG_EXTENSIONS_REQUESTED = 10000
# MetadataResponse: controller_epoch + controller_metadata_epoch (top level),
# topic_epoch (topic), partition_epoch (partition); KIP-232.
TAG_EPOCHS = 10232
# OffsetCommitRequest partition, OffsetFetchResponse partition: topic_epoch; KIP-232.
TAG_OFFSET_TOPIC_EPOCH = 10233
# MetadataResponse topic: initial_partition_count, undeleted_partition_count;
# ProduceRequest / FetchRequest topic: undeleted_partition_count; KIP-253.
TAG_PARTITION_COUNTS = 10253
# MetadataResponse top level: max_partition_epoch; KIP-253.
TAG_MAX_PARTITION_EPOCH = 10254
# UpdateMetadataRequest partition state: the partition znode's leaderEpochAfterCreation and
# leaderEpochBeforeDeletion maps (partition -> leader epoch), one struct, absent when both
# are empty (nearly every partition: it costs neither bytes nor a decoded list); what
# PartitionLeaderEpochsForPartitions answers from; KIP-253.
TAG_LEADER_EPOCH_MAPS = 10255
# LeaderAndIsr / StopReplica / UpdateMetadata / ControlledShutdown requests, top level:
# controller_token, the random number the controller wrote into /controller with its
# election. Only the metadata store and the brokers that read it know it, so it is how a
# connection proves it is a broker's (refka's own, no KIP; broker/inter_broker.py).
TAG_CONTROLLER_TOKEN = 10100
