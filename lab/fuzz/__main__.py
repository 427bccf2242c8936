"""``python -m lab.fuzz``: a hostile client against a real ``refka serve``.

It starts a broker (``--brokers N`` in one process, JSON logs to a file),
creates the topics the seeds name, then sends requests from several
connections at once: for every served API and version, a seed from refka's
own declarations (lab/fuzz/seeds.py), usually with values at their types'
edges, often mutated on the wire (lab/fuzz/mutate.py). After every
``--health-every`` frames a fresh connection must get ApiVersions and
Metadata answered within 5 s, else that is a hang. At the end the broker's
log is scanned: a ``handler_failed`` or ``response_encode_failed`` line, any
error-level line or a traceback is a bug of refka's that a client's bytes
reached; each distinct one is printed once.

It prints frames/s, crashes (the broker process died), hangs, the distinct
error lines and the broker's peak RSS, and exits 1 when there was any crash,
hang or error line. ``--frames`` bounds the run by count (``make test`` runs a
short one), ``--seconds`` by time (``make fuzz``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from refka.client.connection import BrokerConnection, BrokerConnectionError
from refka.protocol import RequestHeader, encode_request_header, join
from refka.protocol.messages import APIS
from refka.protocol.messages.api_versions import ApiVersions
from refka.protocol.messages.create_topics import CreateTopics
from refka.protocol.messages.metadata import Metadata

from .mutate import frame, mutate
from .seeds import TOPICS, Seeds

ANSWER_WAIT = 0.05  # seconds a worker waits for an answer before it sends the next frame
HEALTH_TIMEOUT = 5.0
BAD_EVENTS = ("handler_failed", "response_encode_failed")


def free_port(n: int = 1) -> int:
    """A first port with ``n`` free ports after it (brokers i listen on port + i)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + n < 65000:
            return port


