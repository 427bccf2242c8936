"""CreateTopics (key 19), v2-v7.

Behavior:
- Writes the topic's znodes through the controller package's admin path (as
  Kafka's ZooKeeper brokers do); the controller assigns leaders and tells the
  replicas. The answer waits, up to timeout_ms, until this broker's metadata
  shows the topic with a leader for every partition; past that it says
  REQUEST_TIMED_OUT (the topic will still be created).
- num_partitions / replication_factor -1 take num.partitions /
  default.replication.factor (v4+, KIP-464). Manual assignments are honoured.
- Errors per topic: TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION (bad name),
  INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR (more than the live brokers),
  INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG (unknown name or bad value),
  INVALID_REQUEST (a topic named twice in one request).
- validate_only checks everything and creates nothing.
- A config value longer than 32767 bytes is INVALID_CONFIG and error
  messages are cut short, as in AlterConfigs (alter_configs.py).

Version notes:
- v2-v3 as v1 (throttle, v3 quota). v4 defaults via -1 (KIP-464). v5 flexible;
  the answer lists the topic's configs, partitions and replication factor
  (KIP-525). v6 may answer THROTTLING_QUOTA_EXCEEDED (never here). v7 topic_id.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from refka.common.topic_config import InvalidConfigError
from refka.protocol import ErrorCode
from refka.protocol.messages.create_topics import CreateTopics

from ..controller_side import AdminError, TopicSpec
from ..registry import handles
from .alter_configs import fit_message, oversized_value
from .describe_configs import topic_config_entries

Resp = CreateTopics.Response
RTopic = Resp.CreatableTopicResult
RConfig = RTopic.CreatableTopicConfigs


@handles(CreateTopics.key, 2, 7)
async def handle_create_topics(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    named = Counter(t.name for t in req.topics)
    results: list = []
    specs: list[TopicSpec] = []
    asked: list[tuple] = []  # (result, request topic, its configs) of each spec
    for t in req.topics:
        # error_message null unless there is an error, as Kafka answers (tests/oracle)
        r = RTopic(name=t.name, error_code=ErrorCode.NONE, error_message=None, num_partitions=-1,
                   replication_factor=-1, configs=[])
        results.append(r)
        if named[t.name] > 1:
            r.error_code = ErrorCode.INVALID_REQUEST
            r.error_message = fit_message(f"Topic {t.name} is named more than once in the request.")
            continue
        configs = {c.name: c.value for c in t.configs}
        oversized = oversized_value({k: val for k, val in configs.items() if val is not None})
        if oversized is not None:
            r.error_code, r.error_message = oversized
            continue
        num_partitions = t.num_partitions if t.num_partitions != -1 else broker.config["num.partitions"]
        rf = t.replication_factor if t.replication_factor != -1 else broker.config["default.replication.factor"]
        assignment = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
        if assignment and (t.num_partitions != -1 or t.replication_factor != -1):
            r.error_code = ErrorCode.INVALID_REQUEST
            r.error_message = "Both a manual assignment and num_partitions/replication_factor were given."
            continue
        specs.append(TopicSpec(t.name, num_partitions, rf, assignment, configs))
        asked.append((r, configs))
    # One call for the request's topics: against ZooKeeper they are read and written together.
    done = await broker.controller_side.create_topics(specs, validate_only=req.validate_only) if specs else []
    created: list[str] = []
    for spec, (r, configs), topic in zip(specs, asked, done, strict=True):
        if isinstance(topic, (AdminError, InvalidConfigError)):
            r.error_code, r.error_message = topic.error_code, fit_message(str(topic))
            continue
        r.num_partitions = len(topic.partitions)
        r.replication_factor = len(next(iter(topic.partitions.values())))
        r.topic_id = topic.topic_id
        if v >= 5:
            r.configs = [RConfig(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                                 is_sensitive=False)
                         for e in topic_config_entries(broker, configs)]
        if not req.validate_only:
            created.append(spec.name)
    if created and req.timeout_ms > 0:
        try:
            await asyncio.wait_for(broker.wait_for_topics(created), req.timeout_ms / 1000)
        except TimeoutError:
            for r in results:
                if r.name in created and not broker.topic_ready(r.name):
                    r.error_code = ErrorCode.REQUEST_TIMED_OUT
                    r.error_message = "The topic is being created; its metadata did not arrive in time."
    return Resp(topics=results)
