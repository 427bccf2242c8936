"""MemoryStore (log/store.py): a memory-mode segment's bytes, its pages allocated ahead of the
writes (MADV_POPULATE_WRITE). Whatever the populated boundary, the bytes read back are the
bytes written, through growth past the capacity, truncation and deletion."""

from __future__ import annotations

import mmap
import random

from refka.broker.log import store
from refka.broker.log.store import POPULATE_AHEAD, MemoryStore


def test_bytes_read_back_across_populated_boundaries_growth_and_truncation() -> None:
    rng = random.Random(5)
    s = MemoryStore(capacity=3 * POPULATE_AHEAD + 123)  # not a multiple of a page
    written = bytearray()
    while len(written) < 5 * POPULATE_AHEAD:  # past the capacity: the mapping grows
        chunk = rng.randbytes(rng.choice([1, 100, 4095, 4097, 70_000, POPULATE_AHEAD + 7]))
        s.write(chunk)
        written += chunk
        assert bytes(s.view(0, s.size)) == written
    assert s._populated >= s.size and s._populated % mmap.PAGESIZE == 0
    keep = 2 * POPULATE_AHEAD + 5
    s.truncate(keep)
    del written[keep:]
    s.write(b"after")
    written += b"after"
    assert bytes(s.view(0, s.size)) == written
    s.delete()
    s.write(b"again")
    assert (s.size, bytes(s.view(0, 5))) == (5, b"again")


def test_a_kernel_without_the_advice_still_stores_every_byte(monkeypatch) -> None:
    monkeypatch.setattr(store, "_MADV_POPULATE_WRITE", -1)  # EINVAL, as a kernel before 5.14
    monkeypatch.setattr(store, "_populate_works", True)
    s = MemoryStore(capacity=POPULATE_AHEAD)
    s.write(b"x" * 10_000)
    s.write(b"y" * 10)
    assert store._populate_works is False
    assert bytes(s.view(0, s.size)) == b"x" * 10_000 + b"y" * 10
