"""refka's layering, checked: who may import what, and no import cycles.

The map below is the rule (ARCHITECTURE.md tells why the layers are cut where
they are). Every module under refka/, lab/ and tests/ is parsed with ``ast``;
an import the map does not allow fails, and so does an import cycle (a
strongly connected component of more than one module).

Every import counts, including those inside functions and under
``if TYPE_CHECKING:``. Relative imports are resolved to module names; an import
of a package is an import of its ``__init__`` module (not of the packages
above it); ``from pkg import name`` where ``name`` is a submodule is an import
of that submodule. Imports made by name at run time
(``importlib.import_module``, as the handler and message registries do) are
not seen.

Imports of anything but refka, lab and tests (the standard library,
third-party packages) are not the map's business.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# A module's row is the longest key that is its name or a package above it. It may import, of
# refka's, lab's and tests' modules, only those under the prefixes of its row.
PROTOCOL, COMMON, CLIENT = "refka.protocol", "refka.common", "refka.client"
MAP: dict[str, tuple[tuple[str, ...], str]] = {
    # importer                     may import                                       the rule, in words
    "refka":                        ((),                                              "refka/__init__.py (and a new top-level module, until it has a row) imports nothing of refka's"),
    "refka.protocol":               ((PROTOCOL,),                                     "refka.protocol imports nothing of refka's"),
    "refka.common":                 (("refka.common", PROTOCOL),                      "refka.common imports only refka.protocol"),
    "refka.client":                 (("refka.client", PROTOCOL, COMMON),              "refka.client imports only refka.protocol and refka.common"),
    "refka.controller":             (("refka.controller", PROTOCOL, COMMON, CLIENT),  "refka.controller imports only refka.protocol, refka.common and refka.client"),
    "refka.broker":                 (("refka.broker", PROTOCOL, COMMON, CLIENT),      "refka.broker imports refka.protocol, refka.common, refka.client, and refka.controller only in refka/broker/controller_side.py"),
    "refka.broker.controller_side": (("refka.broker", PROTOCOL, COMMON, CLIENT,
                                      "refka.controller"),                            "refka/broker/controller_side.py, the broker's one typed interface to the controller, imports refka.controller too"),
    "refka.cli":                    (("refka",),                                      "refka/cli.py may import anything of refka's, nothing of lab"),
    "refka.zookeeper":              (("refka",),                                      "refka/zookeeper.py may import anything of refka's, nothing of lab"),
    "refka.apache_kafka":           ((),                                              "refka/apache_kafka.py runs Apache Kafka's broker for comparisons: nothing of refka's"),
    "refka.__main__":               (("refka",),                                      "refka/__main__.py may import anything of refka's, nothing of lab"),
    "refka.testing":                (("refka",),                                      "refka/testing.py, the in-process cluster of tests and labs, may import anything of refka's, nothing of lab"),
    "refka.pytest_plugin":          (("refka.testing",),                              "refka/pytest_plugin.py, the fixtures every pytest run loads, imports only refka.testing (in its fixtures)"),
    "tests":                        (("refka", "tests"),                              "nothing under tests/ imports lab (but tests/lab, below)"),
    "tests.lab":                    (("refka", "tests", "lab"),                       "tests/lab/ tests lab/ and imports what it tests"),
    "lab":                          (("refka", "lab", "tests"),                       "lab may import everything"),
}  # fmt: skip
TRACKED_ROOTS = ("refka", "lab", "tests")


@dataclass(frozen=True)
class Import:
    importer: str
    target: str
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.importer} imports {self.target}"


@dataclass(frozen=True)
class Module:
    name: str
    path: str  # as printed in failures
    source: str
    is_package: bool


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def repo_modules(root: Path = ROOT, top: Iterable[str] = TRACKED_ROOTS) -> list[Module]:
    out = []
    for d in top:
        for path in sorted((root / d).rglob("*.py")):
            rel = path.relative_to(root)
            if "node_modules" in rel.parts:
                continue
            parts = list(rel.with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            out.append(Module(".".join(parts), str(rel), path.read_text(), is_package))
    return out


def imports_of(module: Module, known: set[str]) -> Iterator[Import]:
    """Every import ``module`` makes of a tracked module, resolved to module names."""
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    for node in ast.walk(ast.parse(module.source, module.path)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = []
            for a in node.names:
                sub = f"{base}.{a.name}"
                targets.append(sub if sub in known else base)
        else:
            continue
        for target in dict.fromkeys(targets):
            if target.split(".")[0] in TRACKED_ROOTS:
                yield Import(module.name, target, module.path, node.lineno)


def row_of(name: str) -> str | None:
    rows = [key for key in MAP if _under(name, key)]
    return max(rows, key=len) if rows else None


def map_violations(imports: Iterable[Import]) -> list[str]:
    out = []
    for imp in imports:
        row = row_of(imp.importer)
        if row is None:
            out.append(f"{imp}: the map has no row for {imp.importer}")
            continue
        allowed, rule = MAP[row]
        if not any(_under(imp.target, prefix) for prefix in allowed):
            out.append(f"{imp}: {rule}")
    return out


def import_cycles(modules: Iterable[str], imports: Iterable[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iteratively), sorted."""
    nodes = sorted(set(modules))
    edges: dict[str, set[str]] = {n: set() for n in nodes}
    for imp in imports:
        if imp.importer in edges and imp.target in edges and imp.target != imp.importer:
            edges[imp.importer].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    sccs: list[list[str]] = []
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                scc = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    scc.append(m)
                    if m == node:
                        break
                if len(scc) > 1:
                    sccs.append(sorted(scc))
    return sorted(sccs)


