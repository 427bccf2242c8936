"""Per-broker configs of ``refka serve`` (refka/broker/server.py broker_configs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from refka.broker.config import BrokerConfig
from refka.broker.server import broker_configs

TWO_LISTENERS = {"listeners": "CLIENT://127.0.0.1:9092,BROKER://127.0.0.1:9093",
                 "inter.broker.listener.name": "BROKER"}


def test_one_broker_keeps_its_listeners_the_first_moved_to_host_and_port(tmp_path: Path) -> None:
    (cfg,) = broker_configs(BrokerConfig(TWO_LISTENERS), 1, "0.0.0.0", 19092, tmp_path)
    assert [str(ep) for ep in cfg.listeners] == ["CLIENT://0.0.0.0:19092", "BROKER://127.0.0.1:9093"]
    assert cfg.inter_broker_listener == "BROKER"


def test_several_brokers_get_one_plaintext_listener_each(tmp_path: Path) -> None:
    cfgs = broker_configs(BrokerConfig(), 3, "127.0.0.1", 19092, tmp_path)
    assert [[str(ep) for ep in c.listeners] for c in cfgs] == [
        [f"PLAINTEXT://127.0.0.1:{19092 + i}"] for i in range(3)
    ]
    with pytest.raises(ValueError, match="inter.broker.listener.name"):
        broker_configs(BrokerConfig(TWO_LISTENERS), 3, "127.0.0.1", 19092, tmp_path)
