"""The broker: connections, request handlers, partitions and their logs,
replication and consumer groups. ARCHITECTURE.md maps its modules; start at
``broker.py`` (the wiring of one broker) and ``server.py`` (starting brokers).
Nothing is re-exported here, so importing one module does not load the rest."""