def describe_cycles(cycles: list[list[str]], imports: Iterable[Import]) -> list[str]:
    """Each cycle's modules, then the imports that tie them together."""
    imports = list(imports)
    out = []
    for scc in cycles:
        members = set(scc)
        inside = sorted({i for i in imports if i.importer in members and i.target in members
                         and i.importer != i.target}, key=lambda i: (i.path, i.line, i.target))
        out.append(f"import cycle between {len(scc)} modules: {', '.join(scc)}\n    "
                   + "\n    ".join(map(str, inside)))
    return out


def check(modules: list[Module]) -> tuple[list[str], list[str]]:
    """(map violations, described cycles) of these modules."""
    known = {m.name for m in modules}
    imports = [imp for m in modules for imp in imports_of(m, known)]
    return map_violations(imports), describe_cycles(import_cycles(known, imports), imports)


# ---- the repository ---------------------------------------------------------------------------


def test_every_import_follows_the_layer_map():
    violations, _ = check(repo_modules())
    assert not violations, f"{len(violations)} imports break the layer map:\n" + "\n".join(violations)


def test_no_import_cycles_between_modules():
    _, cycles = check(repo_modules())
    assert not cycles, f"{len(cycles)} import cycles:\n" + "\n".join(cycles)


# ---- the checker itself, on planted sources (so the two tests above cannot pass vacuously) --------


def _modules(sources: dict[str, str]) -> list[Module]:
    """``{"refka/x/y.py": source}`` as modules."""
    out = []
    for path, source in sources.items():
        parts = path.removesuffix(".py").split("/")
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        out.append(Module(".".join(parts), path, source, is_package))
    return out


def test_checker_finds_a_cycle_through_a_function_body_and_type_checking():
    _, cycles = check(_modules({
        "refka/broker/__init__.py": "",
        "refka/broker/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n",
        "refka/broker/b.py": "def f():\n    from refka.broker import c\n",
        "refka/broker/c.py": "import refka.broker.a\n",
        "refka/broker/d.py": "from . import a\n",  # imports into the cycle, is not part of it
    }))
    assert len(cycles) == 1
    assert cycles[0].startswith("import cycle between 3 modules: refka.broker.a, refka.broker.b, refka.broker.c")
    assert "refka/broker/a.py:3: refka.broker.a imports refka.broker.b" in cycles[0]
    assert "refka/broker/b.py:2: refka.broker.b imports refka.broker.c" in cycles[0]
    assert "refka.broker.d" not in cycles[0]


def test_checker_finds_forbidden_imports_with_file_line_and_rule():
    violations, cycles = check(_modules({
        "refka/protocol/__init__.py": "",
        "refka/protocol/codec.py": "import struct\n\n\ndef f():\n    from ..broker import registry\n",
        "refka/broker/__init__.py": "",
        "refka/broker/registry.py": "from refka.protocol import codec\n",
        "refka/broker/handlers/x.py": "from refka.controller.admin import validate\n",
        "refka/broker/controller_side.py": "from refka.controller import admin\n",
        "refka/controller/__init__.py": "",
        "refka/controller/admin.py": "",
        "tests/test_x.py": "import lab.bench.probe\n",
    }))
    assert violations == [
        "refka/protocol/codec.py:5: refka.protocol.codec imports refka.broker.registry: "
        + MAP["refka.protocol"][1],
        "refka/broker/handlers/x.py:1: refka.broker.handlers.x imports refka.controller.admin: "
        + MAP["refka.broker"][1],
        "tests/test_x.py:1: tests.test_x imports lab.bench.probe: " + MAP["tests"][1],
    ]
    assert cycles == [
        "import cycle between 2 modules: refka.broker.registry, refka.protocol.codec\n"
        "    refka/broker/registry.py:1: refka.broker.registry imports refka.protocol.codec\n"
        "    refka/protocol/codec.py:5: refka.protocol.codec imports refka.broker.registry"
    ]


def test_a_package_import_is_its_init_and_a_named_submodule_is_the_submodule():
    modules = _modules({
        "refka/protocol/__init__.py": "",
        "refka/protocol/messages/__init__.py": "APIS = {}\n",
        "refka/protocol/messages/fetch.py": "",
        "refka/common/__init__.py": (
            "from refka.protocol.messages import APIS, fetch\nimport refka.protocol\nfrom ..protocol import *\n"
        ),
    })
    known = {m.name for m in modules}
    found = sorted((i.target, i.line) for m in modules for i in imports_of(m, known))
    assert found == [
        ("refka.protocol", 2),
        ("refka.protocol", 3),
        ("refka.protocol.messages", 1),
        ("refka.protocol.messages.fetch", 1),
    ]
