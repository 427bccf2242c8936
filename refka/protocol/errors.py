"""Kafka's error codes: one enum with whether a client may retry and what it means.

The numbers are Kafka's (clients switch on them); refka's own additions are
numbered in :mod:`refka.protocol.extensions` and re-exported here so handlers
use one enum.
"""

from __future__ import annotations

from enum import IntEnum

from . import extensions as _ext

# code -> (retriable, meaning)
_INFO: dict[int, tuple[bool, str]] = {}


class ErrorCode(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    # refka's extensions (numbers owned by extensions.py)
    INVALID_INTERNAL_METADATA = _ext.ERROR_INVALID_INTERNAL_METADATA
    INVALID_PARTITION_METADATA = _ext.ERROR_INVALID_PARTITION_METADATA

    @property
    def retriable(self) -> bool:
        return _INFO.get(self.value, (False, ""))[0]

    @property
    def meaning(self) -> str:
        return _INFO.get(self.value, (False, self.name.lower().replace("_", " ")))[1]


def _describe(code: ErrorCode, retriable: bool, meaning: str) -> None:
    _INFO[int(code)] = (retriable, meaning)


E = ErrorCode
for _code, _r, _m in [
    (E.UNKNOWN_SERVER_ERROR, False, "The server experienced an unexpected error."),
    (E.NONE, False, "No error."),
    (E.OFFSET_OUT_OF_RANGE, False, "The requested offset is not within the range of offsets maintained by the server."),
    (E.CORRUPT_MESSAGE, True, "The record failed its CRC check, exceeds the valid size, has a null key on a compacted topic, or is otherwise corrupt."),
    (E.UNKNOWN_TOPIC_OR_PARTITION, True, "This server does not host this topic-partition."),
    (E.INVALID_FETCH_SIZE, False, "The requested fetch size is invalid."),
    (E.LEADER_NOT_AVAILABLE, True, "There is no leader for this topic-partition as we are in the middle of a leadership election."),
    (E.NOT_LEADER_OR_FOLLOWER, True, "This server is not the leader or a follower for this partition."),
    (E.REQUEST_TIMED_OUT, True, "The request timed out."),
    (E.BROKER_NOT_AVAILABLE, False, "The broker is not available."),
    (E.REPLICA_NOT_AVAILABLE, True, "The replica is not available for the requested topic-partition."),
    (E.MESSAGE_TOO_LARGE, False, "The request included a message larger than the max message size the server will accept."),
    (E.STALE_CONTROLLER_EPOCH, False, "The controller moved to another broker."),
    (E.OFFSET_METADATA_TOO_LARGE, False, "The metadata field of the offset request was too large."),
    (E.NETWORK_EXCEPTION, True, "The server disconnected before a response was received."),
    (E.COORDINATOR_LOAD_IN_PROGRESS, True, "The coordinator is loading and hence can't process requests."),
    (E.COORDINATOR_NOT_AVAILABLE, True, "The coordinator is not available."),
    (E.NOT_COORDINATOR, True, "This is not the correct coordinator."),
    (E.INVALID_TOPIC_EXCEPTION, False, "The request attempted to perform an operation on an invalid topic."),
    (E.RECORD_LIST_TOO_LARGE, False, "The request included message batch larger than the configured segment size on the server."),
    (E.NOT_ENOUGH_REPLICAS, True, "Messages are rejected since there are fewer in-sync replicas than required."),
    (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, True, "Messages are written to the log, but to fewer in-sync replicas than required."),
    (E.INVALID_REQUIRED_ACKS, False, "Produce request specified an invalid value for required acks."),
    (E.UNSUPPORTED_VERSION, False, "The version of API is not supported."),
    (E.TOPIC_ALREADY_EXISTS, False, "Topic with this name already exists."),
    (E.INVALID_PARTITIONS, False, "Number of partitions is below 1."),
    (E.INVALID_REPLICATION_FACTOR, False, "Replication factor is below 1 or larger than the number of available brokers."),
    (E.INVALID_REPLICA_ASSIGNMENT, False, "Replica assignment is invalid."),
    (E.INVALID_CONFIG, False, "Configuration is invalid."),
    (E.NOT_CONTROLLER, True, "This is not the correct controller for this cluster."),
    (E.INVALID_REQUEST, False, "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker."),
    (E.UNSUPPORTED_FOR_MESSAGE_FORMAT, False, "The message format version on the broker does not support the request."),
    (E.KAFKA_STORAGE_ERROR, True, "Disk error when trying to access log file on the disk."),
    (E.FETCH_SESSION_ID_NOT_FOUND, True, "The fetch session ID was not found."),
    (E.INVALID_FETCH_SESSION_EPOCH, True, "The fetch session epoch is invalid."),
    (E.LISTENER_NOT_FOUND, True, "There is no listener on the leader broker that matches the listener on which metadata request was processed."),
    (E.FENCED_LEADER_EPOCH, True, "The leader epoch in the request is older than the epoch on the broker."),
    (E.UNKNOWN_LEADER_EPOCH, True, "The leader epoch in the request is newer than the epoch on the broker."),
    (E.UNSUPPORTED_COMPRESSION_TYPE, False, "The requesting client does not support the compression type of given partition."),
    (E.OFFSET_NOT_AVAILABLE, True, "The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing."),
    (E.PREFERRED_LEADER_NOT_AVAILABLE, True, "The preferred leader was not available."),
    (E.ELIGIBLE_LEADERS_NOT_AVAILABLE, True, "Eligible topic partition leaders are not available."),
    (E.ELECTION_NOT_NEEDED, True, "Leader election not needed for topic partition."),
    (E.INVALID_RECORD, False, "This record has failed the validation on broker and hence will be rejected."),
    (E.UNSTABLE_OFFSET_COMMIT, True, "There are unstable offsets that need to be cleared."),
    (E.THROTTLING_QUOTA_EXCEEDED, True, "The throttling quota has been exceeded."),
    (E.UNKNOWN_TOPIC_ID, True, "This server does not host this topic ID."),
    (E.INCONSISTENT_TOPIC_ID, True, "The log's topic ID did not match the topic ID in the request."),
    (E.FETCH_SESSION_TOPIC_ID_ERROR, True, "The fetch session encountered inconsistent topic ID usage."),
    (E.CONCURRENT_TRANSACTIONS, True, "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing."),
    (E.OUT_OF_ORDER_SEQUENCE_NUMBER, False, "The broker received an out of order sequence number."),
    (E.DUPLICATE_SEQUENCE_NUMBER, False, "The broker received a duplicate sequence number."),
    (E.INVALID_PRODUCER_EPOCH, False, "Producer attempted to produce with an old epoch."),
    (E.MEMBER_ID_REQUIRED, False, "The group member needs to have a valid member id before actually entering a consumer group."),
    (E.REBALANCE_IN_PROGRESS, False, "The group is rebalancing, so a rejoin is needed."),
    (E.INVALID_INTERNAL_METADATA, False, "refka (KIP-232): the committed offset's epochs are older than the broker's metadata."),
    (E.INVALID_PARTITION_METADATA, True, "refka (KIP-253): the request's undeleted_partition_count differs from the broker's, or the partition is marked for deletion; refresh metadata."),
]:
    _describe(_code, _r, _m)
del _code, _r, _m
