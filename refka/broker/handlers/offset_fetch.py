"""OffsetFetch (key 9), v1-v9.

Behavior:
- A group's committed offsets: offset, committed_leader_epoch (v5+), metadata,
  and refka's KIP-232 topic_epoch (tagged, v6+). A partition without one is
  offset -1, metadata "", no error. Null topics (v2+) asks for every
  partition the group has committed.
- v8+ asks for several groups at once, each with its own error.
- Group errors: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS: per partition
  in v1, top-level (and no partitions) in v2-v7, per group in v8+.
- require_stable (v7+) never waits: no transactional commit is ever pending.
- topic_epoch is answered only to a request with refka_extensions (or as
  refka.protocol.extensions says): -1, so absent, otherwise.

Version notes:
- v1 offsets from Kafka (KIP-896 dropped v0). v2 null topics, top-level error_code.
- v3 throttle_time_ms. v4 as v3 (KIP-219). v5 committed_leader_epoch (KIP-320).
- v6 flexible; refka topic_epoch tag (KIP-232). v7 require_stable (KIP-447).
- v8 several groups (KIP-709). v9 member_id and member_epoch (KIP-848; not
  checked, classic groups only).
"""

from __future__ import annotations

from refka.protocol import ErrorCode
from refka.protocol.messages.offset_fetch import OffsetFetch

from ..config import answers_extensions
from ..registry import handles

Resp = OffsetFetch.Response
RTopic = Resp.OffsetFetchResponseTopic
RPart = RTopic.OffsetFetchResponsePartition
RGroup = Resp.OffsetFetchResponseGroup
RGTopic = RGroup.OffsetFetchResponseTopics
RGPart = RGTopic.OffsetFetchResponsePartitions


def _fetch(groups, group_id: str, topics):
    """(error, {topic: [(partition, CommittedOffset | None)]}) in request order."""
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    err, found = groups.fetch_offsets(group_id, wanted)
    by_topic: dict[str, list] = {}
    if topics is not None:
        for t in topics:
            by_topic.setdefault(t.name, [])
    for (topic, partition), o in found:
        by_topic.setdefault(topic, []).append((partition, o))
    return err, by_topic


def _partition(cls, partition: int, o, error: ErrorCode = ErrorCode.NONE, extensions: bool = False):
    if o is None:
        return cls(partition_index=partition, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                   error_code=error, topic_epoch=-1)
    return cls(partition_index=partition, committed_offset=o.offset, committed_leader_epoch=o.leader_epoch,
               metadata=o.metadata, error_code=error, topic_epoch=o.topic_epoch if extensions else -1)


@handles(OffsetFetch.key, 1, 9)
def handle_offset_fetch(ctx, req):
    groups = ctx.broker.groups
    v = ctx.api_version
    ext = answers_extensions(ctx.broker.config["refka.protocol.extensions"], req.refka_extensions)
    if v >= 8:
        out = []
        for rg in req.groups:
            err, by_topic = _fetch(groups, rg.group_id, rg.topics)
            topics = [] if err else [
                RGTopic(name=name, partitions=[_partition(RGPart, p, o, extensions=ext) for p, o in parts])
                for name, parts in by_topic.items()
            ]
            out.append(RGroup(group_id=rg.group_id, topics=topics, error_code=err))
        return Resp(groups=out)
    err, by_topic = _fetch(groups, req.group_id, req.topics)
    if err and v < 2:
        # v1 has no top-level error: every partition asked for carries it.
        return Resp(topics=[
            RTopic(name=t.name, partitions=[_partition(RPart, p, None, err) for p in t.partition_indexes])
            for t in req.topics or []
        ])
    if err:
        return Resp(error_code=err, topics=[])
    return Resp(error_code=ErrorCode.NONE, topics=[
        RTopic(name=name, partitions=[_partition(RPart, p, o, extensions=ext) for p, o in parts])
        for name, parts in by_topic.items()
    ])
