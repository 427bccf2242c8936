"""Metadata's answers from encoded topics (KIP-526, handlers/metadata.py) are byte for byte
the answers built whole, as the handler built them before it kept encoded topics (the
reference below is that code): for every version, with and without refka's extensions,
for named topics, unknown and invalid names, topics by ID, all topics built in slices,
and after UpdateMetadata changed topics or the live brokers (nothing stale is served)."""

from __future__ import annotations

import asyncio
from types import CoroutineType, SimpleNamespace

import pytest

from refka.broker import acl_operations
from refka.broker.config import BrokerConfig
from refka.broker.handlers import metadata as handler
from refka.broker.metadata_cache import ZERO_UUID, BrokerMeta, MetadataCache, PartitionMeta, TopicMeta
from refka.broker.stats import Stats
from refka.protocol import ErrorCode, join
from refka.protocol.messages.metadata import Metadata

Resp = Metadata.Response
RTopic = Resp.MetadataResponseTopic
RPartition = RTopic.MetadataResponsePartition
Req = Metadata.Request
VERSIONS = range(Metadata.min_version, Metadata.max_version + 1)


# -- the reference: the answer built whole, as handle_metadata did at 531dbbe


def _reference_topic(t: TopicMeta, live: dict, ext: bool):
    parts = []
    for p in sorted(t.partitions.values(), key=lambda p: p.partition):
        ok = p.leader in live
        parts.append(RPartition(
            error_code=0 if ok else ErrorCode.LEADER_NOT_AVAILABLE, partition_index=p.partition,
            leader_id=p.leader if ok else -1, leader_epoch=p.leader_epoch, replica_nodes=p.replicas,
            isr_nodes=p.isr, offline_replicas=p.offline_replicas, partition_epoch=p.partition_epoch if ext else -1))
    return RTopic(error_code=0, name=t.name, topic_id=t.topic_id, is_internal=t.is_internal, partitions=parts,
                  topic_epoch=t.topic_epoch if ext else -1,
                  partition_counts=RTopic.PartitionCounts(initial_partition_count=t.initial_partition_count,
                                                          undeleted_partition_count=t.undeleted_partition_count)
                  if ext and t.initial_partition_count >= 0 else None)


def reference(cache: MetadataCache, req, v: int, ext: bool) -> bytes:
    brokers = [Resp.MetadataResponseBroker(node_id=b.node_id, host=b.endpoint(None)[0], port=b.endpoint(None)[1],
                                           rack=b.rack) for b in cache.brokers.values()]
    live = cache.brokers
    if req.topics is None or (v == 0 and not req.topics):
        topics = [_reference_topic(t, live, ext) for t in cache.topics.values()]
    else:
        topics = []
        for rt in req.topics:
            if rt.name is None:
                t = cache.topic_by_id(rt.topic_id)
                topics.append(RTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=rt.topic_id)
                              if t is None else _reference_topic(t, live, ext))
                continue
            t = cache.topic(rt.name)
            if t is not None:
                topics.append(_reference_topic(t, live, ext))
            elif "!" in rt.name:
                topics.append(RTopic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=rt.name, topic_id=ZERO_UUID))
            else:
                topics.append(RTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=rt.name, topic_id=ZERO_UUID))
    resp = Resp(brokers=brokers, cluster_id=cache.cluster_id, controller_id=cache.controller_id, topics=topics,
                controller_epochs=Resp.ControllerEpochs(controller_epoch=cache.controller_epoch,
                                                        controller_metadata_epoch=cache.controller_metadata_epoch)
                if ext and cache.controller_epoch >= 0 else None,
                max_partition_epoch=cache.max_partition_epoch if ext else -1)
    return join(Metadata.encode_response(resp, v))


# -- the handler, without sockets


def topic(name: str, partitions: int, leader: int = 1, epoch: int = 0, n: int = 0) -> TopicMeta:
    return TopicMeta(name, bytes([n % 251 + 1]) * 16,
                     {p: PartitionMeta(p, leader, epoch, [leader, 2], [leader], [], partition_epoch=p + 10)
                      for p in range(partitions)},
                     initial_partition_count=partitions if n % 2 else -1,
                     undeleted_partition_count=partitions if n % 2 else -1, topic_epoch=n,
                     is_internal=name.startswith("__"))


