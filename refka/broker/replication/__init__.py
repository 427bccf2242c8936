"""Replication between brokers: follower fetchers, ISR and high watermark (Kafka's design).

``isr.py`` holds the rules (no I/O), ``fetcher.py`` the follower's fetch loop
per leader broker, ``fetcher_manager.py`` which fetcher follows which
partition (Kafka's ReplicaFetcherManager), ``isr_manager.py`` the leader's ISR
expansion, shrink and writes. The leader's side of a follower's fetch is in handlers/fetch.py and
``partition.Partition.on_follower_fetch``; acks=all in
``partition.Partition.wait_for_high_watermark``.

The package imports none of its modules here, so that importing ``isr`` (as
partition.py does) does not pull in the fetchers.
"""
