"""Bad input on the wire, sent over raw sockets to a real ``refka serve`` process.

Three kinds of bad input, three contracts (broker/connection.py, handlers/*):

- A frame or request the broker cannot parse or does not serve closes *that*
  connection, with a warning line in the broker log naming the problem and the
  peer; no answer is written and every other client is served on.
- ApiVersions at a version the broker does not know is answered in v0 with
  UNSUPPORTED_VERSION (KIP-511), so the client can downgrade.
- A well-formed request about a bad partition, topic, offset or batch is an
  error code in the response, and the connection stays usable.

Requests are built with our codec (``refka.protocol``) and, where the codec
would refuse to write them, by hand. Every response read here must decode
under its API and version to the last byte of its frame.
"""

from __future__ import annotations

import random
import socket
import struct
import zlib
from typing import Any

import pytest
from crc32c import crc32c

from refka.protocol import ErrorCode, RequestHeader, decode_response_header, encode_request_header, join
from refka.protocol.api import Api
from refka.protocol.compression import compress
from refka.protocol.messages.api_versions import ApiVersions
from refka.protocol.messages.create_topics import CreateTopics
from refka.protocol.messages.fetch import Fetch
from refka.protocol.messages.list_offsets import ListOffsets
from refka.protocol.messages.metadata import Metadata
from refka.protocol.messages.produce import Produce
from refka.protocol.records import (
    Compression,
    assign_offsets,
    build_batch,
    encode_varint,
    iter_batches,
    iter_records,
    parse_batches,
    read_header,
)
from tests.brokers import BrokerProcess
from tests.integration.cluster_helpers import log_file, stored_batches

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

MAX_REQUEST_BYTES = 1024 * 1024
TOPIC = "bad-input"
SMALL_TOPIC = "bad-input-small"  # max.message.bytes=1024
IDLE_TOPIC = "bad-input-idle"  # never written: Fetch long-polls wait on it
PIPELINE_TOPIC = "bad-input-pipeline"
SMALL_MAX_MESSAGE_BYTES = 1024

# Versions the tests speak (the highest refka serves, as a current client would).
V_API_VERSIONS = 3
V_METADATA = 12
V_PRODUCE = 11
V_FETCH = 16
V_LIST_OFFSETS = 8
V_CREATE_TOPICS = 7

_I32 = struct.Struct(">i")


@pytest.fixture(scope="module")
def strict_broker(tmp_path_factory):
    """A durable broker with a 1 MiB request limit and no topic auto-creation."""
    b = BrokerProcess(
        tmp_path_factory.mktemp("bad-input") / "data",
        overrides={
            "socket.request.max.bytes": str(MAX_REQUEST_BYTES),
            "auto.create.topics.enable": "false",
        },
    ).start()
    yield b
    b.stop()


# -- a raw client ------------------------------------------------------------------------


def request_bytes(api: Api, body: Any, version: int, correlation_id: int, client_id: str = "bad-input") -> bytes:
    """One size-prefixed request frame, encoded by our codec."""
    header = encode_request_header(
        RequestHeader(api.key, version, correlation_id, client_id), api.request_header_version(version)
    )
    payload = header + join(api.encode_request(body, version))
    return _I32.pack(len(payload)) + payload


def framed(payload: bytes) -> bytes:
    return _I32.pack(len(payload)) + payload


