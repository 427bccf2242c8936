"""Metadata (key 3), v0-v12.

Behavior:
- Brokers: every live broker, with its endpoint on the listener the request
  arrived on; controller_id and cluster_id from the controller's UpdateMetadata.
- Topics: null (v1+) or an empty list at v0 asks for all topics; v1+ an empty
  list asks for none. v12 may name a topic by ID only (UNKNOWN_TOPIC_ID, with
  a null name, if unknown). v10-v11 carry the ID and a nullable name, but, as
  in Kafka 3.9's KafkaApis, a null name or a non-zero ID there is an invalid
  request: every topic asked for is answered INVALID_REQUEST (name "" where
  it was null, as MetadataRequest.getErrorResponse does, since those
  versions cannot carry a null name), with no brokers.
- An unknown topic is created when the request allows it (v4+, always
  before) and auto.create.topics.enable is true: that answer says
  LEADER_NOT_AVAILABLE and the client asks again, as with Kafka's ZooKeeper
  brokers. A name Kafka would refuse is INVALID_TOPIC_EXCEPTION.
- A partition whose leader is not a live broker is LEADER_NOT_AVAILABLE with
  leader -1.
- refka's KIP-232/253 tagged fields (v9+) carry the controller epochs,
  partition_epoch, topic_epoch and the initial/undeleted partition counts,
  only to a request with refka_extensions (refka.protocol.extensions may say
  always or never): a stock client gets the fields Kafka 3.9 sends and no
  others (protocol/extensions.py says why).
- Stale metadata (metadata_cache.py, for labs): while the broker's cache is
  frozen, answers come from its frozen copy (brokers, topics, controller
  epochs), the encoded topics kept as usual for the topics still current.
- KIP-526: each request's named topics are recorded per client (broker.stats) and in
  the connection's recording (ctx.topics, recording.py).
  An answer costs what it lists, not what the cluster holds: a named topic is
  a dict lookup, and each topic's encoded answer is kept per (version,
  extensions) in the metadata cache until UpdateMetadata changes the topic
  (or the set of live brokers), so a repeated answer is its bytes joined. An
  answer for all topics is built from a snapshot of the topics, in slices of
  about 1 ms of the event loop each (a topic not encoded yet costs ~20 us), so
  other connections are answered in between. The bytes are those of the
  answer built whole (tests/broker/handlers/test_metadata_encoded.py).

Version notes:
- v1 rack, controller, is_internal; null topics. v2 cluster_id. v4 allow auto
  creation. v5 offline replicas. v7 leader_epoch (KIP-320). v8 authorized
  operations (KIP-430): asked for, every operation of a topic (of every topic
  in the answer, errors too) and of the cluster (v8-v10), as Kafka answers
  with no authorizer (acl_operations.py); not asked, -2^31. v9 flexible. v10 topic IDs in
  the answer (KIP-516). v12 lookups by ID, null topic names in the answer.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from refka.protocol import EncodedArray, ErrorCode, join
from refka.protocol.messages.metadata import Metadata

from .. import acl_operations
from ..config import answers_extensions
from ..controller_side import InvalidTopicError, validate_topic_name
from ..metadata_cache import ZERO_UUID, TopicMeta
from ..recording import ALL_TOPICS
from ..registry import handles

Resp = Metadata.Response
RBroker = Resp.MetadataResponseBroker
RTopic = Resp.MetadataResponseTopic
RPartition = RTopic.MetadataResponsePartition
RCounts = RTopic.PartitionCounts
REpochs = Resp.ControllerEpochs

NONE = ErrorCode.NONE
LEADER_NOT_AVAILABLE = ErrorCode.LEADER_NOT_AVAILABLE
# An all-topics answer yields to the event loop after this long building (module docstring).
SLICE_SECONDS = 0.001
_CHECK_EVERY = 16  # topics between two looks at the clock (a topic not encoded yet: ~20 us)
# Encoded topics are kept for this many (version, extensions, operations) forms at most (clients use one
# or two; ~25 MB a form at 100,000 topics): a client cycling through versions cannot grow it.
MAX_ENCODED_FORMS = 4


def _topic_response(t: TopicMeta, live: dict, ext: bool, ops: int) -> Any:
    parts = []
    for p in sorted(t.partitions.values(), key=lambda p: p.partition):
        ok = p.leader in live
        parts.append(
            RPartition(
                error_code=NONE if ok else LEADER_NOT_AVAILABLE,
                partition_index=p.partition,
                leader_id=p.leader if ok else -1,
                leader_epoch=p.leader_epoch,
                replica_nodes=p.replicas,
                isr_nodes=p.isr,
                offline_replicas=p.offline_replicas,
                partition_epoch=p.partition_epoch if ext else -1,
            )
        )
    return RTopic(
        error_code=NONE,
        name=t.name,
        topic_id=t.topic_id,
        is_internal=t.is_internal,
        partitions=parts,
        topic_epoch=t.topic_epoch if ext else -1,
        partition_counts=RCounts(
            initial_partition_count=t.initial_partition_count,
            undeleted_partition_count=t.undeleted_partition_count,
        )
        if ext and t.initial_partition_count >= 0
        else None,
        topic_authorized_operations=ops,
    )


def _asks_by_id(req: Any) -> bool:
    return req.topics is not None and any(rt.name is None or rt.topic_id != ZERO_UUID for rt in req.topics)


def _invalid_request(req: Any) -> Any:
    """Kafka's MetadataRequest.getErrorResponse for INVALID_REQUEST."""
    return Resp(brokers=[], cluster_id=None, controller_id=-1, topics=[
        RTopic(error_code=ErrorCode.INVALID_REQUEST, name=rt.name if rt.name is not None else "",
               topic_id=rt.topic_id, is_internal=False, partitions=[])
        for rt in req.topics
    ])