class Broker:
    """``refka serve`` in a child process, logging JSON to ``log_path``."""

    def __init__(self, workdir: Path, brokers: int) -> None:
        self.port = free_port(brokers)
        self.log_path = workdir / "broker.log"
        self.brokers = brokers
        self.data = workdir / "data"
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        cmd = [sys.executable, "-m", "refka.cli", "serve", "--port", str(self.port), "--brokers", str(self.brokers),
               "--data-dir", str(self.data), "--log-format", "json",
               "--override", "group.initial.rebalance.delay.ms=0",
               "--override", "offsets.topic.num.partitions=3"]
        self.log = open(self.log_path, "w")  # noqa: SIM115  (closed in stop)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("refka ready"):
            raise SystemExit(f"the broker did not start; see {self.log_path}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def peak_rss_kib(self) -> int:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():  # type: ignore[union-attr]
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


class Stats:
    def __init__(self) -> None:
        self.frames = 0
        self.answered = 0
        self.closed = 0  # the broker closed the connection (a refusal, for malformed frames)
        self.by_mutation: Counter[str] = Counter()
        self.hangs: list[str] = []


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (n,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(n)


async def setup(port: int) -> None:
    conn = await BrokerConnection("127.0.0.1", port, client_id="fuzz-setup").connect()
    try:
        R = CreateTopics.Request
        topics = [R.CreatableTopic(name=t, num_partitions=3, replication_factor=1, assignments=[],
                                   configs=[R.CreatableTopic.CreatableTopicConfig(name="cleanup.policy",
                                                                                 value="compact")]
                                   if "compact" in t else [])
                  for t in TOPICS]
        await conn.request(CreateTopics, R(topics=topics, timeout_ms=30000))
    finally:
        await conn.close()


async def health(port: int) -> str | None:
    """None when a fresh connection gets ApiVersions and Metadata answered in time."""
    conn = BrokerConnection("127.0.0.1", port, client_id="fuzz-health")
    try:
        async with asyncio.timeout(HEALTH_TIMEOUT):
            await conn.connect()
            await conn.request(ApiVersions, ApiVersions.Request(), 0)
            await conn.request(Metadata, Metadata.Request(topics=None, allow_auto_topic_creation=False))
        return None
    except (TimeoutError, BrokerConnectionError, OSError) as e:
        return repr(e)
    finally:
        await conn.close()


class Connection:
    """One fuzzing connection: frames written as they come; a reader task counts the
    answers and notices when the broker closes the connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.sent = 0
        self.answered = 0
        self.answer = asyncio.Event()
        self.reading = asyncio.ensure_future(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                await _read_frame(reader)
                self.answered += 1
                self.answer.set()
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            self.answer.set()

    @property
    def open(self) -> bool:
        return not self.reading.done()

    def close(self) -> None:
        self.reading.cancel()
        self.writer.close()


class Worker:
    def __init__(self, port: int, rng: random.Random, stats: Stats, edge: float, mutation_rate: float) -> None:
        self.port = port
        self.rng = rng
        self.stats = stats
        self.seeds = Seeds(rng, edge)
        self.mutation_rate = mutation_rate
        self.apis = sorted(APIS.values(), key=lambda a: a.key)
        self.conn: Connection | None = None
        self.correlation_id = 0

    async def drop(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def next_frame(self) -> tuple[bytes, bool, str]:
        """(frame, whether an answer is due, what mutation was made)."""
        api = self.rng.choice(self.apis)
        version = self.rng.randint(api.min_version, api.max_version)
        self.correlation_id += 1
        header = encode_request_header(RequestHeader(api.key, version, self.correlation_id, "fuzz"),
                                       api.request_header_version(version))
        req: Any = None
        for _ in range(5):
            req = self.seeds.request(api, version)
            try:
                body = join(api.encode_request(req, version))
                break
            except Exception:  # a value our own encoder refuses (e.g. a null it cannot carry): draw again
                continue
        else:
            body = b""
        answer_due = not (api.key == 0 and getattr(req, "acks", 1) == 0)
        if self.rng.random() < self.mutation_rate:
            f, kind = mutate(self.rng, header, body, api.flexible(version), api.max_version)
            return f, answer_due, kind
        return frame(header, body), answer_due, "none"

    async def one(self) -> None:
        """Sends one frame and waits briefly for the broker to answer or close. Answers
        that take longer (long polls, joins) are counted when they come; a connection
        with many unanswered requests is dropped."""
        f, answer_due, kind = self.next_frame()
        self.stats.frames += 1
        self.stats.by_mutation[kind] += 1
        try:
            if self.conn is None or not self.conn.open:
                await self.drop()
                self.conn = Connection(*await asyncio.open_connection("127.0.0.1", self.port))
            conn = self.conn
            conn.answer.clear()
            conn.writer.write(f)
            await conn.writer.drain()
            conn.sent += answer_due
            if kind == "size_lie":
                # The broker waits for bytes that never come (or closes on a negative size):
                # nothing else can be said on this connection.
                await asyncio.sleep(0.01)
                self._count(conn)
                await self.drop()
                return
            if answer_due:
                try:
                    async with asyncio.timeout(ANSWER_WAIT):
                        await conn.answer.wait()
                except TimeoutError:
                    pass
            if not conn.open:
                self.stats.closed += 1
                self._count(conn)
                await self.drop()
            elif conn.sent - conn.answered > 5:
                self._count(conn)
                await self.drop()
        except (ConnectionError, OSError):
            self.stats.closed += 1
            await self.drop()

    def _count(self, conn: Connection) -> None:
        self.stats.answered += conn.answered
        conn.sent = conn.answered = 0


def scan_log(path: Path) -> tuple[Counter[str], Counter[str]]:
    """(distinct error lines, warnings by event) of the broker's JSON log."""
    errors: Counter[str] = Counter()
    warnings: Counter[str] = Counter()
    for line in path.read_text(errors="replace").splitlines():
        try:
            rec: dict[str, Any] = json.loads(line)
        except ValueError:
            if "Traceback" in line or " ERROR " in line:
                errors[line.strip()[:200]] += 1
            continue
        event, level = str(rec.get("event")), rec.get("level")
        if level in ("error", "critical") or event in BAD_EVENTS or "exception" in rec:
            exc = str(rec.get("exception", "")).strip().splitlines()
            key = f"{event} {rec.get('api', '')} {exc[-1] if exc else rec.get('error', '')}".strip()
            errors[key] += 1
        elif level == "warning":
            warnings[event] += 1
    return errors, warnings


async def run(args: argparse.Namespace, broker: Broker) -> Stats:
    stats = Stats()
    await setup(broker.port)
    rng = random.Random(args.seed)
    workers = [Worker(broker.port, random.Random(rng.getrandbits(64)), stats, args.edge, args.mutation_rate)
               for _ in range(args.connections)]
    deadline = time.monotonic() + args.seconds if args.seconds else None
    next_health = args.health_every

    async def work(w: Worker) -> None:
        while (args.frames is None or stats.frames < args.frames) and \
                (deadline is None or time.monotonic() < deadline) and broker.alive():
            await w.one()

    while (args.frames is None or stats.frames < args.frames) and \
            (deadline is None or time.monotonic() < deadline) and broker.alive():
        tasks = [asyncio.ensure_future(work(w)) for w in workers]
        while not all(t.done() for t in tasks) and stats.frames < next_health:
            await asyncio.sleep(0.05)
        if stats.frames >= next_health:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if broker.alive():
                problem = await health(broker.port)
                if problem is not None:
                    stats.hangs.append(f"after {stats.frames} frames: {problem}")
            next_health += args.health_every
        else:
            await asyncio.gather(*tasks, return_exceptions=True)
    for w in workers:
        if w.conn is not None:
            w._count(w.conn)
        await w.drop()
    return stats


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=None, help="run this long (default: until --frames)")
    p.add_argument("--frames", type=int, default=None, help="stop after this many frames")
    p.add_argument("--brokers", type=int, default=1, help="brokers in the one refka process (default 1)")
    p.add_argument("--connections", type=int, default=8, help="concurrent fuzzing connections (default 8)")
    p.add_argument("--health-every", type=int, default=500, help="health check after this many frames")
    p.add_argument("--edge", type=float, default=0.1, help="probability of an edge value per field (0.1)")
    p.add_argument("--mutation-rate", type=float, default=0.5, help="share of frames mutated on the wire (0.5)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep", action="store_true", help="keep the work directory (broker log and data)")
    args = p.parse_args(argv)
    if args.seconds is None and args.frames is None:
        args.seconds = 60.0
    workdir = Path(tempfile.mkdtemp(prefix="refka-fuzz-"))
    broker = Broker(workdir, args.brokers)
    broker.start()
    started = time.monotonic()
    try:
        stats = asyncio.run(run(args, broker))
    finally:
        elapsed = time.monotonic() - started
        crashed = not broker.alive()
        rss = broker.peak_rss_kib()
        code = broker.stop()
    errors, warnings = scan_log(broker.log_path)
    print(f"refka fuzz: {stats.frames} frames in {elapsed:.1f} s ({stats.frames / max(elapsed, 1e-9):.0f} frames/s), "
          f"{args.brokers} broker(s), seed {args.seed}")
    print(f"  answered {stats.answered}, connections closed by the broker {stats.closed}")
    print("  mutations: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.by_mutation.items())))
    print(f"  crashes: {1 if crashed else 0}" + (f" (exit code {code})" if crashed else ""))
    print(f"  hangs: {len(stats.hangs)}" + "".join(f"\n    {h}" for h in stats.hangs))
    print(f"  distinct error lines: {len(errors)}" + "".join(f"\n    {n} x {k}" for k, v in
                                                           sorted(errors.items()) for n in [v]))
    print("  warnings: " + (", ".join(f"{k} {v}" for k, v in warnings.most_common(12)) or "none"))
    print(f"  broker peak RSS: {rss / 1024:.0f} MiB")
    print(f"  broker log: {broker.log_path}" if args.keep or errors or crashed or stats.hangs else "", end="")
    if not (args.keep or errors or crashed or stats.hangs):
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print()
    return 1 if crashed or stats.hangs or errors else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
