"""The package's import graph: no cycle, no import from a lower layer to a higher one.

Layers, lowest first: ``core`` (the table format and its lifecycle: pyarrow, fsspec and
pendulum only), ``spark``, ``hooks`` and ``assets``, then ``operators``, ``sensors`` and ``triggers``, then
the entry points ``cli`` and ``get_provider_info``. A module may import its own layer and any
layer below it (the root package, ``airflow_snaptable/__init__.py``, is below everything).

The graph is read from the source with ``ast``, not by importing: every ``import`` and
``from ... import`` counts wherever it is written, inside functions and under
``if TYPE_CHECKING:`` too. An import inside a function hides a cycle from the interpreter
but not from a reader, and a module annotated with a type depends on the module that
defines it.

Inside ``core``, the same rule holds between its groups (docs/architecture.md, "The groups of
the core"): each group may import only the groups :data:`CORE_ARROWS` lists for it, so an
import that runs the wrong way between two groups fails here, as a cycle does.
"""

from __future__ import annotations

import ast
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "airflow_snaptable"

#: Top-level subpackage or module -> layer; higher may import lower, never the reverse.
LAYERS = {
    "": 0,  # the root package's own __init__: metadata only
    "core": 1,
    "spark": 2,
    "hooks": 3,
    "assets": 3,
    "operators": 4,
    "sensors": 4,
    "triggers": 4,
    "cli": 5,
    "get_provider_info": 5,
    "plugins": 5,  # the Airflow UI plugin (an entry point, like the CLI)
}

#: The groups of ``core``, by dotted prefix below the package: a module is in the group of the
#: longest prefix that names it (``core`` names the package's ``__init__`` only: its public surface).
CORE_GROUPS = {
    "core.errors": "errors",
    "core.arguments": "arguments",
    "core.io": "io",
    "core.native": "native",
    "core.lifecycle": "lifecycle",
    "core.write": "write",
    "core.formats": "formats",
    "core.table": "table",
    "core.lineage": "table",  # a table's lineage since a mark: what incremental reads and lake triggers count
    "core.actions": "actions",
    "core.incremental": "incremental",
    "core.timeline": "timeline",
    "core.lake": "lake",
    "core": "surface",
}

_BASE = {"errors", "arguments", "io"}
#: Group -> the other groups it may import: every group drawn below it in docs/architecture.md's
#: picture, never one beside it.
#: The engine (lifecycle) reaches a table through its seam (lifecycle/store.py) and never imports
#: a store (formats), the write path, ``Table`` or the actions built on it.
CORE_ARROWS = {
    "errors": set(),
    "arguments": {"errors"},
    "io": {"errors"},
    "native": _BASE,
    "lifecycle": _BASE | {"native"},
    "write": _BASE | {"native", "lifecycle"},
    "formats": _BASE | {"native", "lifecycle"},
    "table": _BASE | {"native", "lifecycle", "write", "formats"},
    "actions": _BASE | {"native", "lifecycle", "write", "formats", "table"},
    "incremental": _BASE | {"native", "lifecycle", "write", "formats", "table"},
    "timeline": _BASE | {"native", "lifecycle", "write", "formats", "table"},
    "lake": _BASE | {"native", "lifecycle", "write", "formats", "table", "actions"},
    "surface": {"errors", "arguments", "io", "native", "lifecycle", "write", "formats", "table", "actions", "incremental", "timeline", "lake"},
}

#: Third-party packages a layer must never import (the core runs where Airflow and Spark do not).
FORBIDDEN_THIRD_PARTY = {
    "core": {"airflow", "pyspark"},
    "spark": {"airflow"},
}


@dataclass
class ImportGraph:
    package: str
    #: module -> modules of the package it imports (edges), each with the line of the first such import.
    edges: dict[str, dict[str, int]] = field(default_factory=dict)
    #: module -> top-level names of the packages outside this one it imports.
    external: dict[str, dict[str, int]] = field(default_factory=dict)


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package under ``root``: dotted name -> source file."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join([package, *parts])] = path
    return found


