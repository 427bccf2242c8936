"""AlterConfigs and IncrementalAlterConfigs answers from the handlers in-process
(validate_only: nothing is written): the error code and message a client sees for
each kind of bad topic config, as the topic-config table words them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from refka.broker.config import BrokerConfig
from refka.broker.handlers.alter_configs import handle_alter_configs
from refka.broker.handlers.incremental_alter_configs import handle_incremental_alter_configs
from refka.protocol import ErrorCode
from refka.protocol.messages.alter_configs import AlterConfigs
from refka.protocol.messages.incremental_alter_configs import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    IncrementalAlterConfigs,
)

TOPIC = 2
LONG_MAX = 2**63 - 1


def broker(overrides: dict[str, str] | None = None) -> SimpleNamespace:
    async def topic_configs(name: str) -> dict[str, str]:
        return dict(overrides or {})

    return SimpleNamespace(
        config=BrokerConfig({}),
        metadata=SimpleNamespace(topic=lambda name: object()),
        controller_side=SimpleNamespace(topic_configs=topic_configs),
    )


async def alter(configs: dict[str, str]) -> tuple[int, str | None]:
    R = AlterConfigs.Request
    req = R(resources=[R.AlterConfigsResource(resource_type=TOPIC, resource_name="t", configs=[
        R.AlterConfigsResource.AlterableConfig(name=k, value=v) for k, v in configs.items()])],
        validate_only=True)
    resp = await handle_alter_configs(SimpleNamespace(broker=broker(), api_version=2), req)
    (r,) = resp.responses
    return r.error_code, r.error_message


async def incremental(ops, overrides: dict[str, str] | None = None) -> tuple[int, str | None]:
    R = IncrementalAlterConfigs.Request
    req = R(resources=[R.AlterConfigsResource(resource_type=TOPIC, resource_name="t", configs=[
        R.AlterConfigsResource.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])],
        validate_only=True)
    resp = await handle_incremental_alter_configs(SimpleNamespace(broker=broker(overrides), api_version=1), req)
    (r,) = resp.responses
    return r.error_code, r.error_message


@pytest.mark.parametrize("configs, message", [
    ({"no.such": "1"}, "Unknown topic config name: no.such"),
    ({"retention.ms": "soon"}, "Invalid value soon for configuration retention.ms: 'soon' is not a number"),
    ({"retention.ms": "-7"},
     f"Invalid value -7 for configuration retention.ms: -7 is out of range [-1, {LONG_MAX}]"),
    ({"segment.bytes": "13"},
     "Invalid value 13 for configuration segment.bytes: 13 is out of range [14, 2147483647]"),
    ({"segment.bytes": "2147483648"},
     "Invalid value 2147483648 for configuration segment.bytes: 2147483648 is out of range [14, 2147483647]"),
    ({"min.insync.replicas": "0"},
     "Invalid value 0 for configuration min.insync.replicas: 0 is out of range [1, 2147483647]"),
    ({"compression.type": "bzip"},
     "Invalid value bzip for configuration compression.type: "
     "'bzip' is not one of uncompressed, zstd, lz4, snappy, gzip, producer"),
    ({"message.timestamp.type": "Whenever"},
     "Invalid value Whenever for configuration message.timestamp.type: "
     "'Whenever' is not one of CreateTime, LogAppendTime"),
    ({"cleanup.policy": "forever"},
     "Invalid value forever for configuration cleanup.policy: 'forever' is not a list of delete, compact"),
    ({"cleanup.policy": ""},
     "Invalid value  for configuration cleanup.policy: '' is not a list of delete, compact"),
    ({"preallocate": "yes"}, "Invalid value yes for configuration preallocate: 'yes' is not true or false"),
    ({"min.cleanable.dirty.ratio": "1.5"},
     "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: 1.5 is not in [0, 1]"),
    ({"min.cleanable.dirty.ratio": "half"},
     "Invalid value half for configuration min.cleanable.dirty.ratio: 'half' is not a number"),
    # The first bad entry is the one named.
    ({"retention.ms": "1", "segment.ms": "0", "segment.bytes": "1"},
     f"Invalid value 0 for configuration segment.ms: 0 is out of range [1, {LONG_MAX}]"),
])
async def test_a_bad_topic_config_is_invalid_config_with_its_reason(configs, message):
    assert await alter(configs) == (ErrorCode.INVALID_CONFIG, message)


@pytest.mark.parametrize("configs", [
    {"retention.ms": "-1", "cleanup.policy": "compact,delete", "preallocate": "TRUE"},
    {"cleanup.policy": " compact", "min.cleanable.dirty.ratio": "0", "local.retention.ms": "-2"},
    {"message.format.version": "anything", "leader.replication.throttled.replicas": ""},
    {"max.compaction.lag.ms": str(LONG_MAX), "segment.bytes": "14", "index.interval.bytes": "0"},
])
async def test_good_topic_configs_pass(configs):
    assert await alter(configs) == (ErrorCode.NONE, None)


async def test_incremental_errors_name_the_operation_or_config():
    assert await incremental([("retention.ms", OP_APPEND, "1")]) == (
        ErrorCode.INVALID_CONFIG, "Config value append is not allowed for config key: retention.ms")
    assert await incremental([("segment.ms", OP_SUBTRACT, "1")]) == (
        ErrorCode.INVALID_CONFIG, "Config value subtract is not allowed for config key: segment.ms")
    assert await incremental([("no.such", OP_APPEND, "1")]) == (
        ErrorCode.INVALID_CONFIG, "Unknown topic config name: no.such")
    assert await incremental([("cleanup.policy", OP_APPEND, "forever")]) == (
        ErrorCode.INVALID_CONFIG,
        "Invalid value delete,forever for configuration cleanup.policy: "
        "'delete,forever' is not a list of delete, compact")
    # SUBTRACT of the broker's only item leaves an empty list: refused like any empty cleanup.policy.
    assert (await incremental([("cleanup.policy", OP_SUBTRACT, "delete")]))[0] == ErrorCode.INVALID_CONFIG
    assert await incremental([("retention.ms", OP_SET, "soon")]) == (
        ErrorCode.INVALID_CONFIG, "Invalid value soon for configuration retention.ms: 'soon' is not a number")
    # DELETE of an unknown name is a no-op; the other overrides are validated as they are.
    assert await incremental([("no.such", OP_DELETE, None)], {"retention.ms": "5"}) == (ErrorCode.NONE, None)
    assert await incremental([("follower.replication.throttled.replicas", OP_APPEND, "0:1")]) == (
        ErrorCode.NONE, None)


async def test_a_value_describe_configs_could_not_answer_is_invalid_config():
    code, message = await alter({"message.format.version": "v" * 32_768})
    assert code == ErrorCode.INVALID_CONFIG
    assert message == ("Invalid value for configuration message.format.version: 32768 bytes, "
                       "more than the 32767 DescribeConfigs can answer.")
    assert await alter({"message.format.version": "v" * 32_767}) == (ErrorCode.NONE, None)


async def test_messages_quoting_a_long_name_or_value_are_cut_short():
    code, message = await alter({"retention.ms": "9" * 20 + "x" * 30_000})
    assert code == ErrorCode.INVALID_CONFIG
    assert len(message) == 1024 and message.startswith("Invalid value 99999") and message.endswith("...")
