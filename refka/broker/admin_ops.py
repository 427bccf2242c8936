"""The admin API's cluster-wide operations (issue 13), sent to the controller over the Kafka
protocol with refka's own client connection, as Kafka's tools do: so they work the same in
every serve form, whichever process the controller runs in.

- ``reassign``: AlterPartitionReassignments (the controller moves replicas; a new
  order of the same replicas completes at once).
- ``elect_preferred``: ElectLeaders, preferred election.
- ``move_leader``: a partition's leadership to a named broker, one of its replicas:
  the replicas reordered with that broker first (reassign), then a preferred
  election, then the wait until this broker's metadata names it leader. The new
  order stays, so the named broker is the partition's preferred leader from then on
  (what ``kafka-reassign-partitions`` + ``kafka-leader-election`` would leave).
- ``set_partition_count``: CreatePartitions to a larger count, or, with KIP-253
  (``enable.ordered.delivery``), a smaller one (the controller drains and deletes).

A Kafka error is an ``OperationError`` naming the code and the controller's message; the
HTTP layer answers it 400 (409 for a conflict such as a reassignment in progress). What the
broker's cache says is read from the ``MetadataCache`` passed in, never changed.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from refka.client.connection import BrokerConnection, BrokerConnectionError
from refka.protocol import ErrorCode
from refka.protocol.messages.alter_partition_reassignments import AlterPartitionReassignments
from refka.protocol.messages.create_partitions import CreatePartitions
from refka.protocol.messages.elect_leaders import ELECTION_PREFERRED, ElectLeaders

from .metadata_cache import MetadataCache

CLIENT_ID = "refka-admin-api"
TIMEOUT_S = 30.0
# Kafka errors that say the request conflicts with the cluster's state rather than being wrong.
CONFLICTS = frozenset({ErrorCode.REASSIGNMENT_IN_PROGRESS, ErrorCode.ELECTION_NOT_NEEDED,
                       ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE})


class OperationError(Exception):
    """An operation refused: ``status`` is the HTTP status to answer, ``code`` Kafka's error."""

    def __init__(self, status: int, message: str, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def _kafka_error(code: int, message: str | None, what: str) -> OperationError:
    err = ErrorCode(code) if code in ErrorCode._value2member_map_ else ErrorCode.UNKNOWN_SERVER_ERROR
    status = 409 if err in CONFLICTS else 404 if err == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else 400
    return OperationError(status, f"{what}: {err.name}" + (f" ({message})" if message else ""), err)


async def _controller(cache: MetadataCache) -> BrokerConnection:
    ctl = cache.brokers.get(cache.controller_id)
    ep = ctl.endpoint() if ctl is not None else None
    if ep is None:
        raise OperationError(503, f"no controller is known to this broker (controller id {cache.controller_id})")
    try:
        return await BrokerConnection(ep[0], ep[1], CLIENT_ID, request_timeout=TIMEOUT_S).connect()
    except BrokerConnectionError as e:
        raise OperationError(503, f"the controller (broker {cache.controller_id}) cannot be reached: {e}") from None


async def _call(cache: MetadataCache, api: Any, req: Any) -> Any:
    conn = await _controller(cache)
    try:
        return await conn.request(api, req)
    except BrokerConnectionError as e:
        raise OperationError(503, f"{api.name} to the controller failed: {e}") from None
    finally:
        await conn.close()


def _partitions_of(cache: MetadataCache, topic: str) -> dict[int, Any]:
    t = cache.topic(topic)
    if t is None:
        raise OperationError(404, f"unknown topic {topic!r}")
    return t.partitions


async def reassign(cache: MetadataCache, topic: str, assignment: dict[int, list[int]]) -> None:
    known = _partitions_of(cache, topic)
    missing = sorted(set(assignment) - set(known))
    if missing:
        raise OperationError(404, f"{topic} has no partition {missing[0]}")
    R = AlterPartitionReassignments.Request
    resp = await _call(cache, AlterPartitionReassignments, R(timeout_ms=int(TIMEOUT_S * 1000), topics=[
        R.ReassignableTopic(name=topic, partitions=[
            R.ReassignableTopic.ReassignablePartition(partition_index=p, replicas=r)
            for p, r in sorted(assignment.items())])]))
    if resp.error_code:
        raise _kafka_error(resp.error_code, resp.error_message, "AlterPartitionReassignments")
    for t in resp.responses:
        for p in t.partitions:
            if p.error_code:
                raise _kafka_error(p.error_code, p.error_message, f"reassigning {topic}-{p.partition_index}")


async def elect_preferred(cache: MetadataCache, topic: str, partitions: list[int] | None) -> dict[int, str]:
    """Preferred elections; partition -> "elected" or the reason none was needed."""
    known = _partitions_of(cache, topic)
    wanted = sorted(known) if partitions is None else sorted(set(partitions))
    missing = [p for p in wanted if p not in known]
    if missing:
        raise OperationError(404, f"{topic} has no partition {missing[0]}")
    R = ElectLeaders.Request
    resp = await _call(cache, ElectLeaders, R(election_type=ELECTION_PREFERRED, timeout_ms=int(TIMEOUT_S * 1000),
                                              topic_partitions=[R.TopicPartitions(topic=topic, partitions=wanted)]))
    if resp.error_code:
        raise _kafka_error(resp.error_code, None, "ElectLeaders")
    out: dict[int, str] = {}
    for r in resp.replica_election_results:
        for p in r.partition_result:
            if p.error_code == ErrorCode.NONE:
                out[p.partition_id] = "elected"
            elif p.error_code == ErrorCode.ELECTION_NOT_NEEDED:
                out[p.partition_id] = "not needed: the preferred replica leads"
            else:
                raise _kafka_error(p.error_code, p.error_message, f"electing {topic}-{p.partition_id}")
    return out


async def _until(test: Any, what: str, timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not test():
        if time.monotonic() > deadline:
            raise OperationError(504, f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.02)


async def move_leader(cache: MetadataCache, topic: str, partition: int, broker: int) -> dict[str, Any]:
    """Leadership of ``topic``-``partition`` to ``broker``, one of its replicas; the partition
    as this broker's metadata then says (leader, leader epoch, replicas)."""
    p = _partitions_of(cache, topic).get(partition)
    if p is None:
        raise OperationError(404, f"{topic} has no partition {partition}")
    if broker not in p.replicas:
        raise OperationError(409, f"broker {broker} is not a replica of {topic}-{partition} (replicas {p.replicas}): "
                                  f"reassign it there first")
    if broker not in cache.brokers:
        raise OperationError(409, f"broker {broker} is not alive")
    if broker not in p.isr:
        raise OperationError(409, f"broker {broker} is not in the ISR of {topic}-{partition} ({p.isr}): it cannot "
                                  f"lead without an unclean election")
    t0 = time.monotonic()
    order = [broker, *(r for r in p.replicas if r != broker)]
    if p.replicas != order:
        await reassign(cache, topic, {partition: order})
        await _until(lambda: (cur := cache.partition(topic, partition)) is not None and cur.replicas == order,
                     f"the replicas of {topic}-{partition} to read {order}")
    cur = cache.partition(topic, partition)
    if cur is None or cur.leader != broker:
        await elect_preferred(cache, topic, [partition])
        await _until(lambda: (c := cache.partition(topic, partition)) is not None and c.leader == broker,
                     f"broker {broker} to lead {topic}-{partition}")
    cur = cache.partition(topic, partition)
    assert cur is not None
    return {"topic": topic, "partition": partition, "leader": cur.leader, "leader_epoch": cur.leader_epoch,
            "replicas": list(cur.replicas), "isr": list(cur.isr), "seconds": round(time.monotonic() - t0, 3)}


async def set_partition_count(cache: MetadataCache, topic: str, count: int) -> dict[str, Any]:
    """CreatePartitions to ``count`` (KIP-253: smaller removes partitions once drained)."""
    _partitions_of(cache, topic)
    R = CreatePartitions.Request
    resp = await _call(cache, CreatePartitions, R(topics=[R.CreatePartitionsTopic(
        name=topic, count=count, assignments=None)], timeout_ms=int(TIMEOUT_S * 1000), validate_only=False))
    for r in resp.results:
        if r.error_code:
            raise _kafka_error(r.error_code, r.error_message, f"CreatePartitions of {topic} to {count}")
    return {"topic": topic, "count": count}
