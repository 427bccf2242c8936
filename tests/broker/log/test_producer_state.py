"""The idempotent producer's state: rules, a partition log's duplicates, snapshots,
rebuild at open, truncation, expiry; and producer id blocks in the metadata store.

No sockets: ProducerStateManager on its own, PartitionLog in both storage modes
where the behaviour is the same, files where it is about files. A crash is a log
that is never closed (appends reach the kernel before ``append`` returns, so a
new PartitionLog on the directory sees what a restarted process would).
"""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from refka.broker.log import LogConfig, PartitionLog
from refka.broker.log.producer_state import (
    INT32_MAX,
    DuplicateSequenceError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerStateManager,
    decrement_sequence,
    increment_sequence,
    read_snapshot,
)
from refka.controller import znodes
from refka.controller.producer_ids import ProducerIdManager, claim_block
from refka.controller.store import EmbeddedStore
from refka.protocol.records import build_batch, iter_batches, iter_records, parse_batches

T0 = 1_700_000_000_000
DAY_MS = 86_400_000


class FakeClock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def pbatch(pid: int, seq: int, n: int = 1, epoch: int = 0, ts: int = T0, tag: bytes = b"v") -> bytearray:
    """A batch of ``n`` records from producer ``pid`` starting at sequence ``seq``."""
    return build_batch([(None, b"%s-%d-%d" % (tag, pid, seq + i)) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, timestamp=ts)


def headers(*batches: bytes) -> list:
    data = b"".join(bytes(b) for b in batches)
    return parse_batches(data)


def accept(m: ProducerStateManager, batch: bytes, base_offset: int) -> None:
    """Check and record one batch as a leader would, at ``base_offset``."""
    (h,) = headers(batch)
    assert m.check([h]) is None
    m.update(h, base_offset, h.max_timestamp)


def values(log: PartitionLog) -> list[bytes | None]:
    res = log.read(log.log_start_offset, 1 << 30)
    data = b"".join(bytes(v) for v in res.records)
    return [r.value for h in iter_batches(data) for r in iter_records(memoryview(data)[h.position:h.end])]


def state_of(log: PartitionLog) -> dict[int, tuple[int, list]]:
    return {pid: (e.epoch, list(e.batches)) for pid, e in log.producers.producers.items()}


# -- the rules -------------------------------------------------------------------------


def test_sequences_follow_and_the_last_five_batches_are_duplicates():
    m = ProducerStateManager(None)
    offset = 0
    for seq in range(0, 14, 2):  # seven batches of two records
        accept(m, pbatch(7, seq, 2), offset)
        offset += 2
    entry = m.get(7)
    assert entry is not None and entry.last_seq == 13 and len(entry.batches) == 5
    for seq in range(4, 14, 2):  # the five kept: sequences 4-13
        dup = m.check(headers(pbatch(7, seq, 2)))
        assert dup is not None and (dup.first_seq, dup.last_seq, dup.first_offset) == (seq, seq + 1, seq)
    with pytest.raises(DuplicateSequenceError):
        m.check(headers(pbatch(7, 2, 2)))  # written, but older than the batches kept
    with pytest.raises(OutOfOrderSequenceError):
        m.check(headers(pbatch(7, 4, 1)))  # inside the kept range, not a kept batch
    with pytest.raises(OutOfOrderSequenceError):
        m.check(headers(pbatch(7, 15)))  # a gap
    assert m.check(headers(pbatch(7, 14))) is None


def test_epochs_fence_and_a_new_epoch_starts_at_zero():
    m = ProducerStateManager(None)
    accept(m, pbatch(3, 0, epoch=2), 0)
    accept(m, pbatch(3, 1, epoch=2), 1)
    with pytest.raises(InvalidProducerEpochError):
        m.check(headers(pbatch(3, 2, epoch=1)))
    with pytest.raises(OutOfOrderSequenceError):
        m.check(headers(pbatch(3, 2, epoch=3)))
    # A duplicate only within the same epoch.
    assert m.check(headers(pbatch(3, 1, epoch=2))) is not None
    accept(m, pbatch(3, 0, epoch=3), 2)
    entry = m.get(3)
    assert entry is not None and entry.epoch == 3 and len(entry.batches) == 1  # the old epoch's batches go
    with pytest.raises(InvalidProducerEpochError):
        m.check(headers(pbatch(3, 1, epoch=2)))  # not even a duplicate any more: fenced


def test_unknown_producer_starts_at_any_sequence():
    m = ProducerStateManager(None)
    assert m.check(headers(pbatch(11, 500, epoch=4))) is None
    assert m.check(headers(pbatch(12, 0))) is None


def test_sequences_wrap_at_int32_max():
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert decrement_sequence(1, 3) == INT32_MAX - 1
    m = ProducerStateManager(None)
    accept(m, pbatch(5, INT32_MAX - 3, 2), 0)  # max-3, max-2
    accept(m, pbatch(5, INT32_MAX - 1, 4), 2)  # max-1, max, 0, 1
    entry = m.get(5)
    assert entry is not None and entry.last_seq == 1
    dup = m.check(headers(pbatch(5, INT32_MAX - 1, 4)))
    assert dup is not None and dup.first_offset == 2
    accept(m, pbatch(5, 2), 6)
    # Across the wrap "older than kept" cannot be told: an old retry is a gap.
    with pytest.raises(OutOfOrderSequenceError):
        m.check(headers(pbatch(5, 100)))
    m2 = ProducerStateManager(None)
    accept(m2, pbatch(6, INT32_MAX), 0)
    assert m2.check(headers(pbatch(6, 0))) is None


def test_batches_of_one_request_are_checked_in_turn():
    m = ProducerStateManager(None)
    accept(m, pbatch(1, 0), 0)
    anonymous = build_batch([(None, b"x")])  # producer id -1: never checked
    assert m.check(headers(pbatch(1, 1), anonymous, pbatch(1, 2), pbatch(2, 9))) is None
    with pytest.raises(OutOfOrderSequenceError):
        m.check(headers(pbatch(1, 1), pbatch(1, 3)))
    with pytest.raises(InvalidProducerEpochError):
        m.check(headers(pbatch(1, 0, epoch=1), pbatch(1, 1, epoch=0)))
    # A duplicate anywhere answers the request with that batch (Kafka's analyzeAndValidateProducerState).
    dup = m.check(headers(pbatch(1, 1), pbatch(1, 0)))
    assert dup is not None and dup.first_seq == 0


# -- in a partition log ----------------------------------------------------------------


@pytest.fixture(params=["file", "memory"])
def mode(request):
    return request.param


def test_duplicate_append_returns_the_original_offsets(mode, tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), memory=mode == "memory", clock=FakeClock())
    try:
        log.append(build_batch([(None, b"plain")]), 0)
        first = log.append(pbatch(9, 0, 3), 0)
        assert (first.base_offset, first.last_offset, first.duplicate) == (1, 3, False)
        log.append(pbatch(9, 3), 0)
        again = log.append(pbatch(9, 0, 3), 0)
        assert (again.base_offset, again.last_offset, again.duplicate, again.records_count) == (1, 3, True, 0)
        assert log.log_end_offset == 5
        with pytest.raises(OutOfOrderSequenceError):
            log.append(pbatch(9, 7), 0)
        assert log.append(pbatch(9, 0, epoch=1), 0).base_offset == 5
        with pytest.raises(InvalidProducerEpochError):
            log.append(pbatch(9, 4, epoch=0), 0)
        assert log.log_end_offset == 6
        assert values(log) == [b"plain", b"v-9-0", b"v-9-1", b"v-9-2", b"v-9-3", b"v-9-0"]
    finally:
        log.close()


