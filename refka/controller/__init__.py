"""Controller election and state machines over a metadata store.

What a broker uses is re-exported here; see each module's docstring:
``store`` (MetadataStore: EmbeddedStore, ZooKeeperStore), ``znodes`` (paths
and payloads), ``admin`` (the writes behind admin requests, broker
registration, ISR changes), ``controller`` (Controller), ``channel``
(ControllerChannel, over refka.client.connection's BrokerConnection).
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
    ZooKeeperStore,
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
    "ZooKeeperStore",
    "admin",
    "request_controlled_shutdown",
    "znodes",
]
