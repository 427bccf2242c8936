"""OffsetCommit's expire timestamp (handlers/offset_commit.py): commit time plus
retention_time_ms as Kafka adds them, held within what __consumer_offsets can store."""

from __future__ import annotations

import pytest

from refka.broker.group import storage
from refka.broker.group.offsets import CommittedOffset
from refka.broker.handlers.offset_commit import expire_timestamp

NOW = 1_700_000_000_000
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)


@pytest.mark.parametrize("retention, expected", [
    (-1, -1),  # DEFAULT_RETENTION_TIME: offsets.retention.minutes decides
    (0, NOW),
    (86_400_000, NOW + 86_400_000),
    (LONG_MAX - NOW, LONG_MAX),
    (LONG_MAX, LONG_MAX),  # Kafka's Long sum wraps negative here; refka saturates
    (-5, NOW - 5),  # any other negative retention is taken as given: expired at the next check
    (LONG_MIN, 0),
])
def test_expire_timestamp_is_commit_time_plus_retention_held_in_int64(retention, expected):
    assert expire_timestamp(NOW, retention) == expected


@pytest.mark.parametrize("retention", [LONG_MAX, LONG_MIN, -5, 0])
def test_an_offset_with_any_retention_is_written_and_reads_back(retention):
    o = CommittedOffset(1, -1, "", NOW, expire_timestamp(NOW, retention))
    value = storage.offset_value(o)
    assert value[:2] == b"\x00\x01"  # Kafka's v1, the one with expire_timestamp
    assert storage.decode_offset_value(value) == o