def test_duplicate_under_log_append_time_answers_the_original_append_time(tmp_path):
    clock = FakeClock()
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"), clock=clock)
    try:
        first = log.append(pbatch(4, 0), 0)
        clock.now += 5000
        again = log.append(pbatch(4, 0), 0)
        assert again.duplicate and again.log_append_time == first.log_append_time == T0
    finally:
        log.close()


def test_follower_appends_feed_the_producer_state(mode, tmp_path):
    leader = PartitionLog.open(tmp_path / "l-0", LogConfig(), memory=mode == "memory")
    follower = PartitionLog.open(tmp_path / "f-0", LogConfig(), memory=mode == "memory")
    try:
        for seq in range(3):
            leader.append(pbatch(8, seq), 0)
        for view in leader.read(0, 1 << 30).records:
            follower.append_as_follower(view)
        assert state_of(follower) == state_of(leader)
        # Now the follower leads: a client's retry is a duplicate there too.
        assert follower.append(pbatch(8, 2), 1).duplicate
    finally:
        leader.close()
        follower.close()


# -- snapshots and rebuild ---------------------------------------------------------------

SMALL = LogConfig(segment_bytes=400, index_interval_bytes=64)


def fill(log: PartitionLog, producers: range, rounds: int, start_seq: int = 0) -> None:
    for r in range(rounds):
        for pid in producers:
            log.append(pbatch(pid, start_seq + r, ts=T0 + r), 0)


