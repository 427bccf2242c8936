"""The metadata store: ZooKeeper's data model behind an asyncio interface.

- ``base.py``: the interface (``MetadataStore``), its errors, ``SessionState``,
  ``WatchedEvent``, ``ZnodeStat``, ``Transaction`` and its ``Op`` s; the
  semantics and the session contract both implementations keep.
- ``embedded.py``: ``EmbeddedStore``, in-process and journaled (``refka serve``
  without ZooKeeper).
- ``zookeeper.py``: ``ZooKeeperStore``, kazoo against a real ensemble,
  imported on first use (``refka.controller.store.ZooKeeperStore``): a broker
  on the embedded store does not pay for kazoo or the module at start-up.
"""

from typing import Any

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

_ZOOKEEPER_NAMES = ("ZooKeeperStore", "split_chroot")


def __getattr__(name: str) -> Any:
    if name in _ZOOKEEPER_NAMES:
        from . import zookeeper

        return getattr(zookeeper, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
