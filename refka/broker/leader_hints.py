"""Who leads a partition: the local leader check of the partition APIs, and
KIP-951 leader hints for Produce (v10+) and Fetch (v16+) error answers.

A NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH answer names the partition's
current leader (id and epoch) and, once per response, that leader's endpoint
(host, port, rack) on the listener the request came in on. The leader comes
from the partition state when this broker is a replica (it learnt it from
LeaderAndIsr, possibly newer than its metadata cache) and from the metadata
cache otherwise. ``leader.discovery.hints.enable=false`` turns the hints off
so their effect can be measured.
"""

from __future__ import annotations

from refka.protocol import ErrorCode

from .config import BrokerConfig
from .metadata_cache import MetadataCache
from .partition import Partition
from .replica_manager import ReplicaManager


def local_leader(replicas: ReplicaManager, metadata: MetadataCache, topic: str, partition: int,
                 current_leader_epoch: int = -1) -> tuple[Partition | None, ErrorCode]:
    """The partition if this broker leads it at the request's epoch, else the error
    to answer: NOT_LEADER_OR_FOLLOWER (it exists elsewhere), UNKNOWN_TOPIC_OR_PARTITION,
    or KIP-320's FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH. The epoch is checked first,
    on a follower too, as Kafka's Partition.getLocalLog does: an older epoch sent to a
    broker that no longer leads is FENCED_LEADER_EPOCH."""
    part = replicas.get(topic, partition)
    if part is not None and not part.is_leader:
        err = part.check_leader_epoch(current_leader_epoch)
        if err != ErrorCode.NONE:
            return None, err
    if part is None or not part.is_leader:
        known = part is not None or metadata.partition(topic, partition) is not None
        return None, ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    err = part.check_leader_epoch(current_leader_epoch)
    return (part, err) if err == ErrorCode.NONE else (None, err)


def current_leader(replicas: ReplicaManager, metadata: MetadataCache, topic: str,
                   partition: int) -> tuple[int, int] | None:
    """(leader id, leader epoch) as this broker knows them, or None."""
    p = replicas.get(topic, partition)
    if p is not None and p.state.leader >= 0:
        return p.state.leader, p.state.leader_epoch
    m = metadata.partition(topic, partition)
    if m is not None and m.leader >= 0:
        return m.leader, m.leader_epoch
    return None


def hints_enabled(config: BrokerConfig) -> bool:
    return bool(config["leader.discovery.hints.enable"])


def node_endpoints(metadata: MetadataCache, leader_ids: set[int], listener: str, cls: type) -> list:
    """One ``cls(node_id, host, port, rack)`` per known leader, sorted by id."""
    out = []
    for node_id in sorted(leader_ids):
        b = metadata.brokers.get(node_id)
        if b is None:
            continue
        ep = b.endpoint(listener)
        if ep is not None:
            out.append(cls(node_id=node_id, host=ep[0], port=ep[1], rack=b.rack))
    return out