def build_graph(root: Path, package: str) -> ImportGraph:
    """Parse every module under ``root`` (the directory of ``package``) and collect its imports."""
    modules = module_names(root, package)
    graph = ImportGraph(package)
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        edges: dict[str, int] = {}
        external: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            for target in _imported(node, module, is_package, modules):
                if target == package or target.startswith(package + "."):
                    if target != module:
                        edges.setdefault(target, node.lineno)
                else:
                    external.setdefault(target.split(".")[0], node.lineno)
        graph.edges[module] = edges
        graph.external[module] = external
    return graph


def _imported(node: ast.AST, module: str, is_package: bool, modules: dict[str, Path]) -> list[str]:
    """The modules an import node names (for ``from X import y``: ``X.y`` when that is a module, else ``X``)."""
    if isinstance(node, ast.Import):
        return [_known(alias.name, modules) for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        # Relative: level 1 is this module's package (a package's __init__ is its own package).
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    targets = []
    for alias in node.names:
        candidate = f"{source}.{alias.name}"
        targets.append(candidate if candidate in modules else _known(source, modules))
    return targets


def _known(name: str, modules: dict[str, Path]) -> str:
    """``name``, or its nearest enclosing module of the package (``import a.b.c`` where only ``a.b`` is a module)."""
    while name not in modules and "." in name:
        candidate = name.rsplit(".", 1)[0]
        if candidate not in modules and candidate.count(".") == 0:
            break
        name = candidate
    return name


@dataclass(frozen=True)
class Ring:
    """Modules that import each other (a strongly connected component), and one cycle through them."""

    modules: list[str]
    cycle: list[str]

    def __str__(self) -> str:
        return (
            f"a ring of {len(self.modules)} modules: {', '.join(self.modules)}\n"
            f"  e.g. {' -> '.join(self.cycle)}"
        )


def find_rings(graph: ImportGraph) -> list[Ring]:
    """Every strongly connected component of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.edges.get(node, {}):
            if target not in graph.edges:
                continue  # a module the package does not have: the import would fail anyway
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

    for node in sorted(graph.edges):
        if node not in index:
            visit(node)
    return [Ring(component, _cycle_through(graph, component)) for component in sorted(components)]


def _cycle_through(graph: ImportGraph, component: list[str]) -> list[str]:
    """A shortest cycle through the first module of a strongly connected component (breadth-first)."""
    members = set(component)
    start = component[0]
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph.edges[node]):
                if target not in members:
                    continue
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return list(reversed(path)) + [start]
                if target not in parents:
                    parents[target] = node
                    following.append(target)
        frontier = following
    return component


def layer_of(graph: ImportGraph, module: str) -> tuple[str, int]:
    relative = module[len(graph.package) + 1:] if module != graph.package else ""
    top = relative.split(".")[0]
    if top not in LAYERS:
        raise AssertionError(f"{module}: no layer is defined for {top!r}; add it to LAYERS")
    return top, LAYERS[top]


def upward_imports(graph: ImportGraph) -> list[str]:
    """Imports from a lower layer to a higher one, as ``module:line -> target``."""
    found = []
    for module, edges in sorted(graph.edges.items()):
        name, level = layer_of(graph, module)
        for target, line in sorted(edges.items()):
            target_name, target_level = layer_of(graph, target)
            if target_level > level:
                found.append(f"{module}:{line} ({name or 'root'}) imports {target} ({target_name})")
    return found


def group_of(graph: ImportGraph, module: str, groups: dict[str, str]) -> str | None:
    """The group of a module of ``core`` (the longest prefix of ``groups`` naming it), None outside ``core``."""
    relative = module[len(graph.package) + 1:] if module != graph.package else ""
    if relative != "core" and not relative.startswith("core."):
        return None
    parts = relative.split(".")
    # ``core`` alone names the package's __init__, never the modules under it.
    for end in range(len(parts), 1 if len(parts) > 1 else 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in groups:
            return groups[prefix]
    raise AssertionError(f"{module}: no group is defined for it; add it to CORE_GROUPS")


def wrong_way_imports(graph: ImportGraph, groups: dict[str, str], arrows: dict[str, set[str]]) -> list[str]:
    """Imports between two groups of ``core`` that ``arrows`` does not allow, as ``module:line (group) imports target (group)``."""
    found = []
    for module, edges in sorted(graph.edges.items()):
        group = group_of(graph, module, groups)
        if group is None:
            continue
        for target, line in sorted(edges.items()):
            target_group = group_of(graph, target, groups)
            if target_group is None or target_group == group:
                continue
            if target_group not in arrows[group]:
                found.append(f"{module}:{line} ({group}) imports {target} ({target_group})")
    return found


def forbidden_third_party(graph: ImportGraph) -> list[str]:
    found = []
    for module, external in sorted(graph.external.items()):
        name, _level = layer_of(graph, module)
        for package, line in sorted(external.items()):
            if package in FORBIDDEN_THIRD_PARTY.get(name, ()):
                found.append(f"{module}:{line} ({name}) imports {package}")
    return found


def describe(rings: list[Ring]) -> str:
    return "\n".join(str(ring) for ring in rings)


# -- the package --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return build_graph(PACKAGE_ROOT, "airflow_snaptable")


def test_the_graph_sees_the_package(graph):
    assert "airflow_snaptable.core.table" in graph.edges
    assert "airflow_snaptable.core.errors" in graph.edges["airflow_snaptable.core.table"]


def test_no_import_cycle(graph):
    rings = find_rings(graph)
    assert not rings, "import cycles in airflow_snaptable:\n" + describe(rings)


def test_no_import_from_a_lower_layer_to_a_higher_one(graph):
    found = upward_imports(graph)
    assert not found, "imports from a lower layer to a higher one:\n" + "\n".join(found)


def test_core_imports_neither_airflow_nor_pyspark(graph):
    found = forbidden_third_party(graph)
    assert not found, "forbidden third-party imports:\n" + "\n".join(found)


def test_core_groups_import_only_the_way_the_arrows_run(graph):
    found = wrong_way_imports(graph, CORE_GROUPS, CORE_ARROWS)
    assert not found, "imports between groups of core that run the wrong way:\n" + "\n".join(found)


def test_every_group_has_its_arrows():
    assert set(CORE_GROUPS.values()) == set(CORE_ARROWS)
    for group, targets in CORE_ARROWS.items():
        assert targets <= set(CORE_ARROWS) - {group}, group


#: A module is split by responsibility, never by length; past this many lines, look again whether it holds one.
LONG_MODULE_LINES = 800


def test_long_modules_are_reported():
    """A soft check: a long module is named in a warning, and the test passes."""
    for path in module_names(PACKAGE_ROOT, "airflow_snaptable").values():
        if (count := len(path.read_text().splitlines())) > LONG_MODULE_LINES:
            warnings.warn(f"{path.relative_to(PACKAGE_ROOT.parent)} has {count} lines: does it hold one responsibility?")


# -- the checker itself, on a small package with the faults it must find -------------------------


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_checker_finds_a_cycle_hidden_in_functions_and_type_checking(tmp_path):
    root = tmp_path / "pkg"
    _write(root, {
        "__init__.py": "",
        "core/__init__.py": "from pkg.core.table import Table\n",
        "core/table.py": "from pkg.core import expire\n\nclass Table:\n    pass\n",
        # The ring of the old core: each leg hidden differently.
        "core/expire.py": "def run(table):\n    from .plans import Plan\n    return Plan\n",
        "core/plans.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from pkg.core.table import Table\n"
        ),
        "core/errors.py": "",
        "core/clean.py": "from . import errors\nfrom .errors import *\nimport pkg.core.errors\n",
    })
    graph = build_graph(root, "pkg")
    rings = find_rings(graph)
    assert rings == [Ring(
        ["pkg.core.expire", "pkg.core.plans", "pkg.core.table"],
        ["pkg.core.expire", "pkg.core.plans", "pkg.core.table", "pkg.core.expire"],
    )]
    assert describe(rings) == (
        "a ring of 3 modules: pkg.core.expire, pkg.core.plans, pkg.core.table\n"
        "  e.g. pkg.core.expire -> pkg.core.plans -> pkg.core.table -> pkg.core.expire"
    )
    assert graph.edges["pkg.core.clean"] == {"pkg.core.errors": 1}
    assert graph.edges["pkg.core"] == {"pkg.core.table": 1}  # a package's __init__ is the package


def test_the_checker_finds_an_upward_import_and_a_forbidden_package(tmp_path):
    root = tmp_path / "pkg"
    _write(root, {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/scan.py": "def plan():\n    from pkg.spark.reader import read\n    import pyspark.sql\n",
        "spark/__init__.py": "",
        "spark/reader.py": "from ..core import scan\n\ndef read():\n    pass\n",
        "hooks/__init__.py": "",
        "hooks/hook.py": "from pkg.spark.reader import read\nfrom pkg.core.scan import plan\n",
    })
    graph = build_graph(root, "pkg")
    assert graph.edges["pkg.spark.reader"] == {"pkg.core.scan": 1}  # a relative import two levels up
    assert upward_imports(graph) == ["pkg.core.scan:2 (core) imports pkg.spark.reader (spark)"]
    assert forbidden_third_party(graph) == ["pkg.core.scan:3 (core) imports pyspark"]
    assert [ring.cycle for ring in find_rings(graph)] == [["pkg.core.scan", "pkg.spark.reader", "pkg.core.scan"]]


def test_the_checker_finds_a_wrong_way_arrow_between_groups_of_core(tmp_path):
    root = tmp_path / "pkg"
    _write(root, {
        "__init__.py": "",
        "core/__init__.py": "from pkg.core.table import Table\n",
        "core/errors.py": "",
        "core/table.py": "from pkg.core.lifecycle.expiry.run import expire\n",
        "core/native/__init__.py": "",
        # The format reaching up into the engine, hidden in a function: a wrong-way arrow.
        "core/native/snapshot.py": "from pkg.core import errors\n\ndef read():\n    from pkg.core.lifecycle import store\n",
        "core/lifecycle/__init__.py": "",
        "core/lifecycle/store.py": "from pkg.core.native.snapshot import read\n",
        "core/lifecycle/expiry/__init__.py": "",
        "core/lifecycle/expiry/run.py": "from ..store import read\nfrom pkg.core.errors import *\n",
        "core/stray.py": "",
    })
    graph = build_graph(root, "pkg")
    groups = {"core.errors": "errors", "core.native": "native", "core.lifecycle": "lifecycle", "core.table": "table", "core": "surface"}
    arrows = {
        "errors": set(),
        "native": {"errors"},
        "lifecycle": {"errors", "native"},
        "table": {"errors", "native", "lifecycle"},
        "surface": {"errors", "native", "lifecycle", "table"},
    }
    assert group_of(graph, "pkg.core.lifecycle.expiry.run", groups) == "lifecycle"  # the longest prefix decides
    assert group_of(graph, "pkg.core", groups) == "surface"
    assert group_of(graph, "pkg.spark", groups) is None
    with pytest.raises(AssertionError, match="pkg.core.stray: no group"):
        wrong_way_imports(graph, groups, arrows)
    groups["core.stray"] = "table"
    assert wrong_way_imports(graph, groups, arrows) == [
        "pkg.core.native.snapshot:4 (native) imports pkg.core.lifecycle.store (lifecycle)",
    ]
    # The same arrow allowed: nothing is found.
    arrows["native"] = {"errors", "lifecycle"}
    assert wrong_way_imports(graph, groups, arrows) == []


def test_the_checker_accepts_a_clean_package(tmp_path):
    root = tmp_path / "pkg"
    _write(root, {
        "__init__.py": "__version__ = '1'\n",
        "core/__init__.py": "from pkg.core.table import Table\n",
        "core/table.py": "from pkg.core import errors\n",
        "core/errors.py": "",
        "cli.py": "from pkg import __version__\nfrom pkg.core import Table\n",
    })
    graph = build_graph(root, "pkg")
    assert find_rings(graph) == []
    assert upward_imports(graph) == []
    assert graph.edges["pkg.cli"] == {"pkg": 1, "pkg.core": 2}
