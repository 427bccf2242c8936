"""refka: a Kafka-wire-protocol reference broker."""

__version__ = "0.1.0"
