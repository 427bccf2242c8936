"""The topic-config table (refka.common.topic_config): its invariants, its validation,
and what derives from it (the broker's property defaults, BrokerConfig.topic_defaults,
LogConfig)."""

from __future__ import annotations

import dataclasses

import pytest

from refka.broker.config import DEFAULTS, TOPIC_CONFIG_SYNONYMS_READ, BrokerConfig
from refka.broker.log import LogConfig
from refka.common import topic_config
from refka.common.topic_config import (
    INT_MAX,
    LONG_MAX,
    TOPIC_CONFIGS,
    InvalidConfigError,
    Range,
    defaults_from_broker,
    parse,
    validate_topic_configs,
)
from refka.protocol.errors import ErrorCode

# Kafka's synonyms that refka's broker does not read (not properties of BrokerConfig):
# their topic configs keep the table's defaults. A synonym added to the table lands here
# or in TOPIC_CONFIG_SYNONYMS_READ, by decision.
NOT_READ = {
    "log.segment.delete.delay.ms",
    "log.local.retention.bytes",
    "log.local.retention.ms",
    "log.message.format.version",
    "log.message.timestamp.after.max.ms",
    "log.message.timestamp.before.max.ms",
    "log.message.timestamp.difference.max.ms",
    "log.preallocate",
    "log.retention.hours",
    "log.retention.minutes",
    "log.roll.hours",
    "log.roll.jitter.ms",
}
# Read, with a default of its own: -1, "not set" (Kafka's is null).
OWN_DEFAULT = {"log.flush.interval.ms": (int, -1)}


# -- the table


def test_every_config_has_a_kafka_type_a_one_line_doc_and_synonyms_of_its_own():
    seen: set[str] = set()
    for name, key in TOPIC_CONFIGS.items():
        assert key.name == name
        assert key.type in ("BOOLEAN", "STRING", "INT", "LONG", "DOUBLE", "LIST")
        assert key.doc and "\n" not in key.doc, name
        names = [s.name for s in key.synonyms]
        assert not set(names) & seen, f"{name} shares a broker synonym"
        seen.update(names)
        assert all(s.scale >= 1 for s in key.synonyms)
        assert [s.scale for s in key.synonyms] == sorted(s.scale for s in key.synonyms), \
            f"{name}: synonyms are most precise first"


def test_every_default_passes_its_own_validator():
    for name, key in TOPIC_CONFIGS.items():
        assert parse(name, key.default) == key.default, name
        assert parse(name, key.default_text) == key.default, name


def test_minimums_and_type_limits_are_enforced():
    ranged = {name: key for name, key in TOPIC_CONFIGS.items() if isinstance(key.validator, Range)}
    assert {"segment.bytes", "segment.ms", "retention.ms", "min.insync.replicas"} <= set(ranged)
    for name, key in ranged.items():
        assert isinstance(key.validator, Range)
        lowest = key.validator.min
        if key.type == "DOUBLE":
            assert parse(name, str(lowest)) == lowest
            with pytest.raises(InvalidConfigError, match=f"is not in \\[{lowest}, "):
                parse(name, str(lowest - 0.01))
            continue
        top = INT_MAX if key.type == "INT" else LONG_MAX
        assert parse(name, str(lowest)) == lowest and parse(name, str(top)) == top
        for out in (lowest - 1, top + 1):
            with pytest.raises(InvalidConfigError) as e:
                parse(name, str(out))
            assert str(e.value) == (f"Invalid value {out} for configuration {name}: "
                                    f"{out} is out of range [{lowest}, {top}]")
            assert e.value.error_code == ErrorCode.INVALID_CONFIG


def test_config_validation() -> None:
    assert validate_topic_configs({"retention.ms": 1000, "cleanup.policy": "compact,delete"}) == {
        "retention.ms": "1000",
        "cleanup.policy": "compact,delete",
    }
    assert validate_topic_configs({"unclean.leader.election.enable": True}) == {
        "unclean.leader.election.enable": "true"
    }
    for bad in (
        {"no.such": "1"},
        {"retention.ms": "soon"},
        {"compression.type": "bzip"},
        {"min.insync.replicas": "0"},
    ):
        with pytest.raises(InvalidConfigError) as e:
            validate_topic_configs(bad)
        assert e.value.error_code == ErrorCode.INVALID_CONFIG


def test_values_are_stored_as_given_and_parsed_by_type():
    assert validate_topic_configs({"preallocate": "TRUE", "cleanup.policy": " compact"}) == {
        "preallocate": "TRUE", "cleanup.policy": " compact"}
    assert parse("preallocate", "TRUE") is True
    assert parse("min.cleanable.dirty.ratio", "0.25") == 0.25
    assert parse("cleanup.policy", "delete, compact") == "delete, compact"  # LIST stays text
    assert topic_config.items(" delete, ,compact") == ["delete", "compact"]
    with pytest.raises(InvalidConfigError, match="Null value not supported for topic config: retention.ms"):
        validate_topic_configs({"retention.ms": None})


