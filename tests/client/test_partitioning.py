"""Linear hashing (seed 004 section 5) against a table worked out by hand, and murmur2
against Kafka's own test vectors (UtilsTest.testMurmur2)."""

from __future__ import annotations

import pytest

from refka.client.partitioning import murmur2, partition_for_key


@pytest.mark.parametrize("key, expected", [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
])
def test_murmur2_is_javas(key, expected):
    assert murmur2(key) == expected


# (N, U, h) -> partition. L largest with N*2^L <= U, S = U - N*2^L; bucket = h mod N*2^L,
# and h mod N*2^(L+1) when that bucket is < S.
TABLE = [
    (1, 1, 12345, 0),
    (3, 3, 7, 1),            # L=0, S=0: h mod 3
    (3, 4, 3, 3),            # L=0, S=1: 3 mod 3 = 0 < 1, so 3 mod 6 = 3
    (3, 4, 6, 0),            # 6 mod 3 = 0 < 1, 6 mod 6 = 0
    (3, 4, 4, 1),            # 4 mod 3 = 1, not split
    (3, 4, 5, 2),
    (3, 5, 4, 4),            # S=2: 4 mod 3 = 1 < 2, 4 mod 6 = 4
    (3, 5, 5, 2),            # 5 mod 3 = 2, not split
    (3, 5, 7, 1),            # 7 mod 3 = 1 < 2, 7 mod 6 = 1
    (3, 6, 11, 5),           # L=1, S=0: h mod 6
    (3, 7, 6, 6),            # L=1, S=1: 6 mod 6 = 0 < 1, 6 mod 12 = 6
    (3, 7, 12, 0),
    (3, 7, 13, 1),           # 13 mod 6 = 1, not split
    (2, 3, 2, 2),            # L=0, S=1: 2 mod 2 = 0, 2 mod 4 = 2
    (2, 3, 4, 0),
    (2, 3, 3, 1),
    (4, 4, -1, 3),           # negative hashes are made positive first: 0x7fffffff mod 4
    (4, 9, 0x7FFFFFFF, 7),   # L=1, S=1: 2^31-1 mod 8 = 7, not split (7 >= 1)
    (4, 9, 16, 0),           # 16 mod 8 = 0 < 1: 16 mod 16 = 0
    (4, 9, 8, 8),            # 8 mod 8 = 0 < 1: 8 mod 16 = 8
]


@pytest.mark.parametrize("n, u, h, expected", TABLE)
def test_linear_hashing_table(n, u, h, expected):
    assert partition_for_key(h, n, u) == expected


def test_growing_by_one_moves_keys_out_of_one_partition_only():
    for n in (1, 2, 3, 4, 5):
        for u in range(n, 4 * n):
            moved = {(partition_for_key(h, n, u), partition_for_key(h, n, u + 1))
                     for h in range(2000) if partition_for_key(h, n, u) != partition_for_key(h, n, u + 1)}
            assert {b for _a, b in moved} == {u}, (n, u)  # only into the new partition
            assert len({a for a, _b in moved}) == 1, (n, u)  # only out of the one split


def test_below_initial_is_refused():
    with pytest.raises(ValueError):
        partition_for_key(1, 4, 3)
