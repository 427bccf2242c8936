"""refka's pytest plugin: a Kafka broker for a test, in this process and in memory.

Registered through the ``pytest11`` entry point (pyproject.toml), so any project that
installs refka has the fixtures, in sync and asyncio tests alike:

- ``refka_broker``: one broker on a free port, torn down after the test;
- ``refka_cluster``: ``@pytest.mark.refka_cluster(brokers=N)`` brokers (3 without the
  marker); the marker's other keywords go to ``refka.testing.Cluster`` (``overrides=``...).

Each is the ``with`` form of ``refka.testing.Cluster``: the brokers run on their own loop in a
background thread, so a blocking client (confluent-kafka, kafka-python) and an asyncio one
(aiokafka) both reach them through ``bootstrap_servers``, and its admin calls
(``create_topic``, ``move_leader``, faults, reads...) are plain blocking calls:

    @pytest.mark.refka_cluster(brokers=3)
    def test_moves(refka_cluster):
        refka_cluster.create_topic("events", partitions=3, replication_factor=3)
        producer = confluent_kafka.Producer({"bootstrap.servers": refka_cluster.bootstrap_servers})
        ...
        refka_cluster.move_leader("events", 0, broker=2)

pytest loads this module in every run of every project with refka installed: it imports
refka's broker only inside the fixtures, when a test asks for one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from refka.testing import Cluster

DEFAULT_CLUSTER_BROKERS = 3
MARKER = "refka_cluster"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(brokers={DEFAULT_CLUSTER_BROKERS}, **options): the refka_cluster fixture's broker count "
        "and refka.testing.Cluster options (overrides={...}, admin_port=...)")


@pytest.fixture
def refka_broker() -> Iterator[Cluster]:
    """One refka broker in this process (memory, a free port), stopped after the test."""
    from refka.testing import Broker  # the broker's modules only for a test that asks for one

    with Broker() as broker:
        yield broker


@pytest.fixture
def refka_cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """N refka brokers in this process (N from ``@pytest.mark.refka_cluster(brokers=N)``, 3
    without it); ``bootstrap_servers`` names them all. Stopped after the test."""
    from refka.testing import Cluster  # the broker's modules only for a test that asks for one

    brokers, options = _marked(request.node.get_closest_marker(MARKER))
    with Cluster(brokers, **options) as cluster:
        yield cluster


def _marked(marker: pytest.Mark | None) -> tuple[int, dict[str, Any]]:
    """(brokers, Cluster's keyword options) from the marker: ``refka_cluster(3)`` or
    ``refka_cluster(brokers=3, overrides={...})``."""
    if marker is None:
        return DEFAULT_CLUSTER_BROKERS, {}
    options = dict(marker.kwargs)
    if len(marker.args) > 1 or (marker.args and "brokers" in options):
        raise pytest.UsageError(f"@pytest.mark.{MARKER} takes one broker count, got args {marker.args} "
                                f"and kwargs {marker.kwargs}")
    brokers = marker.args[0] if marker.args else options.pop("brokers", DEFAULT_CLUSTER_BROKERS)
    if not isinstance(brokers, int) or isinstance(brokers, bool) or brokers < 1:
        raise pytest.UsageError(f"@pytest.mark.{MARKER}(brokers=...) must be a positive int, got {brokers!r}")
    return brokers, options
