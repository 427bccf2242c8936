"""deploy/k8s/base/node-zone.py, the brokers' init container, against a stand-in API
server: HTTPS with a CA of its own (as the pod's service-account CA), the token as a
Bearer header, GET /api/v1/nodes/NODE_NAME, the zone label into the rack file."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.manifests import BASE

SCRIPT = BASE / "node-zone.py"
TOKEN = "pod-token-123"


class FakeApi:
    def __init__(self, workdir: Path) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str | None]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                api.requests.append((self.path, self.headers.get("Authorization")))
                name = self.path.removeprefix("/api/v1/nodes/")
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self.send_response(401)
                    self.end_headers()
                    return
                node = api.nodes.get(name)
                body = json.dumps(node or {"kind": "Status", "code": 404}).encode()
                self.send_response(200 if node else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=kubernetes", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", str(workdir / "key.pem"), "-out", str(workdir / "ca.crt")],
                       check=True, capture_output=True, timeout=60)
        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(workdir / "ca.crt", workdir / "key.pem")
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.account = workdir / "serviceaccount"
        self.account.mkdir()
        shutil.copy(workdir / "ca.crt", self.account / "ca.crt")
        (self.account / "token").write_text(TOKEN + "\n")

    def run(self, node: str, out: Path, **env: str) -> subprocess.CompletedProcess[str]:
        full = {**os.environ, "KUBERNETES_SERVICE_HOST": "127.0.0.1",
                "KUBERNETES_SERVICE_PORT": str(self.server.server_address[1]),
                "SERVICE_ACCOUNT_DIR": str(self.account), "NODE_NAME": node, **env}
        return subprocess.run([sys.executable, str(SCRIPT), str(out)], env=full, capture_output=True, text=True,
                              timeout=30)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def api(tmp_path: Path) -> Iterator[FakeApi]:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl to make the stand-in API server's certificate")
    a = FakeApi(tmp_path)
    yield a
    a.close()


def node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "labels": labels}}


def test_writes_the_zone_label_of_the_pods_node_into_the_rack_file(api, tmp_path):
    api.nodes["refka-worker2"] = node("refka-worker2", {"kubernetes.io/hostname": "refka-worker2",
                                                        "topology.kubernetes.io/zone": "zone-b"})
    out = tmp_path / "pod-info" / "rack"
    done = api.run("refka-worker2", out)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "zone-b"
    assert api.requests == [("/api/v1/nodes/refka-worker2", f"Bearer {TOKEN}")]


def test_a_node_without_a_zone_stops_the_pod_unless_zones_are_optional(api, tmp_path):
    api.nodes["bare"] = node("bare", {"kubernetes.io/hostname": "bare"})
    out = tmp_path / "rack"
    done = api.run("bare", out)
    assert done.returncode == 1 and "has no topology.kubernetes.io/zone label" in done.stderr
    assert not out.exists()
    done = api.run("bare", out, ZONE_OPTIONAL="true")
    assert done.returncode == 0 and out.read_text() == ""
    api.nodes["custom"] = node("custom", {"example.com/rack": "r7"})
    assert api.run("custom", out, ZONE_LABEL="example.com/rack").returncode == 0 and out.read_text() == "r7"


def test_an_api_server_it_cannot_verify_is_refused(api, tmp_path):
    api.nodes["n"] = node("n", {"topology.kubernetes.io/zone": "zone-a"})
    other = tmp_path / "other"
    other.mkdir()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=other",
                    "-keyout", str(other / "key.pem"), "-out", str(api.account / "ca.crt")],
                   check=True, capture_output=True, timeout=60)
    done = api.run("n", tmp_path / "rack")
    assert done.returncode != 0 and "CERTIFICATE_VERIFY_FAILED" in done.stderr
