"""Kafka's small text checkpoint files: a version line, a count line, one entry a line.

Written to ``<name>.tmp`` and renamed over the old file, so a reader sees the old or
the new checkpoint, never half of one. No fsync by default: the rename reaches the
kernel, which survives a process crash; :func:`sync` makes it durable against power
loss and is called from the (off-loop) flush paths.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

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


def read(path: Path, fields: int) -> list[tuple[int, ...]] | None:
    """Entries of ``fields`` integers each, or None if the file does not exist."""
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
        if count != len(lines) - 2:
            raise CheckpointError(f"{path}: expected {count} entries, found {len(lines) - 2}")
        entries = []
        for line in lines[2:]:
            parts = line.split()
            if len(parts) != fields:
                raise CheckpointError(f"{path}: bad entry {line!r}")
            entries.append(tuple(int(p) for p in parts))
        return entries
    except ValueError as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"{path}: {exc}") from exc


def read_partition_offsets(path: Path) -> dict[tuple[str, int], int] | None:
    """A ``topic partition offset`` checkpoint (Kafka's replication-offset-checkpoint),
    or None if the file does not exist."""
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
        if int(lines[1]) != len(lines) - 2:
            raise CheckpointError(f"{path}: expected {lines[1]} entries, found {len(lines) - 2}")
        out: dict[tuple[str, int], int] = {}
        for line in lines[2:]:
            parts = line.split()
            if len(parts) != 3:
                raise CheckpointError(f"{path}: bad entry {line!r}")
            out[(parts[0], int(parts[1]))] = int(parts[2])
        return out
    except ValueError as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"{path}: {exc}") from exc


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
