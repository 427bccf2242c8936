"""What the tests of refka/broker/log share: a fake clock, batches of records, reading
a log back, filling it."""

from __future__ import annotations

from refka.broker.log import LogConfig, PartitionLog
from refka.protocol.records import Compression, NewRecord, build_batch, iter_batches, iter_records

T0 = 1_700_000_000_000
HOUR = 3_600_000
SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=128)
# Clean whenever anything is dirty; tombstones live an hour.
COMPACT = LogConfig(
    cleanup_policy="compact",
    segment_bytes=4096,
    index_interval_bytes=64,
    min_cleanable_dirty_ratio=0.0,
    delete_retention_ms=HOUR,
    file_delete_delay_ms=0,
)


class FakeClock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


# -- plain records (values only) ----------------------------------------------------------


def batch(values, ts=T0, compression=Compression.NONE, **kw):
    """A batch of records with values ``values`` (bytes or ints), timestamps ``ts``
    (one int or one per record)."""
    values = [v if isinstance(v, bytes) else b"v%d" % v for v in values]
    stamps = ts if isinstance(ts, list) else [ts] * len(values)
    return build_batch(
        [NewRecord(None, v, (), t) for v, t in zip(values, stamps, strict=True)],
        compression=compression,
        **kw,
    )


def read_all(log: PartitionLog, offset: int = 0, max_bytes: int = 1 << 30, max_offset=None):
    """[(offset, value, leader epoch)] of every record the read returns."""
    res = log.read(offset, max_bytes, max_offset)
    data = b"".join(bytes(v) for v in res.records)
    out = []
    for h in iter_batches(data):
        for rec in iter_records(memoryview(data)[h.position : h.end]):
            out.append((h.base_offset + rec.offset_delta, rec.value, h.partition_leader_epoch))
    return out


def fill(log, n_batches, per_batch=1, epoch=0, ts=T0, start=0):
    for i in range(n_batches):
        first = start + i * per_batch
        log.append(batch(range(first, first + per_batch), ts=ts + i), leader_epoch=epoch)


# -- keyed records, for compaction --------------------------------------------------------


def kv(*pairs, ts=T0, **kw) -> bytearray:
    """A batch of (key, value) records; str keys/values are encoded, None stays None."""
    recs = [NewRecord(None if k is None else k.encode(), None if v is None else v.encode(), (), ts)
            for k, v in pairs]
    return build_batch(recs, **kw)


def records(log: PartitionLog) -> list[tuple[int, str | None, str | None]]:
    """(offset, key, value) of every record, from the log start offset."""
    res = log.read(log.log_start_offset, 1 << 30)
    data = b"".join(bytes(v) for v in res.records)
    out = []
    for h in iter_batches(data, check_counts=False):
        for r in iter_records(memoryview(data)[h.position : h.end]):
            out.append((h.base_offset + r.offset_delta,
                        None if r.key is None else r.key.decode(),
                        None if r.value is None else r.value.decode()))
    return out


def batches(log: PartitionLog):
    res = log.read(log.log_start_offset, 1 << 30)
    data = b"".join(bytes(v) for v in res.records)
    return data, list(iter_batches(data, check_counts=False))


def latest_per_key(recs):
    out = {}
    for offset, key, value in recs:
        out[key] = (offset, value)
    return out


def updates(log, rounds: int, keys: int = 5, ts: int = T0, roll_every: int | None = None) -> None:
    """``rounds`` batches, each updating every key: value "k<i>=<round>"."""
    for r in range(rounds):
        log.append(kv(*[(f"k{i}", f"k{i}={r}") for i in range(keys)], ts=ts + r), leader_epoch=0)
        if roll_every and (r + 1) % roll_every == 0:
            log.roll()

