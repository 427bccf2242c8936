"""AlterConfigs (key 33), v0-v2.

Behavior:
- TOPIC resources (type 2): the request's configs *replace* the topic's
  dynamic configs (an override not named goes back to the broker default), as
  Kafka's legacy AlterConfigs does. Validated by the one table of topic
  configs (refka.common.topic_config): an unknown name or a bad value is
  INVALID_CONFIG; a null value INVALID_REQUEST; a name given twice
  INVALID_REQUEST; an unknown topic UNKNOWN_TOPIC_OR_PARTITION. Written to
  /config/topics/<t> with a /config/changes notification; every broker
  hosting the topic applies it to its logs at once (controller_side.py), and
  DescribeConfigs reports it.
- validate_only checks everything and writes nothing.
- BROKER resources (type 4): Kafka's dynamic broker configs, in its ZooKeeper
  mode's znodes. Named "", the cluster-wide defaults (/config/brokers/<default>);
  named with this broker's id, this broker's own (/config/brokers/<id>), above
  the defaults; another broker's id is INVALID_REQUEST ("Unexpected broker id",
  as Kafka: ask that broker), a name that is not a number too. The configs
  replace the entity's dynamic configs. The dynamic configs refka implements
  are the broker synonyms of topic configs (config.DYNAMIC_CONFIGS:
  log.retention.ms, log.segment.bytes, message.max.bytes, min.insync.replicas,
  ...), the defaults of every topic without an override; any other property
  (a static one, or one refka does not implement), or a value the topic config
  refuses, is INVALID_REQUEST ("Invalid config value for resource ...", as
  Kafka's ZooKeeper mode answers a ConfigException). Written with a
  /config/changes notification: every broker concerned applies it to the logs
  of its partitions at once (controller_side.py), and DescribeConfigs reports
  it with its source (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG).
- BROKER_LOGGER (8) and any other type: INVALID_REQUEST.
- A resource named twice in one request: INVALID_REQUEST for each.
- A value longer than 32767 bytes of UTF-8 (v2 can carry one) is
  INVALID_CONFIG: DescribeConfigs before v4 could not answer it, for any
  client. (Kafka stores it, and fails to serialize those answers.)
- Error messages quote names and values cut to ``MAX_MESSAGE_CHARS``, so that
  an answer quoting the longest name or value a request carries still fits
  its version's strings (the same holds in IncrementalAlterConfigs,
  DescribeConfigs and CreateTopics).

Version notes:
- v0 KIP-133. v1 same (throttle answered before throttling, KIP-219). v2 flexible (KIP-482).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from refka.common.topic_config import InvalidConfigError, validate_topic_configs
from refka.protocol import ErrorCode
from refka.protocol.messages.alter_configs import AlterConfigs

from ..config import validate_dynamic
from ..controller_side import AdminError, StoreError
from ..registry import handles

Resp = AlterConfigs.Response
RResource = Resp.AlterConfigsResourceResponse

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8

Outcome = tuple[ErrorCode, str | None]
OK: Outcome = (ErrorCode.NONE, None)

MAX_VALUE_BYTES = 0x7FFF  # a non-flexible string's int16 length (DescribeConfigs v1-v3)
MAX_MESSAGE_CHARS = 1024  # at most 4096 bytes of UTF-8: fits any version's string


def fit_message(msg: str | None) -> str | None:
    """An error message cut to MAX_MESSAGE_CHARS (see the header)."""
    if msg is None or len(msg) <= MAX_MESSAGE_CHARS:
        return msg
    return msg[:MAX_MESSAGE_CHARS - 3] + "..."


def oversized_value(configs: dict[str, str]) -> Outcome | None:
    """INVALID_CONFIG for the first value too long to describe (see the header), else None."""
    for name, value in configs.items():
        size = len(value.encode())
        if size > MAX_VALUE_BYTES:
            return (ErrorCode.INVALID_CONFIG,
                    fit_message(f"Invalid value for configuration {name}: {size} bytes, "
                                f"more than the {MAX_VALUE_BYTES} DescribeConfigs can answer."))
    return None


def check_resource(broker, resource_type: int, name: str, api: str) -> Outcome | None:
    """The answer for a resource that is not an existing topic, else None."""
    if resource_type == TOPIC:
        if broker.metadata.topic(name) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
        return None
    if resource_type == BROKER:
        if name == "":
            return None
        try:
            node = int(name)
        except ValueError:
            return ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        if node != broker.node_id:
            return ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {broker.node_id}, but received {name}"
        return None
    if resource_type == BROKER_LOGGER:
        return ErrorCode.INVALID_REQUEST, "Broker logger levels are not configurable in refka."
    return ErrorCode.INVALID_REQUEST, f"{api} is only supported for topics, but resource type is {resource_type}."


def duplicates(names: list[Any]) -> set[Any]:
    return {n for n, c in Counter(names).items() if c > 1}


async def write_topic_configs(broker, topic: str, configs: dict[str, str], validate_only: bool) -> Outcome:
    """Validate ``configs`` as the topic's whole override set; write them unless validate_only."""
    oversized = oversized_value(configs)
    if oversized is not None:
        return oversized
    try:
        validate_topic_configs(configs)
        if not validate_only:
            await broker.controller_side.set_topic_configs(topic, configs)
    except (AdminError, InvalidConfigError) as e:
        return e.error_code, str(e)
    return OK


