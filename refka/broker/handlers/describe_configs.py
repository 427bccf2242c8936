"""DescribeConfigs (key 32), v1-v4.

Behavior:
- TOPIC resources (type 2): every topic config of the table
  (refka.common.topic_config, or the named keys), value = the topic's override,
  else the broker's synonym (its most precise one) as the broker has it (this
  broker's dynamic config, the cluster-wide dynamic default, the static
  property), else the default; config_source says which (DYNAMIC_TOPIC_CONFIG,
  DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG,
  DEFAULT_CONFIG). The default is the broker's value of the synonym when refka's
  broker reads it (BrokerConfig.topic_defaults), else the table's. Overrides are
  read from the metadata store (/config/topics/<t>). Unknown topic:
  UNKNOWN_TOPIC_OR_PARTITION.
- BROKER resources (type 4): named with this broker's id, every property of
  this broker, with its source as above; read_only unless it is a dynamic
  config (config.DYNAMIC_CONFIGS). Named "", the cluster-wide dynamic defaults
  only (Kafka's answer for the default entity). Another broker's id is
  INVALID_REQUEST (ask that broker, as with Kafka). BROKER_LOGGER (8) is
  INVALID_REQUEST: log levels are not configurable here.
- include_synonyms (v1+) lists the override and each layer of the broker
  property, in precedence order; include_documentation (v3+) adds the doc line.
- Error messages quote the resource name cut short (alter_configs.py's
  fit_message): v1-v3 could not carry the longest name v4 can.

Version notes:
- v1 synonyms. v2 same as v1. v3 config_type and documentation (KIP-569). v4 flexible.
"""

from __future__ import annotations

from dataclasses import dataclass

from refka.common.topic_config import TOPIC_CONFIGS
from refka.protocol import ErrorCode
from refka.protocol.messages.describe_configs import DescribeConfigs

from ..config import (
    DEFAULT_CONFIG,
    DEFAULTS,
    DYNAMIC_CONFIGS,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
)
from ..registry import handles
from .alter_configs import fit_message

Resp = DescribeConfigs.Response
RResult = Resp.DescribeConfigsResult
REntry = RResult.DescribeConfigsResourceResult
RSynonym = REntry.DescribeConfigsSynonym

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
DYNAMIC_TOPIC_CONFIG = 1  # ConfigSource (the broker's are config.py's)
CONFIG_TYPES = {"UNKNOWN": 0, "BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6,
                "LIST": 7, "CLASS": 8, "PASSWORD": 9}
_BROKER_TYPES = {int: "LONG", bool: "BOOLEAN", str: "STRING", float: "DOUBLE"}


@dataclass
class Entry:
    name: str
    value: str | None
    source: int
    read_only: bool
    type: str
    doc: str
    synonyms: list[tuple[str, str | None, int]]


def topic_config_entries(broker, overrides: dict[str, str]) -> list[Entry]:
    """The effective configs of a topic with these overrides."""
    defaults = broker.config.topic_defaults()
    out = []
    for name, key in sorted(TOPIC_CONFIGS.items()):
        synonyms: list[tuple[str, str | None, int]] = []
        if name in overrides:
            synonyms.append((name, overrides[name], DYNAMIC_TOPIC_CONFIG))
        broker_name = key.synonyms[0].name if key.synonyms else name
        if broker_name in DYNAMIC_CONFIGS:
            layers = broker.config.sources(broker_name)[:-1]  # the default: as below
            synonyms.extend((broker_name, text, source) for source, _value, text in layers)
        elif key.synonyms and broker_name in broker.config.raw:
            synonyms.append((broker_name, broker.config.raw[broker_name], STATIC_BROKER_CONFIG))
        synonyms.append((broker_name, defaults[name], DEFAULT_CONFIG))
        _n, value, source = synonyms[0]
        out.append(Entry(name, value, source, False, key.type, key.doc, synonyms))
    return out


def broker_config_entries(broker, per_broker: bool) -> list[Entry]:
    """This broker's properties (``per_broker``), or the cluster-wide dynamic defaults."""
    out = []
    for name, (kind, _default) in sorted(DEFAULTS.items()):
        synonyms: list[tuple[str, str | None, int]] = [
            (name, text, source) for source, _value, text in broker.config.sources(name)
            if per_broker or source == DYNAMIC_DEFAULT_BROKER_CONFIG]
        if not synonyms:
            continue
        _n, value, source = synonyms[0]
        out.append(Entry(name, value, source, name not in DYNAMIC_CONFIGS, _BROKER_TYPES.get(kind, "STRING"), "",
                         synonyms))
    return out


def _to_result(entries: list[Entry], keys, req, v: int) -> list:
    wanted = set(keys) if keys is not None else None
    out = []
    for e in entries:
        if wanted is not None and e.name not in wanted:
            continue
        out.append(REntry(
            name=e.name, value=e.value, read_only=e.read_only, config_source=e.source, is_sensitive=False,
            synonyms=[RSynonym(name=n, value=val, source=s) for n, val, s in e.synonyms] if req.include_synonyms else [],
            config_type=CONFIG_TYPES.get(e.type, 0),
            documentation=e.doc if req.include_documentation else None,
        ))
    return out


@handles(DescribeConfigs.key, 1, 4)
async def handle_describe_configs(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    results = []
    for res in req.resources:
        r = RResult(error_code=ErrorCode.NONE, error_message=None, resource_type=res.resource_type,
                    resource_name=res.resource_name, configs=[])
        results.append(r)
        if res.resource_type == TOPIC:
            if broker.metadata.topic(res.resource_name) is None:
                r.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                r.error_message = fit_message(f"Topic {res.resource_name} does not exist.")
                continue
            overrides = await broker.controller_side.topic_configs(res.resource_name)
            r.configs = _to_result(topic_config_entries(broker, overrides), res.configuration_keys, req, v)
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(broker.node_id)):
                r.error_code = ErrorCode.INVALID_REQUEST
                r.error_message = fit_message(f"Broker {res.resource_name} must be asked for its own configs.")
                continue
            r.configs = _to_result(broker_config_entries(broker, res.resource_name != ""), res.configuration_keys,
                                   req, v)
        else:
            r.error_code = ErrorCode.INVALID_REQUEST
            r.error_message = f"Resource type {res.resource_type} is not served."
    return Resp(results=results)
