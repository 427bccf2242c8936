"""BrokerConfig's listener properties (refka/broker/config.py)."""

from __future__ import annotations

import pytest

from refka.broker.config import BrokerConfig

TWO_LISTENERS = "CLIENT://127.0.0.1:9092,BROKER://127.0.0.1:9093"


def test_inter_broker_listener_is_none_unless_set() -> None:
    assert BrokerConfig().inter_broker_listener is None
    cfg = BrokerConfig({"listeners": TWO_LISTENERS, "inter.broker.listener.name": "BROKER"})
    assert cfg.inter_broker_listener == "BROKER"
    assert [ep.listener for ep in cfg.listeners] == ["CLIENT", "BROKER"]


def test_an_inter_broker_listener_that_is_not_a_listener_is_refused_as_kafka_does() -> None:
    with pytest.raises(ValueError, match="inter.broker.listener.name BROKER is not one of listeners"):
        BrokerConfig({"inter.broker.listener.name": "BROKER"})
    with pytest.raises(ValueError, match="inter.broker.listener.name BROKER is not one of advertised.listeners"):
        BrokerConfig({"listeners": TWO_LISTENERS, "advertised.listeners": "CLIENT://kafka.example:9092",
                      "inter.broker.listener.name": "BROKER"})
