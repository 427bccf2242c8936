"""Log compaction seen by an unmodified confluent-kafka client.

A compacted topic with small segments gets many updates of a few keys; after the
broker's cleaner (log.cleaner.backoff.ms=200) has run, a consumer reading from the
beginning sees one record per key, the latest, at the offset the producer was told.
A tombstone stays while delete.retention.ms has not passed, then the key vanishes
(delete.retention.ms lowered at runtime with IncrementalAlterConfigs). A record
without a key is refused, as Kafka refuses it.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from tests.brokers import BrokerProcess
from tests.integration.confluent_helpers import (
    TIMEOUT,
    Rec,
    admin,
    create_topic,
    produce,
    producer,
    read_partition,
    unique_topic,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

KEYS = [b"k%d" % i for i in range(8)]
ROUNDS = 25
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "1024",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "3600000",
}


@pytest.fixture(scope="module", params=["disk", "memory"])
def cleaning_broker(request, tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp(f"refka-compact-{request.param}") / "data",
                      memory=request.param == "memory",
                      overrides={"log.cleaner.backoff.ms": "200"}).start()
    yield b
    b.stop()


def now_ms() -> int:
    return int(time.time() * 1000)


def state(messages) -> dict[bytes, list[tuple[int, bytes | None]]]:
    """key -> [(offset, value)] in the order read."""
    out: dict[bytes, list[tuple[int, bytes | None]]] = {}
    for m in messages:
        out.setdefault(m.key(), []).append((m.offset(), m.value()))
    return out


def read_when(bs: str, topic: str, done, what: str):
    """Partition 0 from the beginning, read again until ``done`` holds for what is read."""
    last: list = []

    def read():
        last[:] = read_partition(bs, topic)
        return done(last) and (list(last),)  # truthy even when nothing was read

    (messages,) = wait_until(read, timeout=TIMEOUT, interval=0.2,
                             message=lambda: f"{what}; partition now: {state(last)}")
    return messages


def test_a_consumer_from_the_beginning_sees_the_latest_value_per_key(cleaning_broker):
    bs = cleaning_broker.bootstrap
    topic = unique_topic("compact")
    create_topic(bs, topic, config=COMPACTED)
    p = producer(bs, **{"linger.ms": 0})
    offset_of: dict[tuple[bytes, bytes | None], int] = {}
    for r in range(ROUNDS):
        reports = produce(p, topic, [Rec(k, b"%s=%d" % (k, r), [], now_ms()) for k in KEYS])
        for rep in reports:
            assert rep.error is None
            offset_of[(rep.key, rep.value)] = rep.offset
    # A tombstone for k3, then enough traffic on another key that the segments
    # holding the keys' latest values and the tombstone are no longer active.
    (tomb,) = produce(p, topic, [Rec(b"k3", None, [], now_ms())])
    offset_of[(b"k3", None)] = tomb.offset
    for r in range(40):
        (rep,) = produce(p, topic, [Rec(b"filler", b"f%d" % r, [], now_ms())])
        offset_of[(rep.key, rep.value)] = rep.offset
    end = rep.offset + 1

    latest = {k: (offset_of[(k, b"%s=%d" % (k, ROUNDS - 1))], b"%s=%d" % (k, ROUNDS - 1)) for k in KEYS}
    latest[b"k3"] = (tomb.offset, None)

    def compacted(messages) -> bool:
        s = state(messages)
        return all(s.get(k) == [latest[k]] for k in KEYS)

    messages = read_when(bs, topic, compacted, "the cleaner to compact the updated keys")
    # Offsets are the producer's: every record read is at the offset it was written to.
    assert all(offset_of[(m.key(), m.value())] == m.offset() for m in messages)
    offsets = [m.offset() for m in messages]
    assert offsets == sorted(set(offsets)) and offsets[-1] == end - 1
    assert len(messages) < len(offset_of) / 3
    # The tombstone is still there for consumers (delete.retention.ms is an hour).
    assert state(messages)[b"k3"] == [(tomb.offset, None)]

    # Lower delete.retention.ms at runtime: the tombstone, and with it k3, goes.
    a = admin(bs)
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("delete.retention.ms", "100", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([res], request_timeout=TIMEOUT)[res].result(TIMEOUT)
    messages = read_when(bs, topic, lambda ms: b"k3" not in state(ms), "the cleaner to remove tombstoned k3")
    s = state(messages)
    assert all(s[k] == [latest[k]] for k in KEYS if k != b"k3")
    assert all(offset_of[(m.key(), m.value())] == m.offset() for m in messages)


def test_a_record_without_a_key_is_refused_on_a_compacted_topic(cleaning_broker):
    bs = cleaning_broker.bootstrap
    topic = unique_topic("nokey")
    create_topic(bs, topic, config=COMPACTED)
    p = producer(bs, **{"linger.ms": 0})
    (rep,) = produce(p, topic, [Rec(None, b"no key", [], now_ms())])
    assert rep.error is not None and rep.error.code() == KafkaError.INVALID_RECORD, rep.error
    (ok,) = produce(p, topic, [Rec(b"k", b"keyed", [], now_ms())])
    assert (ok.error, ok.offset) == (None, 0)
    assert [(m.key(), m.value()) for m in read_partition(bs, topic)] == [(b"k", b"keyed")]


def test_a_compacted_log_reads_the_same_after_kill_9_and_restart(tmp_path):
    data = tmp_path / "data"
    b = BrokerProcess(data, overrides={"log.cleaner.backoff.ms": "200"}).start()
    try:
        bs = b.bootstrap
        topic = unique_topic("restart")
        create_topic(bs, topic, config=COMPACTED)
        p = producer(bs, **{"linger.ms": 0})
        for r in range(ROUNDS):
            produce(p, topic, [Rec(k, b"%s=%d" % (k, r), [], now_ms()) for k in KEYS])
        for r in range(40):
            produce(p, topic, [Rec(b"filler", b"f%d" % r, [], now_ms())])
        latest = {k: b"%s=%d" % (k, ROUNDS - 1) for k in KEYS}
        before = read_when(bs, topic, lambda ms: all(len(state(ms).get(k, [])) == 1 for k in KEYS),
                           "the cleaner to compact")
        assert {k: v[0][1] for k, v in state(before).items() if k in latest} == latest
        b.kill()  # SIGKILL: no clean shutdown
        b = BrokerProcess(data, port=b.port, overrides={"log.cleaner.backoff.ms": "200"}).start()
        after = read_partition(b.bootstrap, topic)
        # The same records (a later pass may have compacted the filler further), same state.
        assert {(m.offset(), m.key(), m.value()) for m in after} <= {(m.offset(), m.key(), m.value()) for m in before}
        assert {k: v[-1] for k, v in state(after).items()} == {k: v[-1] for k, v in state(before).items()}
    finally:
        b.stop()
