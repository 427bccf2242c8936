"""UpdateMetadata (handlers/update_metadata.py) and the KIP-253 maps: each partition state
replaces its partition's maps in the metadata cache, as pairs ascending."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from refka.broker.handlers.update_metadata import handle_update_metadata
from refka.broker.metadata_cache import MetadataCache
from refka.protocol import ErrorCode
from refka.protocol.messages.update_metadata import UpdateMetadata

U = UpdateMetadata.Request
TS = U.UpdateMetadataTopicState
PS = TS.UpdateMetadataPartitionState
M = PS.LeaderEpochMaps
E = M.PartitionLeaderEpoch


async def admitted(*_args: Any) -> ErrorCode:
    return ErrorCode.NONE


def broker() -> SimpleNamespace:
    return SimpleNamespace(metadata=MetadataCache(), inter_broker=SimpleNamespace(admit_control_request=admitted),
                           notify_metadata_changed=lambda: None)


async def update(b: SimpleNamespace, maps: Any, version: int = 8) -> None:
    req = U(controller_id=1, controller_epoch=1, broker_epoch=-1, live_brokers=[], topic_states=[TS(
        topic_name="t", partition_states=[PS(partition_index=2, controller_epoch=1, leader=1, leader_epoch=0,
                                             isr=[1], zk_version=0, replicas=[1], leader_epoch_maps=maps)])])
    resp = await handle_update_metadata(SimpleNamespace(broker=b, api_version=version), req)
    assert resp.error_code == ErrorCode.NONE


def maps_of(b: SimpleNamespace) -> tuple[Any, Any]:
    p = b.metadata.partition("t", 2)
    return p.leader_epoch_after_creation, p.leader_epoch_before_deletion


async def test_the_maps_are_kept_as_pairs_ascending_and_replaced_by_the_next_state() -> None:
    b = broker()
    await update(b, M(leader_epoch_after_creation=[E(partition=1, leader_epoch=3), E(partition=0, leader_epoch=4)],
                      leader_epoch_before_deletion=[]))
    assert maps_of(b) == (((0, 4), (1, 3)), ())
    await update(b, M(leader_epoch_after_creation=[E(partition=0, leader_epoch=4), E(partition=1, leader_epoch=3)],
                      leader_epoch_before_deletion=[E(partition=0, leader_epoch=5), E(partition=1, leader_epoch=5)]))
    assert maps_of(b) == (((0, 4), (1, 3)), ((0, 5), (1, 5)))
    await update(b, None)  # the znode's maps are empty now
    assert maps_of(b) == ((), ())
