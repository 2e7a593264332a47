"""Imports only point down the layers, and no distribution's modules import each other in a
circle (docs/architecture.md, "Layers").

Every module of core, of each plugin and of the development tools is parsed with ``ast``;
every ``import`` and ``from ... import`` counts, wherever it is: inside a function (an
import deferred to run time is a dependency all the same), and inside ``if TYPE_CHECKING:``
(a type named across a layer ties the design as much as a call does; where a module needs
the shape of a higher one, a ``Protocol`` beside it names what it uses). ``from . import x``
of a submodule is an edge to that submodule, not to the package's ``__init__``: a
package's ``__init__`` re-exports, and sits above everything inside it.

Run as a script, it prints the graph: modules per layer and the cycles, if any.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]

#: Distribution -> (source root, top-level package, pyproject).
DISTRIBUTIONS = {
    "outcommit": (ROOT / "core/src", "outcommit", ROOT / "core/pyproject.toml"),
    "outcommit-s3": (ROOT / "plugins/s3/src", "outcommit_s3", ROOT / "plugins/s3/pyproject.toml"),
    "outcommit-azure": (ROOT / "plugins/azure/src", "outcommit_azure", ROOT / "plugins/azure/pyproject.toml"),
    "outcommit-gcs": (ROOT / "plugins/gcs/src", "outcommit_gcs", ROOT / "plugins/gcs/pyproject.toml"),
    "outcommit-hdfs": (ROOT / "plugins/hdfs/src", "outcommit_hdfs", ROOT / "plugins/hdfs/pyproject.toml"),
    "outcommit-devtools": (ROOT / "devtools/src", "outcommit_devtools", ROOT / "devtools/pyproject.toml"),
    "outcommit-testplugin": (ROOT / "tests/plugins/outcommit-testplugin/src", "outcommit_testplugin",
                             ROOT / "tests/plugins/outcommit-testplugin/pyproject.toml"),
}

LEAVES, PROTOCOL, MECHANISMS, COMPOSITION, ENGINES, PACKAGE = range(6)
LAYER_NAMES = ("leaves", "protocol and formats", "mechanisms", "composition", "engines, CLI, docs",
               "package __init__")

#: Core's modules by layer: the longest matching prefix decides (``outcommit.committers``
#: covers every committer module but the formats named on their own). A new module outside
#: these prefixes fails the test until it is placed.
CORE_LAYERS: dict[str, int] = {
    # leaves: values and helpers that know nothing of stores, committers or plugins
    "outcommit.errors": LEAVES, "outcommit.redaction": LEAVES, "outcommit.capabilities": LEAVES,
    "outcommit.paths": LEAVES, "outcommit.context": LEAVES, "outcommit.config": LEAVES,
    "outcommit.retry": LEAVES, "outcommit.progress": LEAVES, "outcommit.iostats": LEAVES,
    "outcommit.parallel": LEAVES, "outcommit.install": LEAVES, "outcommit.version": LEAVES,
    "outcommit.storeio": LEAVES,
    "outcommit.spelling": LEAVES, "outcommit.extras": LEAVES,
    # protocol and formats: what committers, stores and plugins are, and what they persist
    "outcommit.committer": PROTOCOL, "outcommit.jobstate": PROTOCOL, "outcommit.jobdir": PROTOCOL,
    "outcommit.livewrites": PROTOCOL,
    "outcommit.conflictmodes": PROTOCOL, "outcommit.recovery": PROTOCOL, "outcommit.reporting": PROTOCOL,
    "outcommit.store": PROTOCOL, "outcommit.storetypes": PROTOCOL,
    "outcommit.storeoptional": PROTOCOL, "outcommit.storetree": PROTOCOL, "outcommit.storejson": PROTOCOL,
    "outcommit.storerecovery": PROTOCOL,
    "outcommit.multipart": PROTOCOL,
    "outcommit.success": PROTOCOL, "outcommit.selection": PROTOCOL, "outcommit.commands": PROTOCOL,
    "outcommit.hookspecs": PROTOCOL, "outcommit.committers.journal": PROTOCOL,
    "outcommit.committers.manifest.format": PROTOCOL, "outcommit.committers.delayed.files": PROTOCOL,
    # mechanisms: the committers and stores
    "outcommit.committers": MECHANISMS, "outcommit.stores": MECHANISMS,
    # composition: the registry names implementations; the factory resolves and injects
    "outcommit.contributions": COMPOSITION, "outcommit.plugins": COMPOSITION,
    "outcommit.builtin": COMPOSITION, "outcommit.factory": COMPOSITION, "outcommit.keys": COMPOSITION,
    # engines, CLI, docs generation, and the suites third parties run
    "outcommit.engine": ENGINES, "outcommit.spark": ENGINES, "outcommit.streaming": ENGINES,
    "outcommit.ray": ENGINES, "outcommit.dask": ENGINES, "outcommit.read": ENGINES,
    "outcommit.cli": ENGINES, "outcommit.docsgen": ENGINES, "outcommit.testing": ENGINES,
    "outcommit.check": ENGINES, "outcommit.checksuites": ENGINES,
}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    type_only: bool

    def __str__(self) -> str:
        where = f"line {self.line}, TYPE_CHECKING" if self.type_only else f"line {self.line}"
        return f"{self.source} -> {self.target} ({where})"


def modules(root: Path, package: str) -> dict[str, Path]:
    """Module name -> file, for every module of ``package`` under ``root``."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, type_only: bool = False) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement, anywhere, and whether it sits in an ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, type_only
        if isinstance(child, ast.If) and _type_checking(child):
            for statement in child.body:
                yield from _imports(ast.Module(body=[statement], type_ignores=[]), True)
            for statement in child.orelse:
                yield from _imports(ast.Module(body=[statement], type_ignores=[]), type_only)
        else:
            yield from _imports(child, type_only)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The modules a statement imports: for ``from m import x``, ``m.x`` when it is a module."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module if is_package else module.rpartition(".")[0]
        parts = package.split(".")
        parts = parts[:len(parts) - (node.level - 1)]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    return [f"{base}.{alias.name}" for alias in node.names] + [base]


