"""Every registered API, every version, request and response: what we encode
we decode back to the same message, consuming exactly the bytes written.

The cases are generated from ``refka.protocol.messages.APIS``, so an API
declared tomorrow is covered without a line here.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import SETTINGS, message, settings_with

from refka.protocol.api import Api, UnsupportedVersion, join
from refka.protocol.codec import DecodeError
from refka.protocol.messages import APIS

GARBAGE_SETTINGS = settings_with(max_examples=10)

CASES = [
    pytest.param(api, v, which, id=f"{api.name}-v{v}-{which}")
    for api in sorted(APIS.values(), key=lambda a: a.key)
    for v in range(api.min_version, api.max_version + 1)
    for which in ("request", "response")
]


def _codec(api: Api, which: str) -> tuple[Any, Any]:
    if which == "request":
        return api.encode_request, api.decode_request
    return api.encode_response, api.decode_response


@pytest.mark.parametrize("api,version,which", CASES)
def test_decode_of_encode_is_identity(api: Api, version: int, which: str) -> None:
    encode, decode = _codec(api, which)

    @SETTINGS
    @given(x=message(api, which, version), lead=st.integers(0, 7), data=st.data())
    def check(x: Any, lead: int, data: st.DataObject) -> None:
        wire = join(encode(x, version))

        y, end = decode(wire, version)
        assert end == len(wire)
        assert y == x

        # The zero-copy path: a memoryview into a larger buffer, from an offset.
        buf = memoryview(b"\xa5" * lead + wire + b"\x5a")
        z, end = decode(buf, version, lead)
        assert end == lead + len(wire)
        assert z == x

        # Encoding is canonical: what we decoded encodes to the same bytes.
        assert join(encode(z, version)) == wire

        # Any proper prefix is a DecodeError (the peer's fault), nothing else.
        if wire:
            cut = data.draw(st.integers(0, len(wire) - 1), label="cut")
            with pytest.raises(DecodeError):
                decode(memoryview(wire)[:cut], version)

    check()


@pytest.mark.parametrize("api,version,which", CASES)
def test_garbage_is_a_decode_error_or_a_message(api: Api, version: int, which: str) -> None:
    """Whatever a peer sends, decoding gives a message or a DecodeError, never another exception."""
    _, decode = _codec(api, which)

    @GARBAGE_SETTINGS
    @given(garbage=st.binary(max_size=200))
    def check(garbage: bytes) -> None:
        try:
            decode(garbage, version)
        except DecodeError:
            pass

    check()


def test_unknown_version_is_refused() -> None:
    for api in APIS.values():
        with pytest.raises(UnsupportedVersion):
            api.decode_request(b"", api.max_version + 1)
        with pytest.raises(UnsupportedVersion):
            api.encode_response(api.Response(), api.max_version + 1)


# -- hand-written wire images -----------------------------------------------------------
# Bytes written out from the protocol's rules, field by field, not from our encoder.


def _wire(*parts: str) -> bytes:
    """Hex fields; anything after a '#' in a part is a comment."""
    return bytes.fromhex("".join(p.split("#")[0].replace(" ", "") for p in parts))


def _produce_v11_not_leader_response(rack: str | None) -> Any:
    R = APIS[0].Response
    P = R.TopicProduceResponse.PartitionProduceResponse
    return R(
        responses=[
            R.TopicProduceResponse(
                name="t1",
                partition_responses=[
                    P(
                        index=0,
                        error_code=6,  # NOT_LEADER_OR_FOLLOWER
                        base_offset=-1,
                        current_leader=P.LeaderIdAndEpoch(leader_id=2, leader_epoch=7),
                    )
                ],
            )
        ],
        throttle_time_ms=0,
        node_endpoints=[R.NodeEndpoint(node_id=2, host="b2", port=9092, rack=rack)],
    )


def test_produce_v11_response_carries_current_leader_and_node_endpoints() -> None:
    """KIP-951: a NOT_LEADER_OR_FOLLOWER answer names the new leader and where it listens."""
    expected = _wire(
        "02                 # responses: compact array of 1",
        "03 7431            #   name 't1'",
        "02                 #   partition_responses: compact array of 1",
        "00000000           #     index 0",
        "0006               #     error_code NOT_LEADER_OR_FOLLOWER",
        "ffffffffffffffff   #     base_offset -1",
        "ffffffffffffffff   #     log_append_time_ms -1",
        "ffffffffffffffff   #     log_start_offset -1",
        "01                 #     record_errors: empty compact array",
        "00                 #     error_message: null",
        "01                 #     one tagged field",
        "00 09              #       tag 0 (current_leader), 9 bytes",
        "00000002 00000007  #       leader_id 2, leader_epoch 7",
        "00                 #       no tagged fields in the struct",
        "00                 #   topic: no tagged fields",
        "00000000           # throttle_time_ms 0",
        "01                 # one tagged field",
        "00 10              #   tag 0 (node_endpoints), 16 bytes",
        "02                 #   compact array of 1",
        "00000002           #     node_id 2",
        "03 6232            #     host 'b2'",
        "00002384           #     port 9092",
        "03 7231            #     rack 'r1'",
        "00                 #     no tagged fields",
    )
    produce = APIS[0]
    response = _produce_v11_not_leader_response("r1")
    assert join(produce.encode_response(response, 11)) == expected
    decoded, end = produce.decode_response(expected, 11)
    assert end == len(expected)
    assert decoded == response
    P = produce.Response.TopicProduceResponse.PartitionProduceResponse
    assert decoded.responses[0].partition_responses[0].current_leader == P.LeaderIdAndEpoch(
        leader_id=2, leader_epoch=7
    )


def test_produce_v11_node_endpoint_without_rack() -> None:
    wire = join(APIS[0].encode_response(_produce_v11_not_leader_response(None), 11))
    assert wire.endswith(
        _wire(
            "01 00 0e    # one tagged field: tag 0, 14 bytes",
            "02 00000002 03 6232 00002384",
            "00          # rack: null",
            "00          # no tagged fields",
        )
    )


def test_produce_v9_response_has_no_kip951_fields() -> None:
    """Before v10 the leader hint does not exist: it is dropped, not an error."""
    wire = join(APIS[0].encode_response(_produce_v11_not_leader_response("r1"), 9))
    assert wire == _wire(
        "02 03 7431 02 00000000 0006",
        "ffffffffffffffff ffffffffffffffff ffffffffffffffff",
        "01 00 00    # record_errors, error_message, no tagged fields",
        "00          # topic: no tagged fields",
        "00000000 00 # throttle_time_ms, no tagged fields",
    )


def test_produce_request_carries_undeleted_partition_count_as_tag_10253() -> None:
    produce = APIS[0]
    T = produce.Request.TopicProduceData
    request = produce.Request(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[T(name="t", partition_data=[], undeleted_partition_count=3)],
    )
    expected = _wire(
        "00          # transactional_id: null",
        "ffff        # acks -1",
        "00007530    # timeout_ms 30000",
        "02 02 74 01 # topic_data: 1 topic 't', no partitions",
        "01 8d50 04  # one tagged field: tag 10253 (varint 8d 50), 4 bytes",
        "00000003    #   undeleted_partition_count 3",
        "00          # no tagged fields",
    )
    assert join(produce.encode_request(request, 9)) == expected
    assert produce.decode_request(expected, 9) == (request, len(expected))


def test_update_metadata_partition_state_carries_the_kip253_maps_as_tag_10255() -> None:
    update_metadata = APIS[6]
    Req = update_metadata.Request
    TS = Req.UpdateMetadataTopicState
    PS = TS.UpdateMetadataPartitionState
    M = PS.LeaderEpochMaps
    E = M.PartitionLeaderEpoch
    request = Req(controller_id=1, controller_epoch=7, broker_epoch=-1, live_brokers=[], topic_states=[
        TS(topic_name="t", partition_states=[PS(
            partition_index=2, controller_epoch=7, leader=1, leader_epoch=3, isr=[1], zk_version=0,
            replicas=[1], offline_replicas=[], leader_epoch_maps=M(
                leader_epoch_after_creation=[E(partition=0, leader_epoch=4), E(partition=1, leader_epoch=2)],
                leader_epoch_before_deletion=[E(partition=0, leader_epoch=5)]),
        )])])
    expected = _wire(
        "00000001 00000007 ffffffffffffffff  # controller_id 1, controller_epoch 7, broker_epoch -1",
        "02 02 74    # topic_states: 1, topic_name 't'",
        "02          #   partition_states: 1",
        "00000002 00000007 00000001 00000003  # partition 2, controller_epoch 7, leader 1, leader_epoch 3",
        "02 00000001 00000000 02 00000001 01  # isr [1], zk_version 0, replicas [1], offline_replicas []",
        "01          #   one tagged field",
        "8f50 1e     #   tag 10255 (varint 8f 50): leader_epoch_maps, 30 bytes",
        "03 00000000 00000004 00 00000001 00000002 00  # after creation {0: 4, 1: 2}, entries without tags",
        "02 00000000 00000005 00  # before deletion {0: 5}",
        "00          #   the maps: no tagged fields",
        "00          #   topic: no tagged fields",
        "01          # live_brokers: none",
        "00          # no tagged fields",
    )
    assert join(update_metadata.encode_request(request, 6)) == expected
    assert update_metadata.decode_request(expected, 6) == (request, len(expected))


def test_update_metadata_partition_state_without_kip253_maps_sends_no_tags() -> None:
    """No maps (every partition not created by an expansion nor marked) cost nothing on the wire."""
    PS = APIS[6].Request.UpdateMetadataTopicState.UpdateMetadataPartitionState
    wire = join(APIS[6].encode_request(APIS[6].Request(
        controller_id=1, controller_epoch=7, broker_epoch=-1, live_brokers=[],
        topic_states=[APIS[6].Request.UpdateMetadataTopicState(topic_name="t", partition_states=[PS(
            partition_index=0, controller_epoch=7, leader=1, leader_epoch=0, isr=[1], zk_version=0,
            replicas=[1], offline_replicas=[])])]), 6))
    assert wire.endswith(_wire("02 00000001 00000000 02 00000001 01", "00 00 01 00"))


def test_unknown_tagged_fields_are_skipped() -> None:
    produce = APIS[0]
    wire = _wire(
        "00 ffff 00007530 02 02 74 01",
        "02          # two tagged fields:",
        "4d 03 aabbcc      # tag 77, unknown: skipped by its length",
        "8d50 04 00000003  # tag 10253: undeleted_partition_count 3",
        "00",
    )
    request, end = produce.decode_request(wire, 9)
    assert end == len(wire)
    assert request.topic_data[0].undeleted_partition_count == 3


def test_api_versions_v0_fallback_encoding() -> None:
    """KIP-511: to a version it does not know, the broker answers ApiVersions v0 with
    UNSUPPORTED_VERSION and its ApiVersions range, behind a v0 response header, so any
    client can read it."""
    from refka.protocol.framing import frame
    from refka.protocol.headers import encode_response_header

    api_versions = APIS[18]
    R = api_versions.Response
    response = R(error_code=35, api_keys=[R.ApiVersion(api_key=18, min_version=0, max_version=4)])
    # Whatever version the client sent, the response header is v0.
    assert {api_versions.response_header_version(v) for v in range(0, 10)} == {0}
    body = api_versions.encode_response(response, 0)
    out = join(frame([encode_response_header(7, 0), *body]))
    assert out == _wire(
        "00000010    # frame length 16",
        "00000007    # correlation_id 7 (header v0: nothing else)",
        "0023        # error_code UNSUPPORTED_VERSION",
        "00000001    # api_keys: int32 count 1",
        "0012 0000 0004",
    )


def test_api_versions_v3_response_encoding() -> None:
    api_versions = APIS[18]
    R = api_versions.Response
    response = R(error_code=0, api_keys=[R.ApiVersion(api_key=18, min_version=0, max_version=4)])
    assert join(api_versions.encode_response(response, 3)) == _wire(
        "0000              # error_code",
        "02 0012 0000 0004 00 # api_keys: compact array of 1, entry without tags",
        "00000000          # throttle_time_ms",
        "00                # no tagged fields",
    )


def test_records_given_as_segment_slices_are_spliced_without_copy() -> None:
    """Fetch serves several segment slices; they go out as they are, and decode as one blob."""
    fetch = APIS[1]
    R = fetch.Response
    first, second = memoryview(b"a" * 5000), b"b" * 10
    response = R(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[
            R.FetchableTopicResponse(
                topic_id=b"\x01" * 16,
                partitions=[
                    R.FetchableTopicResponse.PartitionData(
                        partition_index=0, error_code=0, high_watermark=1, records=[first, second]
                    )
                ],
            )
        ],
    )
    chunks = fetch.encode_response(response, 16)
    assert any(c is first for c in chunks)
    assert any(c is second for c in chunks)
    decoded, _ = fetch.decode_response(memoryview(join(chunks)), 16)
    assert bytes(decoded.responses[0].partitions[0].records) == bytes(first) + second
