"""Metadata (handlers/metadata.py) asked by topic ID below v12: Kafka 3.9 refuses the
request (INVALID_REQUEST for every topic), and the answer stays encodable in versions
whose topic name cannot be null."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from refka.broker.handlers.metadata import handle_metadata
from refka.protocol import ErrorCode, join
from refka.protocol.messages.metadata import Metadata

ZERO = b"\x00" * 16
SOME_ID = bytes(range(16))
RTopic = Metadata.Request.MetadataRequestTopic


def answer(version: int, *topics: tuple[str | None, bytes]):
    req = Metadata.Request(topics=[RTopic(name=n, topic_id=i) for n, i in topics])
    # Refused before the handler looks at the broker's state.
    resp = handle_metadata(SimpleNamespace(broker=SimpleNamespace(metadata=None), api_version=version), req)
    Metadata.decode_response(join(Metadata.encode_response(resp, version)), version)
    return resp


@pytest.mark.parametrize("version", [10, 11])
def test_a_null_name_below_v12_is_an_invalid_request_named_empty(version):
    resp = answer(version, (None, ZERO), ("t", ZERO))
    assert resp.brokers == []
    assert [(t.error_code, t.name, t.topic_id, t.partitions) for t in resp.topics] == [
        (ErrorCode.INVALID_REQUEST, "", ZERO, []), (ErrorCode.INVALID_REQUEST, "t", ZERO, [])]


@pytest.mark.parametrize("version", [10, 11])
def test_a_topic_id_below_v12_is_an_invalid_request(version):
    resp = answer(version, ("t", SOME_ID))
    assert [(t.error_code, t.name, t.topic_id) for t in resp.topics] == [(ErrorCode.INVALID_REQUEST, "t", SOME_ID)]
