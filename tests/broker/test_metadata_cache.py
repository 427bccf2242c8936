"""The metadata cache's KIP-253 view (refka/broker/metadata_cache.py): the
undeleted_partition_count Produce and Fetch check, which LeaderAndIsr brings before
UpdateMetadata does, and which partitions it marks for deletion."""

from __future__ import annotations

from refka.broker.metadata_cache import ZERO_UUID, MetadataCache, PartitionMeta, TopicMeta

TOPIC_ID = bytes(range(16))
OTHER_ID = bytes(range(1, 17))


def cache_with(partitions: int, undeleted: int) -> MetadataCache:
    cache = MetadataCache()
    cache.put_topic(TopicMeta("t", TOPIC_ID, {p: PartitionMeta(p, 1, 0, [1], [1]) for p in range(partitions)},
                              initial_partition_count=2, undeleted_partition_count=undeleted))
    if undeleted >= 0:
        cache.set_undeleted_partition_count("t", TOPIC_ID, undeleted)
    return cache


def test_partitions_at_or_above_the_undeleted_count_are_marked_for_deletion() -> None:
    cache = cache_with(8, 6)
    assert [p for p in range(10) if cache.is_marked_for_deletion("t", p)] == [6, 7]


def test_nothing_is_marked_while_the_count_is_unknown_or_covers_every_partition() -> None:
    for cache in (cache_with(4, -1), cache_with(4, 4)):
        assert not any(cache.is_marked_for_deletion("t", p) for p in range(4))
    assert not cache_with(4, 2).is_marked_for_deletion("u", 3)


def test_a_partition_the_topic_does_not_have_is_not_marked_but_unknown() -> None:
    assert not cache_with(4, 2).is_marked_for_deletion("t", 9)


def test_the_checked_count_is_the_last_one_sent_while_metadata_keeps_update_metadatas() -> None:
    cache = cache_with(8, 8)
    cache.set_undeleted_partition_count("t", TOPIC_ID, 6)  # a LeaderAndIsr
    assert cache.undeleted_partition_count("t") == 6
    t = cache.topic("t")
    assert t is not None and t.undeleted_partition_count == 8  # what Metadata answers until UpdateMetadata
    cache.set_undeleted_partition_count("t", ZERO_UUID, 7)  # LeaderAndIsr v2-v4: no topic ids
    assert cache.undeleted_partition_count("t") == 7


def test_a_count_for_another_incarnation_of_the_topic_is_not_taken() -> None:
    cache = cache_with(8, 8)
    cache.set_undeleted_partition_count("t", OTHER_ID, 6)  # the topic was re-created: not this one
    assert cache.undeleted_partition_count("t") == 8


def test_a_new_topics_count_may_come_before_its_metadata_and_goes_with_the_topic() -> None:
    cache = cache_with(2, 2)
    cache.set_undeleted_partition_count("u", TOPIC_ID, 3)
    assert cache.undeleted_partition_count("u") == 3
    cache.remove_topic("t")
    assert cache.undeleted_partition_count("t") == -1


def test_the_timeline_records_each_change_with_old_and_new():
    from refka.broker.metadata_cache import MetadataCache, PartitionMeta, TopicMeta

    cache = MetadataCache()
    cache.set_controller(1, 5, 10)
    tid = b"\x01" * 16
    cache.put_topic(TopicMeta("t", tid, {0: PartitionMeta(0, 1, 0, [1, 2], [1, 2])}))
    cache.put_topic(TopicMeta("t", tid, {0: PartitionMeta(0, 2, 1, [1, 2], [2]),
                                         1: PartitionMeta(1, 1, 0, [1, 2], [1, 2])}))
    cache.put_topic(TopicMeta("t", tid, {0: PartitionMeta(0, 2, 1, [1, 2], [2])}))
    cache.set_controller(1, 5, 11)  # a broadcast of the same controller: no event
    cache.set_controller(2, 6, 1)
    cache.remove_topic("t")
    events = [{k: v for k, v in e.items() if k != "time_ms"} for e in cache.timeline]
    assert events == [
        {"seq": 1, "type": "controller_changed", "old_controller": -1, "new_controller": 1, "old_epoch": -1,
         "new_epoch": 5},
        {"seq": 2, "type": "topic_created", "topic": "t", "partitions": 1, "topic_epoch": -1},
        {"seq": 3, "type": "leader_changed", "topic": "t", "partition": 0, "old_leader": 1, "new_leader": 2,
         "old_epoch": 0, "new_epoch": 1},
        {"seq": 4, "type": "isr_changed", "topic": "t", "partition": 0, "old_isr": [1, 2], "new_isr": [2],
         "leader": 2},
        {"seq": 5, "type": "partition_created", "topic": "t", "partition": 1, "leader": 1, "leader_epoch": 0,
         "replicas": [1, 2]},
        {"seq": 6, "type": "partition_removed", "topic": "t", "partition": 1},
        {"seq": 7, "type": "controller_changed", "old_controller": 1, "new_controller": 2, "old_epoch": 5,
         "new_epoch": 6},
        {"seq": 8, "type": "topic_deleted", "topic": "t"},
    ]
    assert cache.controller_metadata_epoch == 1 and cache.timeline_seq == 8
