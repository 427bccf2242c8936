"""The active controller's view of the cluster (Kafka's ControllerContext).

What the controller has read from the store, or written there, while it is
active: live brokers and their epochs (the czxid of their registration),
topic assignments and partition znodes with the versions it read, partition
states (the ``.../state`` znodes) with their versions, topic configs, the
``/partition_epoch`` counter, and the partition and replica state machines.

One object, shared by the controller and its collaborators (zk_client.py
writes it as it reads and writes znodes; request_batch.py, topics.py and
reassignment.py read it) and touched only from the controller's event task,
so it needs no locks. ``reset()`` empties it in place when the controller
resigns or takes over: collaborators keep the same object.
"""

from __future__ import annotations

from refka.common import TopicPartition

from .state_machine import PartitionStateMachine, ReplicaStateMachine
from .znodes import BrokerInfo, PartitionStateZnode, PartitionZnode, TopicAssignment


class ControllerContext:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.live: dict[int, BrokerInfo] = {}
        self.broker_epochs: dict[int, int] = {}
        self.topics: dict[str, TopicAssignment] = {}
        self.topic_versions: dict[str, int] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.partition_znodes: dict[TopicPartition, PartitionZnode] = {}
        self.states: dict[TopicPartition, PartitionStateZnode] = {}
        self.state_versions: dict[TopicPartition, int] = {}
        self.shutting_down: set[int] = set()
        self.max_partition_epoch = 0  # /partition_epoch: the last epoch handed out
        self.partition_epoch_version = -1  # its znode's version (-1: not created yet)
        self.epoch_zk_version = -1  # /controller_epoch's version that every write checks
        self.pstates = PartitionStateMachine()
        self.rstates = ReplicaStateMachine()

    def replicas(self, tp: TopicPartition) -> list[int]:
        """The partition's assigned replicas (during a reassignment, the full set RS)."""
        t = self.topics.get(tp[0])
        return list(t.partitions.get(tp[1], [])) if t else []

    def live_replicas(self, tp: TopicPartition) -> list[int]:
        return [r for r in self.replicas(tp) if r in self.live]

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        t = self.topics.get(topic)
        return [(topic, p) for p in sorted(t.partitions)] if t else []

    def all_partitions(self) -> list[TopicPartition]:
        return [tp for name in sorted(self.topics) for tp in self.partitions_of(name)]
