"""Topic and broker configs of a log (refka/broker/log/config.py)."""

from __future__ import annotations

import pytest

from refka.broker.log import InvalidConfigError, LogConfig


def test_log_config_from_props():
    cfg = LogConfig.from_props(
        {
            "retention.ms": "60000",
            "segment.bytes": "2048",
            "message.timestamp.type": "LogAppendTime",
            "cleanup.policy": "delete,compact",
            "min.insync.replicas": "2",  # not a log config: ignored
        }
    )
    assert (cfg.retention_ms, cfg.segment_bytes) == (60000, 2048)
    assert cfg.log_append_time and cfg.deletes and cfg.cleanup_policy == "compact,delete"
    assert LogConfig.from_props({"retention.bytes": "10"}, base=cfg).retention_ms == 60000
    assert cfg.to_props()["segment.bytes"] == "2048"
    for bad in (
        {"segment.bytes": "abc"},
        {"segment.bytes": "1"},
        {"cleanup.policy": "nope"},
        {"message.timestamp.type": "Whenever"},
    ):
        with pytest.raises(InvalidConfigError):
            LogConfig.from_props(bad)
    broker = LogConfig.from_broker_props(
        {"log.retention.hours": "1", "log.segment.bytes": "4096", "log.roll.ms": "5"}
    )
    assert (broker.retention_ms, broker.segment_bytes, broker.segment_ms) == (3_600_000, 4096, 5)
    assert (
        LogConfig.from_broker_props({"log.retention.hours": "1", "log.retention.ms": "7"}).retention_ms == 7
    )
