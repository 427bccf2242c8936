"""The metadata store: ZooKeeper's data model behind an asyncio interface.

- ``base.py``: the interface (``MetadataStore``), its errors, ``SessionState``,
  ``WatchedEvent``, ``ZnodeStat``, ``Transaction`` and its ``Op`` s; the
  semantics and the session contract both implementations keep.
- ``embedded.py``: ``EmbeddedStore``, in-process and journaled (``refka serve``
  without ZooKeeper).
- ``zookeeper.py``: ``ZooKeeperStore``, kazoo against a real ensemble.
"""

from .base import (
    BadArgumentsError,
    BadVersionError,
    ConnectionClosedError,
    ConnectionLossError,
    EventType,
    MetadataStore,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    SessionExpiredError,
    SessionListener,
    SessionState,
    StoreError,
    Transaction,
    WatchedEvent,
    Watcher,
    ZnodeStat,
)
from .embedded import EmbeddedStore
from .zookeeper import ZooKeeperStore, split_chroot

__all__ = [
    "BadArgumentsError",
    "BadVersionError",
    "ConnectionClosedError",
    "ConnectionLossError",
    "EmbeddedStore",
    "EventType",
    "MetadataStore",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "Op",
    "SessionExpiredError",
    "SessionListener",
    "SessionState",
    "StoreError",
    "Transaction",
    "WatchedEvent",
    "Watcher",
    "ZnodeStat",
    "ZooKeeperStore",
    "split_chroot",
]
