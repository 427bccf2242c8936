"""LeaderAndIsr (handlers/leader_and_isr.py) and KIP-253's seed step 4: the topic's
undeleted_partition_count it carries is the one Produce and Fetch check from then on,
before UpdateMetadata says it too (Metadata answers UpdateMetadata's)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from refka.broker.handlers.leader_and_isr import handle_leader_and_isr
from refka.broker.metadata_cache import MetadataCache, PartitionMeta, TopicMeta
from refka.protocol import ErrorCode
from refka.protocol.messages.leader_and_isr import LeaderAndIsr

L = LeaderAndIsr.Request
TS = L.LeaderAndIsrTopicState
TOPIC_ID = bytes(range(16))


async def admitted(*_args: Any) -> ErrorCode:
    return ErrorCode.NONE


async def counts_after(version: int, topic_id: bytes = TOPIC_ID) -> tuple[int, int]:
    """(the count checked, the count Metadata answers) after a LeaderAndIsr saying 6."""
    cache = MetadataCache()
    cache.put_topic(TopicMeta("t", TOPIC_ID, {p: PartitionMeta(p, 1, 0, [1], [1]) for p in range(8)},
                              initial_partition_count=2, undeleted_partition_count=8))
    cache.set_undeleted_partition_count("t", TOPIC_ID, 8)
    broker = SimpleNamespace(metadata=cache, inter_broker=SimpleNamespace(admit_control_request=admitted),
                             controller_side=None, replicas=SimpleNamespace(fetchers=SimpleNamespace(
                                 leader_endpoints={})))
    req = L(controller_id=1, controller_epoch=1, broker_epoch=-1, live_leaders=[], topic_states=[TS(
        topic_name="t", topic_id=topic_id, partition_states=[],
        partition_counts=TS.PartitionCounts(initial_partition_count=2, undeleted_partition_count=6))])
    resp = await handle_leader_and_isr(SimpleNamespace(broker=broker, api_version=version), req)
    assert resp.error_code == ErrorCode.NONE
    t = cache.topic("t")
    return cache.undeleted_partition_count("t"), t.undeleted_partition_count


async def test_the_count_of_a_leader_and_isr_is_checked_at_once() -> None:
    assert await counts_after(7) == (6, 8)
    assert await counts_after(4) == (6, 8)  # no topic ids before v5


async def test_counts_for_another_incarnation_of_the_topic_are_not_taken() -> None:
    assert await counts_after(7, bytes(range(1, 17))) == (8, 8)
