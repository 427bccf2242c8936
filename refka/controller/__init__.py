"""The controller (Kafka's ZooKeeper-era KafkaController) and the metadata store it runs on.

What a broker uses is re-exported here; each module's docstring says what it owns:

- ``store/``: MetadataStore (ZooKeeper's data model): ``EmbeddedStore``, and
  ``store.ZooKeeperStore`` (imported on first use).
- ``znodes``: znode paths and payloads; ``admin``: the writes behind admin
  requests, broker registration and ISR changes; ``producer_ids``.
- ``election``: the ``/controller`` election and the controller epoch.
- ``controller``: ``Controller``, the event loop and its decisions, with
  ``events`` (the typed events), ``context`` (its view of the cluster),
  ``zk_client`` (its fenced reads and writes), ``state_machine`` (partition
  and replica states, elections), ``topics`` (creation, expansion,
  deletion), ``reassignment`` (KIP-455), ``request_batch`` (the
  LeaderAndIsr / UpdateMetadata / StopReplica it sends).
- ``channel``: ``ControllerChannel``, delivery over refka.client.connection's BrokerConnection.
"""

from refka.common import Endpoint

from . import admin, znodes
from .channel import BrokerGoneError, ControllerChannel, request_controlled_shutdown
from .controller import Controller, ControllerConfig
from .store import (
    BadVersionError,
    EmbeddedStore,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    SessionState,
    StoreError,
)
from .znodes import BrokerInfo, PartitionStateZnode

__all__ = [
    "BadVersionError",
    "BrokerGoneError",
    "BrokerInfo",
    "Controller",
    "ControllerChannel",
    "ControllerConfig",
    "EmbeddedStore",
    "Endpoint",
    "MetadataStore",
    "NoNodeError",
    "NodeExistsError",
    "PartitionStateZnode",
    "SessionState",
    "StoreError",
    "admin",
    "request_controlled_shutdown",
    "znodes",
]