class RawClient:
    """A blocking socket to the broker; the socket timeout only guards against a hang."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.sock = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
        self.local_port = self.sock.getsockname()[1]
        self._next_cid = 1000

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def next_cid(self) -> int:
        self._next_cid += 1
        return self._next_cid

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read_exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(out)} of {n} bytes")
            out += chunk
        return bytes(out)

    def read_frame(self) -> bytes:
        (n,) = _I32.unpack(self._read_exactly(4))
        assert n >= 4, f"response frame of {n} bytes"
        return self._read_exactly(n)

    def read_response(self, api: Api, version: int, correlation_id: int) -> Any:
        """The next response: it must carry ``correlation_id`` and decode to its last byte."""
        frame = self.read_frame()
        cid, pos = decode_response_header(frame, api.response_header_version(version))
        assert cid == correlation_id
        resp, end = api.decode_response(frame, version, pos)
        assert end == len(frame), f"{api.name} v{version}: {len(frame) - end} bytes left after decoding"
        return resp

    def call(self, api: Api, body: Any, version: int) -> Any:
        cid = self.next_cid()
        self.send(request_bytes(api, body, version, cid))
        return self.read_response(api, version, cid)

    def api_versions(self) -> Any:
        resp = self.call(
            ApiVersions,
            ApiVersions.Request(client_software_name="bad-input", client_software_version="1.0"),
            V_API_VERSIONS,
        )
        assert resp.error_code == ErrorCode.NONE
        return resp

    def expect_closed(self) -> None:
        """The broker closes the connection without writing a byte."""
        received = bytearray()
        while True:
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
        assert received == b"", f"the broker answered a bad request: {bytes(received[:64])!r}"


def warnings_for(broker: BrokerProcess, client: RawClient) -> list[str]:
    """Warning lines of the broker log about this client's connection."""
    peer = f"peer=127.0.0.1:{client.local_port}"
    lines = broker.log_path.read_text().splitlines()
    return [line for line in lines if "[warning" in line and peer in line]


def assert_still_serves(broker: BrokerProcess) -> None:
    """A fresh connection gets ApiVersions and Metadata answered."""
    with RawClient(broker) as c:
        versions = c.api_versions()
        assert {k.api_key for k in versions.api_keys} >= {ApiVersions.key, Metadata.key, Produce.key}
        md = c.call(Metadata, Metadata.Request(topics=None), V_METADATA)
        assert [(b.host, b.port) for b in md.brokers] == [("127.0.0.1", broker.port)]
    assert warnings_for(broker, c) == []


# -- request bodies --------------------------------------------------------------------


def metadata_request(*names: str) -> Any:
    return Metadata.Request(
        topics=[Metadata.Request.MetadataRequestTopic(name=n) for n in names],
        allow_auto_topic_creation=True,
    )


def produce_request(topic: str, partition: int, records: bytes, acks: int = 1) -> Any:
    R = Produce.Request
    return R(
        transactional_id=None,
        acks=acks,
        timeout_ms=10_000,
        topic_data=[
            R.TopicProduceData(
                name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(index=partition, records=records)]
            )
        ],
    )


