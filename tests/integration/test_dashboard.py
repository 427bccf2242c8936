"""The lab dashboard (``GET /`` of the admin API, refka/broker/dashboard.html) in headless
Chromium against a running ``refka serve --brokers 3 --memory --admin-port``: the three
brokers listed, a leader moved through the API shown on the page within a second of the call
returning (and in the timeline, with the old and new leader and epoch), produce rates per
topic from two scrapes of /metrics, a fault installed through the API listed and removed by
its button (and gone from the API), user text shown as text, and the admin token used as a
bearer token when one is set.

Debian's chromium (``/usr/bin/chromium``, the Makefile's system-deps-test installs it) driven
by Playwright (the test extra); Playwright's own browser builds are never downloaded. The
module is skipped only where that chromium is absent.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from playwright.sync_api import Page, expect, sync_playwright

from tests.brokers import BrokerProcess, admin_call, free_port_block, with_admin_api
from tests.waiting import wait_until

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is absent (Debian's chromium: make test installs it as root)",
                allow_module_level=True)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
LIVE_MS = 1000  # the promise: a leader change on the page within a second
POLL_WAIT_MS = 6000  # what the page polls every 2 s (brokers, faults, /metrics), with room


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with with_admin_api(tmp_path_factory.mktemp("dashboard") / "data", brokers=3,
                        overrides={"auto.create.topics.enable": "false"}) as served:
        yield served


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    """A page; afterwards, no script error happened on it and it asked only its own origin."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    requests: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("request", lambda r: requests.append(r.url))
    yield pg
    origin = pg.url.split("/", 3)[:3]
    context.close()
    assert errors == []
    assert all(u.split("/", 3)[:3] == origin or u.startswith("data:") for u in requests), requests


def open_dashboard(page: Page, url: str) -> None:
    """The page loaded, its first round of polling done and its timeline stream open."""
    page.goto(url + "/")
    expect(page.locator("body")).to_have_attribute("data-polls", re.compile(r"\d+"), timeout=POLL_WAIT_MS)
    expect(page.locator("#live")).to_have_attribute("data-state", "live", timeout=POLL_WAIT_MS)


def create_topic(b: BrokerProcess, url: str, partitions: int = 2) -> str:
    """A topic of replication factor 3 whose partitions all have their full ISR."""
    topic = f"dash-{uuid.uuid4().hex[:6]}"
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    a.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3)])[topic].result(60)

    def ready():
        status, view = admin_call(url, f"/api/topics/{topic}")
        return status == 200 and all(len(p["isr"]) == 3 and p["leader"] >= 0 for p in view["partitions"]) and view
    wait_until(ready, message=f"{topic} with its full ISR")
    return topic


def test_the_page_lists_the_three_brokers_and_the_controller(cluster, page):
    b, url = cluster
    status, c = admin_call(url, "/api/cluster")
    assert status == 200
    open_dashboard(page, url)
    rows = page.locator("#brokers tbody tr[data-broker]")
    expect(rows).to_have_count(3)
    assert [rows.nth(i).get_attribute("data-broker") for i in range(3)] == ["0", "1", "2"]
    controller = page.locator(f'#brokers tr[data-broker="{c["controller"]["id"]}"] .badge.controller')
    expect(controller).to_have_text("controller")
    expect(page.locator("#brokers .badge.controller")).to_have_count(1)
    expect(page.locator("#controller")).to_have_text(str(c["controller"]["id"]))


def test_a_leader_moved_through_the_api_shows_on_the_page_within_a_second(cluster, page):
    b, url = cluster
    topic = create_topic(b, url)
    _, view = admin_call(url, f"/api/topics/{topic}")
    before = view["partitions"][0]
    open_dashboard(page, url)
    row = page.locator(f'tr[data-topic="{topic}"][data-partition="0"]')
    leader = row.locator('td[data-field="leader"]')
    expect(leader).to_have_text(str(before["leader"]), timeout=POLL_WAIT_MS)
    target = next(r for r in before["isr"] if r != before["leader"])

    status, moved = admin_call(url, f"/api/topics/{topic}/partitions/0/leader", "POST", {"broker": target})
    t0 = time.monotonic()
    assert status == 200 and moved["leader"] == target, moved
    expect(leader).to_have_text(str(target), timeout=LIVE_MS)
    shown_after = time.monotonic() - t0
    expect(row.locator('td[data-field="leader-epoch"]')).to_have_text(str(moved["leader_epoch"]), timeout=LIVE_MS)
    change = page.locator(f'#timeline li[data-type="leader_changed"][data-topic="{topic}"][data-partition="0"]')
    expect(change.first).to_contain_text(
        f"leader {before['leader']} → {target}, epoch {moved['leader_epoch'] - 1} → {moved['leader_epoch']}",
        timeout=LIVE_MS)
    print(f"leader change shown {shown_after * 1000:.0f} ms after the API call returned")


