"""Fixtures shared by the tests of refka/broker/log."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["file", "memory"])
def mode(request):
    """The storage mode a test runs in: files in Kafka's layout, or memory."""
    return request.param
