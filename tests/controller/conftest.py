"""Fixtures for the controller tests: metadata stores of both kinds (the
ZooKeeper ones on the run's private ZooKeeper, tests/conftest.py)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from refka.controller.store import EmbeddedStore, MetadataStore, ZooKeeperStore


class StoreFactory:
    """Sessions on one backend; every session opened is stopped at teardown."""

    def __init__(self, kind: str, first: MetadataStore) -> None:
        self.kind = kind
        self.first = first
        self.sessions: list[MetadataStore] = [first]

    async def session(self) -> MetadataStore:
        s = self.first.open_session()
        await s.start()
        self.sessions.append(s)
        return s

    async def close(self) -> None:
        for s in self.sessions:
            await s.stop()


@pytest.fixture(params=["embedded", "zookeeper"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    first: Any
    if request.param == "embedded":
        first = EmbeddedStore(tmp_path / "store")
    else:
        server = request.getfixturevalue("zookeeper")
        # A fresh chroot per test keeps tests apart (and exercises chroot creation).
        first = ZooKeeperStore(f"{server.connect}/t{uuid.uuid4().hex[:12]}", session_timeout=6.0)
    await first.start()
    factory = StoreFactory(request.param, first)
    yield factory
    await factory.close()
