"""The metadata cache's KIP-253 view (refka/broker/metadata_cache.py): which partitions
are marked for deletion, and the counts LeaderAndIsr brings before UpdateMetadata does."""

from __future__ import annotations

from refka.broker.metadata_cache import ZERO_UUID, MetadataCache, PartitionMeta, TopicMeta

TOPIC_ID = bytes(range(16))
OTHER_ID = bytes(range(1, 17))


def topic(partitions: int, undeleted: int, topic_id: bytes = TOPIC_ID) -> TopicMeta:
    return TopicMeta(
        "t", topic_id, {p: PartitionMeta(p, 1, 0, [1], [1]) for p in range(partitions)},
        initial_partition_count=2, undeleted_partition_count=undeleted)


def test_partitions_at_or_above_the_undeleted_count_are_marked_for_deletion() -> None:
    t = topic(8, 6)
    assert [p for p in range(10) if t.is_marked_for_deletion(p)] == [6, 7]


def test_nothing_is_marked_while_the_count_is_unknown_or_covers_every_partition() -> None:
    assert not any(topic(4, -1).is_marked_for_deletion(p) for p in range(4))
    assert not any(topic(4, 4).is_marked_for_deletion(p) for p in range(4))


def test_a_partition_the_topic_does_not_have_is_not_marked_but_unknown() -> None:
    assert not topic(4, 2).is_marked_for_deletion(9)


def test_leader_and_isr_counts_replace_the_topics_counts() -> None:
    cache = MetadataCache()
    cache.put_topic(topic(8, 8))
    cache.set_partition_counts("t", TOPIC_ID, 2, 6)
    t = cache.topic("t")
    assert t is not None and (t.initial_partition_count, t.undeleted_partition_count) == (2, 6)
    cache.set_partition_counts("t", ZERO_UUID, 2, 7)  # LeaderAndIsr v2-v4: no topic ids
    assert t.undeleted_partition_count == 7


def test_leader_and_isr_counts_of_another_incarnation_or_an_unknown_topic_change_nothing() -> None:
    cache = MetadataCache()
    cache.put_topic(topic(8, 8))
    cache.set_partition_counts("t", OTHER_ID, 2, 6)  # the topic was re-created: not this one
    cache.set_partition_counts("u", TOPIC_ID, 2, 6)
    t = cache.topic("t")
    assert t is not None and t.undeleted_partition_count == 8
    assert cache.topic("u") is None
