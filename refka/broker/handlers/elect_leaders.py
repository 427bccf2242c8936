"""ElectLeaders (key 43), v0-v2.

Behavior:
- Served by the active controller, as Kafka's ZooKeeper-mode brokers do
  (KafkaController.electLeaders); clients send it to the controller named in
  Metadata (librdkafka and the Java admin client both do). Any other broker
  answers NOT_CONTROLLER for every partition (and at the top, v1+, when the
  request named no partitions), which the clients retry on the controller.
- election_type 0 (preferred): the first assigned replica takes over when it
  is live and in the ISR. Errors per partition: ELECTION_NOT_NEEDED (it leads
  already), PREFERRED_LEADER_NOT_AVAILABLE (not live or not in the ISR),
  UNKNOWN_TOPIC_OR_PARTITION.
- election_type 1 (unclean, KIP-460): only a partition without a live leader
  is elected, by the offline election with unclean allowed (the first live
  assigned replica, in the ISR or not). ELECTION_NOT_NEEDED when its leader
  is live, ELIGIBLE_LEADERS_NOT_AVAILABLE when no assigned replica is.
  Another type is INVALID_REQUEST.
- topic_partitions null means every partition; then, as Kafka does, the
  partitions that needed no election are left out of the answer.
- The answer waits, up to timeout_ms, until this broker's metadata shows the
  new leader epochs (the controller tells the brokers asynchronously).

Version notes:
- v0 preferred only (KIP-183). v1 election_type and top-level error_code
  (KIP-460). v2 flexible (KIP-482).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from refka.protocol import ErrorCode
from refka.protocol.messages.elect_leaders import ELECTION_PREFERRED, ELECTION_UNCLEAN, ElectLeaders

from ..registry import handles

Resp = ElectLeaders.Response
RTopic = Resp.ReplicaElectionResult
RPart = RTopic.PartitionResult

_MESSAGES = {
    ErrorCode.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred replica is not live or not in the ISR.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "No assigned replica of the partition is live.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
}


def _response(results: dict[tuple[str, int], ErrorCode], top: ErrorCode = ErrorCode.NONE) -> object:
    by_topic: dict[str, list] = defaultdict(list)
    for (topic, p), code in sorted(results.items()):
        by_topic[topic].append(RPart(partition_id=p, error_code=code, error_message=_MESSAGES.get(code)))
    return Resp(throttle_time_ms=0, error_code=top,
                replica_election_results=[RTopic(topic=t, partition_result=ps) for t, ps in by_topic.items()])


async def _await_epochs(broker, epochs: dict[tuple[str, int], int]) -> None:
    def shown() -> bool:
        for (t, p), e in epochs.items():
            m = broker.metadata.partition(t, p)
            if m is None or m.leader_epoch < e:
                return False
        return True

    while not shown():
        await broker.metadata_changed()


@handles(ElectLeaders.key, 0, 2)
async def handle_elect_leaders(ctx, req):
    broker = ctx.broker
    election_type = req.election_type if ctx.api_version >= 1 else ELECTION_PREFERRED
    every = req.topic_partitions is None
    tps = None if every else [(t.topic, p) for t in req.topic_partitions for p in t.partitions]
    if election_type not in (ELECTION_PREFERRED, ELECTION_UNCLEAN):
        return _response({tp: ErrorCode.INVALID_REQUEST for tp in tps or []}, ErrorCode.INVALID_REQUEST)
    side = broker.controller_side
    controller = side.active_controller if side is not None else None
    if controller is None:
        return _response({tp: ErrorCode.NOT_CONTROLLER for tp in tps or []},
                         ErrorCode.NOT_CONTROLLER if every else ErrorCode.NONE)
    if election_type == ELECTION_PREFERRED:
        results = await controller.elect_preferred_leaders(tps)
    else:
        results = await controller.elect_unclean_leaders(tps)
    # The controller resigned while deciding: what it did not answer is for the next one.
    for tp in tps or []:
        results.setdefault(tp, ErrorCode.NOT_CONTROLLER)
    if every:
        results = {tp: c for tp, c in results.items() if c != ErrorCode.ELECTION_NOT_NEEDED}
    epochs = {}
    for tp, code in results.items():
        s = controller.partition_state(*tp)
        if code == ErrorCode.NONE and s is not None:
            epochs[tp] = s.leader_epoch
    if epochs:
        try:
            await asyncio.wait_for(_await_epochs(broker, epochs), max(req.timeout_ms, 0) / 1000)
        except TimeoutError:
            pass  # elected all the same; the metadata follows
    return _response(results)