def test_snapshots_are_written_at_rolls_and_close_in_kafkas_format(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, SMALL, clock=FakeClock())
    fill(log, range(100, 103), 8)
    rolled = log.segment_base_offsets()[1:]
    assert len(rolled) >= 2
    assert [int(p.name[:20]) for p in sorted(d.glob("*.snapshot"))] == rolled
    state = state_of(log)
    log.close()
    end = d / f"{24:020d}.snapshot"
    data = end.read_bytes()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, crc) == (1, crc32c(data[6:]))
    assert count == 15 and len(data) == 10 + 15 * 46  # five batches kept for each of three producers
    entries = read_snapshot(end)
    pid, epoch, meta = entries[-1]
    assert (pid, epoch, meta.last_seq, meta.last_offset, meta.offset_delta, meta.timestamp) == (102, 0, 7, 23, 0,
                                                                                                T0 + 7)
    # Oldest first per producer, so Kafka's loader (last entry wins) keeps the newest.
    assert [m.last_seq for p, _, m in entries if p == 100] == [3, 4, 5, 6, 7]
    reopened = PartitionLog.open(d, SMALL, clock=FakeClock())
    try:
        assert state_of(reopened) == state
    finally:
        reopened.close()


@pytest.mark.parametrize("how", ["clean", "crash"])
def test_state_survives_reopen_and_retries_stay_duplicates(tmp_path, how):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, SMALL, clock=FakeClock())
    fill(log, range(1, 4), 9)
    state = state_of(log)
    leo = log.log_end_offset
    if how == "clean":
        log.close()
    # else: a crash, nothing closed, no snapshot at the end; the last roll's and a scan.
    again = PartitionLog.open(d, SMALL, clock=FakeClock())
    try:
        assert state_of(again) == state
        for pid in range(1, 4):
            for seq in range(4, 9):
                info = again.append(pbatch(pid, seq, ts=T0 + seq), 0)
                assert info.duplicate
        with pytest.raises(DuplicateSequenceError):
            again.append(pbatch(1, 3), 0)
        assert again.log_end_offset == leo
        assert again.append(pbatch(1, 9), 0).base_offset == leo
    finally:
        again.close()


def test_a_bad_snapshot_is_skipped_and_one_above_the_log_end_is_deleted(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, SMALL, clock=FakeClock())
    fill(log, range(1, 3), 12)
    state = state_of(log)
    log.close()
    snaps = sorted(d.glob("*.snapshot"))
    assert len(snaps) >= 3
    newest = snaps[-1]
    newest.write_bytes(newest.read_bytes()[:-3])  # torn
    bogus = d / f"{10**9:020d}.snapshot"
    bogus.write_bytes(snaps[0].read_bytes())
    again = PartitionLog.open(d, SMALL, clock=FakeClock())
    try:
        assert state_of(again) == state
        assert not newest.exists() and not bogus.exists()
    finally:
        again.close()


def test_no_snapshot_at_all_rebuilds_from_every_batch_header(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, SMALL, clock=FakeClock())
    fill(log, range(1, 3), 10)
    state = state_of(log)
    log.close()
    for p in d.glob("*.snapshot"):
        p.unlink()
    again = PartitionLog.open(d, SMALL, clock=FakeClock())
    try:
        assert state_of(again) == state
    finally:
        again.close()


