"""The values the consumer hands its user (refka/client/structs.py): KIP-232's OffsetEpoch
survives encode/decode, and anything else is refused with ValueError (seed 002's
IllegalArgumentException from seek)."""

from __future__ import annotations

import pytest

from refka.client.structs import OffsetAndMetadata, OffsetEpoch, TopicPartition


def test_an_offset_epoch_round_trips_and_says_what_it_is():
    e = OffsetEpoch(7, 3)
    assert e.encode() == b'{"version":1,"topic_epoch":7,"leader_epoch":3}'
    assert OffsetEpoch.decode(e.encode()) == e == OffsetEpoch.decode(e.encode().decode())
    assert OffsetEpoch.decode(OffsetEpoch(-1, -1).encode()) == (-1, -1)


@pytest.mark.parametrize("data", [
    b"", b"garbage", b"[]", b'{"topic_epoch":7,"leader_epoch":3}', b'{"version":2,"topic_epoch":7,"leader_epoch":3}',
    b'{"version":1,"topic_epoch":"7","leader_epoch":3}', b'{"version":1,"topic_epoch":7}',
    b'{"version":1,"topic_epoch":-2,"leader_epoch":3}', b'{"version":1,"topic_epoch":true,"leader_epoch":3}',
    b'{"version":1,"topic_epoch":2147483648,"leader_epoch":3}', b"\xff\xfe",
])
def test_anything_else_is_refused(data):
    with pytest.raises(ValueError):
        OffsetEpoch.decode(data)


def test_offset_and_metadata_reads_as_aiokafkas_with_the_epochs_after():
    om = OffsetAndMetadata(5, "m")
    assert (om.offset, om.metadata, om.leader_epoch, om.topic_epoch) == (5, "m", -1, -1)
    assert OffsetAndMetadata(5, "", 3, 7).offset_epoch == OffsetEpoch(7, 3)
    assert TopicPartition("t", 1) == ("t", 1)
