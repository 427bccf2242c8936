"""DescribeConfigs as a client reads it, from the handler in-process: every topic config's
value, source, type and synonyms, for a broker with defaults and one with properties set,
and the broker properties that are topic configs' defaults.

These answers are the contract the topic-config table (refka.common.topic_config) must
keep: a client that compares them with Kafka's sees the same names, types and defaults.
"""

from __future__ import annotations

from types import SimpleNamespace

from refka.broker.config import DYNAMIC_CONFIGS, BrokerConfig
from refka.broker.handlers.describe_configs import handle_describe_configs
from refka.protocol.messages.describe_configs import DescribeConfigs

TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
TYPE_NAMES = {1: "BOOLEAN", 2: "STRING", 3: "INT", 5: "LONG", 6: "DOUBLE", 7: "LIST"}
LONG_MAX = str(2**63 - 1)

# (topic config, type, the broker property named as its default, default value)
TOPIC_CONFIGS = [
    ("cleanup.policy", "LIST", "log.cleanup.policy", "delete"),
    ("compression.type", "STRING", "compression.type", "producer"),
    ("delete.retention.ms", "LONG", "log.cleaner.delete.retention.ms", "86400000"),
    ("enable.ordered.delivery", "BOOLEAN", "enable.ordered.delivery", "true"),
    ("file.delete.delay.ms", "LONG", "log.segment.delete.delay.ms", "60000"),
    ("flush.messages", "LONG", "log.flush.interval.messages", LONG_MAX),
    ("flush.ms", "LONG", "log.flush.interval.ms", LONG_MAX),
    ("follower.replication.throttled.replicas", "LIST", "follower.replication.throttled.replicas", ""),
    ("index.interval.bytes", "INT", "log.index.interval.bytes", "4096"),
    ("leader.replication.throttled.replicas", "LIST", "leader.replication.throttled.replicas", ""),
    ("local.retention.bytes", "LONG", "log.local.retention.bytes", "-2"),
    ("local.retention.ms", "LONG", "log.local.retention.ms", "-2"),
    ("max.compaction.lag.ms", "LONG", "log.cleaner.max.compaction.lag.ms", LONG_MAX),
    ("max.message.bytes", "INT", "message.max.bytes", "1048588"),
    ("message.downconversion.enable", "BOOLEAN", "message.downconversion.enable", "true"),
    ("message.format.version", "STRING", "log.message.format.version", "3.0-IV1"),
    ("message.timestamp.after.max.ms", "LONG", "log.message.timestamp.after.max.ms", LONG_MAX),
    ("message.timestamp.before.max.ms", "LONG", "log.message.timestamp.before.max.ms", LONG_MAX),
    ("message.timestamp.difference.max.ms", "LONG", "log.message.timestamp.difference.max.ms", LONG_MAX),
    ("message.timestamp.type", "STRING", "log.message.timestamp.type", "CreateTime"),
    ("min.cleanable.dirty.ratio", "DOUBLE", "log.cleaner.min.cleanable.ratio", "0.5"),
    ("min.compaction.lag.ms", "LONG", "log.cleaner.min.compaction.lag.ms", "0"),
    ("min.insync.replicas", "INT", "min.insync.replicas", "1"),
    ("preallocate", "BOOLEAN", "log.preallocate", "false"),
    ("remote.storage.enable", "BOOLEAN", "remote.storage.enable", "false"),
    ("retention.bytes", "LONG", "log.retention.bytes", "-1"),
    ("retention.ms", "LONG", "log.retention.ms", "604800000"),
    ("segment.bytes", "INT", "log.segment.bytes", "1073741824"),
    ("segment.index.bytes", "INT", "log.index.size.max.bytes", "10485760"),
    ("segment.jitter.ms", "LONG", "log.roll.jitter.ms", "0"),
    ("segment.ms", "LONG", "log.roll.ms", "604800000"),
    ("unclean.leader.election.enable", "BOOLEAN", "unclean.leader.election.enable", "false"),
]

