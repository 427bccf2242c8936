"""The consumer protocol's subscription and assignment (refka/protocol/consumer_protocol.py),
checked against kafka-python's declarations as an independent oracle."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription

from refka.protocol import DecodeError
from refka.protocol.consumer_protocol import Assignment, Subscription

SUBSCRIPTION = Subscription(
    topics=["orders", "payments"],
    user_data=b"\x01\x02",
    owned_partitions={"orders": [0, 3]},
    generation_id=7,
    rack_id="rack-a",
)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_a_subscription_reads_as_kafka_python_reads_it(version: int) -> None:
    theirs = KpSubscription.decode(SUBSCRIPTION.encode(version))
    assert theirs.version == version
    assert theirs.topics == ["orders", "payments"]
    assert theirs.user_data == b"\x01\x02"
    if version >= 1:
        assert [(tp.topic, tp.partitions) for tp in theirs.owned_partitions] == [("orders", [0, 3])]
    if version >= 2:
        assert theirs.generation_id == 7
    if version >= 3:
        assert theirs.rack_id == "rack-a"


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_a_subscription_kafka_python_wrote_decodes_field_by_field(version: int) -> None:
    theirs = KpSubscription(
        topics=["t"],
        user_data=None,
        owned_partitions=[KpSubscription.TopicPartition(topic="t", partitions=[2])],
        generation_id=4,
        rack_id=None,
        version=version,
    ).encode()
    ours = Subscription.decode(theirs)
    assert list(ours.topics) == ["t"]
    assert ours.user_data is None
    assert ours.owned_partitions == ({"t": [2]} if version >= 1 else {})
    assert ours.generation_id == (4 if version >= 2 else -1)
    assert ours.rack_id is None
    assert ours.encode(version) == theirs


def test_a_subscription_round_trips_at_the_newest_version() -> None:
    assert Subscription.decode(SUBSCRIPTION.encode()) == Subscription(
        ["orders", "payments"], b"\x01\x02", {"orders": [0, 3]}, 7, "rack-a"
    )


def test_a_newer_subscription_is_read_for_the_fields_we_know() -> None:
    # a v4 we do not know yet: the v3 fields, then more bytes
    data = bytearray(SUBSCRIPTION.encode(3) + b"\x00\x00\x00\x09")
    data[0:2] = b"\x00\x04"
    assert list(Subscription.decode(bytes(data)).topics) == ["orders", "payments"]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_an_assignment_matches_kafka_pythons_bytes(version: int) -> None:
    ours = Assignment({"orders": [0, 2], "payments": [1]}, user_data=b"u")
    theirs = KpAssignment(
        assigned_partitions=[
            KpAssignment.TopicPartition(topic="orders", partitions=[0, 2]),
            KpAssignment.TopicPartition(topic="payments", partitions=[1]),
        ],
        user_data=b"u",
        version=version,
    ).encode()
    assert ours.encode(version) == theirs
    assert Assignment.decode(theirs) == Assignment({"orders": [0, 2], "payments": [1]}, b"u")


@pytest.mark.parametrize(
    "data",
    [
        b"",  # no version
        b"\x00\x00\x00\x00\x00\x01",  # one topic, then nothing
        b"\x00\x00\xff\xff\xff\xfe",  # a negative array length
        b"\x00\x00\x00\x00\x00\x01\xff\xff\xff\xff\xff\xff",  # a null topic name
        b"\x00\x00\x00\x00\x00\x01\x00\x01\xff\xff\xff\xff\xff",  # a topic name not UTF-8
    ],
)
def test_malformed_bytes_are_the_peers_fault(data: bytes) -> None:
    with pytest.raises(DecodeError):
        Subscription.decode(data)
    with pytest.raises(DecodeError):
        Assignment.decode(data)
