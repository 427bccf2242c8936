"""The leader-epoch cache's rules (refka/broker/log/epoch_cache.py, Kafka's
LeaderEpochFileCache) and its checkpoint file."""

from __future__ import annotations

from refka.broker.log import LeaderEpochCache


def test_epoch_cache_assign_drops_diverged_entries(tmp_path):
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    assert cache.assign(1, 0) and cache.assign(3, 10) and cache.assign(5, 20)
    assert not cache.assign(5, 25)  # same epoch, later offset: no change
    assert not cache.assign(-1, 30)
    assert cache.assign(4, 15)  # lower epoch: entries with epoch >= 4 or start >= 15 go
    assert cache.entries() == [(1, 0), (3, 10), (4, 15)]
    cache.truncate_from_start(12)
    assert cache.entries() == [(3, 12), (4, 15)]
    cache.truncate_from_end(15)
    assert cache.entries() == [(3, 12)]
    loaded, ok = LeaderEpochCache.load(tmp_path / "leader-epoch-checkpoint")
    assert ok and loaded.entries() == [(3, 12)]
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n2\n5 10\n4 20\n")  # not increasing
    assert LeaderEpochCache.load(tmp_path / "leader-epoch-checkpoint")[1] is False