def make_cache(topics: int) -> MetadataCache:
    cache = MetadataCache("cluster-x")
    cache.set_brokers({1: BrokerMeta(1, {"PLAINTEXT": ("h1", 9092)}), 2: BrokerMeta(2, {"PLAINTEXT": ("h2", 9093)},
                                                                                     rack="r2")})
    cache.controller_id, cache.controller_epoch, cache.controller_metadata_epoch = 1, 4, 9
    cache.max_partition_epoch = 77
    cache.put_topic(topic("__consumer_offsets", 3, n=0))
    for i in range(1, topics):
        cache.put_topic(topic(f"t{i}", 1 + i % 3, leader=1 + i % 3, n=i))  # leader 3 is not live
    return cache


def answer(cache: MetadataCache, req, v: int, extensions: str = "requested") -> bytes:
    broker = SimpleNamespace(metadata=cache, stats=Stats(),
                             config=BrokerConfig({"refka.protocol.extensions": extensions,
                                                  "auto.create.topics.enable": "false"}))
    ctx = SimpleNamespace(broker=broker, api_version=v, conn=SimpleNamespace(listener=None), client_id="c")
    resp = handler.handle_metadata(ctx, req)
    if type(resp) is CoroutineType:
        resp = asyncio.run(resp)
    return join(Metadata.encode_response(resp, v))


def all_topics(v: int, ext: bool = False):
    return Req(topics=None if v else [], refka_extensions=ext)


def named(*names: str, ext: bool = False):
    return Req(topics=[Req.MetadataRequestTopic(name=n) for n in names], allow_auto_topic_creation=False,
               refka_extensions=ext)


@pytest.mark.parametrize("v", VERSIONS)
@pytest.mark.parametrize("ext", [False, True])
def test_named_topics_are_the_answer_built_whole(v, ext):
    cache = make_cache(30)
    req = named("t5", "nope", "t3", "bad!name", "__consumer_offsets", "t5", ext=ext)
    assert answer(cache, req, v) == reference(cache, req, v, ext and v >= 9)
    assert answer(cache, req, v) == reference(cache, req, v, ext and v >= 9)  # the second from encoded topics


@pytest.mark.parametrize("v", VERSIONS)
@pytest.mark.parametrize("ext", [False, True])
def test_all_topics_in_slices_are_the_answer_built_whole(v, ext, monkeypatch):
    monkeypatch.setattr(handler, "SLICE_SECONDS", 0.0)  # a slice per 64 topics: many slices
    cache = make_cache(300)
    for _ in range(2):
        assert answer(cache, all_topics(v, ext), v) == reference(cache, all_topics(v, ext), v, ext and v >= 9)


def test_topics_by_id_and_unknown_ids_are_the_answer_built_whole():
    cache = make_cache(10)
    req = Req(topics=[Req.MetadataRequestTopic(name=None, topic_id=cache.topic("t4").topic_id),
                      Req.MetadataRequestTopic(name=None, topic_id=b"\x07" * 16)], allow_auto_topic_creation=False)
    assert answer(cache, req, 12) == reference(cache, req, 12, False)


def test_extensions_always_and_never_answer_as_the_reference():
    cache = make_cache(10)
    assert answer(cache, named("t1", "t2"), 12, "always") == reference(cache, named("t1"  , "t2"), 12, True)
    assert answer(cache, named("t1", ext=True), 12, "never") == reference(cache, named("t1"), 12, False)


@pytest.mark.parametrize("v", [1, 9, 12])
def test_after_update_metadata_no_encoded_topic_is_stale(v, monkeypatch):
    monkeypatch.setattr(handler, "SLICE_SECONDS", 0.0)
    cache = make_cache(200)
    req_all, req_some = all_topics(v, True), named("t7", "t8", "t9", ext=True)
    for req in (req_all, req_some):
        answer(cache, req, v)  # both kept encoded now
    # a leader moves and a partition is added (expansion), a topic goes, a topic comes
    cache.put_topic(topic("t7", 4, leader=2, epoch=5, n=7))
    cache.remove_topic("t8")
    cache.put_topic(topic("new", 2, n=1000))
    for req in (req_all, req_some, named("new")):
        assert answer(cache, req, v) == reference(cache, req, v, v >= 9 and req.refka_extensions)
    # broker 2 leaves: every partition it led is LEADER_NOT_AVAILABLE now; broker 3 comes: it leads again
    cache.set_brokers({1: cache.brokers[1]})
    assert answer(cache, req_all, v) == reference(cache, req_all, v, v >= 9)
    cache.set_brokers({1: cache.brokers[1], 3: BrokerMeta(3, {"PLAINTEXT": ("h3", 9094)})})
    assert answer(cache, req_all, v) == reference(cache, req_all, v, v >= 9)
    assert answer(cache, named("t2", "t7"), v) == reference(cache, named("t2", "t7"), v, False)


