"""Micro-benchmark of the codec's hot paths: microseconds per operation.

    .venv/bin/python lab/bench/codec.py        (or: python -m lab.bench.codec)

- decode a Produce v9 request, 10 partitions of 16 KiB batches, from a
  memoryview (as frames come off the socket);
- encode a Fetch v16 response, 10 partitions of 64 KiB records given as
  memoryviews (as segment slices are served);
- encode and decode a Metadata v12 response of 1000 topics, 4 partitions
  each, with refka's epoch and partition-count tags.

Prints figures only; speed targets live here, never in timed test assertions.
"""

from __future__ import annotations

import timeit
from collections.abc import Callable
from typing import Any

from refka.protocol.api import join
from refka.protocol.messages import APIS

PARTITIONS = 10
PRODUCE_BATCH = 16 * 1024
FETCH_RECORDS = 64 * 1024
METADATA_TOPICS = 1000
METADATA_PARTITIONS = 4


def _produce_v9_request_bytes() -> memoryview:
    produce = APIS[0]
    T = produce.Request.TopicProduceData
    P = T.PartitionProduceData
    request = produce.Request(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            T(
                name="bench",
                partition_data=[P(index=i, records=bytes(PRODUCE_BATCH)) for i in range(PARTITIONS)],
                undeleted_partition_count=PARTITIONS,
            )
        ],
    )
    return memoryview(join(produce.encode_request(request, 9)))


def _fetch_v16_response() -> Any:
    R = APIS[1].Response
    T = R.FetchableTopicResponse
    segment = memoryview(bytes(FETCH_RECORDS * PARTITIONS))
    return R(
        throttle_time_ms=0,
        error_code=0,
        session_id=1,
        responses=[
            T(
                topic_id=b"\x01" * 16,
                partitions=[
                    T.PartitionData(
                        partition_index=i,
                        error_code=0,
                        high_watermark=1_000_000,
                        last_stable_offset=1_000_000,
                        log_start_offset=0,
                        records=segment[i * FETCH_RECORDS : (i + 1) * FETCH_RECORDS],
                    )
                    for i in range(PARTITIONS)
                ],
            )
        ],
    )


def _metadata_v12_response() -> Any:
    R = APIS[3].Response
    T = R.MetadataResponseTopic
    P = T.MetadataResponsePartition
    return R(
        throttle_time_ms=0,
        brokers=[
            R.MetadataResponseBroker(node_id=b, host=f"broker-{b}", port=9092 + b, rack=None)
            for b in range(3)
        ],
        cluster_id="refka-bench",
        controller_id=0,
        topics=[
            T(
                error_code=0,
                name=f"topic-{t:05d}",
                topic_id=t.to_bytes(16, "big"),
                is_internal=False,
                partitions=[
                    P(
                        error_code=0,
                        partition_index=p,
                        leader_id=p % 3,
                        leader_epoch=5,
                        replica_nodes=[0, 1, 2],
                        isr_nodes=[0, 1, 2],
                        offline_replicas=[],
                        partition_epoch=1,
                    )
                    for p in range(METADATA_PARTITIONS)
                ],
                topic_epoch=1,
                partition_counts=T.PartitionCounts(
                    initial_partition_count=METADATA_PARTITIONS,
                    undeleted_partition_count=METADATA_PARTITIONS,
                ),
            )
            for t in range(METADATA_TOPICS)
        ],
        controller_epochs=R.ControllerEpochs(controller_epoch=1, controller_metadata_epoch=7),
        max_partition_epoch=1,
    )


def _us_per_op(fn: Callable[[], Any]) -> float:
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    best = min(timer.repeat(repeat=5, number=number))
    return best / number * 1e6


def main() -> None:
    produce, fetch, metadata = APIS[0], APIS[1], APIS[3]
    produce_wire = _produce_v9_request_bytes()
    fetch_response = _fetch_v16_response()
    metadata_response = _metadata_v12_response()
    metadata_wire = memoryview(join(metadata.encode_response(metadata_response, 12)))
    fetch_chunks = fetch.encode_response(fetch_response, 16)
    cases: list[tuple[str, Callable[[], Any], str]] = [
        (
            "Produce v9 request decode",
            lambda: produce.decode_request(produce_wire, 9),
            f"{PARTITIONS} partitions x {PRODUCE_BATCH // 1024} KiB, {len(produce_wire)} bytes",
        ),
        (
            "Fetch v16 response encode",
            lambda: fetch.encode_response(fetch_response, 16),
            f"{PARTITIONS} partitions x {FETCH_RECORDS // 1024} KiB, "
            f"{sum(len(c) for c in fetch_chunks)} bytes in {len(fetch_chunks)} buffers",
        ),
        (
            "Metadata v12 response encode",
            lambda: metadata.encode_response(metadata_response, 12),
            f"{METADATA_TOPICS} topics x {METADATA_PARTITIONS} partitions, {len(metadata_wire)} bytes",
        ),
        (
            "Metadata v12 response decode",
            lambda: metadata.decode_response(metadata_wire, 12),
            f"{METADATA_TOPICS} topics x {METADATA_PARTITIONS} partitions",
        ),
    ]
    width = max(len(name) for name, _, _ in cases)
    for name, fn, note in cases:
        fn()  # compile the codec outside the timing
        print(f"{name:<{width}}  {_us_per_op(fn):10.1f} µs/op   ({note})")


if __name__ == "__main__":
    main()
