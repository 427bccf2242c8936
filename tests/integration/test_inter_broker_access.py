"""Only brokers may send the inter-broker APIs (broker/inter_broker.py), over real sockets.

- The StopReplica v0 of the report (any client, controller epoch 2^31-1) is
  CLUSTER_AUTHORIZATION_FAILED on every broker of ``refka serve --brokers 3``,
  with one warning naming the peer and the API, and the brokers still obey their
  controller: a topic created afterwards comes up and takes acks=all writes.
- LeaderAndIsr, UpdateMetadata and ControlledShutdown from a client connection,
  at current and old versions, are refused and change nothing.
- Even with the registered controller's token (read from the store here, as only
  brokers can), a forged controller id or epoch is refused; the genuine ones make
  the connection a broker's, on which an older epoch is STALE_CONTROLLER_EPOCH and
  one newer than the store's is still refused. A ControlledShutdown with the token is
  a broker's, and its broker epoch is checked as before (STALE_BROKER_EPOCH).
- With ``inter.broker.listener.name``, the client listener refuses even the
  controller's token, and the inter-broker listener serves the controller: the
  cluster comes up, topics replicate, a controlled shutdown succeeds.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from refka.protocol import ErrorCode, decode_response_header
from refka.protocol.messages.controlled_shutdown import ControlledShutdown
from refka.protocol.messages.leader_and_isr import LeaderAndIsr
from refka.protocol.messages.stop_replica import StopReplica
from refka.protocol.messages.update_metadata import UpdateMetadata
from tests.brokers import BrokerProcess
from tests.integration.cluster_helpers import (
    FAST,
    TIMEOUT,
    InProcessCluster,
    Raw,
    create_rf3_topic,
    metadata,
    partition_metadata,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CAF = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
# StopReplica v0, correlation id 0x15, client "wirefuzz": controller 0, epoch 2^31-1, no partitions.
REPORTED_STOP_REPLICA = bytes.fromhex("0000001f000500000000001500087769726566757a7a000000007fffffff0000000000")


@pytest.fixture(scope="module")
def serve3(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("inter-broker") / "data", brokers=3, memory=True,
                      overrides=FAST).start()
    yield b
    b.stop()


def refusals(proc: BrokerProcess) -> list[str]:
    return [line for line in proc.log_path.read_text().splitlines() if "inter_broker_request_refused" in line]


def produce_acks_all(bootstrap: str, topic: str, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(10 * partitions):
        producer.produce(topic, value=b"v%d" % i, partition=i % partitions)
    assert producer.flush(TIMEOUT) == 0


def leaders(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    return {i: (p.leader_id, p.leader_epoch) for i, p in partition_metadata(bootstrap, topic).items()}


def call(port: int, api: Any, body: Any, version: int) -> Any:
    raw = Raw(port)
    try:
        return raw.call_raw(api, body, version)[0]
    finally:
        raw.close()


def stop_replica(controller_id: int, epoch: int, token: int = -1, broker_epoch: int = -1) -> Any:
    """An empty StopReplica (v4): it changes nothing, whoever obeys it."""
    return StopReplica.Request(controller_id=controller_id, controller_epoch=epoch, broker_epoch=broker_epoch,
                               topic_states=[], controller_token=token)


# -- any client, the default single listener -------------------------------------------------


def test_the_reported_stop_replica_is_refused_and_the_brokers_still_obey_their_controller(serve3) -> None:
    seen = len(refusals(serve3))
    for i in range(3):
        raw = Raw(serve3.port + i)
        try:
            frame = raw.call_bytes(REPORTED_STOP_REPLICA)
        finally:
            raw.close()
        cid, pos = decode_response_header(frame, StopReplica.response_header_version(0))
        resp, end = StopReplica.decode_response(frame, 0, pos)
        assert (cid, resp.error_code, resp.partition_errors, end) == (0x15, CAF, [], len(frame))
    lines = wait_until(lambda: len(refusals(serve3)) >= seen + 3 and refusals(serve3)[seen:],
                       message="three refusals logged")
    assert len(lines) == 3
    assert all("api=StopReplica" in line and "peer=127.0.0.1:" in line for line in lines), lines

    topic = f"after-the-report-{uuid.uuid4().hex[:6]}"
    create_rf3_topic(serve3.bootstrap, topic, partitions=3)
    produce_acks_all(serve3.bootstrap, topic, 3)


def test_leader_and_isr_update_metadata_and_controlled_shutdown_from_a_client_change_nothing(serve3) -> None:
    topic = f"forged-{uuid.uuid4().hex[:6]}"
    create_rf3_topic(serve3.bootstrap, topic, partitions=3)
    before = wait_until(lambda: (s := leaders(serve3.bootstrap, topic)) and len(s) == 3 and s,
                        message="leaders of the new topic")
    (md_topic,) = metadata(serve3.port, topic).topics
    target = before[0][0]
    port = serve3.port + target

    # LeaderAndIsr, v7 and ungrouped v1: "you lead partition 0 at epoch +10, alone".
    R = LeaderAndIsr.Request
    TS = R.LeaderAndIsrTopicState
    PS = TS.LeaderAndIsrPartitionState
    state = PS(topic_name=topic, partition_index=0, controller_epoch=2**31 - 1, leader=target,
               leader_epoch=before[0][1] + 10, isr=[target], zk_version=99, replicas=[target])
    v7 = call(port, LeaderAndIsr, R(controller_id=target, controller_epoch=2**31 - 1, broker_epoch=-1, type=1,
                                    topic_states=[TS(topic_name=topic, topic_id=md_topic.topic_id,
                                                     partition_states=[state])]), 7)
    assert v7.error_code == CAF
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partition_errors]) for t in v7.topics] \
        == [(md_topic.topic_id, [(0, CAF)])]
    v1 = call(port, LeaderAndIsr, R(controller_id=target, controller_epoch=2**31 - 1,
                                    ungrouped_partition_states=[state]), 1)
    assert (v1.error_code, [(p.topic_name, p.partition_index, p.error_code) for p in v1.partition_errors]) \
        == (CAF, [(topic, 0, CAF)])

    # UpdateMetadata without a single live broker, v8 and v4.
    for version in (8, 4):
        um = call(port, UpdateMetadata, UpdateMetadata.Request(controller_id=target, controller_epoch=2**31 - 1,
                                                               live_brokers=[]), version)
        assert um.error_code == CAF
    assert sorted(b.node_id for b in metadata(port).brokers) == [0, 1, 2]

    # ControlledShutdown of the broker leading partition 0, to the controller: v1 has no
    # broker epoch at all, v3 carries a made-up token and guessed broker epochs.
    controller_port = serve3.port + metadata(serve3.port).controller_id
    CS = ControlledShutdown.Request
    assert call(controller_port, ControlledShutdown, CS(broker_id=target), 1).error_code == CAF
    for guess in range(0, 60, 3):
        resp = call(controller_port, ControlledShutdown,
                    CS(broker_id=target, broker_epoch=guess, controller_token=guess), 3)
        assert (resp.error_code, resp.remaining_partitions) == (CAF, [])

    assert leaders(serve3.bootstrap, topic) == before, "no leader moved, no epoch changed"
    produce_acks_all(serve3.bootstrap, topic, 3)


# -- the registered controller's token: an in-process cluster, its store read directly --------------


def registration(cluster: InProcessCluster) -> tuple[int, int, int]:
    """(controller id, /controller_epoch, controller_token) as the store holds them."""
    async def read() -> tuple[int, int, int]:
        session = cluster.cluster.store.open_session()
        await session.start()
        try:
            doc = json.loads((await session.get("/controller"))[0])
            epoch = int((await session.get("/controller_epoch"))[0])
        finally:
            await session.stop()
        return int(doc["brokerid"]), epoch, int(doc["controller_token"])

    result: tuple[int, int, int] = cluster.call(read())
    return result


@pytest.fixture
def cluster(tmp_path: Path):
    c = InProcessCluster(tmp_path / "data")
    yield c
    c.close()


def test_a_forged_controller_id_or_epoch_is_refused_even_with_the_controllers_token(cluster) -> None:
    cid, epoch, token = registration(cluster)
    other = (cid + 1) % 3
    port = cluster.configs[other].listeners[0].port
    for forged in (stop_replica(other, epoch, token), stop_replica(cid, epoch + 1, token),
                   stop_replica(cid, 2**31 - 1, token), stop_replica(cid, epoch - 1, token),
                   stop_replica(cid, epoch, token ^ 1), stop_replica(cid, epoch)):
        assert call(port, StopReplica, forged, 4).error_code == CAF, forged

    # The genuine id, epoch and token make the connection a broker's; on it the epochs are fenced.
    raw = Raw(port)
    try:
        assert raw.call_raw(StopReplica, stop_replica(cid, epoch, token), 4)[0].error_code == ErrorCode.NONE
        assert raw.call_raw(StopReplica, stop_replica(cid, epoch - 1), 4)[0].error_code \
            == ErrorCode.STALE_CONTROLLER_EPOCH
        assert raw.call_raw(StopReplica, stop_replica(cid, 2**31 - 1), 4)[0].error_code == CAF
        assert raw.call_raw(StopReplica, stop_replica(cid, epoch), 0)[0].error_code == ErrorCode.NONE
    finally:
        raw.close()

    # ControlledShutdown with the token comes from a broker: the controller then checks the
    # broker epoch against the registration (KIP-380), as before.
    CS = ControlledShutdown.Request
    controller_port = cluster.configs[cid].listeners[0].port
    assert call(controller_port, ControlledShutdown, CS(broker_id=other, broker_epoch=2**62), 3).error_code == CAF
    assert call(controller_port, ControlledShutdown, CS(broker_id=other, broker_epoch=2**62, controller_token=token),
                3).error_code == ErrorCode.STALE_BROKER_EPOCH

    topic = f"after-forgeries-{uuid.uuid4().hex[:6]}"
    create_rf3_topic(cluster.bootstrap, topic, partitions=3)
    produce_acks_all(cluster.bootstrap, topic, 3)


# -- inter.broker.listener.name ----------------------------------------------------------------


def test_with_an_inter_broker_listener_only_it_serves_the_controller(tmp_path: Path) -> None:
    c = InProcessCluster(tmp_path / "data", inter_broker_listener="BROKER")  # ready: the controller got through
    try:
        cid, epoch, token = registration(c)
        client_port = {i: cfg.listeners[0].port for i, cfg in enumerate(c.configs)}
        broker_port = {i: cfg.listeners[1].port for i, cfg in enumerate(c.configs)}
        assert [ep.listener for ep in c.configs[0].listeners] == ["CLIENT", "BROKER"]
        # Clients are told the CLIENT endpoints.
        assert sorted(b.port for b in metadata(client_port[cid]).brokers) == sorted(client_port.values())

        # The client listener refuses even the controller's own token, id and epoch.
        for i in range(3):
            assert call(client_port[i], StopReplica, stop_replica(cid, epoch, token), 4).error_code == CAF
            um = UpdateMetadata.Request(controller_id=cid, controller_epoch=epoch, live_brokers=[],
                                        controller_token=token)
            assert call(client_port[i], UpdateMetadata, um, 8).error_code == CAF

        # The inter-broker listener needs no token, and still fences the epochs.
        other = (cid + 1) % 3
        assert call(broker_port[other], StopReplica, stop_replica(cid, epoch), 0).error_code == ErrorCode.NONE
        assert call(broker_port[other], StopReplica, stop_replica(cid, epoch - 1), 4).error_code \
            == ErrorCode.STALE_CONTROLLER_EPOCH
        assert call(broker_port[other], StopReplica, stop_replica(cid, epoch + 1), 4).error_code == CAF

        # The controller reaches every broker, followers their leaders, a stopping broker the controller.
        topic = f"two-listeners-{uuid.uuid4().hex[:6]}"
        create_rf3_topic(c.bootstrap, topic, partitions=3)
        produce_acks_all(c.bootstrap, topic, 3)
        stopping = next(i for i in range(3) if i != cid)
        side = c.cluster.sides[[b.node_id for b in c.cluster.brokers].index(stopping)]
        assert c.call(asyncio.wait_for(side.controlled_shutdown(max_retries=1), TIMEOUT)) is True
        wait_until(lambda: all(leader != stopping for leader, _e in leaders(c.bootstrap, topic).values()),
                   message="leadership off the stopping broker")
    finally:
        c.close()
