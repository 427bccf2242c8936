"""Kafka's small text checkpoint files: a version line, a count line, one entry a line.

Written to ``<name>.tmp`` and renamed over the old file, so a reader sees the old or
the new checkpoint, never half of one. No fsync by default: the rename reaches the
kernel, which survives a process crash; :func:`sync` makes it durable against power
loss and is called from the (off-loop) flush paths.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

VERSION = 0


class CheckpointError(ValueError):
    """A checkpoint file that does not parse."""


def encode(entries: Sequence[Sequence[int | str]]) -> bytes:
    lines = [str(VERSION), str(len(entries))]
    lines.extend(" ".join(str(v) for v in entry) for entry in entries)
    return ("\n".join(lines) + "\n").encode("ascii")


def write(path: Path, entries: Sequence[Sequence[int | str]], fsync: bool = False) -> None:
    write_atomically(path, encode(entries), fsync)


def write_atomically(path: Path, data: bytes, fsync: bool = False) -> None:
    """Writes ``path.tmp`` then renames it over ``path``: readers see the old file or the new one."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _entry_lines(path: Path) -> list[list[str]] | None:
    """The entries of a checkpoint, split into words, after checking its version and
    count lines; None if the file does not exist."""
    try:
        text = path.read_text("ascii")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: {exc}") from exc
    lines = text.splitlines()
    try:
        if len(lines) < 2 or int(lines[0]) != VERSION:
            raise CheckpointError(f"{path}: unknown version or missing count")
        count = int(lines[1])
    except ValueError as exc:
        raise CheckpointError(f"{path}: {exc}") from exc
    if count != len(lines) - 2:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(lines) - 2}")
    return [line.split() for line in lines[2:]]


def _parse(path: Path, fields: int, words: list[str], convert: Callable[[list[str]], Any]) -> Any:
    if len(words) != fields:
        raise CheckpointError(f"{path}: bad entry {' '.join(words)!r}")
    try:
        return convert(words)
    except ValueError as exc:
        raise CheckpointError(f"{path}: {exc}") from exc


def read(path: Path, fields: int) -> list[tuple[int, ...]] | None:
    """Entries of ``fields`` integers each, or None if the file does not exist."""
    entries = _entry_lines(path)
    if entries is None:
        return None
    return [_parse(path, fields, w, lambda w: tuple(int(p) for p in w)) for w in entries]


def read_partition_offsets(path: Path) -> dict[tuple[str, int], int] | None:
    """A ``topic partition offset`` checkpoint (Kafka's replication-offset-checkpoint),
    or None if the file does not exist."""
    entries = _entry_lines(path)
    if entries is None:
        return None
    return dict(_parse(path, 3, w, lambda w: ((w[0], int(w[1])), int(w[2]))) for w in entries)


def write_partition_offsets(path: Path, offsets: Mapping[tuple[str, int], int], fsync: bool = False) -> None:
    write(path, [(topic, partition, offset) for (topic, partition), offset in sorted(offsets.items())], fsync)


def sync(path: Path) -> None:
    """fsync an existing checkpoint file (no-op if it is gone)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