def fetch_request(topic_id: bytes, partition: int, offset: int, *, max_wait_ms: int, min_bytes: int = 1) -> Any:
    R = Fetch.Request
    return R(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1024 * 1024,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            R.FetchTopic(
                topic_id=topic_id,
                partitions=[
                    R.FetchTopic.FetchPartition(
                        partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                        last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1024 * 1024,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def list_offsets_request(topic: str, partition: int, timestamp: int = -1) -> Any:
    R = ListOffsets.Request
    return R(
        replica_id=-1,
        isolation_level=0,
        topics=[
            R.ListOffsetsTopic(
                name=topic,
                partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)],
            )
        ],
    )


def legacy_message_set(key: bytes, value: bytes, magic: int = 1) -> bytes:
    """One pre-0.11 message (magic 0/1) in its message set: what an old producer sends."""
    body = struct.pack(">bbq", magic, 0, 1_700_000_000_000 if magic else 0)[: 10 if magic else 2]
    body += _I32.pack(len(key)) + key + _I32.pack(len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


def produced_offset(resp: Any) -> tuple[int, int]:
    [t] = resp.responses
    [p] = t.partition_responses
    return p.error_code, p.base_offset


@pytest.fixture(scope="module")
def topic_ids(strict_broker) -> dict[str, bytes]:
    """The module's topics, created over the wire; name -> topic id."""
    R = CreateTopics.Request
    topics = [
        R.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1, assignments=[], configs=[]),
        R.CreatableTopic(name=SMALL_TOPIC, num_partitions=1, replication_factor=1, assignments=[],
                         configs=[R.CreatableTopic.CreatableTopicConfig(
                             name="max.message.bytes", value=str(SMALL_MAX_MESSAGE_BYTES))]),
        R.CreatableTopic(name=IDLE_TOPIC, num_partitions=1, replication_factor=1, assignments=[], configs=[]),
        R.CreatableTopic(name=PIPELINE_TOPIC, num_partitions=1, replication_factor=1, assignments=[], configs=[]),
    ]
    with RawClient(strict_broker) as c:
        resp = c.call(CreateTopics, R(topics=topics, timeout_ms=15_000, validate_only=False), V_CREATE_TOPICS)
        assert {(t.name, t.error_code) for t in resp.topics} == {(t.name, 0) for t in topics}
        md = c.call(Metadata, metadata_request(*(t.name for t in topics)), V_METADATA)
        assert all(t.error_code == 0 and len(t.partitions) == 1 for t in md.topics)
        # Three records in the main topic, for the Fetch and ListOffsets cases.
        resp = c.call(Produce, produce_request(TOPIC, 0, bytes(build_batch(
            [(b"k%d" % i, b"v%d" % i) for i in range(3)]))), V_PRODUCE)
        assert produced_offset(resp) == (ErrorCode.NONE, 0)
        return {t.name: t.topic_id for t in md.topics}


# -- inputs that close the connection ----------------------------------------------------


def _header(api_key: int, version: int, cid: int = 7, header_version: int = 2) -> bytes:
    return encode_request_header(RequestHeader(api_key, version, cid, "bad-input"), header_version)


def _truncated_produce() -> bytes:
    whole = request_bytes(Produce, produce_request(TOPIC, 0, bytes(build_batch([(b"k", b"v" * 200)]))), V_PRODUCE, 7)
    payload = whole[4:]
    return framed(payload[: len(payload) // 2])


def _truncated_metadata() -> bytes:
    whole = request_bytes(Metadata, metadata_request(TOPIC, "another-topic"), V_METADATA, 7)
    return framed(whole[4:-9])


_GARBAGE = random.Random(7).randbytes(200)  # its first two bytes name no API

CLOSING_INPUTS = {
    # name: (bytes sent, warning event, text the warning must contain)
    "negative_frame_length": (_I32.pack(-1) + b"\x00" * 16, "bad_frame", "negative frame length -1"),
    "frame_above_socket_request_max_bytes": (
        _I32.pack(2 * 1024 * 1024) + b"\x00" * 64,
        "bad_frame",
        f"frame of {2 * 1024 * 1024} bytes exceeds the maximum of {MAX_REQUEST_BYTES}",
    ),
    "frame_shorter_than_a_header": (framed(b"\x00\x03\x00"), "bad_request_header", "shorter than a request header"),
    "garbage_bytes": (framed(_GARBAGE), "unknown_api_key", f"api_key={struct.unpack_from('>h', _GARBAGE)[0]}"),
    "garbage_header_client_id_overruns": (
        framed(struct.pack(">hhih", Metadata.key, V_METADATA, 7, 500) + b"abc"),
        "malformed_request",
        "client_id overruns the frame",
    ),
    "garbage_body": (
        framed(_header(Produce.key, 3, header_version=1) + b"\xff" * 40),
        "malformed_request",
        "api=Produce",
    ),
    "truncated_produce_body": (_truncated_produce(), "malformed_request", "api=Produce"),
    "truncated_metadata_body": (_truncated_metadata(), "malformed_request", "api=Metadata"),
    "unknown_api_key": (framed(_header(32000, 0, header_version=1)), "unknown_api_key", "api_key=32000"),
    "unsupported_metadata_version": (  # logged once per client and reason (test_unserved_requests.py)
        framed(_header(Metadata.key, 99) + b"\x00\x00"),
        "request_not_served",
        "Metadata v99 is not served",
    ),
}


@pytest.mark.parametrize("case", CLOSING_INPUTS)
def test_bad_input_closes_the_connection_with_a_warning(strict_broker, topic_ids, case):
    data, event, detail = CLOSING_INPUTS[case]
    with RawClient(strict_broker) as c:
        c.send(data)
        c.expect_closed()
    # The broker logs before it closes, so the line is there once we saw the close.
    lines = warnings_for(strict_broker, c)
    assert len(lines) == 1, f"expected one warning for this connection, log tail:\n{strict_broker.log_tail()}"
    assert f"] {event} " in lines[0] and detail in lines[0], lines[0]
    assert "Traceback" not in strict_broker.log_path.read_text()
    assert_still_serves(strict_broker)


def test_requests_before_a_bad_frame_are_answered_then_the_connection_closes(strict_broker):
    with RawClient(strict_broker) as c:
        good = request_bytes(Metadata, Metadata.Request(topics=None), V_METADATA, 41)
        c.send(good + _I32.pack(-7))
        md = c.read_response(Metadata, V_METADATA, 41)
        assert md.brokers[0].port == strict_broker.port
        c.expect_closed()
    [line] = warnings_for(strict_broker, c)
    assert "bad_frame" in line and "negative frame length -7" in line
    assert_still_serves(strict_broker)


def test_frame_split_across_writes_is_reassembled(strict_broker):
    """Not bad input, but the same decoder: one byte per write still makes a request."""
    with RawClient(strict_broker) as c:
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = request_bytes(ApiVersions, ApiVersions.Request(), 0, 77)
        for i in range(len(data)):
            c.send(data[i : i + 1])
        resp = c.read_response(ApiVersions, 0, 77)
        assert resp.error_code == ErrorCode.NONE
    assert warnings_for(strict_broker, c) == []


# -- ApiVersions at an unknown version (KIP-511) -------------------------------------------


def test_api_versions_at_unknown_version_is_answered_in_v0_with_unsupported_version(strict_broker):
    with RawClient(strict_broker) as c:
        reference = c.call(ApiVersions, ApiVersions.Request(), 0)
        # What a client from the future sends: header v2 (client id, tagged fields),
        # a body we cannot know the layout of.
        payload = _header(ApiVersions.key, 99, cid=0x12345678) + b"\x0bbad-input\x041.0\x00\x00"
        c.send(framed(payload))
        frame = c.read_frame()
        # Response header v0: the correlation id and nothing else, then the v0 body.
        assert frame[:4] == bytes.fromhex("12345678")
        resp, end = ApiVersions.decode_response(frame, 0, 4)
        assert end == len(frame)
        assert len(frame) == 4 + 2 + 4 + 6 * len(resp.api_keys)
        assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION == 35
        listed = {(k.api_key, k.min_version, k.max_version) for k in resp.api_keys}
        assert (ApiVersions.key, 0, 4) in listed
        assert listed == {(k.api_key, k.min_version, k.max_version) for k in reference.api_keys}
        # The client downgrades on the same connection.
        assert c.api_versions().api_keys == reference.api_keys
    assert warnings_for(strict_broker, c) == []


# -- well-formed requests with bad contents: an error code, the connection lives on ----------


def _corrupt_crc_batch() -> bytes:
    batch = build_batch([(b"key", b"value" * 20)])
    batch[-1] ^= 0xFF  # inside the CRC-covered records, header untouched
    return bytes(batch)


def _unknown_compression_batch() -> bytes:
    """Compression bits 7 (no codec has that id) under a valid CRC."""
    batch = build_batch([(b"key", b"value")])
    struct.pack_into(">h", batch, 21, struct.unpack_from(">h", batch, 21)[0] | 0x07)
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def _with_valid_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def _null_header_key_batch() -> bytes:
    """One record with one header whose key length is -1 (null), under a valid CRC."""
    batch = build_batch([(b"key", b"value")], timestamp=1_700_000_000_000)
    # The record from its attributes to its value, then header count 1, key -1, value -1.
    body = bytes(batch[62:-1]) + encode_varint(1) + encode_varint(-1) + encode_varint(-1)
    batch[61:] = encode_varint(len(body)) + body
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    return _with_valid_crc(batch)


def _garbled_zstd_batch() -> bytes:
    batch = build_batch([(b"k%d" % i, b"value " * 30) for i in range(10)], compression=Compression.ZSTD)
    for i in range(70, len(batch) - 4):
        batch[i] ^= 0x5A
    return _with_valid_crc(batch)


def _zstd_bomb_batch() -> bytes:
    """Compression bits zstd over 100 KB of zeros: a few bytes that decompress past 64
    times SMALL_TOPIC's max.message.bytes, the most a leader decompresses."""
    batch = build_batch([(b"k", b"v")], compression=Compression.ZSTD)
    batch[61:] = compress(Compression.ZSTD, bytes(100_000))
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    return _with_valid_crc(batch)


PRODUCE_ERRORS = {
    # name: (topic, records, acks, expected error)
    "corrupt_crc": (TOPIC, _corrupt_crc_batch(), 1, ErrorCode.CORRUPT_MESSAGE),
    "null_header_key": (TOPIC, _null_header_key_batch(), 1, ErrorCode.CORRUPT_MESSAGE),
    "zstd_payload_that_does_not_decompress": (TOPIC, _garbled_zstd_batch(), 1, ErrorCode.CORRUPT_MESSAGE),
    "zstd_bomb": (SMALL_TOPIC, _zstd_bomb_batch(), 1, ErrorCode.MESSAGE_TOO_LARGE),
    "magic_1_message_set": (TOPIC, legacy_message_set(b"key", b"value"), 1, ErrorCode.INVALID_RECORD),
    "magic_1_message_set_large": (TOPIC, legacy_message_set(b"key", b"v" * 300), 1, ErrorCode.INVALID_RECORD),
    "unknown_compression_type": (TOPIC, _unknown_compression_batch(), 1, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    "batch_above_max_message_bytes": (
        SMALL_TOPIC, bytes(build_batch([(None, random.Random(3).randbytes(4 * SMALL_MAX_MESSAGE_BYTES))])),
        1, ErrorCode.MESSAGE_TOO_LARGE,
    ),
    "acks_5": (TOPIC, bytes(build_batch([(b"k", b"v")])), 5, ErrorCode.INVALID_REQUIRED_ACKS),
    "unknown_topic": ("bad-input-no-such-topic", bytes(build_batch([(b"k", b"v")])), 1,
                      ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    "unknown_partition": (TOPIC, bytes(build_batch([(b"k", b"v")])), 1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
}


@pytest.mark.parametrize("case", PRODUCE_ERRORS)
def test_bad_produce_is_an_error_code_and_the_connection_stays_usable(strict_broker, topic_ids, case):
    topic, records, acks, expected = PRODUCE_ERRORS[case]
    partition = 5 if case == "unknown_partition" else 0
    with RawClient(strict_broker) as c:
        before = c.call(ListOffsets, list_offsets_request(TOPIC, 0), V_LIST_OFFSETS)
        resp = c.call(Produce, produce_request(topic, partition, records, acks), V_PRODUCE)
        [t] = resp.responses
        assert t.name == topic
        [p] = t.partition_responses
        assert (p.index, p.error_code, p.base_offset) == (partition, expected, -1)
        # Nothing was appended, and the same connection is answered.
        after = c.call(ListOffsets, list_offsets_request(TOPIC, 0), V_LIST_OFFSETS)
        assert after.topics[0].partitions[0].offset == before.topics[0].partitions[0].offset
        c.api_versions()
    assert warnings_for(strict_broker, c) == []


def test_metadata_for_an_invalid_topic_name(strict_broker, topic_ids):
    with RawClient(strict_broker) as c:
        md = c.call(Metadata, metadata_request("bad name!", TOPIC), V_METADATA)
        by_name = {t.name: t for t in md.topics}
        assert by_name["bad name!"].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert by_name["bad name!"].partitions == []
        assert by_name[TOPIC].error_code == ErrorCode.NONE
        c.api_versions()
    assert warnings_for(strict_broker, c) == []


def test_metadata_for_an_unknown_topic_with_auto_create_off(strict_broker, topic_ids):
    with RawClient(strict_broker) as c:
        md = c.call(Metadata, metadata_request("bad-input-absent"), V_METADATA)
        assert [(t.name, t.error_code) for t in md.topics] == [
            ("bad-input-absent", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        # Asked again: still unknown, nothing was created behind our back.
        md = c.call(Metadata, metadata_request("bad-input-absent"), V_METADATA)
        assert md.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_past_the_log_end_is_offset_out_of_range(strict_broker, topic_ids):
    with RawClient(strict_broker) as c:
        end = c.call(ListOffsets, list_offsets_request(TOPIC, 0), V_LIST_OFFSETS).topics[0].partitions[0].offset
        resp = c.call(Fetch, fetch_request(topic_ids[TOPIC], 0, end + 100, max_wait_ms=0), V_FETCH)
        assert resp.error_code == ErrorCode.NONE
        [t] = resp.responses
        [p] = t.partitions
        assert p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        # as Kafka answers an errored partition to a consumer: no offsets (tests/oracle)
        assert (p.high_watermark, p.log_start_offset) == (-1, -1)
        assert not p.records
        # The same connection fetches from the start.
        resp = c.call(Fetch, fetch_request(topic_ids[TOPIC], 0, 0, max_wait_ms=0), V_FETCH)
        p = resp.responses[0].partitions[0]
        assert p.error_code == ErrorCode.NONE
        values = [r.value for h in iter_batches(p.records) for r in iter_records(p.records[h.position:h.end])]
        assert values[:3] == [b"v0", b"v1", b"v2"]
    assert warnings_for(strict_broker, c) == []


@pytest.mark.parametrize("topic,partition", [(TOPIC, 7), ("bad-input-no-such-topic", 0)])
def test_list_offsets_on_an_unknown_partition(strict_broker, topic_ids, topic, partition):
    with RawClient(strict_broker) as c:
        resp = c.call(ListOffsets, list_offsets_request(topic, partition), V_LIST_OFFSETS)
        [t] = resp.topics
        [p] = t.partitions
        assert (t.name, p.partition_index, p.error_code, p.offset) == (
            topic, partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)
        ok = c.call(ListOffsets, list_offsets_request(TOPIC, 0, timestamp=-2), V_LIST_OFFSETS)
        assert (ok.topics[0].partitions[0].error_code, ok.topics[0].partitions[0].offset) == (0, 0)
    assert warnings_for(strict_broker, c) == []


# -- pipelining ------------------------------------------------------------------------------


def test_fifty_pipelined_requests_are_answered_in_request_order(strict_broker, topic_ids):
    """One write of 50 mixed requests; a Fetch long-poll on an idle partition goes
    first and another one mid-way waits for a Produce sent after it: each response
    still leaves in request order."""
    with RawClient(strict_broker) as c:
        start = c.call(ListOffsets, list_offsets_request(PIPELINE_TOPIC, 0), V_LIST_OFFSETS)
        base = start.topics[0].partitions[0].offset
        sent: list[tuple[int, Api, int, str]] = []
        data = bytearray()
        produced = 0
        waiting_fetch_offset = -1
        for i in range(50):
            cid = 5000 + i
            if i == 0:
                kind, api, v = "idle_long_poll", Fetch, V_FETCH
                body = fetch_request(topic_ids[IDLE_TOPIC], 0, 0, max_wait_ms=300)
            elif i == 20:
                kind, api, v = "waiting_long_poll", Fetch, V_FETCH
                waiting_fetch_offset = base + produced
                # max_wait far beyond the socket timeout: only the append can end this wait.
                body = fetch_request(topic_ids[PIPELINE_TOPIC], 0, waiting_fetch_offset, max_wait_ms=600_000)
            else:
                kind = ("metadata", "api_versions", "produce", "fetch")[(i - 1) % 4]
                if kind == "metadata":
                    api, v, body = Metadata, V_METADATA, metadata_request(PIPELINE_TOPIC)
                elif kind == "api_versions":
                    api, v, body = ApiVersions, V_API_VERSIONS, ApiVersions.Request(
                        client_software_name="bad-input", client_software_version="1.0")
                elif kind == "produce":
                    api, v = Produce, V_PRODUCE
                    body = produce_request(PIPELINE_TOPIC, 0, bytes(build_batch([(None, b"r%d" % i)])), acks=1)
                    produced += 1
                else:
                    api, v = Fetch, V_FETCH
                    body = fetch_request(topic_ids[PIPELINE_TOPIC], 0, base, max_wait_ms=100)
            sent.append((cid, api, v, kind))
            data += request_bytes(api, body, v, cid)
        c.send(bytes(data))

        answers = []
        for cid, *_ in sent:
            try:
                frame = c.read_frame()
            except TimeoutError:
                pytest.fail(f"no response for correlation id {cid} (after {len(answers)} answers): the "
                            "Fetch long-poll was not woken by the Produce pipelined after it")
            answers.append((int.from_bytes(frame[:4], "big", signed=True), frame))
        assert [cid for cid, _ in answers] == [cid for cid, *_ in sent]

        produce_offsets = []
        for (cid, api, v, kind), (_, frame) in zip(sent, answers, strict=True):
            _, pos = decode_response_header(frame, api.response_header_version(v))
            resp, end = api.decode_response(frame, v, pos)
            assert end == len(frame), (kind, cid)
            if kind == "produce":
                err, offset = produced_offset(resp)
                assert err == ErrorCode.NONE
                produce_offsets.append(offset)
            elif kind == "idle_long_poll":
                p = resp.responses[0].partitions[0]
                assert (p.error_code, p.high_watermark, bool(p.records)) == (0, 0, False)
            elif kind == "waiting_long_poll":
                # Woken by the append of a Produce pipelined after it.
                p = resp.responses[0].partitions[0]
                assert p.error_code == ErrorCode.NONE
                [h, *_] = list(iter_batches(p.records))
                assert h.base_offset == waiting_fetch_offset
                [rec] = list(iter_records(p.records[h.position:h.end]))
                assert rec.value == b"r23"
            elif kind == "fetch":
                p = resp.responses[0].partitions[0]
                assert p.error_code == ErrorCode.NONE and p.records
            elif kind == "metadata":
                assert resp.topics[0].error_code == ErrorCode.NONE
            else:
                assert resp.error_code == ErrorCode.NONE
        assert produce_offsets == list(range(base, base + produced))
        c.api_versions()
    assert warnings_for(strict_broker, c) == []


# -- issue 16's reproducer: a batch nobody can read back ----------------------------------------

# A Produce v9 frame (size prefix included; client "wirefuzz", correlation id 1) for
# partition 0 of repro-lz4: one batch with compression bits LZ4 whose payload is not
# LZ4 (an uncompressed record), under a valid CRC; and a ListOffsets v7 for the
# partition's max timestamp (correlation id 2). A broker that stored the batch then
# closed the connection on the ListOffsets (handler_failed CorruptRecordError).
REPRO_TOPIC = "repro-lz4"
REPRO_PRODUCE = bytes.fromhex(
    "00000087000000090000000100087769726566757a7a0000000100001388020a726570726f2d6c7a3402000000005a"
    "00000000000000000000004dffffffff02ceadf41d000300000000000001a2120e87ee000001a2120e87eeffffffffff"
    "ffffffffffffffffff0000000136000000026b28767676767676767676767676767676767676767600000000"
)
REPRO_LIST_OFFSETS = bytes.fromhex(
    "00000037000200070000000200087769726566757a7a00ffffffff00020a726570726f2d6c7a340200000000ffffffff"
    "fffffffffffffffd000000"
)
REPRO_BATCH = REPRO_PRODUCE[47:136]


def _create_repro_topic(c: RawClient) -> bytes:
    R = CreateTopics.Request
    resp = c.call(CreateTopics, R(topics=[R.CreatableTopic(
        name=REPRO_TOPIC, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=15_000, validate_only=False), V_CREATE_TOPICS)
    assert [(t.name, t.error_code) for t in resp.topics] == [(REPRO_TOPIC, ErrorCode.NONE)]
    return bytes(resp.topics[0].topic_id)


def _log_end_offset(c: RawClient) -> int:
    resp = c.call(ListOffsets, list_offsets_request(REPRO_TOPIC, 0, timestamp=-1), V_LIST_OFFSETS)
    p = resp.topics[0].partitions[0]
    assert p.error_code == ErrorCode.NONE
    return int(p.offset)


def _repro_list_offsets(c: RawClient) -> Any:
    c.send(REPRO_LIST_OFFSETS)
    resp = c.read_response(ListOffsets, 7, 2)
    [t] = resp.topics
    [p] = t.partitions
    assert (t.name, p.partition_index) == (REPRO_TOPIC, 0)
    return p


def test_the_lz4_reproducer_is_refused_corrupt_and_never_reaches_the_log(strict_broker, topic_ids):
    assert parse_batches(REPRO_BATCH)[0].compression == Compression.LZ4  # the CRC is right
    with RawClient(strict_broker) as c:
        _create_repro_topic(c)
        c.send(REPRO_PRODUCE)
        resp = c.read_response(Produce, 9, 1)
        [t] = resp.responses
        [p] = t.partition_responses
        assert (t.name, p.index, p.error_code, p.base_offset) == (REPRO_TOPIC, 0, ErrorCode.CORRUPT_MESSAGE, -1)
        assert p.error_message is None  # as Kafka; the reason is in the broker's log (info)
        assert _log_end_offset(c) == 0
        # The ListOffsets of the report is answered on the same connection: nothing there.
        p = _repro_list_offsets(c)
        assert (p.error_code, p.offset, p.timestamp) == (ErrorCode.NONE, -1, -1)
        c.api_versions()
    assert warnings_for(strict_broker, c) == []


def test_a_batch_on_disk_that_does_not_decode_is_answered_not_a_closed_connection(tmp_path):
    """What an older refka let in, found on disk: ListOffsets answers that partition
    CORRUPT_MESSAGE with one warning line naming it, Fetch serves the batch as stored
    (no broker decompresses for a Fetch), and the partition takes new records."""
    data_dir = tmp_path / "data"
    broker = BrokerProcess(data_dir).start()
    try:
        with RawClient(broker) as c:
            topic_id = _create_repro_topic(c)
            good = build_batch([(b"k", b"before")], timestamp=1_000)
            resp = c.call(Produce, produce_request(REPRO_TOPIC, 0, bytes(good)), V_PRODUCE)
            assert produced_offset(resp) == (ErrorCode.NONE, 0)
    finally:
        broker.stop()
    # The reproducer's batch at offset 1 (base offset and leader epoch are outside the
    # CRC), as the last batch of the segment; without the clean-shutdown marker the
    # broker re-reads that segment at start-up, checking CRCs only.
    segment = log_file(data_dir, 0, REPRO_TOPIC)
    stored = stored_batches(segment)
    corrupt = bytearray(REPRO_BATCH)
    assign_offsets(corrupt, 0, 1, read_header(stored).partition_leader_epoch)
    segment.write_bytes(stored + corrupt)
    (segment.parent / ".clean_shutdown").unlink(missing_ok=True)

    broker = BrokerProcess(data_dir).start()
    try:
        with RawClient(broker) as c:
            assert _log_end_offset(c) == 2
            p = _repro_list_offsets(c)  # the max timestamp is the corrupt batch's
            assert (p.error_code, p.offset) == (ErrorCode.CORRUPT_MESSAGE, -1)
            by_time = c.call(ListOffsets, list_offsets_request(REPRO_TOPIC, 0, timestamp=2_000), V_LIST_OFFSETS)
            assert by_time.topics[0].partitions[0].error_code == ErrorCode.CORRUPT_MESSAGE
            found = c.call(ListOffsets, list_offsets_request(REPRO_TOPIC, 0, timestamp=0), V_LIST_OFFSETS)
            assert (found.topics[0].partitions[0].error_code, found.topics[0].partitions[0].offset) == (0, 0)
            resp = c.call(Fetch, fetch_request(topic_id, 0, 0, max_wait_ms=0), V_FETCH)
            p = resp.responses[0].partitions[0]
            assert p.error_code == ErrorCode.NONE
            assert [(h.base_offset, h.compression) for h in iter_batches(p.records)] == [
                (0, Compression.NONE), (1, Compression.LZ4)]
            resp = c.call(Produce, produce_request(REPRO_TOPIC, 0, bytes(build_batch([(b"k", b"after")]))),
                          V_PRODUCE)
            assert produced_offset(resp) == (ErrorCode.NONE, 2)
            c.api_versions()
    finally:
        broker.stop()
    lines = broker.log_path.read_text().splitlines()
    unreadable = [line for line in lines if "list_offsets_records_unreadable" in line]
    assert len(unreadable) == 2, unreadable
    assert all("topic=repro-lz4" in line and "partition=0" in line and "[warning" in line for line in unreadable)
    assert not [line for line in lines if "handler_failed" in line or "Traceback" in line]
