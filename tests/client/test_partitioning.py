"""Kafka's murmur2 and KIP-253's linear hashing (refka/client/partitioning.py)."""

from __future__ import annotations

import random

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from refka.client.partitioning import default_partition, murmur2, partition_for_key, to_positive

# Apache Kafka's UtilsTest.testMurmur2: what Java's Utils.murmur2 returns (a signed int).
KAFKA_MURMUR2_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), KAFKA_MURMUR2_VECTORS.items())
def test_murmur2_returns_what_kafkas_own_test_pins(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_murmur2_agrees_with_kafka_python_on_every_length_and_byte() -> None:
    # kafka-python returns the same 32 bits unsigned; lengths 0..40 cover every tail size.
    rng = random.Random(253)
    for length in range(41):
        for _ in range(25):
            key = rng.randbytes(length)
            assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key), key
            assert -(2**31) <= murmur2(key) < 2**31


def test_to_positive_clears_the_sign_bit_only() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0  # abs() would overflow in Java; toPositive does not
    assert to_positive(0) == 0
    assert to_positive(12345) == 12345
    assert to_positive(-790332482) == -790332482 & 0x7FFFFFFF


# (N, U, h) -> partition, each worked out by hand from the rule:
# R = N * 2^L the largest with R <= U, S = U - R; b = h mod R, and h mod 2R if b < S.
HAND_WORKED = [
    (4, 4, 13, 1),  # R=4 S=0: 13 mod 4 = 1
    (4, 5, 13, 1),  # R=4 S=1: 13 mod 4 = 1, not < 1
    (4, 5, 12, 4),  # R=4 S=1: 12 mod 4 = 0 < 1, so 12 mod 8 = 4 (bucket 0 split into 0 and 4)
    (4, 5, 8, 0),  # R=4 S=1: 8 mod 4 = 0 < 1, 8 mod 8 = 0 (stays in 0)
    (4, 6, 13, 5),  # R=4 S=2: 13 mod 4 = 1 < 2, 13 mod 8 = 5
    (4, 6, 7, 3),  # R=4 S=2: 7 mod 4 = 3, not < 2
    (4, 8, 13, 5),  # R=8 S=0: 13 mod 8 = 5
    (4, 8, 15, 7),  # R=8 S=0: 15 mod 8 = 7
    (4, 9, 16, 0),  # R=8 S=1: 16 mod 8 = 0 < 1, 16 mod 16 = 0
    (4, 9, 24, 8),  # R=8 S=1: 24 mod 8 = 0 < 1, 24 mod 16 = 8
    (4, 9, 25, 1),  # R=8 S=1: 25 mod 8 = 1, not < 1
    (4, 12, 13, 5),  # R=8 S=4: 13 mod 8 = 5, not < 4
    (4, 12, 11, 11),  # R=8 S=4: 11 mod 8 = 3 < 4, 11 mod 16 = 11
    (4, 12, 27, 11),  # R=8 S=4: 27 mod 8 = 3 < 4, 27 mod 16 = 11
    (4, 12, 19, 3),  # R=8 S=4: 19 mod 8 = 3 < 4, 19 mod 16 = 3
    (3, 5, 10, 4),  # R=3 (6 > 5) S=2: 10 mod 3 = 1 < 2, 10 mod 6 = 4
    (3, 5, 11, 2),  # R=3 S=2: 11 mod 3 = 2, not < 2
    (3, 5, 9, 3),  # R=3 S=2: 9 mod 3 = 0 < 2, 9 mod 6 = 3
    (1, 1, 99, 0),  # R=1 S=0: everything in 0
    (1, 3, 5, 1),  # R=2 S=1: 5 mod 2 = 1, not < 1
    (1, 3, 6, 2),  # R=2 S=1: 6 mod 2 = 0 < 1, 6 mod 4 = 2
    (1, 3, 4, 0),  # R=2 S=1: 4 mod 2 = 0 < 1, 4 mod 4 = 0
    (6, 6, 2**31 - 1, 1),  # R=6 S=0: 2147483646 = 6 * 357913941, so the largest hash mod 6 = 1
]


@pytest.mark.parametrize(("initial", "undeleted", "key_hash", "partition"), HAND_WORKED)
def test_linear_hashing_matches_the_hand_worked_table(
    initial: int, undeleted: int, key_hash: int, partition: int
) -> None:
    assert partition_for_key(key_hash, initial, undeleted) == partition


def _by_splitting(key_hash: int, initial: int, undeleted: int) -> int:
    """An independent statement of linear hashing: start from h mod N and grow
    one partition at a time; growing U splits bucket s = U - R into s and s + R,
    a key of s moving to s + R iff h mod 2R = s + R."""
    partition, count = key_hash % initial, initial
    while count < undeleted:
        round_size = initial
        while round_size * 2 <= count:
            round_size *= 2
        split = count - round_size
        if partition == split and key_hash % (2 * round_size) == split + round_size:
            partition = split + round_size
        count += 1
    return partition


def test_linear_hashing_equals_bucket_splitting_one_partition_at_a_time() -> None:
    for initial in range(1, 7):
        for undeleted in range(initial, 8 * initial + 3):
            for key_hash in range(4 * undeleted + 17):
                assert partition_for_key(key_hash, initial, undeleted) == _by_splitting(
                    key_hash, initial, undeleted
                ), (initial, undeleted, key_hash)


def test_every_partition_below_the_count_gets_keys_and_none_above() -> None:
    for initial in range(1, 6):
        for undeleted in range(initial, 6 * initial):
            seen = {partition_for_key(h, initial, undeleted) for h in range(4 * undeleted)}
            assert seen == set(range(undeleted))


def test_growing_by_one_moves_keys_from_one_partition_to_the_new_one_only() -> None:
    for initial in range(1, 6):
        for undeleted in range(initial, 6 * initial):
            moved = {
                (partition_for_key(h, initial, undeleted), partition_for_key(h, initial, undeleted + 1))
                for h in range(8 * undeleted)
                if partition_for_key(h, initial, undeleted) != partition_for_key(h, initial, undeleted + 1)
            }
            assert len({old for old, _ in moved}) == 1
            assert {new for _, new in moved} == {undeleted}


def test_a_topic_never_resized_hashes_as_kafkas_default_partitioner() -> None:
    rng = random.Random(11)
    for _ in range(500):
        key = rng.randbytes(rng.randrange(1, 30))
        count = rng.randrange(1, 50)
        assert default_partition(key, count, count) == (kafka_python_murmur2(key) & 0x7FFFFFFF) % count


def test_default_partition_hashes_the_key_with_murmur2_made_positive() -> None:
    # murmur2(b"foobar") = -790332482; made positive: 1357151166 = 4 * 339287791 + 2
    assert to_positive(murmur2(b"foobar")) == 1357151166
    assert default_partition(b"foobar", 4, 4) == 2
    # N=4, U=6: R=4 S=2, 1357151166 mod 4 = 2, not < 2
    assert default_partition(b"foobar", 4, 6) == 2
    # N=4, U=7: R=4 S=3, 2 < 3 so mod 8: 1357151166 = 8 * 169643895 + 6
    assert default_partition(b"foobar", 4, 7) == 6


@pytest.mark.parametrize(("initial", "undeleted"), [(0, 0), (4, 3), (-1, 4)])
def test_counts_kip_253_never_allows_are_refused(initial: int, undeleted: int) -> None:
    with pytest.raises(ValueError):
        partition_for_key(5, initial, undeleted)


def test_a_negative_hash_is_refused() -> None:
    with pytest.raises(ValueError):
        partition_for_key(-1, 4, 4)
