"""Owns one librdkafka mock cluster in its own process, for the benchmark.

    python -m lab.bench.mock_owner

A confluent-kafka client configured with ``test.mock.num.brokers=1`` starts an
in-process mock cluster (its brokers listen on 127.0.0.1, ephemeral ports) and
ignores its own ``bootstrap.servers``. librdkafka announces the mock's
bootstrap address in one NOTICE log line ("Mock cluster enabled: ... replaced
with 127.0.0.1:PORT"); we capture it through the client's ``logger`` and print

    mock ready: 127.0.0.1:PORT

so that separate producers and consumers (in the benchmark process) can use
the same mock cluster, exactly as they use a broker process. The cluster lives
until our stdin is closed or we get SIGTERM.

Running the owner in a child process keeps the comparison fair: the mock's
broker thread competes for the CPUs like a broker process does, and the
start-up time is measured from process spawn as for the other targets.
"""

from __future__ import annotations

import logging
import re
import signal
import sys
import time

from confluent_kafka import Producer

_ANNOUNCEMENT = re.compile(r"replaced with (\S+)")


class _CaptureBootstrap(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.bootstrap: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        match = _ANNOUNCEMENT.search(record.getMessage())
        if match and self.bootstrap is None:
            self.bootstrap = match.group(1)


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    capture = _CaptureBootstrap()
    logger = logging.getLogger("refka.bench.mock")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(capture)
    t0 = time.perf_counter()
    owner = Producer({"test.mock.num.brokers": 1, "logger": logger})
    deadline = time.monotonic() + 5.0
    while capture.bootstrap is None and time.monotonic() < deadline:
        owner.poll(0.005)  # delivers queued log lines to the logger
    bootstrap = capture.bootstrap
    if bootstrap is None:
        # No announcement (a librdkafka that words it differently): ask the
        # mock itself; its only broker is the bootstrap server.
        brokers = owner.list_topics(timeout=5).brokers
        bootstrap = ",".join(f"{b.host}:{b.port}" for b in brokers.values())
    elapsed_ms = (time.perf_counter() - t0) * 1000
    print(f"mock ready: {bootstrap} (cluster up {elapsed_ms:.1f} ms after rd_kafka_new)", flush=True)
    sys.stdin.read()  # until the benchmark closes our stdin
    return 0


if __name__ == "__main__":
    sys.exit(main())