# The broker properties refka reads that are topic configs' defaults: (value, type) as a
# BROKER resource describes them (refka's broker property types: int is LONG).
BROKER_SYNONYMS = {
    "compression.type": ("producer", "STRING"),
    "log.cleaner.delete.retention.ms": ("86400000", "LONG"),
    "log.cleaner.max.compaction.lag.ms": (LONG_MAX, "LONG"),
    "log.cleaner.min.cleanable.ratio": ("0.5", "DOUBLE"),
    "log.cleaner.min.compaction.lag.ms": ("0", "LONG"),
    "log.cleanup.policy": ("delete", "STRING"),
    "log.flush.interval.messages": (LONG_MAX, "LONG"),
    "log.flush.interval.ms": ("-1", "LONG"),  # -1: not set, flush.ms keeps its own default
    "log.index.interval.bytes": ("4096", "LONG"),
    "log.index.size.max.bytes": ("10485760", "LONG"),
    "log.message.timestamp.type": ("CreateTime", "STRING"),
    "log.retention.bytes": ("-1", "LONG"),
    "log.retention.ms": ("604800000", "LONG"),
    "log.roll.ms": ("604800000", "LONG"),
    "log.segment.bytes": ("1073741824", "LONG"),
    "message.max.bytes": ("1048588", "LONG"),
    "min.insync.replicas": ("1", "LONG"),
    "unclean.leader.election.enable": ("false", "BOOLEAN"),
}


def broker(props: dict[str, str], overrides: dict[str, str] | None = None) -> SimpleNamespace:
    async def topic_configs(name: str) -> dict[str, str]:
        return dict(overrides or {})

    return SimpleNamespace(
        config=BrokerConfig(props),
        node_id=0,
        metadata=SimpleNamespace(topic=lambda name: object() if name == "t" else None),
        controller_side=SimpleNamespace(topic_configs=topic_configs),
    )


async def describe(b, resource_type: int = TOPIC, name: str = "t", keys=None, *, version: int = 4,
                   synonyms: bool = True, documentation: bool = True):
    R = DescribeConfigs.Request
    req = R(resources=[R.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                                 configuration_keys=keys)],
            include_synonyms=synonyms, include_documentation=documentation)
    resp = await handle_describe_configs(SimpleNamespace(broker=b, api_version=version), req)
    (result,) = resp.results
    return result


def synonyms_of(entry) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


async def test_every_topic_config_with_kafkas_type_broker_synonym_and_default():
    result = await describe(broker({}))
    assert result.error_code == 0
    got = []
    for e in result.configs:
        assert (e.config_source, e.read_only, e.is_sensitive) == (DEFAULT_CONFIG, False, False), e.name
        (synonym,) = synonyms_of(e)
        assert synonym[1:] == (e.value, DEFAULT_CONFIG)
        assert e.documentation and "\n" not in e.documentation
        got.append((e.name, TYPE_NAMES[e.config_type], synonym[0], e.value))
    assert got == TOPIC_CONFIGS


