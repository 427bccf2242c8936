"""Replication between brokers: follower fetchers, ISR and high watermark (Kafka's design).

``isr.py`` holds the rules (no I/O), ``fetcher.py`` the follower's fetch loop
per leader broker, ``manager.py`` the per-broker wiring and the leader's ISR
writes. The leader's side of a follower's fetch is in handlers/fetch.py and
``replica_manager.Partition.on_follower_fetch``; acks=all in handlers/produce.py.
"""

from .isr import FollowerState
from .manager import ReplicationManager

__all__ = ["FollowerState", "ReplicationManager"]