def test_an_all_topics_answer_is_the_snapshot_it_started_from(monkeypatch):
    """UpdateMetadata between two slices: the answer is the topics as they were when it started,
    and what it encoded for the old live brokers is not kept for later answers."""
    monkeypatch.setattr(handler, "SLICE_SECONDS", 0.0)
    cache = make_cache(300)
    before = reference(cache, all_topics(12), 12, False)

    async def interleaved() -> tuple[bytes, bytes]:
        broker = SimpleNamespace(metadata=cache, stats=Stats(), config=BrokerConfig({}))
        ctx = SimpleNamespace(broker=broker, api_version=12, conn=SimpleNamespace(listener=None), client_id="c")
        task = asyncio.ensure_future(handler.handle_metadata(ctx, all_topics(12)))
        await asyncio.sleep(0)  # the first slice is built
        cache.put_topic(topic("t250", 1, leader=2, epoch=9, n=250))
        cache.set_brokers({1: cache.brokers[1]})
        resp = await task
        return join(Metadata.encode_response(resp, 12)), reference(cache, all_topics(12), 12, False)

    during, after = asyncio.run(interleaved())
    assert during == before
    assert answer(cache, all_topics(12), 12) == after != before


def test_the_cache_counts_partitions_and_replicas_per_broker_as_topics_come_and_go():
    cache = MetadataCache()
    cache.put_topic(topic("a", 3, leader=1))
    cache.put_topic(topic("b", 2, leader=2))
    assert (cache.partition_count, dict(cache.replicas_per_broker)) == (5, {1: 3, 2: 7})
    cache.put_topic(topic("a", 5, leader=1))  # expanded
    cache.remove_topic("b")
    assert (cache.partition_count, dict(cache.replicas_per_broker)) == (5, {1: 5, 2: 5})
    cache.remove_topic("a")
    assert (cache.partition_count, dict(cache.replicas_per_broker)) == (0, {})


def test_encoded_topics_are_kept_for_the_forms_asked_most_recently_only():
    cache = make_cache(5)
    for v in (12, 11, 10, 9, 12, 8):
        answer(cache, named("t1"), v)
    unasked = acl_operations.NOT_ASKED
    assert list(cache.encoded_topics) == [(10, False, unasked), (9, False, unasked), (12, False, unasked),
                                          (8, False, unasked)]
    assert answer(cache, named("t1"), 11) == reference(cache, named("t1"), 11, False)
    assert len(cache.encoded_topics) == handler.MAX_ENCODED_FORMS


@pytest.mark.parametrize("v", [1, 9, 12])
def test_a_frozen_cache_answers_as_it_was_until_thawed(v, monkeypatch):
    """Stale-metadata mode: after freeze() Metadata answers the topics, brokers and controller
    epochs of the moment it froze, byte for byte, while the cache follows UpdateMetadata."""
    monkeypatch.setattr(handler, "SLICE_SECONDS", 0.0)
    cache = make_cache(100)
    req_all, req_some = all_topics(v, True), named("t7", "t8", "t9", "new", ext=True)
    before = {id(r): reference(cache, r, v, v >= 9) for r in (req_all, req_some)}
    answer(cache, req_some, v)  # t7..t9 kept encoded
    cache.freeze(now_ms=1.0)
    # the cluster moves on: a leader move, a deletion, a creation, a new controller, a broker leaves
    cache.put_topic(topic("t7", 4, leader=2, epoch=5, n=7))
    cache.remove_topic("t8")
    cache.put_topic(topic("new", 2, n=1000))
    cache.controller_id, cache.controller_epoch, cache.controller_metadata_epoch = 2, 5, 1
    cache.set_brokers({2: cache.brokers[2]})
    cache.freeze(now_ms=2.0)  # frozen already: the first copy stays
    assert cache.frozen is not None and cache.frozen.frozen_at_ms == 1.0
    for req in (req_all, req_some):
        assert answer(cache, req, v) == before[id(req)]
    cache.thaw()
    for req in (req_all, req_some):
        now = answer(cache, req, v)
        assert now == reference(cache, req, v, v >= 9) != before[id(req)]
