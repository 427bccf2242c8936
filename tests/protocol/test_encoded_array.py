"""EncodedArray: an array field given as its elements already encoded encodes to the same
bytes as the array of the elements themselves."""

from __future__ import annotations

import pytest

from refka.protocol import EncodedArray, join
from refka.protocol.messages.metadata import Metadata

Resp = Metadata.Response
RTopic = Resp.MetadataResponseTopic
RPartition = RTopic.MetadataResponsePartition
RCounts = RTopic.PartitionCounts


def _topics() -> list:
    return [
        RTopic(error_code=0, name="orders", topic_id=b"\x01" * 16, is_internal=False, topic_epoch=3,
               partition_counts=RCounts(initial_partition_count=2, undeleted_partition_count=2),
               partitions=[RPartition(error_code=0, partition_index=p, leader_id=1, leader_epoch=4,
                                      replica_nodes=[1, 2], isr_nodes=[1], offline_replicas=[2],
                                      partition_epoch=7) for p in range(2)]),
        RTopic(error_code=3, name="missing", topic_id=b"\x00" * 16),
        RTopic(error_code=0, name="__consumer_offsets", topic_id=b"\x02" * 16, is_internal=True, partitions=[]),
    ]


@pytest.mark.parametrize("version", range(Metadata.min_version, Metadata.max_version + 1))
def test_metadata_topics_given_encoded_encode_as_the_topics_themselves(version):
    topics = _topics()
    whole = join(Metadata.encode_response(Resp(brokers=[], controller_id=1, topics=topics), version))
    encode_topic = Metadata.struct_encoder(RTopic, version)
    parts = [join(encode_topic(t)) for t in topics]
    # in one chunk per element and as one chunk for all: the count, then the bytes
    for chunks in (parts, [b"".join(parts)]):
        spliced = Resp(brokers=[], controller_id=1, topics=EncodedArray(len(topics), chunks))
        assert join(Metadata.encode_response(spliced, version)) == whole
    decoded, _ = Metadata.decode_response(whole, version)
    assert [t.name for t in decoded.topics] == [t.name for t in topics]


def test_an_empty_encoded_array_is_an_empty_array():
    for version in (1, 9, 12):
        empty = join(Metadata.encode_response(Resp(brokers=[], topics=[]), version))
        assert join(Metadata.encode_response(Resp(brokers=[], topics=EncodedArray(0, [])), version)) == empty
