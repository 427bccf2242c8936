"""The handler registry (broker/registry.py): what ``@handles`` accepts and
records, and that ApiVersions answers from it. (tests/test_readme.py checks the
README's table against the same registry.)"""

from __future__ import annotations

import pytest

import refka.broker.handlers  # noqa: F401  (registers every handler)
from refka.broker import registry
from refka.broker.registry import HANDLERS, api_versions_response, handles, served_versions
from refka.protocol import ErrorCode
from refka.protocol.messages import APIS
from refka.protocol.messages.api_versions import ApiVersions
from refka.protocol.messages.controlled_shutdown import ControlledShutdown
from refka.protocol.messages.leader_and_isr import LeaderAndIsr
from refka.protocol.messages.list_offsets import ListOffsets
from refka.protocol.messages.produce import Produce
from refka.protocol.messages.stop_replica import StopReplica
from refka.protocol.messages.update_metadata import UpdateMetadata


@pytest.fixture
def empty_registry(monkeypatch):
    """A fresh HANDLERS for registrations made by a test, so the served ones are untouched."""
    fresh: dict[int, registry.Handler] = {}
    monkeypatch.setattr(registry, "HANDLERS", fresh)
    return fresh


def test_every_handler_serves_versions_its_message_declares():
    assert HANDLERS
    for key, h in HANDLERS.items():
        api = APIS[key]
        assert h.api is api
        assert api.min_version <= h.min_version <= h.max_version <= api.max_version, h


def test_api_versions_lists_exactly_the_registered_handlers_with_their_ranges():
    resp = api_versions_response(ErrorCode.NONE)
    listed = [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys]
    assert listed == [(key, lo, hi) for key, _name, lo, hi in served_versions()]
    assert {key for key, _lo, _hi in listed} == set(HANDLERS)
    assert resp.error_code == ErrorCode.NONE


def test_served_versions_are_by_key_with_the_declared_names():
    served = served_versions()
    assert [key for key, *_ in served] == sorted(HANDLERS)
    assert all(name == APIS[key].name for key, name, _lo, _hi in served)


def test_the_controller_to_broker_apis_are_marked_inter_broker_and_still_advertised():
    inter_broker = {key for key, h in HANDLERS.items() if h.inter_broker}
    assert inter_broker == {LeaderAndIsr.key, UpdateMetadata.key, StopReplica.key, ControlledShutdown.key}
    assert inter_broker <= {key for key, *_ in served_versions()}


def test_a_range_outside_the_declaration_is_refused_at_registration():
    with pytest.raises(ValueError, match=r"ListOffsets: serving v0-8 but declared v1-8"):
        handles(ListOffsets.key, 0, 8)
    with pytest.raises(ValueError, match=r"Produce: serving v0-12 but declared v0-11"):
        handles(Produce.key, 0, 12)


def test_an_api_without_a_declaration_cannot_be_handled():
    undeclared = max(APIS) + 1
    with pytest.raises(LookupError, match=f"no declaration for API key {undeclared}"):
        handles(undeclared, 0, 0)


def test_a_second_handler_for_an_api_is_refused():
    before = HANDLERS[Produce.key]
    with pytest.raises(RuntimeError, match="Produce has two handlers"):
        handles(Produce.key, 0, 11)(lambda ctx, req: None)
    assert HANDLERS[Produce.key] is before


def test_registration_records_the_range_whether_async_and_inter_broker(empty_registry):
    def plain(ctx, req):
        return None

    async def waits(ctx, req):
        return None

    assert handles(ApiVersions.key, 0, 4)(plain) is plain
    handles(LeaderAndIsr.key, 1, 7, inter_broker=True)(waits)
    versions = empty_registry[ApiVersions.key]
    assert (versions.api, versions.min_version, versions.max_version) == (ApiVersions, 0, 4)
    assert (versions.fn, versions.is_async, versions.inter_broker) == (plain, False, False)
    leader_and_isr = empty_registry[LeaderAndIsr.key]
    assert (leader_and_isr.min_version, leader_and_isr.max_version) == (1, 7)
    assert (leader_and_isr.fn, leader_and_isr.is_async, leader_and_isr.inter_broker) == (waits, True, True)
