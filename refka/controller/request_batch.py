"""What the controller tells brokers after an event (Kafka's ControllerBrokerRequestBatch).

``RequestBatch`` collects, while one event is handled, which broker must
hear about which partition; ``BatchSender.send`` then builds one request per
broker from the context as it stands at the end of the event and hands it
to the channel (channel.py does the delivery). The order is Kafka's:

1. LeaderAndIsr to each broker named (incremental: the partitions named,
   ``is_new`` for a replica that must create the partition), or full (type 1,
   KIP-516: every partition the broker hosts; it drops the others) to the
   brokers in ``full_leader_and_isr``. ``live_leaders``: the leaders named.
2. UpdateMetadata to every live broker, all with the same, next
   ``controller_metadata_epoch`` (KIP-232): the partitions named, or all of
   them to the brokers in ``update_metadata_full_to`` (to every broker with
   ``update_metadata_all``). Each partition carries its partition znode's
   KIP-253 maps (leaderEpochAfterCreation, leaderEpochBeforeDeletion), which
   brokers know only from here. A deleted partition goes out with leader -2
   (LEADER_DURING_DELETE) and its topic without id or counts. Sent when
   anything is named, ``deleted`` is not empty, or ``update_metadata_brokers``
   (the live brokers changed: the broker list itself is the news).
3. StopReplica to each broker named: (delete, leader_epoch) per partition.

Every request carries the controller's epoch and, as refka's tagged
``controller_token``, the token of its election, by which brokers know it
comes from the controller (broker/inter_broker.py). Requests go only to live
brokers; a broker that left meanwhile gets nothing.
The controller does not wait for the answers, except the KIP-253 expansion,
which sends its LeaderAndIsr alone (``send_leader_and_isr``) and waits.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from refka.common import Endpoint, TopicPartition
from refka.protocol.messages.leader_and_isr import TYPE_FULL, TYPE_INCREMENTAL, LeaderAndIsr
from refka.protocol.messages.stop_replica import StopReplica
from refka.protocol.messages.update_metadata import SECURITY_PROTOCOLS, UpdateMetadata

from .channel import Channel
from .context import ControllerContext
from .election import ControllerElection
from .znodes import LEADER_DURING_DELETE, PartitionStateZnode, PartitionZnode, TopicAssignment


@dataclass
class RequestBatch:
    """Requests collected while handling one event, sent together at its end."""

    # broker -> partition -> is_new
    leader_and_isr: dict[int, dict[TopicPartition, bool]] = field(default_factory=lambda: defaultdict(dict))
    full_leader_and_isr: set[int] = field(default_factory=set)
    update_metadata: set[TopicPartition] = field(default_factory=set)
    deleted: dict[TopicPartition, PartitionStateZnode] = field(default_factory=dict)
    update_metadata_all: bool = False
    update_metadata_full_to: set[int] = field(default_factory=set)
    update_metadata_brokers: bool = False  # live brokers changed: tell everyone
    # broker -> partition -> (delete, leader_epoch)
    stop_replica: dict[int, dict[TopicPartition, tuple[bool, int]]] = field(
        default_factory=lambda: defaultdict(dict)
    )

    def add_leader_and_isr(self, brokers: Iterable[int], tp: TopicPartition, is_new: bool = False) -> None:
        for b in brokers:
            self.leader_and_isr[b][tp] = is_new

    def add_stop_replica(self, broker: int, tp: TopicPartition, delete: bool, leader_epoch: int) -> None:
        self.stop_replica[broker][tp] = (delete, leader_epoch)

    @property
    def has_update_metadata(self) -> bool:
        return bool(
            self.update_metadata or self.update_metadata_all or self.update_metadata_brokers or self.deleted
        )


class BatchSender:
    """Builds each broker's requests from the context and queues them on the channel."""

    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        channel: Channel,
        election: ControllerElection,
        inter_broker_listener_name: str | None,
    ) -> None:
        self.controller_id = controller_id
        self.context = context
        self.channel = channel
        self.election = election  # the controller epoch, token and controller_metadata_epoch
        self.listener = inter_broker_listener_name

    def send(self, batch: RequestBatch) -> None:
        """LeaderAndIsr, UpdateMetadata (one broadcast, one controller_metadata_epoch), StopReplica."""
        ctx = self.context
        self.send_leader_and_isr(batch)
        if batch.has_update_metadata:
            metadata_epoch = self.election.next_metadata_epoch()
            everything = ctx.all_partitions()
            for b in sorted(ctx.live):
                full = batch.update_metadata_all or b in batch.update_metadata_full_to
                tps = everything if full else sorted(batch.update_metadata | set(batch.deleted))
                request = self.update_metadata(b, tps, batch.deleted, metadata_epoch)
                self.channel.send(b, UpdateMetadata, request)
        for b, parts in sorted(batch.stop_replica.items()):
            if b not in ctx.live or not parts:
                continue
            self.channel.send(b, StopReplica, self.stop_replica(b, parts))

    def send_leader_and_isr(self, batch: RequestBatch) -> list[asyncio.Future[Any]]:
        """Only the batch's LeaderAndIsr requests; the futures of their answers."""
        ctx = self.context
        futures = []
        for b in sorted(set(batch.leader_and_isr) | batch.full_leader_and_isr):
            if b not in ctx.live:
                continue
            full = b in batch.full_leader_and_isr
            parts: dict[TopicPartition, bool] = {}
            if full:
                parts = {
                    tp: False for tp in ctx.all_partitions() if b in ctx.replicas(tp) and tp in ctx.states
                }
            parts.update(batch.leader_and_isr.get(b, {}))
            if not parts and not full:
                continue
            futures.append(self.channel.send(b, LeaderAndIsr, self.leader_and_isr(b, parts, full)))
        return futures

    # ---- building ------------------------------------------------------------------------------

    def _endpoint(self, broker_id: int) -> Endpoint:
        return self.context.live[broker_id].endpoint(self.listener)

    @staticmethod
    def _partition_counts(topic_state_cls: Any, topic: TopicAssignment) -> Any:
        return topic_state_cls.PartitionCounts(
            initial_partition_count=topic.initial_partition_count,
            undeleted_partition_count=topic.undeleted_partition_count,
        )

    @staticmethod
    def _leader_epoch_maps(partition_state_cls: Any, pz: PartitionZnode | None) -> Any:
        """A partition znode's KIP-253 maps as UpdateMetadata carries them; None (nothing on
        the wire) for nearly every partition: none created by an expansion, none marked."""
        if pz is None or not (pz.leader_epoch_after_creation or pz.leader_epoch_before_deletion):
            return None
        maps = partition_state_cls.LeaderEpochMaps
        entry = maps.PartitionLeaderEpoch

        def entries(epochs: Mapping[int, int]) -> list[Any]:
            return [entry(partition=p, leader_epoch=e) for p, e in sorted(epochs.items())]

        return maps(leader_epoch_after_creation=entries(pz.leader_epoch_after_creation),
                    leader_epoch_before_deletion=entries(pz.leader_epoch_before_deletion))

    def leader_and_isr(self, broker_id: int, parts: Mapping[TopicPartition, bool], full: bool) -> Any:
        """``broker_id``'s LeaderAndIsr for ``parts`` (partition -> is_new)."""
        ctx = self.context
        Req = LeaderAndIsr.Request
        TS = Req.LeaderAndIsrTopicState
        PS = TS.LeaderAndIsrPartitionState
        by_topic: dict[str, list[Any]] = defaultdict(list)
        leaders: set[int] = set()
        for tp in sorted(parts):
            s = ctx.states.get(tp)
            topic = ctx.topics.get(tp[0])
            if s is None or topic is None:
                continue
            pz = ctx.partition_znodes.get(tp)
            by_topic[tp[0]].append(
                PS(
                    partition_index=tp[1],
                    controller_epoch=s.controller_epoch,
                    leader=s.leader,
                    leader_epoch=s.leader_epoch,
                    isr=list(s.isr),
                    zk_version=ctx.state_versions.get(tp, 0),
                    replicas=ctx.replicas(tp),
                    adding_replicas=list(topic.adding_replicas.get(tp[1], [])),
                    removing_replicas=list(topic.removing_replicas.get(tp[1], [])),
                    is_new=parts[tp],
                    leader_recovery_state=s.leader_recovery_state,
                    partition_epoch=pz.partition_epoch if pz else -1,
                )
            )
            if s.leader in ctx.live:
                leaders.add(s.leader)
        topic_states = [
            TS(
                topic_name=name,
                topic_id=ctx.topics[name].topic_id,
                partition_states=states,
                partition_counts=self._partition_counts(TS, ctx.topics[name]),
            )
            for name, states in by_topic.items()
        ]
        live_leaders = []
        for b in sorted(leaders):
            ep = self._endpoint(b)
            live_leaders.append(Req.LeaderAndIsrLiveLeader(broker_id=b, host_name=ep.host, port=ep.port))
        return Req(
            controller_id=self.controller_id,
            controller_epoch=self.election.epoch,
            broker_epoch=ctx.broker_epochs.get(broker_id, -1),
            controller_token=self.election.token,
            type=TYPE_FULL if full else TYPE_INCREMENTAL,
            topic_states=topic_states,
            live_leaders=live_leaders,
        )

    def update_metadata(
        self,
        broker_id: int,
        tps: Iterable[TopicPartition],
        deleted: Mapping[TopicPartition, PartitionStateZnode],
        metadata_epoch: int,
    ) -> Any:
        """``broker_id``'s UpdateMetadata for ``tps`` (those in ``deleted`` as being deleted)."""
        ctx = self.context
        Req = UpdateMetadata.Request
        TS = Req.UpdateMetadataTopicState
        PS = TS.UpdateMetadataPartitionState
        epoch = self.election.epoch
        by_topic: dict[str, list[Any]] = defaultdict(list)
        for tp in sorted(tps):
            if tp in deleted:
                gone = deleted[tp]
                by_topic[tp[0]].append(
                    PS(
                        partition_index=tp[1],
                        controller_epoch=epoch,
                        leader=LEADER_DURING_DELETE,
                        leader_epoch=gone.leader_epoch,
                        isr=list(gone.isr),
                        zk_version=0,
                        replicas=[],
                        offline_replicas=[],
                    )
                )
                continue
            s = ctx.states.get(tp)
            if s is None or tp[0] not in ctx.topics:
                continue
            replicas = ctx.replicas(tp)
            pz = ctx.partition_znodes.get(tp)
            by_topic[tp[0]].append(
                PS(
                    partition_index=tp[1],
                    controller_epoch=s.controller_epoch,
                    leader=s.leader,
                    leader_epoch=s.leader_epoch,
                    isr=list(s.isr),
                    zk_version=ctx.state_versions.get(tp, 0),
                    replicas=replicas,
                    offline_replicas=[r for r in replicas if r not in ctx.live],
                    partition_epoch=pz.partition_epoch if pz else -1,
                    leader_epoch_maps=self._leader_epoch_maps(PS, pz),
                )
            )
        topic_states = []
        for name, states in by_topic.items():
            topic = ctx.topics.get(name)
            if topic is None:  # deleted: no ids or counts any more
                topic_states.append(TS(topic_name=name, partition_states=states))
                continue
            topic_states.append(
                TS(
                    topic_name=name,
                    topic_id=topic.topic_id,
                    partition_states=states,
                    topic_epoch=topic.topic_epoch,
                    partition_counts=self._partition_counts(TS, topic),
                )
            )
        live_brokers = []
        for b in sorted(ctx.live):
            info = ctx.live[b]
            live_brokers.append(
                Req.UpdateMetadataBroker(
                    id=b,
                    endpoints=[
                        Req.UpdateMetadataBroker.UpdateMetadataEndpoint(
                            port=ep.port,
                            host=ep.host,
                            listener=ep.listener,
                            security_protocol=SECURITY_PROTOCOLS.get(ep.security_protocol, 0),
                        )
                        for ep in info.endpoints
                    ],
                    rack=info.rack,
                )
            )
        return Req(
            controller_id=self.controller_id,
            controller_epoch=epoch,
            broker_epoch=ctx.broker_epochs.get(broker_id, -1),
            controller_token=self.election.token,
            topic_states=topic_states,
            live_brokers=live_brokers,
            controller_metadata_epoch=metadata_epoch,
            max_partition_epoch=ctx.max_partition_epoch,
        )

    def stop_replica(self, broker_id: int, parts: Mapping[TopicPartition, tuple[bool, int]]) -> Any:
        """``broker_id``'s StopReplica for ``parts`` (partition -> (delete, leader_epoch))."""
        Req = StopReplica.Request
        TS = Req.StopReplicaTopicState
        by_topic: dict[str, list[Any]] = defaultdict(list)
        for (t, p), (delete, leader_epoch) in sorted(parts.items()):
            by_topic[t].append(
                TS.StopReplicaPartitionState(
                    partition_index=p, leader_epoch=leader_epoch, delete_partition=delete
                )
            )
        return Req(
            controller_id=self.controller_id,
            controller_epoch=self.election.epoch,
            broker_epoch=self.context.broker_epochs.get(broker_id, -1),
            controller_token=self.election.token,
            topic_states=[TS(topic_name=t, partition_states=ps) for t, ps in by_topic.items()],
        )
