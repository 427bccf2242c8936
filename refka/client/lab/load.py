"""A plan's load (``load:`` in a plan): one producer and one consumer of refka's own client
on one topic for the plan's time, and what became of every record.

The producer (client id ``refka-lab-producer``) is idempotent with acks=all and sends
``rate`` records a second, keyed ``k0``..``k{keys-1}`` in turn (unkeyed with ``keys: 0``),
each value ``RUN:SEQ:`` padded to ``value_bytes`` (RUN tells this run's records from any
other's on the topic). The consumer (``refka-lab-consumer``) reads every partition from
the earliest offset, without a group (following the topic's partitions as its metadata
changes) or, with ``group``, as a member of that group (KIP-253's ordered delivery).

``start`` returns once a first record has gone round (sent, acknowledged, consumed): from
then on the cluster is under load. ``stop`` stops sending, waits for every record's answer,
then gives the consumer up to ``drain_timeout`` seconds to read every acknowledged record,
and reports (``LoadReport``):

- sent, acknowledged, failed (answered with an error; ``errors`` by name);
- consumed: distinct records read; lost: acknowledged and never read;
- duplicates: records found at more than one offset (the log has them twice; reading the
  same offset again, as a consumer does after a rebalance, is not one);
- out_of_order: records read, for the first time, after a later record of their key.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from refka.client.consumer import Consumer
from refka.client.errors import KafkaError
from refka.client.producer import Producer, RecordMetadata

from .plan import LoadSpec

PRODUCER_CLIENT_ID = "refka-lab-producer"
CONSUMER_CLIENT_ID = "refka-lab-consumer"


class LoadError(Exception):
    pass


@dataclass
class LoadReport:
    topic: str
    sent: int = 0
    acknowledged: int = 0
    failed: int = 0
    consumed: int = 0
    lost: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    drained: bool = False  # every acknowledged record was read within drain_timeout
    errors: dict[str, int] = field(default_factory=dict)
    consumer_error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def violations(self, expect: dict[str, int]) -> list[str]:
        """The plan's expectations (``max_lost: 0``, ``min_acknowledged: 100``...) not met."""
        out = []
        for key, bound in expect.items():
            bound_kind, _, counter = key.partition("_")
            value = getattr(self, counter)
            if (value > bound) if bound_kind == "max" else (value < bound):
                out.append(f"{counter} {value}, expected {'at most' if bound_kind == 'max' else 'at least'} {bound}")
        if self.consumer_error is not None:
            out.append(f"the consumer failed: {self.consumer_error}")
        return out

    def summary(self) -> str:
        errors = ", ".join(f"{k}={v}" for k, v in sorted(self.errors.items()))
        return (f"sent {self.sent}, acknowledged {self.acknowledged}, failed {self.failed}"
                f"{' (' + errors + ')' if errors else ''}, consumed {self.consumed}, lost {self.lost}, "
                f"duplicates {self.duplicates}, out of order {self.out_of_order}"
                f"{'' if self.drained else ' (not every acknowledged record was read in time)'}")


