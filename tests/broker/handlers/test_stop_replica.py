"""StopReplica in-process: a partition deleted while others of its topic stay hosted
(a KIP-253 removal) leaves the topic's config overrides to them."""

from __future__ import annotations

from types import SimpleNamespace

from refka.broker.handlers.stop_replica import handle_stop_replica
from refka.protocol import ErrorCode
from refka.protocol.messages.stop_replica import StopReplica


class Replicas:
    def __init__(self, hosted: list[tuple[str, int]]) -> None:
        self.partitions = {tp: object() for tp in hosted}
        self.topic_configs = {"t": {"min.insync.replicas": "2"}}

    def get(self, topic: str, index: int) -> None:
        return None  # no leader epoch to compare: -2 (deletion) always applies

    def stop_replica(self, topic: str, index: int, delete: bool) -> None:
        self.partitions.pop((topic, index), None)


async def stop(replicas: Replicas, partition: int) -> None:
    async def admit(*_args) -> ErrorCode:
        return ErrorCode.NONE

    R = StopReplica.Request
    TS = R.StopReplicaTopicState
    req = R(controller_id=1, controller_epoch=1, broker_epoch=-1, topic_states=[TS(
        topic_name="t", partition_states=[TS.StopReplicaPartitionState(
            partition_index=partition, leader_epoch=-2, delete_partition=True)])])
    broker = SimpleNamespace(inter_broker=SimpleNamespace(admit_control_request=admit), replicas=replicas,
                             groups=SimpleNamespace(on_resign=lambda index: None))
    resp = await handle_stop_replica(SimpleNamespace(broker=broker, api_version=4), req)
    assert [e.error_code for e in resp.partition_errors] == [ErrorCode.NONE]


async def test_a_deleted_partition_leaves_the_topic_config_to_the_partitions_still_hosted() -> None:
    replicas = Replicas([("t", 0), ("t", 1)])
    await stop(replicas, 1)
    assert replicas.topic_configs == {"t": {"min.insync.replicas": "2"}}
    await stop(replicas, 0)  # the topic's last partition here
    assert replicas.topic_configs == {}