def edges(known: dict[str, Path]) -> list[Edge]:
    """Every import of a module of ``known`` by another (the nearest enclosing module for
    ``import a.b.c`` of a name that is not a module)."""
    found = []
    for module, path in known.items():
        for node, type_only in _imports(ast.parse(path.read_text(), str(path))):
            targets = _targets(node, module, path.name == "__init__.py")
            if isinstance(node, ast.ImportFrom):  # m.x when x is a module, else m itself
                submodules = [t for t in targets[:-1] if t in known]
                base = targets[-1]
                names_only = len(submodules) < len(targets) - 1
                targets = submodules + ([base] if names_only or not submodules else [])
            for target in targets:
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != module:
                    found.append(Edge(module, target, node.lineno, type_only))
    return found


def cycles(known: dict[str, Path], found: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    graph: dict[str, set[str]] = {m: set() for m in known}
    for edge in found:
        graph[edge.source].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components, key=lambda c: (-len(c), c))


def cycle_path(component: list[str], found: list[Edge]) -> str:
    """One circle through ``component``'s first module, its edges with their lines."""
    members = set(component)
    out: dict[str, list[Edge]] = {}
    for edge in found:
        if edge.source in members and edge.target in members:
            out.setdefault(edge.source, []).append(edge)
    start = component[0]
    path: list[Edge] = []
    seen: set[str] = set()

    def walk(node: str) -> bool:
        for edge in sorted(out.get(node, []), key=lambda e: e.target):
            if edge.target == start:
                path.append(edge)
                return True
            if edge.target not in seen:
                seen.add(edge.target)
                path.append(edge)
                if walk(edge.target):
                    return True
                path.pop()
        return False

    walk(start)
    return "\n    ".join(str(edge) for edge in path)


def core_layer(module: str) -> int | None:
    """The layer of a core module: its longest prefix in :data:`CORE_LAYERS` (None: unplaced)."""
    if module == "outcommit":
        return PACKAGE
    name = module
    while name:
        if name in CORE_LAYERS:
            return CORE_LAYERS[name]
        name = name.rpartition(".")[0]
    return None


def entry_point_modules(pyproject: Path) -> set[str]:
    """The modules a distribution publishes in the entry-point group ``outcommit``."""
    data = tomllib.loads(pyproject.read_text())
    group = data.get("project", {}).get("entry-points", {}).get("outcommit", {})
    return {value.partition(":")[0] for value in group.values()}


def plugin_layer(module: str, package: str, entry_points: set[str]) -> int:
    """A plugin's layers: its mechanisms (store, committers, their support), its entry point
    modules (composition: they register what the rest defines), its ``__init__`` on top."""
    if module == package:
        return PACKAGE
    return COMPOSITION if module in entry_points else MECHANISMS


def distribution_graph(name: str) -> tuple[dict[str, Path], list[Edge], dict[str, int | None]]:
    root, package, pyproject = DISTRIBUTIONS[name]
    known = modules(root, package)
    layers: dict[str, int | None]
    if name == "outcommit":
        layers = {m: core_layer(m) for m in known}
    else:
        entry_points = entry_point_modules(pyproject)
        layers = {m: plugin_layer(m, package, entry_points) for m in known}
    return known, edges(known), layers


