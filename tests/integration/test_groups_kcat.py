"""kcat's balanced consumer (``-G``, librdkafka's KafkaConsumer) against refka.

Two ``kcat -G`` processes in one group split a 4-partition topic (as kcat's
rebalance lines on stderr show), read together every record confluent-kafka
produced, and commit on exit (SIGTERM: auto-commit and LeaveGroup). A third
``kcat -G -e`` in the same group then reads only what was produced after.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import threading
import uuid

import pytest

from tests.brokers import BrokerProcess
from tests.integration.confluent_helpers import create_topic, producer
from tests.integration.group_helpers import TIMEOUT
from tests.waiting import wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (Debian package kcat)"),
]

KCAT = shutil.which("kcat") or "kcat"
PARTITIONS = 4
ASSIGNED = re.compile(r"rebalanced \(memberid [^)]*\): assigned: (.*)$")
REVOKED = re.compile(r"rebalanced \(memberid [^)]*\): revoked: (.*)$")
PART = re.compile(r"\[(\d+)\]")


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("refka-kcat-groups") / "data", memory=True,
                      overrides={"group.initial.rebalance.delay.ms": "0"}).start()
    yield b
    b.stop()


class Kcat:
    """A ``kcat -G`` process; stdout records and stderr lines collected as they come."""

    def __init__(self, bootstrap: str, group: str, topic: str, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [KCAT, "-b", bootstrap, "-G", group, "-u", "-f", "%p %o %s\\n",
             "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000", *extra, topic],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.records: list[tuple[int, int, str]] = []
        self.stderr: list[str] = []
        self.lock = threading.Lock()
        self.readers = [threading.Thread(target=self._read_out, daemon=True),
                        threading.Thread(target=self._read_err, daemon=True)]
        for t in self.readers:
            t.start()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            p, o, v = line.rstrip("\n").split(" ", 2)
            with self.lock:
                self.records.append((int(p), int(o), v))

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self.lock:
                self.stderr.append(line.rstrip("\n"))

    def assignment(self) -> set[int]:
        owned: set[int] = set()
        with self.lock:
            for line in self.stderr:
                if m := ASSIGNED.search(line):
                    owned = {int(p) for p in PART.findall(m.group(1))}
                elif REVOKED.search(line):
                    owned = set()
        return owned

    def values(self) -> list[str]:
        with self.lock:
            return [v for _p, _o, v in self.records]

    def terminate(self) -> int:
        """SIGTERM: kcat closes its consumer (final commit, LeaveGroup) and exits 0."""
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(TIMEOUT)
        for t in self.readers:
            t.join(TIMEOUT)
        return rc

    def wait(self) -> int:
        rc = self.proc.wait(TIMEOUT)
        for t in self.readers:
            t.join(TIMEOUT)
        return rc


def produce_values(bootstrap: str, topic: str, values: list[str]) -> None:
    p = producer(bootstrap, acks="all")
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % PARTITIONS)
    assert p.flush(TIMEOUT) == 0


def test_two_balanced_kcats_split_the_topic_commit_and_a_third_resumes(group_broker):
    bootstrap = group_broker.bootstrap
    topic = f"kcat-grp-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    create_topic(bootstrap, topic, PARTITIONS)
    first = [f"first-{i}" for i in range(40)]
    produce_values(bootstrap, topic, first)

    a, b = Kcat(bootstrap, group, topic), Kcat(bootstrap, group, topic)
    try:
        wait_until(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2
                   and a.assignment() | b.assignment() == set(range(PARTITIONS)),
                   message="the two kcats split the partitions")
        wait_until(lambda: sorted(set(a.values()) | set(b.values())) == sorted(first),
                   message="every record read")
    finally:
        assert a.terminate() == 0, a.stderr
        assert b.terminate() == 0, b.stderr

    second = [f"second-{i}" for i in range(8)]
    produce_values(bootstrap, topic, second)
    c = Kcat(bootstrap, group, topic, "-e")  # exits at the end of every partition
    assert c.wait() == 0, c.stderr
    assert sorted(c.values()) == sorted(second), "resumed from the committed offsets"
