"""``refka topics create|list|describe|alter|delete|delete-records`` against a running broker.

``alter T --partitions N`` is CreatePartitions: it grows the topic, or with KIP-253
shrinks it (partitions N.. are marked for deletion, and removed by the controller
once drained); it prints the count before and after and the partitions created or
marked. ``delete-records T:P:OFFSET ...`` is DeleteRecords, sent to each partition's
leader; it prints each partition's new low watermark (log start offset).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import defaultdict

from refka.protocol import ErrorCode
from refka.protocol.messages.create_partitions import CreatePartitions
from refka.protocol.messages.create_topics import CreateTopics
from refka.protocol.messages.delete_records import DeleteRecords
from refka.protocol.messages.delete_topics import DeleteTopics
from refka.protocol.messages.metadata import Metadata

from .connection import BrokerConnection, BrokerConnectionError, connect


def _err(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


async def _create(conn, args) -> int:
    R = CreateTopics.Request
    configs = []
    for item in args.config:
        k, _, v = item.partition("=")
        configs.append(R.CreatableTopic.CreatableTopicConfig(name=k, value=v))
    req = R(topics=[R.CreatableTopic(name=args.topic, num_partitions=args.partitions,
                                     replication_factor=args.replication_factor, assignments=[],
                                     configs=configs)], timeout_ms=30000)
    resp = await conn.request(CreateTopics, req)
    t = resp.topics[0]
    if t.error_code:
        print(f"refka topics: {args.topic}: {_err(t.error_code)} {t.error_message or ''}".rstrip(), file=sys.stderr)
        return 1
    print(f"created topic {args.topic}")
    return 0


async def _metadata(conn, names):
    R = Metadata.Request
    topics = None if not names else [R.MetadataRequestTopic(name=n) for n in names]
    return await conn.request(Metadata, R(topics=topics, allow_auto_topic_creation=False, refka_extensions=True))


async def _list(conn, args) -> int:
    resp = await _metadata(conn, None)
    names = sorted(t.name for t in resp.topics if t.name)
    if getattr(args, "json", False):
        print(json.dumps(names))
        return 0
    for name in names:
        print(name)
    return 0


def _topic_json(t) -> dict:
    return {"topic": t.name, "topic_id": t.topic_id.hex() if t.topic_id else None,
            "topic_epoch": t.topic_epoch,
            "partitions": [{"partition": p.partition_index, "leader": p.leader_id, "leader_epoch": p.leader_epoch,
                            "replicas": list(p.replica_nodes), "isr": list(p.isr_nodes)}
                           for p in sorted(t.partitions, key=lambda p: p.partition_index)]}


async def _describe(conn, args) -> int:
    resp = await _metadata(conn, args.topic)
    rc = 0
    found = []
    for t in sorted(resp.topics, key=lambda t: t.name or ""):
        if t.error_code:
            print(f"{t.name}: {_err(t.error_code)}", file=sys.stderr)
            rc = 1
            continue
        if getattr(args, "json", False):
            found.append(_topic_json(t))
            continue
        tid = t.topic_id.hex() if t.topic_id else "-"
        print(f"Topic: {t.name}\tTopicId: {tid}\tPartitionCount: {len(t.partitions)}\t"
              f"ReplicationFactor: {len(t.partitions[0].replica_nodes) if t.partitions else 0}")
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            print(f"\tTopic: {t.name}\tPartition: {p.partition_index}\tLeader: {p.leader_id}\t"
                  f"LeaderEpoch: {p.leader_epoch}\tReplicas: {','.join(map(str, p.replica_nodes))}\t"
                  f"Isr: {','.join(map(str, p.isr_nodes))}")
    if getattr(args, "json", False):
        print(json.dumps(found, indent=2))
    return rc


async def _delete(conn, args) -> int:
    R = DeleteTopics.Request
    resp = await conn.request(DeleteTopics, R(topics=[R.DeleteTopicState(name=n) for n in args.topic],
                                              topic_names=list(args.topic), timeout_ms=30000))
    rc = 0
    for r in resp.responses:
        if r.error_code:
            print(f"refka topics: {r.name}: {_err(r.error_code)}", file=sys.stderr)
            rc = 1
        else:
            print(f"deleted topic {r.name}")
    return rc


def _count(t) -> int:
    """The topic's partition count: its KIP-253 undeleted_partition_count when the broker
    sends it (partitions marked for deletion do not count), else its partitions."""
    counts = getattr(t, "partition_counts", None)
    if counts is not None and counts.undeleted_partition_count >= 0:
        return counts.undeleted_partition_count
    return len(t.partitions)


def _ids(ps) -> str:
    return ", ".join(map(str, ps))


async def _alter(conn, args) -> int:
    (before,) = (await _metadata(conn, [args.topic])).topics
    if before.error_code:
        print(f"refka topics: {args.topic}: {_err(before.error_code)}", file=sys.stderr)
        return 1
    R = CreatePartitions.Request
    resp = await conn.request(CreatePartitions, R(
        topics=[R.CreatePartitionsTopic(name=args.topic, count=args.partitions, assignments=None)],
        timeout_ms=30000, validate_only=False))
    r = resp.results[0]
    if r.error_code:
        print(f"refka topics: {args.topic}: {_err(r.error_code)} {r.error_message or ''}".rstrip(), file=sys.stderr)
        return 1
    (after,) = (await _metadata(conn, [args.topic])).topics
    old, new = _count(before), _count(after)
    line = f"altered topic {args.topic}: partitions {old} -> {new}"
    created = sorted({p.partition_index for p in after.partitions} - {p.partition_index for p in before.partitions})
    if created:
        line += f"; created partitions {_ids(created)}"
    if new < old:
        line += f"; marked for deletion partitions {_ids(range(new, old))} (removed once drained)"
    print(line)
    return 0


def _parse_offsets(items: list[str]) -> dict[tuple[str, int], int] | str:
    out: dict[tuple[str, int], int] = {}
    for item in items:
        topic, _, rest = item.rpartition(":")
        topic, _, partition = topic.rpartition(":")
        try:
            out[(topic, int(partition))] = int(rest)
        except ValueError:
            return item
        if not topic:
            return item
    return out


async def _delete_records(conn, args) -> int:
    wanted = _parse_offsets(args.offsets)
    if isinstance(wanted, str):
        print(f"refka topics: expected TOPIC:PARTITION:OFFSET, got {wanted!r}", file=sys.stderr)
        return 2
    meta = await _metadata(conn, sorted({t for t, _p in wanted}))
    brokers = {b.node_id: (b.host, b.port) for b in meta.brokers}
    leaders: dict[int, dict[tuple[str, int], int]] = defaultdict(dict)
    rc = 0
    found = {(t.name, p.partition_index): p.leader_id for t in meta.topics for p in t.partitions}
    for tp, offset in sorted(wanted.items()):
        leader = found.get(tp, -1)
        if leader not in brokers:
            error = "UNKNOWN_TOPIC_OR_PARTITION" if tp not in found else "LEADER_NOT_AVAILABLE"
            print(f"refka topics: {tp[0]}:{tp[1]}: {error}", file=sys.stderr)
            rc = 1
            continue
        leaders[leader][tp] = offset
    R = DeleteRecords.Request
    for leader, parts in sorted(leaders.items()):
        host, port = brokers[leader]
        by_topic: dict[str, list] = defaultdict(list)
        for (t, p), offset in sorted(parts.items()):
            by_topic[t].append(R.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=p, offset=offset))
        req = R(topics=[R.DeleteRecordsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
                timeout_ms=30000)
        leader_conn = await BrokerConnection(host, port, "refka-topics").connect()
        try:
            resp = await leader_conn.request(DeleteRecords, req)
        finally:
            await leader_conn.close()
        for t in resp.topics:
            for p in sorted(t.partitions, key=lambda p: p.partition_index):
                if p.error_code:
                    print(f"refka topics: {t.name}:{p.partition_index}: {_err(p.error_code)}", file=sys.stderr)
                    rc = 1
                else:
                    print(f"{t.name}:{p.partition_index}: low watermark {p.low_watermark}")
    return rc


async def _run(args: argparse.Namespace) -> int:
    try:
        conn = await connect(args.bootstrap_server, "refka-topics")
    except BrokerConnectionError as e:
        print(f"refka topics: {e}", file=sys.stderr)
        return 1
    try:
        action = {"create": _create, "list": _list, "describe": _describe, "delete": _delete,
                  "alter": _alter, "delete-records": _delete_records}[args.action]
        return await action(conn, args)
    except BrokerConnectionError as e:
        print(f"refka topics: {e}", file=sys.stderr)
        return 1
    finally:
        await conn.close()


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))
