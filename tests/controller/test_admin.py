"""Admin writes (AdminZkClient's job): validation, assignment, znodes."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter

import pytest

from refka.common.topic_config import InvalidConfigError
from refka.controller import admin, znodes
from refka.controller.store import BadVersionError, EmbeddedStore
from refka.protocol.errors import ErrorCode

BROKERS = {1: None, 2: None, 3: None}


@pytest.fixture
async def store():
    s = EmbeddedStore(None)
    await s.start()
    await admin.ensure_cluster(s)
    yield s
    await s.stop()


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "has space", "slash/no", "ünïcode"])
def test_illegal_topic_names(name: str) -> None:
    with pytest.raises(admin.InvalidTopicError) as e:
        admin.validate_topic_name(name)
    assert e.value.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


@pytest.mark.parametrize("name", ["a", "a.b_c-D9", "a" * 249, "..."])
def test_legal_topic_names(name: str) -> None:
    admin.validate_topic_name(name)


def test_round_robin_assignment_matches_kafka() -> None:
    # Kafka's AdminTest: five brokers, ten partitions, three replicas, start index 0.
    got = admin.assign_replicas({b: None for b in range(5)}, 10, 3, start_index=0)
    assert got == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_rack_aware_assignment_spreads_replicas_over_racks() -> None:
    racks = {0: "a", 1: "c", 2: "c", 3: "b", 4: "b", 5: "a"}
    got = admin.assign_replicas(racks, 12, 3, rng=random.Random(7))
    for replicas in got.values():
        assert len({racks[r] for r in replicas}) == 3
        assert len(set(replicas)) == 3
    leaders = Counter(r[0] for r in got.values())
    assert set(leaders.values()) == {2}  # every broker leads two of twelve


def test_assignment_errors() -> None:
    with pytest.raises(admin.InvalidReplicationFactorError):
        admin.assign_replicas(BROKERS, 1, 4)
    with pytest.raises(admin.InvalidPartitionsError):
        admin.assign_replicas(BROKERS, 0, 1)
    with pytest.raises(admin.InvalidReplicationFactorError):
        admin.assign_replicas(BROKERS, 1, 0)
    for bad in ({0: [1, 1]}, {0: [9]}, {1: [1]}, {0: [1, 2], 1: [1]}, {0: []}):
        with pytest.raises(admin.InvalidReplicaAssignmentError) as e:
            admin.validate_assignment(bad, BROKERS)
        assert e.value.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


async def test_create_topic_writes_config_and_assignment(store) -> None:
    t = await admin.create_topic(
        store, "events", 4, 2, None, {"retention.ms": "5"}, BROKERS, rng=random.Random(1)
    )
    doc = json.loads((await store.get("/brokers/topics/events"))[0])
    assert doc["version"] == 3 and doc["topic_id"] == znodes.topic_id_to_str(t.topic_id)
    assert (doc["initial_partition_count"], doc["undeleted_partition_count"]) == (4, 4)
    assert "topic_epoch" not in doc  # the controller assigns it
    assert sorted(doc["partitions"]) == ["0", "1", "2", "3"]
    assert all(len(r) == 2 for r in doc["partitions"].values())
    assert json.loads((await store.get("/config/topics/events"))[0]) == {
        "version": 1,
        "config": {"retention.ms": "5"},
    }
    assert await admin.list_topics(store) == ["events"]
    assert (await admin.read_topic(store, "events")).partitions == t.partitions
    assert await admin.get_topic_config(store, "events") == {"retention.ms": "5"}


async def test_create_topic_refusals(store) -> None:
    await admin.create_topic(store, "a.b", 1, 1, None, None, BROKERS)
    with pytest.raises(admin.TopicExistsError) as e:
        await admin.create_topic(store, "a.b", 1, 1, None, None, BROKERS)
    assert e.value.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    with pytest.raises(admin.InvalidTopicError, match="collides"):
        await admin.create_topic(store, "a_b", 1, 1, None, None, BROKERS)
    with pytest.raises(admin.InvalidReplicationFactorError):
        await admin.create_topic(store, "big", 1, 5, None, None, BROKERS)
    with pytest.raises(admin.InvalidPartitionsError):
        await admin.create_topic(store, "none", 0, 1, None, None, BROKERS)
    with pytest.raises(admin.InvalidReplicaAssignmentError):
        await admin.create_topic(store, "bad", -1, -1, {0: [7]}, None, BROKERS)
    with pytest.raises(InvalidConfigError) as bad_config:
        await admin.create_topic(store, "cfg", 1, 1, None, {"bogus": "1"}, BROKERS)
    assert bad_config.value.error_code == ErrorCode.INVALID_CONFIG
    assert await admin.list_topics(store) == ["a.b"]
    await admin.delete_topic(store, "a.b")
    with pytest.raises(admin.TopicExistsError, match="marked for deletion"):
        await admin.create_topic(store, "a.b", 1, 1, None, None, BROKERS)


async def test_create_topics_answers_each_topic_in_order_and_writes_the_good_ones(store) -> None:
    await admin.create_topic(store, "old", 1, 1, None, None, BROKERS)
    specs = [
        admin.TopicSpec("one", 2, 2),
        admin.TopicSpec("old", 1, 1),  # exists
        admin.TopicSpec("x.y", 1, 1),
        admin.TopicSpec("x_y", 1, 1),  # collides with the topic just before it in the same request
        admin.TopicSpec("cfg", 1, 1, configs={"bogus": "1"}),
        admin.TopicSpec("two", -1, -1, {0: [3], 1: [1]}, {"retention.ms": "7"}),
        admin.TopicSpec("wide", 1, 9),
    ]
    got = await admin.create_topics(store, specs, BROKERS)
    assert [type(r).__name__ for r in got] == [
        "TopicAssignment", "TopicExistsError", "TopicAssignment", "InvalidTopicError", "InvalidConfigError",
        "TopicAssignment", "InvalidReplicationFactorError"]
    assert await admin.list_topics(store) == ["old", "one", "two", "x.y"]
    assert (await admin.read_topic(store, "two")).partitions == {0: [3], 1: [1]}
    assert await admin.get_topic_config(store, "two") == {"retention.ms": "7"}
    assert len({r.topic_id for r in got if isinstance(r, znodes.TopicAssignment)}) == 3


async def test_create_topics_counts_earlier_topics_of_the_request_in_the_check(store) -> None:
    budget = 3

    def check(new) -> None:
        nonlocal budget
        if len(new) > budget:
            raise admin.PolicyViolationError(f"{len(new)} > {budget}")
        budget -= len(new)

    got = await admin.create_topics(store, [admin.TopicSpec("a", 2, 1), admin.TopicSpec("b", 2, 1),
                                            admin.TopicSpec("c", 1, 1), admin.TopicSpec("a", 1, 1)],
                                    BROKERS, check=check)
    assert [type(r).__name__ for r in got] == [
        "TopicAssignment", "PolicyViolationError", "TopicAssignment", "TopicExistsError"]
    assert await admin.list_topics(store) == ["a", "c"]


async def test_a_topic_created_meanwhile_fails_alone_and_the_rest_of_its_multi_is_written(store, monkeypatch) -> None:
    # Another broker creates "raced" after this one read that it did not exist.
    await store.ensure_path(znodes.BROKER_TOPICS)
    await store.create(znodes.topic_path("raced"), b'{"version":3,"partitions":{"0":[1]}}')
    exists = store.exists
    monkeypatch.setattr(store, "exists", lambda path, watch=None: (
        asyncio.sleep(0, None) if path == znodes.topic_path("raced") else exists(path, watch)))
    got = await admin.create_topics(store, [admin.TopicSpec(n, 1, 1) for n in ("p", "raced", "q")], BROKERS)
    assert [type(r).__name__ for r in got] == ["TopicAssignment", "TopicExistsError", "TopicAssignment"]
    assert await admin.list_topics(store) == ["p", "q", "raced"]
    assert await admin.get_topic_config(store, "p") == {}


async def test_validate_only_writes_nothing(store) -> None:
    t = await admin.create_topic(store, "dry", 2, 1, None, None, BROKERS, validate_only=True)
    assert len(t.partitions) == 2
    assert await admin.list_topics(store) == []


async def test_delete_topic_marks_it(store) -> None:
    with pytest.raises(admin.UnknownTopicError):
        await admin.delete_topic(store, "nope")
    await admin.create_topic(store, "t", 1, 1, None, None, BROKERS)
    await admin.delete_topic(store, "t")
    await admin.delete_topic(store, "t")  # idempotent
    assert await store.get_children("/admin/delete_topics") == ["t"]


async def test_create_partitions(store) -> None:
    await admin.create_topic(store, "p", -1, -1, {0: [1, 2], 1: [2, 3]}, None, BROKERS)
    t = await admin.create_partitions(store, "p", 4, None, BROKERS, rng=random.Random(3))
    assert sorted(t.partitions) == [0, 1, 2, 3]
    assert all(len(r) == 2 for r in t.partitions.values())
    doc = json.loads((await store.get("/brokers/topics/p"))[0])
    assert len(doc["partitions"]) == 4
    assert doc["undeleted_partition_count"] == 2  # the controller raises it (KIP-253 step 2)
    with pytest.raises(admin.InvalidPartitionsError, match="KIP-253"):
        await admin.create_partitions(store, "p", 3, None, BROKERS)
    with pytest.raises(admin.InvalidPartitionsError, match="already has 4"):
        await admin.create_partitions(store, "p", 4, None, BROKERS)
    with pytest.raises(admin.InvalidReplicaAssignmentError):
        await admin.create_partitions(store, "p", 6, [[1, 2]], BROKERS)
    with pytest.raises(admin.InvalidReplicaAssignmentError):
        await admin.create_partitions(store, "p", 5, [[1]], BROKERS)
    with pytest.raises(admin.UnknownTopicError):
        await admin.create_partitions(store, "q", 5, None, BROKERS)


async def _as_the_controller_left_it(store, name: str, marked: dict[int, dict[int, int]] | None = None) -> None:
    """Partition znodes for every partition of the assignment (what the controller writes),
    with ``marked``: partition -> leaderEpochBeforeDeletion."""
    topic = await admin.read_topic(store, name)
    for p in topic.partitions:
        pz = znodes.PartitionZnode(p + 1, leader_epoch_before_deletion=(marked or {}).get(p, {}))
        path = znodes.partition_path(name, p)
        if await store.exists(path) is None:
            await store.create(path, pz.to_json(), makepath=True)
        else:
            await store.set(path, pz.to_json())


async def test_a_smaller_count_writes_only_undeleted_partition_count(store) -> None:
    await admin.create_topic(store, "s", -1, -1, {p: [1, 2] for p in range(2)}, None, BROKERS)
    await admin.create_partitions(store, "s", 5, None, BROKERS, rng=random.Random(1))
    before = await admin.read_topic(store, "s")
    before.undeleted_partition_count = 5  # as the controller raises it
    await store.set("/brokers/topics/s", before.to_json())
    await _as_the_controller_left_it(store, "s")

    assert (await admin.create_partitions(store, "s", 3, None, BROKERS, validate_only=True)).undeleted_partition_count == 3
    assert (await admin.read_topic(store, "s")).undeleted_partition_count == 5  # validate_only wrote nothing
    t = await admin.create_partitions(store, "s", 3, None, BROKERS)
    doc = json.loads((await store.get("/brokers/topics/s"))[0])
    assert (doc["initial_partition_count"], doc["undeleted_partition_count"]) == (2, 3)
    assert doc["partitions"] == {str(p): r for p, r in before.partitions.items()}  # nothing else changed
    assert t.partitions == before.partitions


async def test_partition_count_changes_refused_with_the_reason(store) -> None:
    await admin.create_topic(store, "r", -1, -1, {p: [1, 2] for p in range(2)}, None, BROKERS)
    await admin.create_partitions(store, "r", 4, None, BROKERS)
    grown = await admin.read_topic(store, "r")
    grown.undeleted_partition_count = 4
    await store.set("/brokers/topics/r", grown.to_json())
    await _as_the_controller_left_it(store, "r")

    def refused(match: str):
        return pytest.raises(admin.InvalidPartitionsError, match=match)

    with refused("Topic already has 4 partitions"):
        await admin.create_partitions(store, "r", 4, None, BROKERS)
    with refused("initial_partition_count"):
        await admin.create_partitions(store, "r", 1, None, BROKERS)
    with pytest.raises(admin.InvalidReplicaAssignmentError, match="takes no replica assignment"):
        await admin.create_partitions(store, "r", 3, [[1, 2]], BROKERS)
    # Shrunk to 3, not marked yet: nothing else until the controller has marked partition 3.
    await admin.create_partitions(store, "r", 3, None, BROKERS)
    with refused("Topic already has 3 partitions"):
        await admin.create_partitions(store, "r", 3, None, BROKERS)
    for count in (2, 5):
        with refused(r"partitions \[3\] being marked for deletion"):
            await admin.create_partitions(store, "r", count, None, BROKERS)
    # Marked: a further shrink is fine, a growth is not (KIP-253's goals).
    await _as_the_controller_left_it(store, "r", {3: {0: 0, 1: 0, 2: 0}})
    with refused(r"Partitions \[3\] of topic 'r' are marked for deletion"):
        await admin.create_partitions(store, "r", 5, None, BROKERS)
    await admin.create_partitions(store, "r", 2, None, BROKERS, validate_only=True)
    # Partition 3 removed from the assignment, its znode not yet deleted: still in progress.
    removed = await admin.read_topic(store, "r")
    del removed.partitions[3]
    await store.set("/brokers/topics/r", removed.to_json())
    with refused(r"partitions \[3\] being removed"):
        await admin.create_partitions(store, "r", 5, None, BROKERS)
    await store.delete(znodes.partition_path("r", 3))
    # Gone: it grows again, from partition 3.
    t = await admin.create_partitions(store, "r", 5, None, BROKERS)
    assert sorted(t.partitions) == [0, 1, 2, 3, 4]


async def test_with_ordered_delivery_off_partitions_follow_kafkas_rules(store) -> None:
    await admin.create_topic(store, "k", -1, -1, {p: [1, 2] for p in range(2)},
                             {"enable.ordered.delivery": "false"}, BROKERS)
    await admin.create_partitions(store, "k", 4, None, BROKERS)
    grown = await admin.read_topic(store, "k")
    grown.undeleted_partition_count = 4
    await store.set("/brokers/topics/k", grown.to_json())
    await _as_the_controller_left_it(store, "k")
    with pytest.raises(admin.InvalidPartitionsError,
                       match="Topic currently has 4 partitions, which is higher than the requested 3"):
        await admin.create_partitions(store, "k", 3, None, BROKERS)
    assert (await admin.read_topic(store, "k")).undeleted_partition_count == 4


async def test_topic_config_changes_leave_a_notification(store) -> None:
    await admin.create_topic(store, "c", 1, 1, None, None, BROKERS)
    assert await admin.get_topic_config(store, "c") == {}
    await admin.set_topic_config(store, "c", {"segment.ms": 100})
    assert await admin.get_topic_config(store, "c") == {"segment.ms": "100"}
    (note,) = await store.get_children("/config/changes")
    assert note.startswith("config_change_")
    assert znodes.decode_config_change((await store.get(f"/config/changes/{note}"))[0]) == "topics/c"
    with pytest.raises(admin.UnknownTopicError):
        await admin.set_topic_config(store, "zz", {})
    # A bad config is refused before anything is written.
    with pytest.raises(InvalidConfigError, match="segment.ms"):
        await admin.set_topic_config(store, "c", {"segment.ms": 0})
    assert await admin.get_topic_config(store, "c") == {"segment.ms": "100"}
    assert len(await store.get_children("/config/changes")) == 1


async def test_register_broker_is_an_ephemeral_owned_by_the_session(store) -> None:
    info = znodes.BrokerInfo(5, (znodes.Endpoint("PLAINTEXT", "h", 1),), rack="r")
    s = store.open_session()
    await s.start()
    epoch = await admin.register_broker(s, info)
    stat = await store.exists("/brokers/ids/5")
    assert stat.czxid == epoch and stat.ephemeral_owner == s.session_id
    assert await admin.register_broker(s, info) == epoch  # a retry finds its own node
    other = store.open_session()
    await other.start()
    with pytest.raises(admin.BrokerIdInUseError):
        await admin.register_broker(other, info)
    assert (await admin.live_brokers(store))[5] == znodes.BrokerInfo.from_json(5, info.to_json())
    await admin.deregister_broker(s, 5)
    assert await store.exists("/brokers/ids/5") is None
    await other.stop()
    await s.stop()


async def test_update_isr_is_conditional(store) -> None:
    await store.create(
        "/brokers/topics/t/partitions/0/state",
        znodes.PartitionStateZnode(1, 0, (1, 2), 1).to_json(),
        makepath=True,
    )
    v = await admin.update_isr(store, "t", 0, znodes.PartitionStateZnode(1, 0, (1,), 1), 0)
    assert v == 1
    with pytest.raises(BadVersionError):
        await admin.update_isr(store, "t", 0, znodes.PartitionStateZnode(1, 0, (1, 2), 1), 0)
    path = await admin.notify_isr_change(store, [("t", 0)])
    assert path.startswith("/isr_change_notification/isr_change_")


async def test_cluster_id_is_made_once(store) -> None:
    first = await admin.ensure_cluster(store)
    assert await admin.ensure_cluster(store) == first
    assert json.loads((await store.get("/cluster/id"))[0]) == {"version": "1", "id": first}


async def test_broker_registration_survives_session_expiry(store) -> None:
    s = store.open_session()
    await s.start()
    epochs: list[int] = []
    reg = admin.BrokerRegistration(
        s, znodes.BrokerInfo(4, (znodes.Endpoint("PLAINTEXT", "h", 1),)), epochs.append
    )
    first = await reg.start()
    await s.expire_session()
    for _ in range(200):
        if epochs:
            break
        await asyncio.sleep(0.005)
    assert epochs == [reg.epoch] and reg.epoch > first
    assert (await store.exists("/brokers/ids/4")).ephemeral_owner == s.session_id
    await reg.stop()
    assert await store.exists("/brokers/ids/4") is None
    await s.stop()
