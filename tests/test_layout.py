"""The engine's layout stays readable: no import cycle, a small root, an architecture page that
names every package and module as built.

The import graph is read from the source with ``ast`` (nothing is imported): an import under
``if TYPE_CHECKING:`` is a type annotation's, not a dependency at run time, and is left out;
an import inside a function counts, since it still ties the two modules together.  Importing
``harness.consumer._target`` runs ``harness/consumer/__init__.py`` first, so it is an edge to
that package too (unless the importer is inside it, where the package is already loading): a
cycle through a package's ``__init__`` breaks as surely as a direct one, depending only on which
module happens to be imported first.
"""

from __future__ import annotations

import ast
import importlib
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "reference_server")
MOST_ROOT_MODULES = 20


def module_name(path: Path) -> str:
    """The dotted name of a module file: ``harness/cli/__init__.py`` is ``harness.cli``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_modules() -> dict[str, Path]:
    """Every module of the packages checked, by dotted name."""
    return {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def run_time_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of a module, leaving out the bodies of ``if TYPE_CHECKING:``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        if isinstance(node, ast.If) and is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of the checked packages that ``name`` imports at run time.

    ``from a.b import c`` is an edge to ``a.b.c`` when that is a module, else to ``a.b``; and
    to each package on the way (``a``, ``a.b``) that ``name`` is not itself inside.
    """
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in run_time_imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        for alias in node.names:
            child = f"{base}.{alias.name}"
            if child in modules:
                found.add(child)
            elif base in modules:
                found.add(base)
    ancestors = {".".join(name.split(".")[:depth]) for depth in range(1, name.count(".") + 1)}
    if is_package:
        ancestors.add(name)
    for module in list(found):
        parts = module.split(".")
        packages = {".".join(parts[:depth]) for depth in range(1, len(parts))}
        found.update(package for package in packages - ancestors if package in modules)
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = source_modules()
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components with more than one module (a cycle lives inside one)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for neighbour in sorted(graph[node]):
            if neighbour not in index:
                visit(neighbour)
                low[node] = min(low[node], low[neighbour])
            elif neighbour in on_stack:
                low[node] = min(low[node], index[neighbour])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def shortest_cycle(graph: dict[str, set[str]], start: str, within: set[str]) -> list[str]:
    """The shortest path from ``start`` back to itself inside one component."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for neighbour in sorted(graph[node] & within):
            if neighbour == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if neighbour not in came_from:
                came_from[neighbour] = node
                queue.append(neighbour)
    raise AssertionError(f"{start} is in a component but on no cycle")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle through each module caught in a cycle, without repeats."""
    found: list[list[str]] = []
    seen: set[frozenset[str]] = set()
    for component in strongly_connected(graph):
        for start in component:
            cycle = shortest_cycle(graph, start, set(component))
            if frozenset(cycle) not in seen:
                seen.add(frozenset(cycle))
                found.append(cycle)
    return found


def test_the_cycle_finder_finds_a_cycle_and_its_path() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_reader_skips_type_checking_and_resolves_relative_imports(
    tmp_path: Path,
) -> None:
    source = tmp_path / "mod.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import harness.a\n"
        "from . import b\n"
        "from .c import name\n"
        "from harness.p._inner import thing\n"
        "from harness.own._sibling import other\n"
        "if TYPE_CHECKING:\n"
        "    from harness.d import Thing\n"
        "def later() -> None:\n"
        "    from harness.e import thing\n"
    )
    names = ("harness", "harness.a", "harness.b", "harness.c", "harness.d", "harness.e",
             "harness.p", "harness.p._inner", "harness.own", "harness.own._sibling",
             "harness.own.b", "harness.own.c")
    modules = dict.fromkeys(names, source)
    assert imported_modules("harness.own.mod", source, modules) == {
        "harness.a",
        "harness.own.b",
        "harness.own.c",
        "harness.p",
        "harness.p._inner",
        "harness.own._sibling",
        "harness.e",
    }


def test_no_import_cycle_inside_the_engine_or_the_reference_server() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles (each a path back to its start):\n" + "\n".join(
        " -> ".join(cycle) for cycle in found
    )


@pytest.mark.parametrize("package", ["harness", "harness.consumer"])
def test_every_name_a_lazy_face_lists_resolves(package: str) -> None:
    """These faces resolve their names on first use: a stale path in one fails only there."""
    face = importlib.import_module(package)
    unresolved = [name for name in face.__all__ if not hasattr(face, name)]
    assert not unresolved, f"{package} lists names it cannot resolve: {unresolved}"


def test_the_engine_root_holds_at_most_twenty_modules() -> None:
    root_modules = sorted(path.name for path in (ROOT / "harness").glob("*.py"))
    assert len(root_modules) <= MOST_ROOT_MODULES, (
        f"{len(root_modules)} modules at harness/'s root (at most {MOST_ROOT_MODULES}): "
        "group them by role in a subpackage\n" + "\n".join(root_modules)
    )


def test_the_architecture_page_names_every_package_and_module() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    missing: list[str] = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        relative = path.relative_to(ROOT / "harness")
        if relative.name == "__init__.py":
            if relative.parent == Path("."):
                continue
            named = f"{relative.parent.as_posix()}/"
        else:
            named = relative.as_posix()
        if f"`{named}`" not in page:
            missing.append(named)
    assert not missing, (
        "docs/architecture.md does not name (in backquotes, path under harness/): "
        + ", ".join(missing)
    )