@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
def test_no_module_imports_another_that_imports_it_back(name: str) -> None:
    known, found, _ = distribution_graph(name)
    assert len(known) > 1
    circles = cycles(known, found)
    assert not circles, f"{name}: import cycles (strongly connected components), each with one circle:\n" + \
        "\n".join(f"  {len(c)} modules {c}:\n    {cycle_path(c, found)}" for c in circles)


@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
def test_imports_only_point_down_the_layers(name: str) -> None:
    _, found, layers = distribution_graph(name)
    unplaced = sorted(m for m, layer in layers.items() if layer is None)
    assert not unplaced, f"modules in no layer: {unplaced}: add them to CORE_LAYERS ({__file__})"
    upward = [f"{edge} : {LAYER_NAMES[layers[edge.source] or 0]} -> {LAYER_NAMES[layers[edge.target] or 0]}"
              for edge in found if (layers[edge.source] or 0) < (layers[edge.target] or 0)]
    assert not upward, f"{name}: imports that point up a layer:\n  " + "\n  ".join(upward)


def test_core_imports_no_other_distribution() -> None:
    """Core never imports or names a plugin's package (fsspec's registry: by name, on use)."""
    root, package, _ = DISTRIBUTIONS["outcommit"]
    others = {p for d, (_, p, _) in DISTRIBUTIONS.items() if d != "outcommit"}
    found = []
    for module, path in modules(root, package).items():
        for node, _ in _imports(ast.parse(path.read_text())):
            for target in _targets(node, module, path.name == "__init__.py"):
                if target.split(".")[0] in others:
                    found.append(f"{module} (line {node.lineno}) imports {target}")
    assert found == []


def test_the_graph_is_read_as_python_imports_it() -> None:
    """The parser's rules, on a package made for it: relative and absolute forms, a name or
    a submodule, inside a function and under TYPE_CHECKING."""
    known = {m: Path(f"/{m}") for m in ("p", "p.a", "p.b", "p.sub", "p.sub.c", "p.sub.d")}
    sources = {
        "p.a": "from . import b\nfrom .sub import c\nfrom p.sub.d import NAME\n",
        "p.b": "def f():\n    import p.sub.c\n",
        "p.sub.c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import X\n",
        "p.sub.d": "from .. import b, CONSTANT\n",
    }

    def parsed(module: str) -> list[tuple[str, bool]]:
        tree = ast.parse(sources.get(module, ""))
        is_package = module in ("p", "p.sub")
        out = []
        for node, type_only in _imports(tree):
            targets = _targets(node, module, is_package)
            if isinstance(node, ast.ImportFrom):
                submodules = [t for t in targets[:-1] if t in known]
                names_only = len(submodules) < len(targets) - 1
                targets = submodules + ([targets[-1]] if names_only or not submodules else [])
            out += [(t, type_only) for t in targets if t in known]
        return out

    assert parsed("p.a") == [("p.b", False), ("p.sub.c", False), ("p.sub.d", False)]
    assert parsed("p.b") == [("p.sub.c", False)]
    assert parsed("p.sub.c") == [("p.a", True)]
    assert parsed("p.sub.d") == [("p.b", False), ("p", False)]  # CONSTANT is the package's
    graph = [Edge("p.a", "p.sub.c", 2, False), Edge("p.sub.c", "p.a", 3, True)]
    assert cycles(known, graph) == [["p.a", "p.sub.c"]]
    assert cycle_path(["p.a", "p.sub.c"], graph) == ("p.a -> p.sub.c (line 2)\n"
                                                      "    p.sub.c -> p.a (line 3, TYPE_CHECKING)")


def main() -> None:
    """Print each distribution's graph: modules per layer, edges, cycles, upward edges."""
    for name in sorted(DISTRIBUTIONS):
        known, found, layers = distribution_graph(name)
        counts = {LAYER_NAMES[layer]: sum(1 for v in layers.values() if v == layer)
                  for layer in range(len(LAYER_NAMES)) if any(v == layer for v in layers.values())}
        upward = [e for e in found if (layers[e.source] or 0) < (layers[e.target] or 0)]
        print(f"{name}: {len(known)} modules, {len(found)} imports; per layer {counts}")
        for component in cycles(known, found):
            print(f"  cycle of {len(component)}: {component}")
        for edge in upward:
            print(f"  upward: {edge}")


if __name__ == "__main__":
    main()