async def write_broker_configs(broker, entity: str, configs: dict[str, str], validate_only: bool) -> Outcome:
    """Validate ``configs`` as the whole dynamic config set of ``entity`` ("" for the
    cluster-wide defaults, else this broker's id); write them unless validate_only."""
    try:
        values = validate_dynamic(configs)
    except ValueError as e:
        kind = f"ConfigResource(type=BROKER, name='{entity}')"
        return ErrorCode.INVALID_REQUEST, fit_message(f"Invalid config value for resource {kind}: {e}")
    if not validate_only:
        try:
            await broker.controller_side.set_broker_configs(entity, values)
        except StoreError as e:
            return ErrorCode.UNKNOWN_SERVER_ERROR, f"The metadata store did not take the configs: {e}"
    return OK


def _entries(res) -> dict[str, str] | Outcome:
    """A resource's configs as a dict, or the error for duplicated names or null values."""
    dup = duplicates([c.name for c in res.configs])
    if dup:
        return ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys: {', '.join(sorted(dup))}"
    nulls = [c.name for c in res.configs if c.value is None]
    if nulls:
        return ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}"
    return {c.name: c.value for c in res.configs}


async def _alter_topic(broker, res, validate_only: bool) -> Outcome:
    configs = _entries(res)
    if isinstance(configs, tuple):
        return configs
    return await write_topic_configs(broker, res.resource_name, configs, validate_only)


async def _alter_broker(broker, res, validate_only: bool) -> Outcome:
    configs = _entries(res)
    if isinstance(configs, tuple):
        return configs
    return await write_broker_configs(broker, res.resource_name, configs, validate_only)


async def alter_resources(broker, resources, api: str, alter_topic, alter_broker, validate_only: bool) -> list:
    """(resource, error code, message) per resource: the loop AlterConfigs and
    IncrementalAlterConfigs share; ``alter_topic`` and ``alter_broker`` are what differs."""
    twice = duplicates([(r.resource_type, r.resource_name) for r in resources])
    out = []
    for res in resources:
        code: ErrorCode
        msg: str | None
        if (res.resource_type, res.resource_name) in twice:
            code, msg = ErrorCode.INVALID_REQUEST, f"Resource {res.resource_name} is named more than once."
        else:
            refused = check_resource(broker, res.resource_type, res.resource_name, api)
            alter = alter_broker if res.resource_type == BROKER else alter_topic
            code, msg = refused or await alter(broker, res, validate_only)
        out.append((res, code, fit_message(msg)))
    return out


@handles(AlterConfigs.key, 0, 2)
async def handle_alter_configs(ctx, req):
    results = await alter_resources(ctx.broker, req.resources, "AlterConfigs", _alter_topic, _alter_broker,
                                    req.validate_only)
    return Resp(throttle_time_ms=0, responses=[
        RResource(error_code=code, error_message=msg, resource_type=res.resource_type,
                  resource_name=res.resource_name)
        for res, code, msg in results
    ])
