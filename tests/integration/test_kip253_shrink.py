"""A real shrink (CreatePartitions 4 -> 2, through the controller) marks partitions 2 and 3
on every broker: PartitionLeaderEpochsForPartitions answers their leaderEpochBeforeDeletion,
a KIP-253 producer's Produce to them is INVALID_PARTITION_METADATA, Fetch still serves them."""

from __future__ import annotations

import pytest

from refka.protocol import ErrorCode
from refka.protocol.messages.create_partitions import CreatePartitions
from tests.integration.test_kip253_wire import TOPIC, call, cluster, fetch, plefp_maps, produce, topic  # noqa: F401
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

def test_a_real_shrink_marks_partitions_on_every_broker(cluster, topic):  # noqa: F811
    C = CreatePartitions.Request
    resp = call(cluster, 0, CreatePartitions, C(topics=[C.CreatePartitionsTopic(name=TOPIC, count=2, assignments=None)],
                                                timeout_ms=15_000, validate_only=False), 3)
    assert resp.results[0].error_code == ErrorCode.NONE, resp
    for node in (0, 1):
        got = wait_until(lambda node=node: (m := plefp_maps(cluster, node, 3)) and m[0][2] >= 0 and m,
                         message=f"partition 3 marked on broker {node}")

        assert [(p, b) for p, _a, b in got if b >= 0] == [(0, 2), (1, 2)]
    p = produce(cluster, 3, [b"after"], 2)
    assert p.error_code == ErrorCode.INVALID_PARTITION_METADATA, p
    assert produce(cluster, 0, [b"ok"], 2).error_code == ErrorCode.NONE
    f = fetch(cluster, 3, 2)
    assert (f.error_code, f.high_watermark) == (ErrorCode.NONE, 2)
