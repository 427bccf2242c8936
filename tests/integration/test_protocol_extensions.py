"""refka's tagged fields (protocol/extensions.py) go only to a client that asks.

A stock client's Metadata and OffsetFetch answers carry the fields Kafka 3.9
sends and no others: kio (an independent implementation, which raises on a
tagged field it does not know) decodes them. A request with refka_extensions
gets the KIP-232/253 fields, and kio then meets them. The broker property
refka.protocol.extensions (requested | always | never) overrides the rule.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from kio.index import load_response_schema
from kio.serial import entity_reader

from refka.broker.config import BrokerConfig
from refka.protocol.api import Api
from refka.protocol.messages.find_coordinator import FindCoordinator
from refka.protocol.messages.metadata import Metadata
from refka.protocol.messages.offset_commit import OffsetCommit
from refka.protocol.messages.offset_fetch import OffsetFetch
from tests.brokers import BrokerProcess
from tests.integration.cluster_helpers import TIMEOUT, Raw, metadata
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "ext-t"
GROUP = "ext-g"


def _kio_reads(api: Api, version: int, body: bytes) -> bool:
    """Whether kio decodes ``body`` to its end (False: it met a tagged field it does not know)."""
    try:
        _, end = entity_reader(load_response_schema(api.key, version))(memoryview(body), 0)
    except Exception:  # kio raises on an unknown tag (kio 0.6: a ValueError or its own)
        return False
    return end == len(body)


def _start(tmp_path, mode: str | None) -> BrokerProcess:
    overrides = {} if mode is None else {"refka.protocol.extensions": mode}
    b = BrokerProcess(tmp_path / "data", memory=True, overrides=overrides).start()
    try:
        p = Producer({"bootstrap.servers": b.bootstrap})
        p.produce(TOPIC, b"v", partition=0)
        assert p.flush(TIMEOUT) == 0
        # A commit from outside the group that carries the topic epoch (KIP-232), as refka's client sends it.
        # Retried while the group's coordinator loads (FindCoordinator creates __consumer_offsets).
        (t,) = metadata(b.port, TOPIC).topics
        C = OffsetCommit.Request.OffsetCommitRequestTopic
        request = OffsetCommit.Request(
            group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", topics=[C(name=TOPIC, partitions=[
                C.OffsetCommitRequestPartition(partition_index=0, committed_offset=1, committed_metadata="",
                                               topic_epoch=t.topic_epoch)])])

        def committed() -> bool:
            raw = Raw(b.port)
            try:
                raw.call_raw(FindCoordinator, FindCoordinator.Request(key=GROUP, key_type=0), 3)
                answer, _ = raw.call_raw(OffsetCommit, request, 8)
            finally:
                raw.close()
            return answer.topics[0].partitions[0].error_code == 0

        wait_until(committed, timeout=TIMEOUT, interval=0.1, message="the commit accepted")
    except BaseException:
        b.stop()
        raise
    return b


def _answers(port: int, asks: bool) -> tuple[tuple[object, bytes], tuple[object, bytes]]:
    raw = Raw(port)
    try:
        md = raw.call_raw(Metadata, Metadata.Request(
            topics=[Metadata.Request.MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False,
            refka_extensions=asks), 12)
        F = OffsetFetch.Request
        of = raw.call_raw(OffsetFetch, F(groups=[F.OffsetFetchRequestGroup(group_id=GROUP, topics=[
            F.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0])])],
            refka_extensions=asks), 8)
    finally:
        raw.close()
    return md, of


def _has_extensions(md, of) -> bool:
    (t,) = md.topics
    (g,) = of.groups
    (p,) = g.topics[0].partitions
    assert p.committed_offset == 1
    return (md.controller_epochs is not None and t.topic_epoch >= 0 and t.partition_counts is not None
            and t.partitions[0].partition_epoch >= 0 and p.topic_epoch >= 0)


def test_a_stock_request_gets_what_kafka_sends_and_refkas_fields_only_when_asked(tmp_path):
    b = _start(tmp_path, None)
    try:
        (md, md_body), (of, of_body) = _answers(b.port, asks=False)
        assert not _has_extensions(md, of)
        assert md.topics[0].topic_epoch == -1 and md.topics[0].partition_counts is None
        assert _kio_reads(Metadata, 12, md_body) and _kio_reads(OffsetFetch, 8, of_body)

        (md, md_body), (of, of_body) = _answers(b.port, asks=True)
        assert _has_extensions(md, of)
        t = md.topics[0]
        assert (t.partition_counts.initial_partition_count, t.partition_counts.undeleted_partition_count) == (1, 1)
        # kio does not know refka's tags: it stops at them, which is why a stock client gets none.
        assert not _kio_reads(Metadata, 12, md_body) and not _kio_reads(OffsetFetch, 8, of_body)
    finally:
        b.stop()


@pytest.mark.parametrize(("mode", "expected"), [("always", True), ("never", False)])
def test_the_broker_property_overrides_what_the_request_asks(tmp_path, mode, expected):
    b = _start(tmp_path, mode)
    try:
        for asks in (False, True):
            md, of = (r for r, _ in _answers(b.port, asks=asks))
            assert _has_extensions(md, of) is expected, (mode, asks)
    finally:
        b.stop()


def test_an_unknown_mode_is_refused_at_start():
    with pytest.raises(ValueError, match="refka.protocol.extensions"):
        BrokerConfig({"refka.protocol.extensions": "sometimes"})