def _encoded_form(cache: Any, v: int, ext: bool, ops: int) -> dict[str, tuple[TopicMeta, bytes]]:
    """The cache's encoded topics for (version, extensions, topic operations), made the most
    recently asked."""
    key = (v, ext, ops)
    encoded = cache.encoded_topics
    by_name = encoded.get(key)
    if by_name is None:
        if len(encoded) >= MAX_ENCODED_FORMS:  # the form asked least recently goes
            del encoded[next(iter(encoded))]
        by_name = encoded[key] = {}
    elif next(reversed(encoded)) != key:
        encoded[key] = encoded.pop(key)  # most recently asked last
    return by_name  # type: ignore[no-any-return]


def _encoded_topic(cache: Any, by_name: dict, t: TopicMeta, v: int, ext: bool, ops: int, live: dict,
                   codes: set[int]) -> bytes:
    """``t``'s element of the topics array, from ``by_name`` (``_encoded_form``) when it has
    it; kept there only while ``live`` is the cache's current broker list and ``t`` its topic.
    Adds LEADER_NOT_AVAILABLE to ``codes`` when a partition of it has no live leader."""
    hit = by_name.get(t.name)
    if hit is not None and hit[0] is t:
        if hit[2]:
            codes.add(LEADER_NOT_AVAILABLE)
        return hit[1]  # type: ignore[no-any-return]
    answer = _topic_response(t, live, ext, ops)
    leaderless = any(p.error_code for p in answer.partitions)
    if leaderless:
        codes.add(LEADER_NOT_AVAILABLE)
    data = join(Metadata.struct_encoder(RTopic, v)(answer))
    if cache.brokers is live and cache.topics.get(t.name) is t:
        by_name[t.name] = (t, data, leaderless)
    return data


def _encoded(topic: Any, v: int, codes: set[int]) -> bytes:
    """An answer without a cached form (an error for a topic asked for)."""
    codes.add(topic.error_code)
    return join(Metadata.struct_encoder(RTopic, v)(topic))


