"""deploy/ as the tests read it: the manifests rendered by kustomize (or read as written),
a pod's environment worked out as the kubelet does, the Dockerfile's instructions.

``render(path)`` runs ``kustomize build`` (the binary ``make kustomize`` installs into
.cache/bin from the Go module proxy, or ``$KUSTOMIZE``, or one on PATH);
``kustomize_unavailable()`` says why there is none. ``pod_env`` resolves a container's
``env`` for a given pod: ``fieldRef``s from the values given, ``$(VAR)`` references
expanded against the variables above them, optional secrets left out.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
BASE = K8S / "base"
OVERLAYS = {"kind": K8S / "overlays" / "kind", "multi-zone": K8S / "overlays" / "multi-zone"}
SMOKE = K8S / "smoke"
SERVICEMONITOR = K8S / "components" / "servicemonitor"
KIND_CLUSTER = DEPLOY / "kind" / "cluster.yaml"
DOCKERFILE = DEPLOY / "Dockerfile"


def kustomize() -> str | None:
    for candidate in (os.environ.get("KUSTOMIZE"), str(ROOT / ".cache" / "bin" / "kustomize")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("kustomize")


def kustomize_unavailable() -> str | None:
    if kustomize() is None:
        return "no kustomize: `make kustomize` installs it into .cache/bin from the Go module proxy (needs go)"
    return None


@functools.cache
def _build(path: str) -> str:
    exe = kustomize()
    assert exe is not None, kustomize_unavailable()
    done = subprocess.run([exe, "build", path], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"kustomize build {path} failed:\n{done.stderr}"
    return done.stdout


def render(path: Path) -> list[dict[str, Any]]:
    """``kustomize build path``: its documents (a fresh copy each call)."""
    return [d for d in yaml.safe_load_all(_build(str(path))) if d]


def load(path: Path) -> list[dict[str, Any]]:
    """A YAML file's documents as written."""
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{len(found)} {kind} named {name}"
    return found[0]


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def container(workload: dict[str, Any], name: str, init: bool = False) -> dict[str, Any]:
    spec = workload["spec"]["template"]["spec"]
    (c,) = [c for c in spec.get("initContainers" if init else "containers", []) if c["name"] == name]
    return c


_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text: str, env: Mapping[str, str]) -> str:
    """The kubelet's expansion of ``$(VAR)`` in env values, command and args: a defined
    variable is replaced, an undefined reference stays as written, ``$$`` is one ``$``."""
    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return _REFERENCE.sub(one, text)


def pod_env(c: dict[str, Any], fields: Mapping[str, str], secrets: Mapping[str, str] | None = None
            ) -> dict[str, str]:
    """The environment the kubelet gives container ``c``: ``fields`` maps a fieldRef's
    fieldPath (``metadata.name``, ``status.hostIP``, ...) to its value for this pod;
    ``secrets`` maps ``secret/key`` to a value (an optional one missing is left out)."""
    env: dict[str, str] = {}
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = expand(str(e["value"]), env)
            continue
        source = e["valueFrom"]
        if "fieldRef" in source:
            env[e["name"]] = fields[source["fieldRef"]["fieldPath"]]
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            key = f"{ref['name']}/{ref['key']}"
            if secrets and key in secrets:
                env[e["name"]] = secrets[key]
            else:
                assert ref.get("optional"), f"{e['name']}: secret {key} is not optional"
        else:
            raise AssertionError(f"{e['name']}: unexpected valueFrom {source}")
    return env


def named_port(c: dict[str, Any], port: int | str) -> int:
    """A probe's or Service's port in container ``c``: a number, or one of its ports' names."""
    if isinstance(port, int):
        assert port in {p["containerPort"] for p in c["ports"]}, f"{port} is not a port of {c['name']}"
        return port
    (p,) = [p["containerPort"] for p in c["ports"] if p["name"] == port]
    return int(p)


# -- the Dockerfile -------------------------------------------------------------------


@dataclass
class Instruction:
    keyword: str
    args: str

    def exec_form(self) -> list[str]:
        """JSON (exec) form arguments, e.g. ENTRYPOINT ["refka", "serve"]."""
        import json

        text = self.args
        if self.keyword == "HEALTHCHECK":
            text = text[text.index("CMD") + 3:]
        value = json.loads(text)
        assert isinstance(value, list), f"{self.keyword} is not in exec form: {self.args}"
        return [str(v) for v in value]

    def options(self) -> dict[str, str]:
        """``--name=value`` options before the rest (HEALTHCHECK, COPY, RUN)."""
        out = {}
        for word in shlex.split(self.args):
            if not word.startswith("--"):
                break
            k, _, v = word[2:].partition("=")
            out[k] = v
        return out


def dockerfile_stages(path: Path = DOCKERFILE) -> tuple[dict[str, str], list[list[Instruction]]]:
    """(the ARGs before the first FROM, the stages' instructions), continuation lines joined
    and comments dropped."""
    logical: list[str] = []
    pending = ""
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or not stripped:
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        logical.append(pending + stripped)
        pending = ""
    global_args: dict[str, str] = {}
    stages: list[list[Instruction]] = []
    for text in logical:
        keyword, _, args = text.partition(" ")
        ins = Instruction(keyword.upper(), args.strip())
        if ins.keyword == "FROM":
            stages.append([ins])
        elif not stages:
            assert ins.keyword == "ARG", f"{ins.keyword} before FROM"
            k, _, v = ins.args.partition("=")
            global_args[k] = v
        else:
            stages[-1].append(ins)
    return global_args, stages


def image_env(stage: list[Instruction]) -> dict[str, str]:
    """The ENV of a stage (``ENV a=1 b=2`` form)."""
    env: dict[str, str] = {}
    for ins in stage:
        if ins.keyword == "ENV":
            for word in shlex.split(ins.args):
                k, _, v = word.partition("=")
                env[k] = v
    return env


def last(stage: list[Instruction], keyword: str) -> Instruction:
    found = [i for i in stage if i.keyword == keyword]
    assert found, f"no {keyword} in the stage"
    return found[-1]
