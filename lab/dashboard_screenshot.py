"""The README's picture of the lab dashboard (``GET /`` of the admin API), made again:

    python -m lab.dashboard_screenshot [--out docs/dashboard.png] [--width 1440]

Starts ``refka serve --brokers 3 --memory --admin-port`` on free ports, creates two topics of
replication factor 3, produces to both and consumes one (confluent-kafka) so the rates have
something to show, installs two faults (latency on broker 1's Produce, which fires, and a
Fetch error on one topic that waits), moves a partition's leader through the API once two
scrapes of /metrics are on the page, and takes the page in headless Chromium (Debian's
``/usr/bin/chromium``, driven by Playwright, as tests/integration/test_dashboard.py does)
while the moved leader's cells still flash. The cluster is stopped on the way out.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
TOPICS = {"orders": 3, "payments": 2}


def free_port_block(n: int) -> int:
    """A base port p such that p..p+n-1 are free on 127.0.0.1 (best effort)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        try:
            for i in range(1, n):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", base + i))
        except OSError:
            continue
        return base
    raise RuntimeError("no free block of ports")


@contextmanager
def cluster(brokers: int = 3) -> Iterator[tuple[str, str]]:
    """``refka serve --brokers N --memory --admin-port``: (bootstrap servers, admin API URL)."""
    port, admin_port = free_port_block(brokers), free_port_block(1)
    with tempfile.TemporaryDirectory(prefix="refka-dashboard-") as tmp:
        log = open(Path(tmp) / "broker.log", "w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "refka.cli", "serve", "--brokers", str(brokers), "--memory", "--port", str(port),
             "--admin-port", str(admin_port), "--data-dir", str(Path(tmp) / "data"),
             "--override", "auto.create.topics.enable=false"],
            stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith("refka ready"):
                    break
            else:
                raise RuntimeError(f"refka serve did not start:\n{(Path(tmp) / 'broker.log').read_text()[-3000:]}")
            yield ",".join(f"127.0.0.1:{port + i}" for i in range(brokers)), f"http://127.0.0.1:{admin_port}"
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()


def call(url: str, path: str, method: str = "GET", body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def wait_for(what: str, predicate: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if got := predicate():
                return got
        except OSError:  # the API between states
            pass
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


def traffic(bootstrap: str, stop: threading.Event) -> list[threading.Thread]:
    """A producer to every topic, a consumer of the first, until ``stop``."""
    from confluent_kafka import Consumer, Producer

    def produce() -> None:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        i = 0
        while not stop.is_set():
            for topic in TOPICS:
                p.produce(topic, b"%08d" % i + b"." * (60 if topic == "orders" else 240), key=b"%d" % (i % 17))
            p.poll(0)
            i += 1
            time.sleep(0.01)
        p.flush(10)

    def consume() -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dashboard-shot", "auto.offset.reset": "earliest"})
        c.subscribe([next(iter(TOPICS))])
        while not stop.is_set():
            c.poll(0.2)
        c.close()

    threads = [threading.Thread(target=produce, daemon=True), threading.Thread(target=consume, daemon=True)]
    for t in threads:
        t.start()
    return threads


def shoot(out: Path, width: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    from playwright.sync_api import expect, sync_playwright

    with cluster() as (bootstrap, url), sync_playwright() as pw:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic(t, num_partitions=n, replication_factor=3)
                                      for t, n in TOPICS.items()]).values():
            f.result(60)
        for topic in TOPICS:
            wait_for(f"{topic} with its full ISR", lambda t=topic: all(
                len(p["isr"]) == 3 for p in call(url, f"/api/topics/{t}")["partitions"]))
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto(url + "/")
        expect(page.locator("#live")).to_have_attribute("data-state", "live", timeout=10_000)

        stop = threading.Event()
        threads = traffic(bootstrap, stop)
        try:
            call(url, "/api/faults", "POST", {"kind": "latency", "broker": 1, "api": "Produce", "latency_ms": 20})
            call(url, "/api/faults", "POST", {"kind": "error", "api": "Fetch", "topic": "payments",
                                              "error_code": "NOT_LEADER_OR_FOLLOWER", "count": 3})
            # two scrapes of /metrics with records produced, and fetched by the group, between them
            for topic, field in [*((t, "records-in") for t in TOPICS), (next(iter(TOPICS)), "bytes-out")]:
                page.wait_for_function(
                    f"parseFloat(document.querySelector('#rates tr[data-topic=\"{topic}\"] "
                    f"td[data-field=\"{field}\"]')?.textContent) > 0", timeout=30_000)
            p0 = call(url, "/api/topics/orders")["partitions"][0]
            target = next(r for r in p0["isr"] if r != p0["leader"])
            call(url, "/api/topics/orders/partitions/0/leader", "POST", {"broker": target})
            leader = page.locator('tr[data-topic="orders"][data-partition="0"] td[data-field="leader"]')
            expect(leader).to_have_text(str(target), timeout=1000)
            page.wait_for_timeout(400)  # the moved leader's cells still lit
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), full_page=True)
        finally:
            stop.set()
            for t in threads:
                t.join(15)
            browser.close()
    print(f"{out}: {out.stat().st_size // 1024} KB")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("docs/dashboard.png"), help="the PNG to write")
    ap.add_argument("--width", type=int, default=1440, help="the browser window's width (px)")
    args = ap.parse_args(argv)
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is absent: apt-get install chromium", file=sys.stderr)
        return 1
    shoot(args.out, args.width)
    return 0


if __name__ == "__main__":
    sys.exit(main())
