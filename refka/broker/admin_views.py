"""What the admin API reads (issue 13): the cluster, topics and partitions, and groups, as
JSON-ready dicts built from one broker's parts. No HTTP here (admin_http.py routes), no
I/O: each view is a few dict reads over what the broker already keeps.

- The cluster and the topics are one broker's view (its ``MetadataCache``, fed by the
  controller's UpdateMetadata; the answering view while frozen is not used here: these
  are the broker's own). Log start and end offsets and the high watermark come from the
  partition's leader when this process hosts it, else from any replica hosted here (then
  ``offsets_from`` says which broker), else they are null.
- A group is described by the broker of this process that coordinates it; its lag per
  partition is the partition's high watermark (as above) minus the committed offset.
- ``ServedBroker`` is what the views see of a broker of this process; both the HTTP API
  (admin_http.py) and the in-process one (refka.testing) read through these functions. A
  read that cannot be answered raises ``ViewError`` with the HTTP status it would be.

Names follow Kafka's tools where they have one (``kafka-topics --describe``:
Leader, Replicas, Isr; ``kafka-consumer-groups --describe``: CURRENT-OFFSET,
LOG-END-OFFSET, LAG).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from refka.protocol import ErrorCode
from refka.protocol.consumer_protocol import Assignment

from .broker_metrics import MetricsSnapshot
from .metadata_cache import MetadataCache, TopicMeta
from .partition import Partition
from .recording import BrokerRecordings

PartitionLookup = Callable[[str, int], "Partition | None"]


@dataclass(frozen=True, slots=True)
class ServedBroker:
    """What the admin views see of one broker of this process: its recordings, its metadata
    cache, its hosted partitions (``partitions(topic, index)``) and its group coordinator
    (``list_groups``, ``describe_group``, ``fetch_offsets``); None where a test has none."""

    node_id: int
    recordings: BrokerRecordings
    metadata: MetadataCache
    partitions: PartitionLookup | None = None
    groups: Any = None
    metrics: Callable[[], MetricsSnapshot] | None = None  # the broker's own metrics (broker_metrics.py)


class ViewError(Exception):
    """A read that cannot be answered; ``status`` the HTTP status that says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def lookups(brokers: Iterable[ServedBroker]) -> dict[int, PartitionLookup]:
    return {b.node_id: b.partitions for b in brokers if b.partitions is not None}


def _uuid(raw: bytes) -> str | None:
    return str(uuid.UUID(bytes=raw)) if raw and any(raw) else None


def cluster_view(node_id: int, cache: MetadataCache, served: Iterable[int]) -> dict[str, Any]:
    """Brokers, racks, endpoints, the controller and its epochs, as broker ``node_id`` knows them."""
    here = set(served)
    return {
        "cluster_id": cache.cluster_id,
        "view_of_broker": node_id,
        "controller": {"id": cache.controller_id, "epoch": cache.controller_epoch,
                       "metadata_epoch": cache.controller_metadata_epoch},
        "brokers": [{"id": b.node_id, "rack": b.rack, "served_here": b.node_id in here,
                     "endpoints": {name: f"{host}:{port}" for name, (host, port) in b.endpoints.items()}}
                    for b in sorted(cache.brokers.values(), key=lambda b: b.node_id)],
        "topics": len(cache.topics),
        "partitions": cache.partition_count,
    }


def topic_summary(t: TopicMeta) -> dict[str, Any]:
    return {"name": t.name, "topic_id": _uuid(t.topic_id), "topic_epoch": t.topic_epoch,
            "internal": t.is_internal, "partitions": len(t.partitions),
            "initial_partition_count": t.initial_partition_count,
            "undeleted_partition_count": t.undeleted_partition_count}


def topics_view(cache: MetadataCache) -> list[dict[str, Any]]:
    return [topic_summary(t) for t in sorted(cache.topics.values(), key=lambda t: t.name)]


def hosted_offsets(topic: str, index: int, leader: int, lookups: dict[int, PartitionLookup]
                   ) -> dict[str, Any]:
    """The log start/end and high watermark of ``topic``-``index`` from the leader when this
    process hosts it, else from another replica hosted here; nulls when none is."""
    order = ([leader] if leader in lookups else []) + [n for n in sorted(lookups) if n != leader]
    for node in order:
        p = lookups[node](topic, index)
        if p is not None:
            return {"log_start_offset": p.log_start_offset, "log_end_offset": p.log_end_offset,
                    "high_watermark": p.high_watermark, "offsets_from": node}
    return {"log_start_offset": None, "log_end_offset": None, "high_watermark": None, "offsets_from": None}


