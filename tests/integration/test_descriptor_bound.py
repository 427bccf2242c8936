"""Partitions cost no file descriptors at rest: a real ``refka serve`` with
``log.open.files.max=64`` and 1,000 partitions on disk holds its descriptors under
that bound plus a margin while clients produce to and fetch from every partition
(sampled throughout, Fetch answers in flight included), after a clean restart and
after a kill -9 and recovery, and every record comes back.

The margin covers what is not a log file: the listeners, the clients' and the
controller's connections, the metadata store's journal, stdio. It is measured
as the broker's descriptors before it has any partition.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tests.brokers import BrokerProcess
from tests.integration.test_durability import consume_all, create_topic, produce_all

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

MAX_OPEN_FILES = 64
PARTITIONS = 1000
# Client connections come and go on top of the broker's own (producer, consumer and
# admin clients each keep one or two, and a finished client's may linger until it is
# collected). Main held 4,019 descriptors here after creating the topic, 5,219 fetching.
CLIENTS = 16


def descriptors(b: BrokerProcess) -> int:
    return len(os.listdir(f"/proc/{b.proc.pid}/fd"))  # type: ignore[union-attr]


class PeakDescriptors:
    """The most descriptors the broker held while the block ran, sampled every ms."""

    def __init__(self, b: BrokerProcess) -> None:
        self.broker = b
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(0.001):
            try:
                self.peak = max(self.peak, descriptors(self.broker))
            except OSError:
                return

    def __enter__(self) -> PeakDescriptors:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def test_a_thousand_partitions_hold_descriptors_within_log_open_files_max(tmp_path: Path):
    data = tmp_path / "data"
    b = BrokerProcess(data, overrides={"log.open.files.max": str(MAX_OPEN_FILES)}).start()
    try:
        bound = descriptors(b) + MAX_OPEN_FILES + CLIENTS
        with PeakDescriptors(b) as created:
            create_topic(b, "many", PARTITIONS)
        records = [(i % PARTITIONS, (b"k%d" % i, b"v%d" % i, None)) for i in range(3 * PARTITIONS)]
        with PeakDescriptors(b) as produced:
            acked = produce_all(b.bootstrap, "many", records, "1")
        with PeakDescriptors(b) as fetched:
            assert consume_all(b.bootstrap, "many", PARTITIONS) == acked
        peaks = {"create": created.peak, "produce": produced.peak, "fetch": fetched.peak}
        assert max(peaks.values()) <= bound, (peaks, bound)
        assert descriptors(b) <= bound

        assert b.stop() == 0
        b.start()
        assert descriptors(b) <= bound
        b.kill()  # kill -9: the last segment of every partition is recovered at start-up
        b.start()
        assert descriptors(b) <= bound
        with PeakDescriptors(b) as fetched_again:
            assert consume_all(b.bootstrap, "many", PARTITIONS) == acked
        assert fetched_again.peak <= bound
    finally:
        b.stop()
