"""Which partition a key goes to: Kafka's murmur2 and KIP-253's linear hashing.

Pure functions, no I/O. The producer chooses partitions with them and the
consumer's ordering logic (``ordering.py``) reasons about where keys moved with
the same ones, so both sides agree by construction.

Linear hashing (seed 004, "Proposed Changes" 5)), with N the topic's
``initial_partition_count`` and U its ``undeleted_partition_count``:

- L is the largest integer with N * 2^L <= U (a "round" of N * 2^L buckets);
- S = U - N * 2^L is the split pointer: buckets 0..S-1 of this round have been
  split already, their keys shared with buckets N * 2^L .. U-1;
- a key with the non-negative hash h goes to b = h mod N * 2^L, and to
  h mod N * 2^(L+1) instead when b < S.

Growing U by one splits exactly one bucket (S moves by one); shrinking it by
one merges the last bucket back into the one it was split from. Keys never move
between two partitions that exist on both sides of a change, which is what
lets a consumer wait on few partitions (seed 5): see ``ordering.py``.

The hash is Java's ``Utils.murmur2`` made positive with ``Utils.toPositive``,
as Kafka's default partitioner does, so a key's partition for U = N (a topic
never resized) is the one a stock Java producer picks.
"""

from __future__ import annotations

_MURMUR2_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: the 32-bit MurmurHash2 of ``data``, returned
    as Java returns it, a signed int (-2^31 .. 2^31-1)."""
    length = len(data)
    h = (_MURMUR2_SEED ^ length) & _MASK32
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    tail = length % 4
    if tail >= 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(h: int) -> int:
    """Kafka's ``Utils.toPositive``: the sign bit cleared (not ``abs``, which
    has no positive counterpart for -2^31)."""
    return h & 0x7FFFFFFF


def partition_for_key(key_hash: int, initial: int, undeleted: int) -> int:
    """The partition of a key whose non-negative hash is ``key_hash``, under
    linear hashing over ``initial`` (N) and ``undeleted`` (U) partitions.

    Raises ValueError unless 1 <= N <= U: KIP-253 never lets U fall below N,
    and a count that does is metadata not to be trusted."""
    if initial < 1 or undeleted < initial:
        raise ValueError(f"need 1 <= initial ({initial}) <= undeleted ({undeleted})")
    if key_hash < 0:
        raise ValueError(f"key_hash must be non-negative, got {key_hash}")
    round_size = initial
    while round_size * 2 <= undeleted:
        round_size *= 2
    split_pointer = undeleted - round_size
    bucket = key_hash % round_size
    if bucket < split_pointer:
        bucket = key_hash % (round_size * 2)
    return bucket


def default_partition(key: bytes, initial: int, undeleted: int) -> int:
    """The partition of ``key``: ``to_positive(murmur2(key))`` through linear hashing."""
    return partition_for_key(to_positive(murmur2(key)), initial, undeleted)