def test_truncation_rolls_the_state_back(mode, tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", SMALL, memory=mode == "memory", clock=FakeClock())
    try:
        fill(log, range(1, 3), 10)  # offsets 0-19, producer 1 at even offsets
        log.truncate_to(10)  # producer 1 wrote sequences 0-4 below offset 10
        entry = log.producers.get(1)
        assert entry is not None and entry.last_seq == 4 and entry.last_offset == 8
        if mode == "file":
            assert all(int(p.name[:20]) <= 10 for p in (tmp_path / "t-0").glob("*.snapshot"))
        assert log.append(pbatch(1, 5), 0).base_offset == 10  # not a duplicate any more
        log.truncate_fully_and_start_at(50)
        assert len(log.producers) == 0
        assert log.append(pbatch(1, 77), 0).base_offset == 50  # unknown again: any sequence
        if mode == "file":
            assert list((tmp_path / "t-0").glob("*.snapshot")) == []
    finally:
        log.close()


def test_state_outlives_deleted_records_and_expires_after_a_day(mode, tmp_path):
    clock = FakeClock()
    log = PartitionLog.open(tmp_path / "t-0", SMALL, memory=mode == "memory", clock=clock)
    try:
        fill(log, range(1, 3), 10)
        log.delete_records_before(log.log_end_offset)
        assert log.append(pbatch(1, 9, ts=T0 + 9), 0).duplicate  # Kafka 2.5+: state kept
        if mode == "file":
            first = log.segment_base_offsets()[0]
            assert all(int(p.name[:20]) >= first for p in (tmp_path / "t-0").glob("*.snapshot"))
        log.append(pbatch(2, 10, ts=T0 + DAY_MS), 0)
        clock.now = T0 + DAY_MS + 9
        log.enforce_retention(clock.now)
        assert log.producers.get(1) is None and log.producers.get(2) is not None
    finally:
        log.close()


# -- producer id blocks ----------------------------------------------------------------


async def test_blocks_are_claimed_in_turn_in_kafkas_znode(tmp_path):
    store = EmbeddedStore(tmp_path / "store")
    await store.start()
    try:
        a = await claim_block(store, 1)
        b = await claim_block(store, 2)
        assert (a.block_start, a.block_end, b.block_start, b.block_end) == (0, 999, 1000, 1999)
        data, _ = await store.get(znodes.LATEST_PRODUCER_ID_BLOCK)
        assert data == b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}'
        # Kafka creates the znode empty: that is "no block yet".
        await store.set(znodes.LATEST_PRODUCER_ID_BLOCK, b"")
        assert (await claim_block(store, 3)).block_start == 0
    finally:
        await store.stop()


async def test_brokers_never_hand_out_the_same_id_even_across_restarts(tmp_path):
    store = EmbeddedStore(tmp_path / "store")
    await store.start()
    s1, s2 = store.open_session(), store.open_session()
    await s1.start()
    await s2.start()
    m1, m2 = ProducerIdManager(1, block_size=10), ProducerIdManager(2, block_size=10)
    ids = await asyncio.gather(*(m.generate(s) for _ in range(35) for m, s in ((m1, s1), (m2, s2))))
    assert len(set(ids)) == 70
    assert max(ids) < 80  # four blocks of ten each, the last ones partly unused
    await s1.stop()
    await s2.stop()
    await store.stop()
    restarted = EmbeddedStore(tmp_path / "store")
    await restarted.start()
    try:
        later = [await ProducerIdManager(1, block_size=10).generate(restarted)]
        assert later[0] > max(ids)
    finally:
        await restarted.stop()


def test_snapshot_files_are_not_taken_for_segments(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, SMALL)
    fill(log, range(1, 2), 20)
    bases = log.segment_base_offsets()
    log.close()
    again = PartitionLog.open(Path(d), SMALL)
    try:
        assert again.segment_base_offsets() == bases
    finally:
        again.close()


async def test_init_producer_id_answers_retriably_without_the_store(tmp_path):
    from types import SimpleNamespace

    from refka.broker.handlers.init_producer_id import handle_init_producer_id
    from refka.protocol import ErrorCode
    from refka.protocol.messages.init_producer_id import InitProducerId

    req = InitProducerId.Request(transactional_id=None, transaction_timeout_ms=-1)
    broker = SimpleNamespace(node_id=0, controller_side=None, producer_ids=ProducerIdManager(0))
    refused: list[str] = []
    ctx = SimpleNamespace(broker=broker, not_served=lambda reason, answer: refused.append(reason))
    assert (await handle_init_producer_id(ctx, req)).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    store = EmbeddedStore(tmp_path / "store")
    await store.start()
    broker.controller_side = SimpleNamespace(session=store)
    ok = await handle_init_producer_id(ctx, req)
    assert (ok.error_code, ok.producer_id, ok.producer_epoch) == (ErrorCode.NONE, 0, 0)
    await store.stop()
    broker.producer_ids = ProducerIdManager(0)  # nothing left in memory: it must ask the store
    assert (await handle_init_producer_id(ctx, req)).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    tx = InitProducerId.Request(transactional_id="t", transaction_timeout_ms=1000)
    assert (await handle_init_producer_id(ctx, tx)).error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert refused == ["transactions: InitProducerId with a transactional id"]


def test_clean_restarts_do_not_pile_up_snapshots(tmp_path):
    d = tmp_path / "t-0"
    for round_ in range(4):
        log = PartitionLog.open(d, LogConfig(), clock=FakeClock())
        log.append(pbatch(1, round_), 0)
        log.close()
    assert [p.name for p in d.glob("*.snapshot")] == [f"{4:020d}.snapshot"]
    log = PartitionLog.open(d, LogConfig(), clock=FakeClock())
    try:
        assert log.append(pbatch(1, 3), 0).duplicate
    finally:
        log.close()
