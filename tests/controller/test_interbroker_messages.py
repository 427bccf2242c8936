"""LeaderAndIsr, StopReplica, UpdateMetadata and ControlledShutdown against kio.

kio is the independent oracle: our bytes decode with kio to the same values,
kio re-encodes them to the same bytes, and we decode kio's bytes back. Every
version of every request and response is checked, once without and once with
refka's tagged extensions (kio skips those, as a stock peer must; kio 0.5.0
needs to be taught to, see ``_ORACLE``).

kio dropped the inter-broker APIs in 0.6 (Kafka 4.0 removed them), so the
oracle is kio 0.5.0, run in a subprocess so it does not clash with the kio the
venv has. Its wheel is found, in order: in ``$REFKA_KIO_LEGACY`` (an unpacked
wheel), in the user cache, or fetched once with ``pip download`` into it.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from refka.protocol.api import Api, join
from refka.protocol.messages import APIS
from refka.protocol.messages.controlled_shutdown import ControlledShutdown
from refka.protocol.messages.leader_and_isr import LeaderAndIsr
from refka.protocol.messages.stop_replica import StopReplica
from refka.protocol.messages.update_metadata import UpdateMetadata
from refka.protocol.schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UUID,
    Array,
    Field,
    Struct,
    in_range,
)

KIO_LEGACY = "0.5.0"
MODULES = {
    LeaderAndIsr: "leader_and_isr",
    StopReplica: "stop_replica",
    UpdateMetadata: "update_metadata",
    ControlledShutdown: "controlled_shutdown",
}


def _legacy_kio_dir() -> Path | None:
    """A directory whose ``kio`` package still has the inter-broker schemas."""
    env = os.environ.get("REFKA_KIO_LEGACY")
    if env:
        return Path(env)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "refka" / f"kio-{KIO_LEGACY}"
    if (cache / "kio" / "schema" / "leader_and_isr").is_dir():
        return cache
    cache.mkdir(parents=True, exist_ok=True)
    dl = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "-q",
            "-d",
            str(cache),
            f"kio=={KIO_LEGACY}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    wheels = list(cache.glob("kio-*.whl"))
    if dl.returncode != 0 or not wheels:
        return None
    with zipfile.ZipFile(wheels[0]) as z:
        z.extractall(cache)
    return cache


@pytest.fixture(scope="module")
def kio_path() -> Path | None:
    if importlib.util.find_spec("kio.schema.leader_and_isr") is not None:
        return None  # the installed kio still has them
    path = _legacy_kio_dir()
    if path is None:
        pytest.skip(f"kio {KIO_LEGACY} (the last kio with the inter-broker APIs) could not be fetched")
    return path


# ---- deterministic sample messages --------------------------------------------------


def _refka_tag(f: Field) -> bool:
    return f.tag is not None and f.tag >= 10000  # extensions.py numbers; Kafka's are small


def _on_wire(f: Field, v: int, flexible: bool, tags: bool) -> bool:
    if not in_range(v, f.versions):
        return False
    if f.tag is None:
        return True
    return flexible and (tags or not _refka_tag(f))


class _Values:
    """Distinct values per field, so a field read in the wrong place shows."""

    def __init__(self) -> None:
        self.n = 0

    def next(self) -> int:
        self.n += 1
        return self.n


def _sample(s: Struct, cls: type, v: int, flexible: bool, tags: bool, vals: _Values) -> Any:
    kwargs: dict[str, Any] = {}
    for f in s.fields:
        if not _on_wire(f, v, flexible, tags):
            continue
        kwargs[f.name] = _value(f.name, f.type, cls, v, flexible, tags, vals)
    return cls(**kwargs)


def _value(name: str, t: Any, cls: type, v: int, flexible: bool, tags: bool, vals: _Values) -> Any:
    if isinstance(t, Array):
        return [_value(name, t.element, cls, v, flexible, tags, vals) for _ in range(2)]
    if isinstance(t, Struct):
        return _sample(t, getattr(cls, t.name), v, flexible, tags, vals)
    n = vals.next()
    if name == "error_code":
        return (0, 6, 11)[n % 3]  # kio parses error codes into its enum
    if t is BOOL:
        return n % 2 == 1
    if t is INT8:
        return n % 2 + 1
    if t in (INT16, INT32, INT64):
        return n
    if t is STRING:
        return f"s{n}"
    if t is UUID:
        return bytes([n % 256]) * 16
    raise AssertionError(f"no sample for {t!r}")


def _active(s: Struct, obj: Any, v: int, flexible: bool, tags: bool) -> dict[str, Any]:
    """The fields of ``obj`` that are on the wire in ``v``, as plain data."""
    out: dict[str, Any] = {}
    for f in s.fields:
        if not _on_wire(f, v, flexible, tags):
            continue
        out[f.name] = _plain(f.type, getattr(obj, f.name), v, flexible, tags)
    return out


def _plain(t: Any, x: Any, v: int, flexible: bool, tags: bool) -> Any:
    if x is None:
        return None
    if isinstance(t, Array):
        return [_plain(t.element, e, v, flexible, tags) for e in x]
    if isinstance(t, Struct):
        return _active(t, x, v, flexible, tags)
    if t is UUID:
        return bytes(x).hex()
    return x


def _without_tags(s: Struct, obj: Any) -> Any:
    """``obj`` with every tagged field at its default: what a peer that skips them sees."""
    for f in s.fields:
        if _refka_tag(f):
            setattr(obj, f.name, f.default_value())
            continue
        t = f.type.element if isinstance(f.type, Array) else f.type
        x = getattr(obj, f.name)
        if isinstance(t, Struct) and x is not None:
            for e in x if isinstance(f.type, Array) else [x]:
                _without_tags(t, e)
    return obj


def _cases() -> list[tuple[Api, int, str, bool]]:
    out = []
    for api in MODULES:
        for v in range(api.min_version, api.max_version + 1):
            for which in ("request", "response"):
                for tags in (False, True):
                    if tags and not api.flexible(v):
                        continue
                    out.append((api, v, which, tags))
    return out


# ---- the kio side, in a subprocess -------------------------------------------------

_ORACLE = r"""
import dataclasses, enum, importlib, io, json, sys, uuid
from kio.serial import entity_reader, entity_writer

