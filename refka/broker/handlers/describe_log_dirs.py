"""DescribeLogDirs (key 35), v0-v4.

Behavior:
- One result per log directory of this broker (log.dirs), with every partition
  log in it (topics null: all of them; else the named partitions this broker
  has, others left out as Kafka does): partition_size is the bytes of its
  segments, offset_lag max(high watermark - log end offset, 0) as Kafka
  computes it for a current replica (so 0), is_future_key false (refka never
  moves replicas between directories). log_dir is the absolute path.
- v4: total_bytes and usable_bytes of the directory's filesystem
  (shutil.disk_usage: size and space available to the broker's user). A
  directory that cannot be read: KAFKA_STORAGE_ERROR for it.
- --memory brokers answer one pseudo directory named "(memory)", total and
  usable bytes -1 (unknown), as there is no disk.

Version notes:
- v0 KIP-113 (Kafka 4.0 dropped it, KIP-896; refka still serves it). v1 same
  (throttling, KIP-219). v2 flexible (KIP-482). v3 top-level error_code
  (KIP-784). v4 total_bytes, usable_bytes (KIP-827).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from refka.protocol import ErrorCode
from refka.protocol.messages.describe_log_dirs import DescribeLogDirs

from ..registry import handles

Resp = DescribeLogDirs.Response
RResult = Resp.DescribeLogDirsResult
RTopic = RResult.DescribeLogDirsTopic
RPartition = RTopic.DescribeLogDirsPartition

MEMORY_DIR = "(memory)"


@handles(DescribeLogDirs.key, 0, 4)
def handle_describe_log_dirs(ctx, req):
    broker = ctx.broker
    wanted = None
    if req.topics is not None:
        wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
    by_dir: dict[str, dict[str, list]] = {}
    if broker.memory:
        by_dir[MEMORY_DIR] = {}
    else:
        for d in broker.logs.log_dirs:
            by_dir[str(Path(d).resolve())] = {}
    for (topic, index), plog in sorted(broker.logs.logs().items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        key = MEMORY_DIR if plog.directory is None else str(plog.directory.parent.resolve())
        part = broker.replicas.get(topic, index)
        leo = plog.log_end_offset
        hw = part.high_watermark if part is not None else leo
        by_dir.setdefault(key, {}).setdefault(topic, []).append(
            RPartition(partition_index=index, partition_size=plog.size_in_bytes, offset_lag=max(hw - leo, 0),
                       is_future_key=False))
    results = []
    for log_dir, topics in by_dir.items():
        r = RResult(error_code=ErrorCode.NONE, log_dir=log_dir,
                    topics=[RTopic(name=t, partitions=ps) for t, ps in topics.items()],
                    total_bytes=-1, usable_bytes=-1)
        if log_dir != MEMORY_DIR:
            try:
                usage = shutil.disk_usage(log_dir)
                r.total_bytes, r.usable_bytes = usage.total, usage.free
            except OSError:
                r.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                r.topics = []
        results.append(r)
    return Resp(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)