def test_produce_rates_per_topic_come_from_two_scrapes_of_metrics(cluster, page):
    b, url = cluster
    topic = create_topic(b, url, partitions=1)
    open_dashboard(page, url)
    stop = threading.Event()

    def produce():
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
        while not stop.is_set():
            p.produce(topic, b"x" * 100)
            p.poll(0.01)
            time.sleep(0.005)
        p.flush(10)

    t = threading.Thread(target=produce)
    t.start()
    try:
        records_in = f'#rates tr[data-topic="{topic}"] td[data-field="records-in"]'
        page.wait_for_function(f"parseFloat(document.querySelector('{records_in}')?.textContent) > 0",
                               timeout=3 * POLL_WAIT_MS)
        bytes_in = page.locator(f'#rates tr[data-topic="{topic}"] td[data-field="bytes-in"]').text_content()
        assert bytes_in is not None and bytes_in.endswith("B/s") and not bytes_in.startswith("0 "), bytes_in
    finally:
        stop.set()
        t.join(30)


def test_a_fault_removed_from_the_page_is_gone_from_the_api(cluster, page):
    b, url = cluster
    open_dashboard(page, url)
    hostile = '<img src=x onerror="window.pwned=1">'
    status, fault = admin_call(url, "/api/faults", "POST",
                               {"kind": "latency", "api": "Produce", "latency_ms": 5, "client_id": hostile})
    assert status == 201, fault
    row = page.locator(f'#faults tr[data-fault="{fault["id"]}"]')
    expect(row).to_be_visible(timeout=POLL_WAIT_MS)
    expect(row.locator('[data-field="kind"]')).to_have_text("latency")
    expect(row.locator('[data-field="scope"]')).to_contain_text(f"Produce, client {hostile}")  # as text
    assert page.evaluate("window.pwned") is None
    expect(page.locator('#timeline li[data-type="fault_installed"]').first).to_contain_text(
        f"fault {fault['id']} installed")

    row.locator('button[data-action="remove"]').click()
    expect(row).to_have_count(0, timeout=POLL_WAIT_MS)
    status, listed = admin_call(url, "/api/faults")
    assert status == 200 and fault["id"] not in [f["id"] for f in listed["faults"]], listed
    expect(page.locator('#timeline li[data-type="fault_removed"]').first).to_contain_text(
        f"fault {fault['id']} removed from this page")


@pytest.fixture(scope="module")
def token_cluster(tmp_path_factory):
    admin_port = free_port_block()
    b = BrokerProcess(tmp_path_factory.mktemp("dashboard-token") / "data", memory=True,
                      extra_args=["--admin-port", str(admin_port), "--admin-token", "s3cret"]).start()
    try:
        yield b, f"http://127.0.0.1:{admin_port}"
    finally:
        b.stop()


def test_the_token_typed_in_is_the_bearer_token_of_a_removal(token_cluster, page):
    b, url = token_cluster
    req = urllib.request.Request(url + "/api/faults", method="POST",
                                 data=json.dumps({"kind": "latency", "latency_ms": 5}).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer s3cret"})
    with urllib.request.urlopen(req, timeout=30) as r:
        fault = json.loads(r.read())
    open_dashboard(page, url)
    row = page.locator(f'#faults tr[data-fault="{fault["id"]}"]')
    expect(row).to_be_visible(timeout=POLL_WAIT_MS)

    row.locator('button[data-action="remove"]').click()  # no token yet: refused
    expect(page.locator("#errors")).to_contain_text("401")
    assert fault["id"] in [f["id"] for f in admin_call(url, "/api/faults")[1]["faults"]]

    page.fill("#token", "s3cret")
    assert page.evaluate("sessionStorage.getItem('refka.adminToken')") == "s3cret"
    row.locator('button[data-action="remove"]').click()
    expect(row).to_have_count(0, timeout=POLL_WAIT_MS)
    assert admin_call(url, "/api/faults")[1]["faults"] == []
    expect(page.locator("#errors")).to_be_hidden()