async def test_override_then_broker_property_then_default_in_precedence_order():
    props = {
        "log.retention.ms": "5",
        "message.max.bytes": " 2000 ",
        "unclean.leader.election.enable": "TRUE",
        "log.flush.interval.ms": "-1",
        "log.cleaner.min.cleanable.ratio": "0.50",
        # Kafka's synonyms that refka's broker does not read: reported as set, not applied.
        "log.preallocate": "true",
        "log.segment.delete.delay.ms": "7",
        # A less precise synonym of retention.ms: not a broker property of refka's.
        "log.retention.hours": "3",
    }
    overrides = {"retention.ms": "100", "cleanup.policy": "compact"}
    entries = {e.name: e for e in (await describe(broker(props, overrides))).configs}

    def seen(name):
        e = entries[name]
        return e.value, e.config_source, synonyms_of(e)

    assert seen("retention.ms") == ("100", DYNAMIC_TOPIC_CONFIG, [
        ("retention.ms", "100", DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", "5", STATIC_BROKER_CONFIG),
        ("log.retention.ms", "5", DEFAULT_CONFIG),  # the broker's value, as refka answers today
    ])
    assert seen("cleanup.policy") == ("compact", DYNAMIC_TOPIC_CONFIG, [
        ("cleanup.policy", "compact", DYNAMIC_TOPIC_CONFIG),
        ("log.cleanup.policy", "delete", DEFAULT_CONFIG),
    ])
    # The property as written; the default synonym as parsed.
    assert seen("max.message.bytes") == (" 2000 ", STATIC_BROKER_CONFIG, [
        ("message.max.bytes", " 2000 ", STATIC_BROKER_CONFIG),
        ("message.max.bytes", "2000", DEFAULT_CONFIG),
    ])
    assert seen("unclean.leader.election.enable") == ("TRUE", STATIC_BROKER_CONFIG, [
        ("unclean.leader.election.enable", "TRUE", STATIC_BROKER_CONFIG),
        ("unclean.leader.election.enable", "true", DEFAULT_CONFIG),
    ])
    assert seen("min.cleanable.dirty.ratio") == ("0.50", STATIC_BROKER_CONFIG, [
        ("log.cleaner.min.cleanable.ratio", "0.50", STATIC_BROKER_CONFIG),
        ("log.cleaner.min.cleanable.ratio", "0.5", DEFAULT_CONFIG),
    ])
    # log.flush.interval.ms=-1 is "not set": flush.ms's default stays Long.MAX_VALUE.
    assert seen("flush.ms") == ("-1", STATIC_BROKER_CONFIG, [
        ("log.flush.interval.ms", "-1", STATIC_BROKER_CONFIG),
        ("log.flush.interval.ms", LONG_MAX, DEFAULT_CONFIG),
    ])
    assert seen("preallocate") == ("true", STATIC_BROKER_CONFIG, [
        ("log.preallocate", "true", STATIC_BROKER_CONFIG),
        ("log.preallocate", "false", DEFAULT_CONFIG),
    ])
    assert seen("file.delete.delay.ms") == ("7", STATIC_BROKER_CONFIG, [
        ("log.segment.delete.delay.ms", "7", STATIC_BROKER_CONFIG),
        ("log.segment.delete.delay.ms", "60000", DEFAULT_CONFIG),
    ])
    # Untouched configs are as on a broker with defaults.
    assert seen("segment.bytes") == ("1073741824", DEFAULT_CONFIG,
                                     [("log.segment.bytes", "1073741824", DEFAULT_CONFIG)])


async def test_named_keys_versions_and_what_is_left_out():
    b = broker({}, {"retention.ms": "100"})
    result = await describe(b, keys=["retention.ms", "preallocate", "no.such"], synonyms=False,
                            documentation=False)
    assert [(e.name, e.value, e.synonyms, e.documentation) for e in result.configs] == [
        ("preallocate", "false", [], None),
        ("retention.ms", "100", [], None),
    ]
    for version in (1, 2, 3, 4):
        result = await describe(b, keys=["retention.ms"], version=version)
        assert [(e.name, e.value, e.config_source) for e in result.configs] == [
            ("retention.ms", "100", DYNAMIC_TOPIC_CONFIG)]
    missing = await describe(b, name="gone")
    assert (missing.error_code, missing.configs) == (3, [])  # UNKNOWN_TOPIC_OR_PARTITION


async def test_broker_properties_that_are_topic_config_defaults():
    result = await describe(broker({"log.retention.ms": "5"}), BROKER, "0")
    assert result.error_code == 0
    entries = {e.name: e for e in result.configs}
    got = {name: (entries[name].value, TYPE_NAMES[entries[name].config_type]) for name in BROKER_SYNONYMS}
    assert got == {**BROKER_SYNONYMS, "log.retention.ms": ("5", "LONG")}
    # the dynamic broker configs refka implements (the topic defaults) are not read-only
    assert {e.name for e in result.configs if not e.read_only} == set(DYNAMIC_CONFIGS)
    assert not entries["log.retention.ms"].read_only and entries["num.partitions"].read_only
    assert synonyms_of(entries["log.retention.ms"]) == [
        ("log.retention.ms", "5", STATIC_BROKER_CONFIG),
        ("log.retention.ms", "604800000", DEFAULT_CONFIG),
    ]
    # Kafka's synonyms refka's broker does not read are not broker properties of refka's.
    assert not {"log.preallocate", "log.segment.delete.delay.ms", "log.retention.hours"} & set(entries)