def topic_view(cache: MetadataCache, name: str, lookups: dict[int, PartitionLookup]) -> dict[str, Any] | None:
    """One topic with every partition (None: the broker does not know it)."""
    t = cache.topic(name)
    if t is None:
        return None
    parts = []
    for p in sorted(t.partitions.values(), key=lambda p: p.partition):
        parts.append({
            "partition": p.partition, "leader": p.leader if p.leader in cache.brokers else -1,
            "leader_epoch": p.leader_epoch, "partition_epoch": p.partition_epoch,
            "replicas": list(p.replicas), "isr": list(p.isr), "offline_replicas": list(p.offline_replicas),
            "marked_for_deletion": cache.is_marked_for_deletion(name, p.partition),
            "leader_epoch_after_creation": [list(e) for e in p.leader_epoch_after_creation],
            "leader_epoch_before_deletion": [list(e) for e in p.leader_epoch_before_deletion],
            **hosted_offsets(name, p.partition, p.leader, lookups),
        })
    return {**topic_summary(t), "partitions": parts}


def group_view(group_id: str, summary: Any, committed: list[tuple[tuple[str, int], Any]], coordinator: int,
               cache: MetadataCache, lookups: dict[int, PartitionLookup]) -> dict[str, Any]:
    """A group from its coordinator: state, members and their assignments, committed offsets and lag."""
    members = []
    for m in summary.members:
        assigned: dict[str, list[int]] = {}
        if m.assignment:
            try:
                assigned = {t: sorted(ps) for t, ps in Assignment.decode(m.assignment).assigned_partitions.items()}
            except (ValueError, IndexError):  # not the consumer protocol's bytes: shown as their size
                assigned = {}
        members.append({"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id, "client_host": m.client_host, "assignment": assigned,
                        "assignment_bytes": len(m.assignment)})
    offsets = []
    for (topic, index), c in committed:
        if c is None:
            continue
        meta = cache.partition(topic, index)
        hw = hosted_offsets(topic, index, meta.leader if meta is not None else -1, lookups)["high_watermark"]
        offsets.append({"topic": topic, "partition": index, "current_offset": c.offset,
                        "leader_epoch": c.leader_epoch, "topic_epoch": c.topic_epoch, "metadata": c.metadata,
                        "log_end_offset": hw, "lag": None if hw is None else max(hw - c.offset, 0)})
    return {"group_id": group_id, "coordinator": coordinator, "state": summary.state,
            "protocol_type": summary.protocol_type, "protocol": summary.protocol,
            "members": members, "offsets": offsets,
            "lag": sum(o["lag"] for o in offsets if o["lag"] is not None)}


def groups_view(brokers: Sequence[ServedBroker]) -> dict[str, Any]:
    """The groups the brokers coordinate, and the brokers still loading theirs."""
    out: list[dict[str, Any]] = []
    loading: list[int] = []
    for b in brokers:
        if b.groups is None:
            continue
        err, listed = b.groups.list_groups()
        if err == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            loading.append(b.node_id)
        out.extend({"group_id": g, "protocol_type": ptype, "state": state, "coordinator": b.node_id}
                   for g, ptype, state in listed)
    return {"groups": sorted(out, key=lambda g: g["group_id"]), "loading": loading}


def find_group(group_id: str, brokers: Sequence[ServedBroker]) -> dict[str, Any]:
    """``group_view`` from the broker of ``brokers`` that coordinates the group."""
    for b in brokers:
        if b.groups is None:
            continue
        err, summary = b.groups.describe_group(group_id)
        if err == ErrorCode.NOT_COORDINATOR:
            continue
        if err == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            raise ViewError(503, f"broker {b.node_id} is still loading the groups of {group_id!r}")
        if summary.state == "Dead":
            raise ViewError(404, f"no group {group_id!r} (its coordinator is broker {b.node_id})")
        _err, committed = b.groups.fetch_offsets(group_id, None)
        return group_view(group_id, summary, committed, b.node_id, b.metadata, lookups(brokers))
    served = ", ".join(str(b.node_id) for b in brokers) or "none"
    raise ViewError(404, f"group {group_id!r} is not coordinated by a broker of this process (served: {served})")
