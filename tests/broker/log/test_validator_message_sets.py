"""Produce v0-v2's legacy message sets before a leader appends them
(refka/broker/log/validator.py validate_message_set): Kafka's LogValidator rules on top
of the codec's (keys on compacted topics, a producer's LogAppendTime, the converted
batch's size), each with the error a client gets, and the RecordBatch v2 it becomes."""

from __future__ import annotations

import pytest

from refka.broker.log import LogConfig
from refka.broker.log.validator import RecordValidationError, validate_message_set
from refka.protocol import ErrorCode
from refka.protocol.legacy_records import build_message_set, encode_message, message_entry
from refka.protocol.records import Compression, TimestampType, iter_records, parse_batches

T0 = 1_700_000_000_000
COMPACTED = LogConfig(cleanup_policy="compact")
LOG_APPEND = LogConfig(message_timestamp_type="LogAppendTime")
DEFAULT = LogConfig()


def refused(records: bytes, config: LogConfig = DEFAULT) -> RecordValidationError:
    with pytest.raises(RecordValidationError) as e:
        validate_message_set(records, config, "orders", 3)
    return e.value


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.LZ4], ids=lambda c: c.name)
def test_a_message_set_is_appended_as_one_record_batch_v2(magic, codec):
    sent = [(b"a", b"1", T0), (None, b"2", T0 + 1), (b"c", None, T0 + 2)]
    batch, headers = validate_message_set(build_message_set(sent, magic, codec, base_offset=9), LogConfig(), "t", 0)
    assert isinstance(batch, memoryview) and not batch.readonly  # patched in place by the log
    assert headers == parse_batches(batch)
    (h,) = headers
    assert (h.base_offset, h.records_count, h.compression, h.timestamp_type) == (0, 3, codec, TimestampType.CREATE_TIME)
    got = [(h.base_timestamp + r.timestamp_delta, r.key, r.value, r.headers) for r in iter_records(batch)]
    assert got == [(ts if magic else -1, k, v, []) for k, v, ts in sent]


def test_a_keyless_message_on_a_compacted_topic_is_invalid_record():
    # Uncompressed, each message is a batch of its own: the first one at fault is named, index 0.
    e = refused(build_message_set([(b"a", b"1"), (None, b"2"), (None, b"3")], 0), COMPACTED)
    why = "Compacted topic cannot accept message without key in topic partition orders-3."
    assert (e.error_code, e.record_errors) == (ErrorCode.INVALID_RECORD, [(0, why)])
    # A wrapper is one batch: each inner message at fault, by its index.
    e = refused(build_message_set([(b"a", b"1"), (None, b"2"), (None, b"3")], 1, Compression.GZIP), COMPACTED)
    assert (e.error_code, e.record_errors) == (ErrorCode.INVALID_RECORD, [(1, why), (2, why)])
    assert validate_message_set(build_message_set([(b"a", b"1")], 0), COMPACTED, "orders", 3)


def test_a_producers_log_append_time_is_invalid_timestamp_where_kafka_refuses_it():
    lat = TimestampType.LOG_APPEND_TIME
    stamped = build_message_set([(b"a", b"1", T0)], 1, timestamp_type=lat)
    unstamped = build_message_set([(b"a", b"1", -1)], 1, Compression.GZIP, timestamp_type=lat)
    assert validate_message_set(stamped, LogConfig(), "orders", 3)  # CreateTime topic, a timestamp: taken
    for records, config in ((stamped, LOG_APPEND), (unstamped, LogConfig())):
        assert refused(records, config).error_code == ErrorCode.INVALID_TIMESTAMP


def test_a_timestamp_below_minus_1_is_invalid_timestamp():
    assert refused(build_message_set([(b"a", b"1", -2)], 1)).error_code == ErrorCode.INVALID_TIMESTAMP


def test_the_codecs_refusals_carry_their_error_and_the_partition():
    bad = bytearray(build_message_set([(b"a", b"1", T0)], 1))
    bad[-1] ^= 1
    e = refused(bytes(bad))
    assert e.error_code == ErrorCode.CORRUPT_MESSAGE and e.message.endswith("in topic partition orders-3")
    assert refused(b"").error_code == ErrorCode.INVALID_RECORD
    wrapped = build_message_set([(b"a", b"1")], 0, Compression.SNAPPY)
    assert refused(wrapped + wrapped).error_code == ErrorCode.INVALID_RECORD


def test_messages_above_max_message_bytes_and_a_converted_batch_above_it_are_too_large():
    one = message_entry(0, encode_message(0, b"k", b"v" * 200))
    batch, _ = validate_message_set(one, LogConfig(), "orders", 3)
    small = LogConfig(max_message_bytes=len(batch))  # one message, and its batch, fit
    assert validate_message_set(one, small, "orders", 3)
    assert refused(one, LogConfig(max_message_bytes=len(one) - 1)).error_code == ErrorCode.MESSAGE_TOO_LARGE
    # Each message fits; the one batch they become does not (Kafka checks the converted size too).
    e = refused(one * 10, small)
    assert e.error_code == ErrorCode.MESSAGE_TOO_LARGE and "converted" in e.message
