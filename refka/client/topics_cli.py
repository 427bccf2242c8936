"""``refka topics create|list|describe|delete`` against a running broker."""

from __future__ import annotations

import argparse
import asyncio
import sys

from refka.protocol import ErrorCode
from refka.protocol.messages.create_topics import CreateTopics
from refka.protocol.messages.delete_topics import DeleteTopics
from refka.protocol.messages.metadata import Metadata

from .connection import BrokerConnectionError, connect


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
    return await conn.request(Metadata, R(topics=topics, allow_auto_topic_creation=False))


async def _list(conn, args) -> int:
    resp = await _metadata(conn, None)
    for t in sorted(resp.topics, key=lambda t: t.name or ""):
        print(t.name)
    return 0


async def _describe(conn, args) -> int:
    resp = await _metadata(conn, args.topic)
    rc = 0
    for t in sorted(resp.topics, key=lambda t: t.name or ""):
        if t.error_code:
            print(f"{t.name}: {_err(t.error_code)}", file=sys.stderr)
            rc = 1
            continue
        tid = t.topic_id.hex() if t.topic_id else "-"
        print(f"Topic: {t.name}\tTopicId: {tid}\tPartitionCount: {len(t.partitions)}\t"
              f"ReplicationFactor: {len(t.partitions[0].replica_nodes) if t.partitions else 0}")
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            print(f"\tTopic: {t.name}\tPartition: {p.partition_index}\tLeader: {p.leader_id}\t"
                  f"LeaderEpoch: {p.leader_epoch}\tReplicas: {','.join(map(str, p.replica_nodes))}\t"
                  f"Isr: {','.join(map(str, p.isr_nodes))}")
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


async def _run(args: argparse.Namespace) -> int:
    try:
        conn = await connect(args.bootstrap_server, "refka-topics")
    except BrokerConnectionError as e:
        print(f"refka topics: {e}", file=sys.stderr)
        return 1
    try:
        action = {"create": _create, "list": _list, "describe": _describe, "delete": _delete}[args.action]
        return await action(conn, args)
    finally:
        await conn.close()


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))
