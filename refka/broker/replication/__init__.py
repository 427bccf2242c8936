"""Replication between brokers: follower fetchers, ISR and high watermark (Kafka's design).

``isr.py`` holds the rules (no I/O), ``fetcher.py`` the follower's fetch loop
per leader broker, ``manager.py`` the per-broker wiring and the leader's ISR
writes. The leader's side of a follower's fetch is in handlers/fetch.py and
``partition.Partition.on_follower_fetch``; acks=all in
``partition.Partition.wait_for_high_watermark``.

The package imports none of its modules here, so that importing ``isr`` (as
partition.py does) does not pull in the fetchers.
"""