@handles(Metadata.key, 0, 12)
def handle_metadata(ctx, req):
    broker = ctx.broker
    cache = broker.metadata
    v = ctx.api_version
    if v < 12 and _asks_by_id(req):
        return _invalid_request(req)
    listener = ctx.conn.listener
    view = cache.answering()  # the cache, or its frozen copy (stale-metadata mode)
    brokers = []
    for b in view.brokers.values():
        ep = b.endpoint(listener)
        if ep is not None:
            brokers.append(RBroker(node_id=b.node_id, host=ep[0], port=ep[1], rack=b.rack))
    live = view.brokers
    ext = answers_extensions(broker.config["refka.protocol.extensions"], req.refka_extensions)
    ops = acl_operations.TOPIC if v >= 8 and req.include_topic_authorized_operations else acl_operations.NOT_ASKED
    resp = Resp(
        brokers=brokers,
        cluster_id=view.cluster_id,
        controller_id=view.controller_id,
        controller_epochs=REpochs(
            controller_epoch=view.controller_epoch,
            controller_metadata_epoch=view.controller_metadata_epoch,
        )
        if ext and view.controller_epoch >= 0
        else None,
        max_partition_epoch=view.max_partition_epoch if ext else -1,
        cluster_authorized_operations=acl_operations.CLUSTER if 8 <= v <= 10 and req.include_cluster_authorized_operations
        else acl_operations.NOT_ASKED,
    )

    by_name = _encoded_form(cache, v, ext, ops)
    requested = req.topics
    if requested is None or (v == 0 and not requested):
        broker.stats.metadata_request(ctx.client_id, None)
        ctx.topics = ALL_TOPICS
        snapshot = list(view.topics.values())
        if len(snapshot) <= _CHECK_EVERY:
            codes: set[int] = set()
            chunks = [_encoded_topic(cache, by_name, t, v, ext, ops, live, codes) for t in snapshot]
            resp.topics = EncodedArray(len(snapshot), chunks, tuple(sorted(codes)))
            return resp
        return _all_topics(cache, by_name, snapshot, resp, v, ext, ops, live)

    parts = []
    codes = set()
    allow_create = broker.config["auto.create.topics.enable"] and (v < 4 or req.allow_auto_topic_creation)
    names = []
    for rt in requested:
        name = rt.name
        if name is None:
            t = view.topic_by_id(rt.topic_id)
            if t is None:
                parts.append(_encoded(RTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None,
                                             topic_id=rt.topic_id, topic_authorized_operations=ops), v, codes))
                continue
            names.append(t.name)
            parts.append(_encoded_topic(cache, by_name, t, v, ext, ops, live, codes))
            continue
        names.append(name)
        t = view.topic(name)
        if t is not None:
            parts.append(_encoded_topic(cache, by_name, t, v, ext, ops, live, codes))
            continue
        try:
            validate_topic_name(name)
        except InvalidTopicError:
            parts.append(_encoded(RTopic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=name,
                                         topic_id=ZERO_UUID, topic_authorized_operations=ops), v, codes))
            continue
        if allow_create and not name.startswith("__"):
            if cache.topic(name) is None:  # frozen: the cluster may have it already
                broker.spawn(broker.auto_create_topic(name))
            err = LEADER_NOT_AVAILABLE
        else:
            err = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        parts.append(_encoded(RTopic(error_code=err, name=name, topic_id=ZERO_UUID, topic_authorized_operations=ops),
                              v, codes))
    broker.stats.metadata_request(ctx.client_id, names)
    ctx.topics = names
    resp.topics = EncodedArray(len(parts), parts, tuple(sorted(codes)))
    return resp


async def _all_topics(cache: Any, by_name: dict, snapshot: list[TopicMeta], resp: Any, v: int, ext: bool,
                      ops: int, live: dict) -> Any:
    """The topics of ``snapshot``, in slices of about SLICE_SECONDS of the loop each; each
    slice's bytes joined into one chunk."""
    chunks: list[bytes] = []
    slice_parts: list[bytes] = []
    codes: set[int] = set()
    started = time.perf_counter()
    for i, t in enumerate(snapshot, 1):
        slice_parts.append(_encoded_topic(cache, by_name, t, v, ext, ops, live, codes))
        if i % _CHECK_EVERY == 0 and time.perf_counter() - started > SLICE_SECONDS:
            chunks.append(b"".join(slice_parts))
            slice_parts = []
            await asyncio.sleep(0)
            started = time.perf_counter()
    chunks.append(b"".join(slice_parts))
    resp.topics = EncodedArray(len(snapshot), chunks, tuple(sorted(codes)))
    return resp