# -- the broker's defaults


def test_broker_properties_that_are_topic_defaults_take_type_and_default_from_the_table():
    types = {"BOOLEAN": bool, "STRING": str, "LIST": str, "INT": int, "LONG": int, "DOUBLE": float}
    for name in TOPIC_CONFIG_SYNONYMS_READ:
        key = TOPIC_CONFIGS[name]
        assert DEFAULTS[key.synonyms[0].name] == (types[key.type], key.default), name
    synonyms = {s.name for key in TOPIC_CONFIGS.values() for s in key.synonyms}
    read = {TOPIC_CONFIGS[name].synonyms[0].name for name in TOPIC_CONFIG_SYNONYMS_READ}
    assert synonyms - read - set(OWN_DEFAULT) == NOT_READ
    assert {name: DEFAULTS[name] for name in OWN_DEFAULT} == OWN_DEFAULT
    # Every synonym the broker reads is a broker property; the others are not.
    assert read <= set(DEFAULTS) and not NOT_READ & set(DEFAULTS)


def test_topic_defaults_of_a_broker_with_defaults_are_the_tables():
    assert BrokerConfig({}).topic_defaults() == {name: key.default_text for name, key in TOPIC_CONFIGS.items()}


def test_topic_defaults_follow_the_broker_properties_refka_reads():
    cfg = BrokerConfig({"log.retention.ms": "5", "unclean.leader.election.enable": "TRUE",
                        "log.cleaner.min.cleanable.ratio": ".25", "log.flush.interval.ms": "100",
                        "log.retention.hours": "1", "log.preallocate": "true"})
    defaults = cfg.topic_defaults()
    assert (defaults["retention.ms"], defaults["unclean.leader.election.enable"],
            defaults["min.cleanable.dirty.ratio"], defaults["flush.ms"]) == ("5", "true", "0.25", "100")
    # Not properties of refka's broker: the table's defaults stay.
    assert defaults["preallocate"] == "false"
    assert BrokerConfig({"log.retention.hours": "1"}).topic_defaults()["retention.ms"] == "604800000"
    # log.flush.interval.ms below zero is "not set".
    assert BrokerConfig({"log.flush.interval.ms": "-1"}).topic_defaults()["flush.ms"] == str(LONG_MAX)


def test_the_most_precise_synonym_wins_in_the_topic_configs_unit():
    assert defaults_from_broker({"log.retention.hours": "2"})["retention.ms"] == "7200000"
    assert defaults_from_broker({"log.retention.hours": "2", "log.retention.minutes": "3"})["retention.ms"] == "180000"
    assert defaults_from_broker({"log.retention.minutes": "3", "log.retention.ms": "7"})["retention.ms"] == "7"
    assert defaults_from_broker({"log.retention.hours": "-1"})["retention.ms"] == "-1"  # forever in any unit
    assert defaults_from_broker({"log.roll.hours": "1"})["segment.ms"] == "3600000"
    assert defaults_from_broker({"log.preallocate": True})["preallocate"] == "true"
    with pytest.raises(InvalidConfigError, match="configuration log.retention.hours"):
        defaults_from_broker({"log.retention.hours": "soon"})


# -- LogConfig


def test_log_config_fields_are_topic_configs_with_the_tables_defaults():
    for f in dataclasses.fields(LogConfig):
        name = f.name.replace("_", ".")
        assert name in TOPIC_CONFIGS, name
        assert getattr(LogConfig(), f.name) == TOPIC_CONFIGS[name].default, name
    assert LogConfig.from_props(BrokerConfig({}).topic_defaults()) == LogConfig()


def test_log_config_enforces_the_tables_minimums():
    for f in dataclasses.fields(LogConfig):
        name = f.name.replace("_", ".")
        validator = TOPIC_CONFIGS[name].validator
        if not isinstance(validator, Range) or TOPIC_CONFIGS[name].type == "DOUBLE":
            continue
        assert getattr(LogConfig.from_props({name: str(validator.min)}), f.name) == validator.min
        with pytest.raises(InvalidConfigError, match=f"configuration {name}"):
            LogConfig.from_props({name: str(validator.min - 1)})


def test_log_config_over_broker_defaults():
    base = LogConfig.from_props(BrokerConfig({"log.segment.bytes": "4096", "log.cleanup.policy": "compact"})
                                .topic_defaults())
    assert (base.segment_bytes, base.cleanup_policy, base.compacts, base.deletes) == (4096, "compact", True, False)
    cfg = LogConfig.from_props({"cleanup.policy": "delete, compact,delete", "min.insync.replicas": "0"}, base=base)
    assert (cfg.segment_bytes, cfg.cleanup_policy) == (4096, "compact,delete")  # sorted, once each
    assert LogConfig.from_broker_props({"log.retention.minutes": "2", "log.roll.hours": "1"}) == LogConfig(
        retention_ms=120_000, segment_ms=3_600_000)
