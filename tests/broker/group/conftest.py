"""The ``env`` fixture: a coordinator leading offsets partition 0, loaded (harness.py)."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite(f"{__package__}.harness")  # its helpers assert as the tests do

from .harness import Env, loaded, make_env  # noqa: E402


@pytest.fixture
async def env() -> Env:
    return await loaded(make_env())
