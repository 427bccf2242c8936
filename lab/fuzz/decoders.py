"""``python -m lab.fuzz.decoders``: coverage-guided fuzzing (atheris, libFuzzer) of
refka's decoders without a broker.

One input is ``api index | version | target | bytes``: the target is the
request decoder of that API and version, or the record-batch reader
(``parse_batches`` then every record of every batch, decompressed, after the
leader's record walk: the compiled walk and the Python one must agree, the
same keyless records or the same message). Whatever
the bytes, a decoder must give a message or raise the error that says the
peer broke the rules (``DecodeError``; for records ``CorruptRecordError``,
``InvalidRecordError``, ``UnsupportedCompressionTypeError``); any other
exception is a crash, and libFuzzer stops with the input that caused it.

The corpus starts from valid requests of every API and version
(lab/fuzz/seeds.py) and valid batches in every codec. ``--runs N`` or
``--seconds S`` bound the run; ``make fuzz`` runs it after the broker fuzzer,
and ``make test`` a short run.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from refka.protocol.api import join
    from refka.protocol.codec import DecodeError
    from refka.protocol.messages import APIS
    from refka.protocol.record_walk import COMPILED, walk_records, walk_records_in_python
    from refka.protocol.records import (
        CorruptRecordError,
        InvalidRecordError,
        UnsupportedCompressionTypeError,
        iter_batches,
        iter_records,
        record_data,
    )

from .seeds import Seeds

ORDER = sorted(APIS.values(), key=lambda a: a.key)
RECORDS_TARGET = 1
PEER_ERRORS = (DecodeError, CorruptRecordError, InvalidRecordError, UnsupportedCompressionTypeError)


def one_input(data: bytes) -> None:
    if len(data) < 3:
        return
    api = ORDER[data[0] % len(ORDER)]
    version = api.min_version + data[1] % (api.max_version - api.min_version + 1)
    body = memoryview(data)[3:]
    try:
        if data[2] & 1 == RECORDS_TARGET:
            for header in iter_batches(body, validate_crc=False, check_counts=True):
                batch = body[header.position : header.position + header.length]
                if COMPILED:
                    records = record_data(batch)
                    compiled = _walked(walk_records, records, header.records_count)
                    in_python = _walked(walk_records_in_python, records, header.records_count)
                    if compiled != in_python:
                        raise AssertionError(f"compiled walk {compiled!r} != Python walk {in_python!r}")
                for _ in iter_records(batch):
                    pass
        else:
            api.decode_request(body, version)
    except PEER_ERRORS:
        pass


def _walked(walk, records: bytes | memoryview, count: int) -> list[int] | str:
    try:
        return walk(records, count)
    except CorruptRecordError as e:
        return str(e)


def corpus(directory: Path, seed: int) -> None:
    seeds = Seeds(random.Random(seed))
    for i, api in enumerate(ORDER):
        for v in range(api.min_version, api.max_version + 1):
            body = join(api.encode_request(seeds.request(api, v), v))
            (directory / f"{api.name}-v{v}").write_bytes(bytes((i, v - api.min_version, 0)) + body)
    for n in range(10):
        (directory / f"records-{n}").write_bytes(bytes((0, 0, RECORDS_TARGET)) + seeds.records())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.fuzz.decoders", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=None, help="stop after this many inputs")
    p.add_argument("--seconds", type=int, default=None, help="stop after this many seconds (default 60)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="refka-fuzz-decoders-"))
    corpus(work, args.seed)
    lib_args = [sys.argv[0], str(work), f"-seed={args.seed}", "-print_final_stats=1", "-max_len=65536"]
    if args.runs is not None:
        lib_args.append(f"-runs={args.runs}")
    else:
        lib_args.append(f"-max_total_time={args.seconds or 60}")
    atheris.Setup(lib_args, one_input)
    atheris.Fuzz()  # exits the process: 0 when the run ends, non-zero with the crashing input
    return 0


if __name__ == "__main__":
    sys.exit(main())
