"""Durable partition logs in Kafka's on-disk layout (or in memory).

- :mod:`.config`: ``LogConfig`` (Kafka topic-config names).
- :mod:`.log`: ``PartitionLog``, the running log (append, read, truncation, retention,
  epochs); :mod:`.loader`: opening one from disk (recovery, interrupted swaps).
- :mod:`.validator`: the rules a client's records pass before a leader appends them.
- :mod:`.cleaner`: ``LogCleaner``, compaction for cleanup.policy=compact.
- :mod:`.segment`: one segment and its lookups; :mod:`.index`: the sparse indexes;
  :mod:`.store`: mmapped file or bytearray behind a segment; :mod:`.open_files`: the
  bounded cache of the descriptors of the logs' files (log.open.files.max).
- :mod:`.epoch_cache`: the leader-epoch cache; :mod:`.checkpoint`: the format of Kafka's
  checkpoint files (leader epochs, log start offset, high watermarks, cleaner offsets).
- :mod:`.producer_state`: the idempotent producer's state and its snapshots.
- :mod:`.manager`: ``LogManager`` (all partitions of a broker, retention pass).
"""

from .config import InvalidConfigError, LogConfig
from .epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache
from .errors import (
    LogClosedError,
    LogError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from .log import AppendInfo, PartitionLog, ReadResult
from .manager import LogManager, RetentionResult, parse_partition_dir

__all__ = [
    "AppendInfo",
    "InvalidConfigError",
    "LeaderEpochCache",
    "LogClosedError",
    "LogConfig",
    "LogError",
    "LogManager",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "ReadResult",
    "RecordTooLargeError",
    "RetentionResult",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "UnexpectedAppendOffsetError",
    "parse_partition_dir",
]