import kio.serial._parse as _parse

# kio 0.5.0 fails on a tagged field it does not know, where the protocol says
# skip it by its length: teach it to skip (the length varint is the bytes just
# before the value; the tag varint before it ends with a byte below 0x80).
class _Unknown:
    name = "_unknown_tag"

def _skip(buffer, offset):
    mv = memoryview(buffer)
    j = offset - 1
    while mv[j - 1] & 0x80:
        j -= 1
    n = 0
    for i, b in enumerate(mv[j:offset]):
        n |= (b & 0x7F) << (7 * i)
    return None, n

class _Skipping(dict):
    def __missing__(self, tag):
        return (_Unknown, _skip, None)

_compile = _parse._compile_schema
def _compile_skipping(entity_type, nullable):
    s = _compile(entity_type, nullable)
    return dataclasses.replace(s, tagged_field_readers=_Skipping(s.tagged_field_readers))
_parse._compile_schema = _compile_skipping

RENAMES = {"is_k_raft_controller": "is_kraft_controller"}

def plain(x, module):
    if dataclasses.is_dataclass(x):
        out = {}
        for f in dataclasses.fields(x):
            name = RENAMES.get(f.name, f.name.rstrip("_"))
            if module == "leader_and_isr" and name == "partition_epoch":
                name = "zk_version"  # Kafka 3.x's name for it
            out[name] = plain(getattr(x, f.name), module)
        return out
    if isinstance(x, tuple):
        return [plain(e, module) for e in x]
    if isinstance(x, uuid.UUID):
        return x.bytes.hex()
    if isinstance(x, enum.Enum):
        return int(x.value)
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    return int(x)

results = []
for case in json.load(sys.stdin):
    mod = importlib.import_module(f"kio.schema.{case['module']}.v{case['version']}.{case['which']}")
    cls = next(
        c for c in vars(mod).values()
        if isinstance(c, type) and dataclasses.is_dataclass(c)
        and getattr(getattr(c, "__type__", None), "name", None) == case["which"]
    )
    data = bytes.fromhex(case["hex"])
    obj, size = entity_reader(cls)(memoryview(data), 0)
    buf = io.BytesIO()
    entity_writer(cls)(buf, obj)
    results.append({"size": size, "value": plain(obj, case["module"]), "hex": buf.getvalue().hex(),
                    "header": cls.__header_schema__.__module__})
