"""Micro-benchmark of Produce validation per codec: what a leader spends on one
partition's records before appending them (refka/broker/log/validator.py
``validate_records``: batch headers, CRC32C, and the decompression and walk of the
records).

    python -m lab.bench.validate [--baseline /path/to/other/checkout] [--quick]

Cases: every codec (none, gzip, snappy, lz4, zstd) x 100-byte and 1 KiB values
x values of one size (what the main benchmark's producer sends) or of sizes
spread +-20% around it (the walk's runs of same-layout records do not apply)
x one batch of ~1 MB of records (librdkafka's default message.max.bytes, what
the main benchmark's producer sends with batch.size=1 MiB) and of ~16 KiB (the
Java producer's default batch.size). Keys ``key-<n>``, no headers; values are
text with counters, so that they compress about as much as JSON does (random
bytes would not compress and the codecs would skip most of their work). The
batches are built with the checkout's own records.py (snappy in Java's xerial
framing).

Each case is timed with ``timeit`` (the best of 5 repeats, 2 with ``--quick``),
in a fresh process per checkout: this one, and with ``--baseline DIR`` the refka
found in DIR (e.g. main's worktree), measured in the same invocation and printed
side by side with the ratio. Figures: µs per batch, ns per record, MB/s of
record values (10^6 bytes).

Prints figures only; speed targets live here, never in timed test assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import timeit
from pathlib import Path

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
VALUE_SIZES = [100, 1024]
SHAPES = ["fixed", "varied"]
BATCH_BYTES = {"1 MB": 1_000_000, "16 KiB": 16 * 1024}


def _value(i: int, size: int, shape: str) -> bytes:
    if shape == "varied":
        size += (i * 7919) % (size * 2 // 5 + 1) - size // 5  # spread over +-20%, no two neighbours alike
    text = b'{"id": %d, "user": "user-%d", "event": "page_view", "path": "/items/%d", "ok": true} ' % (
        i, i % 997, i % 113)
    return (text * (size // len(text) + 1))[:size]


def _measure(quick: bool) -> list[dict[str, object]]:
    """Every case, timed with the refka this process imports."""
    from refka.broker.log import LogConfig
    from refka.broker.log.validator import validate_records
    from refka.protocol.records import Compression, build_batch

    config = LogConfig()
    out: list[dict[str, object]] = []
    for batch_name, batch_bytes in BATCH_BYTES.items():
        for size in VALUE_SIZES:
            count = max(1, batch_bytes // (size + 24))  # key and varints: ~20 bytes a record
            for shape in SHAPES:
                records = [(b"key-%d" % i, _value(i, size, shape)) for i in range(count)]
                values = sum(len(v) for _, v in records)
                for codec in CODECS:
                    batch = memoryview(bytes(build_batch(records, compression=Compression[codec.upper()],
                                                         timestamp=1_700_000_000_000)))
                    validate_records(batch, config, "bench", 0)  # accepted, and warm

                    def run(batch: memoryview = batch) -> object:
                        return validate_records(batch, config, "bench", 0)

                    timer = timeit.Timer(run)
                    number, _ = timer.autorange()
                    best = min(timer.repeat(repeat=2 if quick else 5, number=number)) / number
                    out.append({"batch": batch_name, "value_bytes": size, "values": shape, "codec": codec,
                                "records": count, "batch_bytes": len(batch), "us_per_batch": best * 1e6,
                                "ns_per_record": best / count * 1e9, "mb_per_s": values / best / 1e6})
    return out


def _run_checkout(root: Path, quick: bool) -> list[dict[str, object]]:
    """The cases measured in a child process importing refka from ``root``."""
    env = dict(os.environ, PYTHONPATH=str(root))
    # -P: the child imports refka from PYTHONPATH, not lab/bench/ (whose profile.py shadows the stdlib's).
    cmd = [sys.executable, "-P", str(Path(__file__).resolve()), "--child"] + (["--quick"] if quick else [])
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, timeout=1800)
    if done.returncode:
        raise SystemExit(f"benchmark in {root} failed:\n{done.stderr.strip()[-2000:]}")
    result: list[dict[str, object]] = json.loads(done.stdout)
    return result


def _refka_root() -> Path:
    return Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.bench.validate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="another checkout to measure in the same run (e.g. main's)")
    parser.add_argument("--quick", action="store_true", help="2 repeats instead of 5")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_measure(args.quick)))
        return 0
    this = _run_checkout(_refka_root(), args.quick)
    base = _run_checkout(args.baseline.resolve(), args.quick) if args.baseline else None
    print(f"validate_records, one partition's records, best of {2 if args.quick else 5}; "
          f"this checkout: {_refka_root()}" + (f"; baseline: {args.baseline.resolve()}" if base else ""))
    head = (f"{'batch':<7} {'value':>6} {'values':<7}{'codec':<7} {'records':>7} {'bytes':>8}   "
            f"{'µs/batch':>9} {'ns/rec':>7} {'MB/s':>8}")
    if base:
        head += f"   {'baseline µs':>11} {'ns/rec':>7} {'MB/s':>8}  {'x':>6}"
    print(head)
    for i, case in enumerate(this):
        line = (f"{case['batch']:<7} {case['value_bytes']:>5}B {case['values']:<7}{case['codec']:<7} {case['records']:>7} "
                f"{case['batch_bytes']:>8}   {case['us_per_batch']:>9.1f} {case['ns_per_record']:>7.0f} "
                f"{case['mb_per_s']:>8.0f}")
        if base:
            b = base[i]
            ratio = float(case["us_per_batch"]) / float(b["us_per_batch"])  # type: ignore[arg-type]
            line += (f"   {b['us_per_batch']:>11.1f} {b['ns_per_record']:>7.0f} {b['mb_per_s']:>8.0f}  "
                     f"{ratio:>5.1f}x")
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