class Load:
    def __init__(self, spec: LoadSpec, bootstrap: str, run_id: str) -> None:
        self.spec = spec
        self.bootstrap = bootstrap
        self._prefix = f"{run_id}:".encode()
        self._producer = Producer(bootstrap_servers=bootstrap, client_id=PRODUCER_CLIENT_ID, acks="all",
                                  enable_idempotence=True, linger_ms=5, request_timeout_ms=10_000,
                                  delivery_timeout_ms=60_000, metadata_max_age_ms=2_000)
        group: dict[str, Any] = {} if spec.group is None else {
            "group_id": spec.group, "session_timeout_ms": 10_000, "heartbeat_interval_ms": 1_000,
            "auto_commit_interval_ms": 1_000}
        self._consumer = Consumer(spec.topic, bootstrap_servers=bootstrap, client_id=CONSUMER_CLIENT_ID,
                                  auto_offset_reset="earliest", fetch_max_wait_ms=200, request_timeout_ms=10_000,
                                  metadata_max_age_ms=1_000, **group)
        self.sent = 0
        self._acked: dict[int, tuple[int, int]] = {}  # seq -> (partition, offset)
        self._errors: Counter[str] = Counter()
        self._read: dict[int, set[tuple[int, int]]] = {}  # seq -> where it was read
        self._last_of_key: dict[bytes | None, int] = {}
        self._out_of_order = 0
        self._consumer_error: str | None = None
        self._progress = asyncio.Event()  # set whenever the consumer read something
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # -- running --------------------------------------------------------------------------

    async def start(self, timeout: float = 30.0) -> None:
        """Starts both clients; returns once a record has been acknowledged and read."""
        try:
            async with asyncio.timeout(timeout):
                await self._producer.start()
                await self._consumer.start()
                self._tasks = [asyncio.create_task(self._produce(), name="lab-load-producer"),
                               asyncio.create_task(self._consume(), name="lab-load-consumer")]
                while not any(seq in self._read for seq in self._acked):
                    if self._consumer_error is not None:
                        raise LoadError(f"the consumer failed: {self._consumer_error}")
                    self._progress.clear()
                    await self._progress.wait()
        except TimeoutError:
            raise LoadError(f"no record of the load went round (sent, acknowledged, read) within {timeout:g} s: "
                            f"sent {self.sent}, acknowledged {len(self._acked)}, read {len(self._read)}") from None

    def counts(self) -> tuple[int, int, int]:
        """Sent, acknowledged, read so far."""
        return self.sent, len(self._acked), len(self._read)

    async def stop(self) -> LoadReport:
        """Stops sending, waits for the answers, lets the consumer read what was acknowledged
        (``drain_timeout``), stops both clients and reports."""
        self._stopping.set()
        deadline = time.monotonic() + self.spec.drain_timeout
        producer_task = self._tasks[0] if self._tasks else None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.spec.drain_timeout):
                if producer_task is not None:
                    await producer_task
                await self._producer.stop()  # a flush: every record answered
        await self._producer.stop()  # not stopped yet when the time ran out in send(): what is left fails
        drained = False
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                while not self._all_read():
                    if self._consumer_error is not None:
                        break
                    self._progress.clear()
                    await self._progress.wait()
                drained = self._all_read()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        with contextlib.suppress(Exception):
            async with asyncio.timeout(10):
                await self._consumer.stop()
        return self.report(drained)

    def _all_read(self) -> bool:
        return all(seq in self._read for seq in self._acked)

    def report(self, drained: bool) -> LoadReport:
        return LoadReport(
            topic=self.spec.topic, sent=self.sent, acknowledged=len(self._acked),
            failed=sum(self._errors.values()), consumed=len(self._read),
            lost=sum(1 for seq in self._acked if seq not in self._read),
            duplicates=sum(1 for where in self._read.values() if len(where) > 1),
            out_of_order=self._out_of_order, drained=drained, errors=dict(self._errors),
            consumer_error=self._consumer_error)

    # -- the two clients' loops -------------------------------------------------------------

    async def _produce(self) -> None:
        spec = self.spec
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        while not self._stopping.is_set():
            due = int((loop.time() - t0) * spec.rate) + 1
            while self.sent < due and not self._stopping.is_set():
                seq = self.sent
                self.sent += 1
                header = self._prefix + b"%d:" % seq
                value = header + b"x" * max(0, spec.value_bytes - len(header))
                key = b"k%d" % (seq % spec.keys) if spec.keys else None
                try:
                    fut = await self._producer.send(spec.topic, value, key=key)
                except Exception as e:  # no room, or the producer stopped: this record failed
                    self._errors[type(e).__name__] += 1
                    continue
                fut.add_done_callback(lambda f, seq=seq: self._answered(seq, f))  # type: ignore[misc]
            # Pacing: sleep until the next record is due (or the plan ends).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), max(0.001, t0 + self.sent / spec.rate - loop.time()))

    def _answered(self, seq: int, fut: asyncio.Future[RecordMetadata]) -> None:
        if fut.cancelled():
            self._errors["cancelled"] += 1
        elif (e := fut.exception()) is not None:
            self._errors[e.code.name if isinstance(e, KafkaError) else type(e).__name__] += 1
        else:
            meta = fut.result()
            self._acked[seq] = (meta.partition, meta.offset)

    async def _consume(self) -> None:
        while True:
            try:
                batches = await self._consumer.getmany(timeout_ms=200)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a group error retrying cannot mend: the report says so
                self._consumer_error = f"{type(e).__name__}: {e}"
                self._progress.set()
                return
            for records in batches.values():
                for r in records:
                    self._read_one(r.partition, r.offset, r.key, r.value)
            if batches:
                self._progress.set()

    def _read_one(self, partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        if value is None or not value.startswith(self._prefix):
            return  # not this run's
        raw = value[len(self._prefix):].split(b":", 1)[0]
        if not raw.isdigit():
            return
        seq = int(raw)
        where = self._read.get(seq)
        if where is None:
            self._read[seq] = {(partition, offset)}
            last = self._last_of_key.get(key, -1)
            if seq < last:
                self._out_of_order += 1
            else:
                self._last_of_key[key] = seq
        else:
            where.add((partition, offset))
