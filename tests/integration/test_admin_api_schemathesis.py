"""schemathesis against the admin API's own OpenAPI document, on a running ``refka serve
--admin-port``: every operation, generated inputs, answers as documented and never a 500
(schemathesis's default checks, among them the ``Allow`` header of a 405).

schemathesis is not one of refka's dependencies (it pins its own hypothesis): this module
is skipped where it is not installed, e.g. run it with
``pip install --target /tmp/st-lib schemathesis`` and ``PYTHONPATH=/tmp/st-lib``.
"""

from __future__ import annotations

import pytest
from kafka import KafkaProducer

from tests.brokers import BrokerProcess, free_port_block

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import given, settings  # noqa: E402  (after the skip: schemathesis brings its own)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def admin_schema(tmp_path_factory):
    admin_port = free_port_block()
    b = BrokerProcess(tmp_path_factory.mktemp("st") / "data", memory=True,
                      extra_args=["--admin-port", str(admin_port)]).start()
    try:
        p = KafkaProducer(bootstrap_servers=b.bootstrap, client_id="st-client")
        p.partitions_for("st-topic")  # something to record
        p.close()
        yield schemathesis.openapi.from_url(f"http://127.0.0.1:{admin_port}/api/openapi.json")
    finally:
        b.stop()


def test_every_operation_answers_as_its_document_says(admin_schema):
    # schemathesis's pytest plugin (from_fixture) does not load under pytest 9: its
    # strategies are driven by hand, one operation after another.
    operations = [result.ok() for result in admin_schema.get_all_operations()]
    # schemathesis leaves out the document's own path (loading it is its test)
    assert {op.path for op in operations} == {
        "/", "/api/connections", "/api/recordings", "/api/recordings/stream", "/metrics", "/api/brokers/{broker}/metadata",
        "/api/brokers/{broker}/metadata/freeze", "/api/brokers/{broker}/metadata/thaw", "/api/cluster",
        "/api/topics", "/api/topics/{topic}", "/api/groups", "/api/groups/{group}",
        "/api/topics/{topic}/partitions/{partition}/leader", "/api/topics/{topic}/elect-preferred",
        "/api/topics/{topic}/reassign", "/api/topics/{topic}/partition-count",
        *(f"/api/brokers/{{broker}}/{a}" for a in ("stop", "kill", "start", "expire-session")),
        "/api/timeline", "/api/timeline/stream", "/api/faults", "/api/faults/{fault}"}
    from schemathesis.checks import positive_data_acceptance

    for op in operations:
        if op.path in ("/api/timeline/stream", "/api/recordings/stream"):
            continue  # endless streams, which schemathesis would read to their end: test_admin_operations.py and
            # test_admin_reads.py read them
        # A fault's fields depend on each other (an error fault needs error_code and one of the APIs whose
        # answers refka can build; min_version <= max_version), which JSON Schema cannot say here: its
        # refusals are 400s that test_faults.py checks one by one, so only that check is left out for it.
        excluded = [positive_data_acceptance] if (op.path, op.method.lower()) == ("/api/faults", "post") else []

        def check(op, excluded: list) -> None:
            @given(case=op.as_strategy())
            @settings(max_examples=40, deadline=None)
            def answers_as_documented(case):
                case.call_and_validate(excluded_checks=excluded)

            answers_as_documented()

        check(op, excluded)
