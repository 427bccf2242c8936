"""Requests refka refuses because it does not serve the feature (issue 13): KIP-848's
ConsumerGroupHeartbeat, a Produce version above the served ones, and a confluent-kafka
transactional producer. Each is logged at warning level once per client and reason, with
the client id, the reason and the answer, and counted in the metrics per client and reason;
the connection of an unserved API is closed, as Kafka closes it."""

from __future__ import annotations

import socket
import struct
import urllib.request

import pytest
from confluent_kafka import KafkaException, Producer
from prometheus_client.parser import text_string_to_metric_families

from refka.broker.registry import HANDLERS
from refka.protocol.kafka_apis import KAFKA_API_NAMES
from tests.brokers import BrokerProcess, free_port_block
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def raw_request(port: int, api_key: int, version: int, client_id: str) -> bytes:
    """Sends a request header v1 (+ an empty body) and returns what came back (b"" when the
    broker closed the connection)."""
    cid = client_id.encode()
    payload = struct.pack(">hhih", api_key, version, 7, len(cid)) + cid + b"\x00" * 8
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        try:
            return s.recv(4096)
        except ConnectionResetError:
            return b""


def unserved_counts(url: str) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {(s.labels["client_id"], s.labels["reason"]): s.value
            for f in text_string_to_metric_families(text) for s in f.samples
            if s.name == "refka_unserved_requests_total"}


def warnings(b: BrokerProcess, client_id: str) -> list[str]:
    return [line for line in b.log_path.read_text().splitlines()
            if "request_not_served" in line and f"client_id={client_id}" in line]


def test_unserved_requests_are_logged_once_per_client_and_reason_and_counted(tmp_path):
    admin_port = free_port_block()
    with BrokerProcess(tmp_path / "data", memory=True, extra_args=["--admin-port", str(admin_port)]) as b:
        url = f"http://127.0.0.1:{admin_port}"
        for _ in range(3):
            assert raw_request(b.port, 68, 0, "kip848-app") == b""  # closed, no answer
        assert raw_request(b.port, 0, 99, "future-producer") == b""
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "eos-app", "client.id": "eos-app"})
        with pytest.raises(KafkaException, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"):
            p.init_transactions(30)

        def counted() -> dict[tuple[str, str], float]:
            return unserved_counts(url)

        wait_until(lambda: ("eos-app", "transactions: FindCoordinator for a transactional id") in counted(),
                   message="the transactional producer counted")
        counts = counted()
        reason = ("API ConsumerGroupHeartbeat (key 68) is not served: KIP-848's consumer group protocol is not "
                  "served; use group.protocol=classic")
        assert counts[("kip848-app", reason)] == 3
        assert counts[("future-producer", "Produce v99 is not served (v0-11 are)")] == 1
        logged = warnings(b, "kip848-app")
        assert len(logged) == 1 and "ConsumerGroupHeartbeat (key 68)" in logged[0] and "[warning" in logged[0]
        assert "answer='connection closed (as Kafka does)'" in logged[0]
        eos = warnings(b, "eos-app")
        assert len(eos) == 1 and "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in eos[0]


def test_kafkas_api_names_agree_with_every_served_api():
    for key, handler in HANDLERS.items():
        if key in KAFKA_API_NAMES:
            assert KAFKA_API_NAMES[key] == handler.api.name, key
    assert KAFKA_API_NAMES[68] == "ConsumerGroupHeartbeat" and KAFKA_API_NAMES[75] == "DescribeTopicPartitions"