json.dump(results, sys.stdout)
"""


def _zero_uuids(x: Any) -> Any:
    # kio reads the all-zero UUID as None and writes None back as zeros.
    if isinstance(x, dict):
        return {k: _zero_uuids(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_zero_uuids(v) for v in x]
    return "0" * 32 if x is None else x


def test_all_four_apis_are_registered() -> None:
    for api, key in ((LeaderAndIsr, 4), (StopReplica, 5), (UpdateMetadata, 6), (ControlledShutdown, 7)):
        assert APIS[key] is api
    assert (LeaderAndIsr.max_version, UpdateMetadata.max_version, StopReplica.max_version) == (7, 8, 4)
    assert ControlledShutdown.request_header_version(0) == 0
    assert ControlledShutdown.request_header_version(1) == 1
    assert ControlledShutdown.request_header_version(3) == 2
    assert LeaderAndIsr.response_header_version(4) == 1
    assert LeaderAndIsr.response_header_version(3) == 0


def test_every_version_matches_kio(kio_path: Path | None) -> None:
    cases = _cases()
    payload = []
    expected = []
    for api, v, which, tags in cases:
        spec = api.spec.request if which == "request" else api.spec.response
        cls = api.Request if which == "request" else api.Response
        flexible = api.flexible(v)
        obj = _sample(spec, cls, v, flexible, tags, _Values())
        encode = api.encode_request if which == "request" else api.encode_response
        decode = api.decode_request if which == "request" else api.decode_response
        data = join(encode(obj, v))
        # Ours round-trips, tags included.
        back, end = decode(data, v)
        assert end == len(data)
        assert _active(spec, back, v, flexible, True) == _active(spec, obj, v, flexible, True)
        plain_data = join(encode(_without_tags(spec, copy.deepcopy(obj)), v))
        payload.append({"module": MODULES[api], "version": v, "which": which, "hex": data.hex()})
        expected.append((api, v, which, tags, spec, obj, data, plain_data))

    env = dict(os.environ)
    if kio_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(kio_path), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", _ORACLE],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    assert len(results) == len(cases)

    for (api, v, which, tags, spec, obj, data, plain_data), got in zip(expected, results, strict=True):
        where = f"{api.name} v{v} {which}{' +tags' if tags else ''}"
        flexible = api.flexible(v)
        assert got["size"] == len(data), f"{where}: kio read {got['size']} of {len(data)} bytes"
        # kio sees the same values in the same fields (it skips our tags).
        assert got["value"] == _zero_uuids(_active(spec, obj, v, flexible, False)), where
        # kio writes exactly our bytes, less our tags.
        assert bytes.fromhex(got["hex"]) == plain_data, where
        # And we read kio's bytes back to the same message.
        decode = api.decode_request if which == "request" else api.decode_response
        back, end = decode(bytes.fromhex(got["hex"]), v)
        assert end == len(plain_data)
        assert _active(spec, back, v, flexible, False) == _active(spec, obj, v, flexible, False), where
        # Header versions agree with kio's.
        header = got["header"].split(".")[-2]  # e.g. kio.schema.request_header.v2.header
        ours = api.request_header_version(v) if which == "request" else api.response_header_version(v)
        assert header == f"v{ours}", where


def test_refka_tags_survive_our_round_trip() -> None:
    R = UpdateMetadata.Request
    req = R(
        controller_id=1,
        controller_epoch=3,
        broker_epoch=77,
        topic_states=[
            R.UpdateMetadataTopicState(
                topic_name="t",
                topic_id=b"\x01" * 16,
                topic_epoch=5,
                partition_counts=R.UpdateMetadataTopicState.PartitionCounts(
                    initial_partition_count=2, undeleted_partition_count=4
                ),
                partition_states=[
                    R.UpdateMetadataTopicState.UpdateMetadataPartitionState(
                        partition_index=0,
                        controller_epoch=3,
                        leader=1,
                        leader_epoch=2,
                        isr=[1],
                        zk_version=4,
                        replicas=[1],
                        partition_epoch=9,
                    )
                ],
            )
        ],
        controller_metadata_epoch=12,
        max_partition_epoch=9,
    )
    back, _ = UpdateMetadata.decode_request(join(UpdateMetadata.encode_request(req, 8)), 8)
    assert back.controller_metadata_epoch == 12 and back.max_partition_epoch == 9
    t = back.topic_states[0]
    assert (t.topic_epoch, t.partition_counts.undeleted_partition_count) == (5, 4)
    assert t.partition_states[0].partition_epoch == 9
    # A non-flexible version simply does not carry them.
    old, _ = UpdateMetadata.decode_request(join(UpdateMetadata.encode_request(req, 5)), 5)
    assert old.controller_metadata_epoch == -1 and old.topic_states[0].partition_counts is None
