"""The authorized operations of KIP-430, as Kafka 3.9 answers them without an authorizer.

Metadata (v8+: include_topic_authorized_operations, and include_cluster_authorized_operations
up to v10), DescribeCluster (include_cluster_authorized_operations) and DescribeGroups (v3+:
include_authorized_operations) carry a 32-bit field of AclOperation codes, bit n for code n.
Kafka's KafkaApis fills it from ``AuthHelper.authorizedOperations``: with no authorizer
configured, every operation the resource type supports (``AclEntry.supportedOperations``
of kafka-server 3.9: a group's are READ, DESCRIBE and DELETE, the group configs of KIP-848
coming later). refka has no ACLs, so this is what it answers where a client asks; where it
does not ask, the field keeps its default, -2^31 ("not asked").
"""

from __future__ import annotations

from enum import IntEnum

NOT_ASKED = -(2**31)


class AclOperation(IntEnum):
    """org.apache.kafka.common.acl.AclOperation's codes (UNKNOWN 0, ANY 1 and ALL 2 are
    never in an answer)."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


def bit_field(*ops: AclOperation) -> int:
    """Kafka's Utils.to32BitField."""
    out = 0
    for op in ops:
        out |= 1 << op
    return out


A = AclOperation
TOPIC = bit_field(A.READ, A.WRITE, A.CREATE, A.DESCRIBE, A.DELETE, A.ALTER, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS)
GROUP = bit_field(A.READ, A.DESCRIBE, A.DELETE)
CLUSTER = bit_field(A.CREATE, A.CLUSTER_ACTION, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS, A.IDEMPOTENT_WRITE, A.ALTER,
                    A.DESCRIBE)
