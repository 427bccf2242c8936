"""Producer ids (InitProducerId), unique across the cluster and across restarts.

Kafka's ZooKeeper-mode ProducerIdManager: a broker claims a block of
``BLOCK_SIZE`` ids by a version-checked write of ``/latest_producer_id_block``
(``znodes.ProducerIdBlock``: the last block claimed by anyone), then hands the
ids out from memory; an exhausted block claims the next. Ids of a block a
broker did not hand out before it stopped are never used again.

Error contract: ``claim_block`` retries by itself when another broker claimed a
block between its read and its write (BadVersionError, NodeExistsError). Any
other StoreError (ConnectionLossError while SUSPENDED, SessionExpiredError,
ConnectionClosedError after LOST) goes to the caller, which answers a retriable
error; the next call starts again from a fresh read. A write that was applied
although its answer was lost makes that block unused, never a block given
twice: the next claim reads past it.
"""

from __future__ import annotations

import asyncio

import structlog

from . import znodes
from .store import BadVersionError, MetadataStore, NodeExistsError, NoNodeError

BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
_INT64_MAX = 2**63 - 1

log = structlog.get_logger("refka.controller.producer_ids")


class ProducerIdsExhaustedError(Exception):
    """Every producer id up to Int64 max was handed out (not expected to happen)."""


async def claim_block(store: MetadataStore, broker_id: int, size: int = BLOCK_SIZE) -> znodes.ProducerIdBlock:
    """Claim the next block of ``size`` ids for ``broker_id``."""
    path = znodes.LATEST_PRODUCER_ID_BLOCK
    while True:
        try:
            data, stat = await store.get(path)
            version: int | None = stat.version
        except NoNodeError:
            data, version = b"", None
        # Kafka creates the znode empty at start-up: empty data is "no block yet".
        start = znodes.ProducerIdBlock.from_json(data).block_end + 1 if data else 0
        if start > _INT64_MAX - size:
            raise ProducerIdsExhaustedError(f"no block of {size} producer ids left after {start - 1}")
        block = znodes.ProducerIdBlock(broker_id, start, start + size - 1)
        try:
            if version is None:
                await store.create(path, block.to_json())
            else:
                await store.set(path, block.to_json(), version)
            return block
        except (BadVersionError, NodeExistsError):
            continue  # another broker claimed one first: read again


class ProducerIdManager:
    """One broker's producer ids: ``await generate(store)`` gives the next one.

    ``store`` is the broker's own metadata-store session, passed per call since
    the manager exists before the session. Claims are serialized; a call that
    finds ids left in the block does not wait for anything.
    """

    def __init__(self, broker_id: int, block_size: int = BLOCK_SIZE) -> None:
        self.broker_id = broker_id
        self.block_size = block_size
        self.block: znodes.ProducerIdBlock | None = None
        self._next = 0
        self._claiming = asyncio.Lock()

    def _take(self) -> int | None:
        b = self.block
        if b is None or self._next > b.block_end:
            return None
        pid = self._next
        self._next += 1
        return pid

    async def generate(self, store: MetadataStore) -> int:
        pid = self._take()
        while pid is None:
            async with self._claiming:
                pid = self._take()  # another call may have claimed while we waited
                if pid is None:
                    block = await claim_block(store, self.broker_id, self.block_size)
                    self.block, self._next = block, block.block_start
                    log.info("producer_id_block_claimed", broker=self.broker_id, block_start=block.block_start,
                             block_end=block.block_end)
                    pid = self._take()
        return pid
