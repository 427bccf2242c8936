"""Which partition a key goes to: KIP-253's linear hashing over Java's murmur2.

Seed 004 section 5): with N = initial_partition_count and U =
undeleted_partition_count, L is the largest integer with N*2^L <= U and the
split pointer S = U - N*2^L; a key of hash h goes to bucket h mod N*2^L, and to
h mod N*2^(L+1) when that bucket is below S (it has already been split). So
growing U by one moves keys out of exactly one partition (the one split), and
shrinking by one moves the keys of the last partition back into the one it
was split from: no key moves between two partitions that both stay.

h is Java's default partitioner's hash, ``toPositive(murmur2(key))``, so a
topic that never changed (U == N, L = 0, S = 0) places keys exactly where
Java's and librdkafka's ``murmur2_random`` producers do.
"""

from __future__ import annotations

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF


def murmur2(key: bytes) -> int:
    """Kafka's ``Utils.murmur2``: the 32-bit MurmurHash2 of ``key``, as Java's signed int."""
    length = len(key)
    h = (_SEED ^ length) & _MASK32
    end = length - length % 4
    for i in range(0, end, 4):
        k = int.from_bytes(key[i:i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    tail = length % 4
    if tail == 3:
        h ^= key[end + 2] << 16
    if tail >= 2:
        h ^= key[end + 1] << 8
    if tail >= 1:
        h ^= key[end]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key_hash: int, initial: int, undeleted: int) -> int:
    """The partition of a key hashing to ``key_hash`` (murmur2's value; made positive here
    as Java's ``toPositive`` does) by linear hashing over ``initial`` (N) and ``undeleted`` (U)."""
    if initial < 1 or undeleted < initial:
        raise ValueError(f"linear hashing needs 1 <= initial ({initial}) <= undeleted ({undeleted})")
    h = key_hash & 0x7FFFFFFF
    level = initial
    while level * 2 <= undeleted:
        level *= 2  # N*2^L
    split = undeleted - level  # S
    bucket = h % level
    if bucket < split:
        bucket = h % (level * 2)
    return bucket
