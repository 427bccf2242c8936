"""IncrementalAlterConfigs (key 44), v0-v1.

Behavior:
- TOPIC resources (type 2): each entry changes one dynamic config of the
  topic, the others stay (KIP-339). SET sets it; DELETE removes the override
  (back to the broker default; an unknown name is a no-op); APPEND and
  SUBTRACT add or remove comma-separated items of a LIST config
  (cleanup.policy, *.replication.throttled.replicas), starting from the
  override or else the broker's value, an item appended once only, as Kafka
  does; on another type they are INVALID_CONFIG. The result is validated as a
  whole by refka.common.topic_config (INVALID_CONFIG: unknown name, bad
  value) and written like AlterConfigs (applied by every broker hosting the
  topic at once). A null value for SET/APPEND/SUBTRACT, a name given twice or
  an unknown operation: INVALID_REQUEST. Unknown topic:
  UNKNOWN_TOPIC_OR_PARTITION.
- validate_only checks everything and writes nothing.
- BROKER (4) resources: the same operations on the entity's dynamic broker
  configs (alter_configs.py: "" the cluster-wide defaults, this broker's id its
  own), starting from those stored; APPEND and SUBTRACT on the LIST one
  (log.cleanup.policy) start from the broker's value in force. Validated and
  written as AlterConfigs writes them. BROKER_LOGGER (8): INVALID_REQUEST.
- The read-modify-write of a topic's configs is not atomic: two concurrent
  requests on one topic may lose one's change (as in Kafka's ZooKeeper mode).

Version notes:
- v0 KIP-339. v1 flexible (KIP-482).
"""

from __future__ import annotations

from collections.abc import Callable

from refka.common.topic_config import TOPIC_CONFIGS, items, to_text
from refka.protocol import ErrorCode
from refka.protocol.messages.incremental_alter_configs import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    IncrementalAlterConfigs,
)

from ..config import DYNAMIC_CONFIGS
from ..registry import handles
from .alter_configs import Outcome, alter_resources, duplicates, write_broker_configs, write_topic_configs

Resp = IncrementalAlterConfigs.Response
RResource = Resp.AlterConfigsResourceResponse

_OP_NAMES = {OP_SET: "set", OP_DELETE: "delete", OP_APPEND: "append", OP_SUBTRACT: "subtract"}


def _topic_config_type(name: str) -> str | None:
    key = TOPIC_CONFIGS.get(name)
    return None if key is None else key.type


def apply_ops(configs: dict[str, str], ops, broker_defaults: dict[str, str],
              config_type: Callable[[str], str | None] = _topic_config_type,
              what: str = "topic") -> Outcome | dict[str, str]:
    """The overrides after ``ops`` (name, config_operation, value), or the error.
    ``config_type``: a config's type name (LIST, ...), None for a name unknown (to ``what``:
    "topic");
    ``broker_defaults``: the values APPEND and SUBTRACT start from without an override."""
    dup = duplicates([op.name for op in ops])
    if dup:
        return ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys: {', '.join(sorted(dup))}"
    out = dict(configs)
    for op in ops:
        name, kind, value = op.name, op.config_operation, op.value
        if kind not in _OP_NAMES:
            return ErrorCode.INVALID_REQUEST, f"Unknown config operation {kind} for {name}."
        if kind == OP_DELETE:
            out.pop(name, None)
            continue
        if value is None:
            return ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}"
        if kind == OP_SET:
            out[name] = value
            continue
        ctype = config_type(name)
        if ctype is None:
            return ErrorCode.INVALID_CONFIG, f"Unknown {what} config name: {name}"
        if ctype != "LIST":
            return ErrorCode.INVALID_CONFIG, f"Config value {_OP_NAMES[kind]} is not allowed for config key: {name}"
        old = items(out[name] if name in out else broker_defaults[name])
        if kind == OP_APPEND:
            new = old + [v for v in dict.fromkeys(items(value)) if v not in old]
        else:
            drop = set(items(value))
            new = [v for v in old if v not in drop]
        out[name] = ",".join(new)
    return out


async def _alter_topic(broker, res, validate_only: bool) -> Outcome:
    current = await broker.controller_side.topic_configs(res.resource_name)
    changed = apply_ops(current, res.configs, broker.config.topic_defaults())
    if isinstance(changed, tuple):
        return changed
    return await write_topic_configs(broker, res.resource_name, changed, validate_only)


def _broker_config_type(name: str) -> str | None:
    topic_name = DYNAMIC_CONFIGS.get(name)
    return None if topic_name is None else TOPIC_CONFIGS[topic_name].type


async def _alter_broker(broker, res, validate_only: bool) -> Outcome:
    current = await broker.controller_side.broker_configs(res.resource_name)
    in_force = {name: to_text(broker.config[name]) for name in DYNAMIC_CONFIGS}
    changed = apply_ops(current, res.configs, in_force, _broker_config_type, "dynamic broker")
    if isinstance(changed, tuple):
        return changed
    return await write_broker_configs(broker, res.resource_name, changed, validate_only)


@handles(IncrementalAlterConfigs.key, 0, 1)
async def handle_incremental_alter_configs(ctx, req):
    results = await alter_resources(ctx.broker, req.resources, "IncrementalAlterConfigs", _alter_topic,
                                    _alter_broker, req.validate_only)
    return Resp(throttle_time_ms=0, responses=[
        RResource(error_code=code, error_message=msg, resource_type=res.resource_type,
                  resource_name=res.resource_name)
        for res, code, msg in results
    ])
