"""The engine's layout stays readable: no import cycle, a small root, the engine apart from the
front ends, one lazy face, and an architecture page that names every package and module as built.

The import graph is read from the source with ``ast`` (nothing is imported): an import under
``if TYPE_CHECKING:`` is a type annotation's, not a dependency at run time, and is left out;
an import inside a function counts, since it still ties the two modules together.  Importing
``harness.consumer._target`` runs ``harness/consumer/__init__.py`` first, so it is an edge to
that package too (unless the importer is inside it, where the package is already loading): a
cycle through a package's ``__init__`` breaks as surely as a direct one, depending only on which
module happens to be imported first.

The three layers (docs/architecture.md): the faces (``harness/__init__.py``, the pytest plugin,
``cli/``, ``_gate/``, ``demo/``) over the engine (every other module outside a front end) and
the front ends (``harness/http/``, ``harness/consumer/``).  The engine imports no front end's
module, not even for a type: it reaches one through ``harness._front``'s registry, by the
target's kind.  A front end imports the engine and never another front end.  A face imports a
front end's module only for a feature of that front end alone (``FRONT_FEATURES``); everything
that works for any kind of target goes through the registry.
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
MOST_ROOT_MODULES = 15
#: The front ends, each one package.
FRONT_PACKAGES = ("harness.http", "harness.consumer")
#: The faces: what users call (the public names, the pytest plugin, the command, the demo).
FACES = ("harness", "harness.pytest_plugin", "harness.cli", "harness._gate", "harness.demo")
#: The faces that import a front end's modules, and the feature of that front end alone each
#: serves; a face not listed reaches front ends only through the registry.
FRONT_FEATURES: dict[tuple[str, str], str] = {
    ("harness", "harness.http"): "the public names: an HTTP service's (`Deployment`, ...)",
    ("harness.cli._run", "harness.consumer"): "run --reference-consumer",
    ("harness.cli._explore", "harness.consumer"): "explore --reference-consumer",
    ("harness.cli._matrix", "harness.consumer"): "matrix --consumers",
    ("harness._gate._session", "harness.consumer"): "--idem-reference-consumer",
    ("harness.cli._load", "harness.http"): "load: Locust drives HTTP services",
    ("harness.cli._init", "harness.http"): "init drafts an HTTP service's target file",
    ("harness.cli._probe", "harness.http"): "probe asks an HTTP service",
    ("harness.cli._reproduce", "harness.http"): "reproduce: what an HTTP finding's script runs",
    ("harness.demo._narrator", "harness.http"): "the demo tells the reference server's flaws",
    ("harness.demo._lesson", "harness.consumer"): "the demo shows the reference consumer's "
                                                  "flaws on Kafka",
}


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


def run_time_imports(tree: ast.AST, *,
                     type_checking: bool = False) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of a module, leaving out the bodies of ``if TYPE_CHECKING:``
    (unless ``type_checking``: a type annotation's import is knowledge all the same)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        if isinstance(node, ast.If) and is_type_checking(node.test) and not type_checking:
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def imported_modules(name: str, path: Path, modules: dict[str, Path], *,
                     type_checking: bool = False) -> set[str]:
    """The modules of the checked packages that ``name`` imports at run time (and, with
    ``type_checking``, for its annotations).

    ``from a.b import c`` is an edge to ``a.b.c`` when that is a module, else to ``a.b``; and
    to each package on the way (``a``, ``a.b``) that ``name`` is not itself inside.
    """
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    for node in run_time_imports(tree, type_checking=type_checking):
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


def import_graph(*, type_checking: bool = False) -> dict[str, set[str]]:
    modules = source_modules()
    return {name: imported_modules(name, path, modules, type_checking=type_checking)
            for name, path in modules.items()}


def inside(module: str, packages: tuple[str, ...]) -> str | None:
    """The package of ``packages`` that ``module`` is (or is inside), if any."""
    return next((p for p in packages if module == p or module.startswith(p + ".")), None)


def is_face(module: str) -> bool:
    return module == "harness" or inside(module, FACES[1:]) is not None


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
    assert "harness.d" in imported_modules("harness.own.mod", source, modules, type_checking=True)


def test_no_import_cycle_inside_the_engine_or_the_reference_server() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles (each a path back to its start):\n" + "\n".join(
        " -> ".join(cycle) for cycle in found
    )


def test_the_layer_finder_tells_engine_faces_and_front_ends_apart() -> None:
    assert inside("harness.http.explore._world", FRONT_PACKAGES) == "harness.http"
    assert inside("harness.httpx", FRONT_PACKAGES) is None
    assert is_face("harness") and is_face("harness.cli._run")
    assert not is_face("harness._runner") and not is_face("harness.consumer")


def test_no_engine_module_imports_a_front_end() -> None:
    """The engine knows a front end only through ``harness._front``'s registry: a module that
    imports one (even for a type) would need a branch per front end, as ``_runner``'s
    ``type(deployment) is Deployment`` did."""
    found = [f"{module} -> {imported}"
             for module, imports in sorted(import_graph(type_checking=True).items())
             if module.startswith("harness") and not is_face(module)
             and inside(module, FRONT_PACKAGES) is None
             for imported in sorted(imports) if inside(imported, FRONT_PACKAGES)]
    assert not found, ("engine modules importing a front end (ask harness._front's registry "
                       "instead):\n" + "\n".join(found))


def test_no_front_end_imports_another() -> None:
    found = [f"{module} -> {imported}"
             for module, imports in sorted(import_graph(type_checking=True).items())
             if (own := inside(module, FRONT_PACKAGES)) is not None
             for imported in sorted(imports)
             if (other := inside(imported, FRONT_PACKAGES)) is not None and other != own]
    assert not found, ("a front end importing another (what both need belongs in the "
                       "engine):\n" + "\n".join(found))


def test_a_face_imports_a_front_end_only_for_a_feature_of_its_own() -> None:
    """``run``, ``check``, ``matrix``, ``explore``, ``replay`` and the gate work for any kind of
    target through the registry; a face names a front end only for what that front end alone
    offers, listed with why in ``FRONT_FEATURES``."""
    found = sorted({(module, front)
                    for module, imports in import_graph(type_checking=True).items()
                    if is_face(module) for imported in imports
                    if (front := inside(imported, FRONT_PACKAGES)) is not None})
    unlisted = [f"{module} -> {front}" for module, front in found
                if (module, front) not in FRONT_FEATURES]
    stale = [f"{module} -> {front}" for module, front in FRONT_FEATURES
             if (module, front) not in found]
    assert not unlisted, ("faces importing a front end for no feature of its own (go through "
                          "harness._front, or list the feature):\n" + "\n".join(unlisted))
    assert not stale, "FRONT_FEATURES lists imports no face makes:\n" + "\n".join(stale)


def front_types_checked(tree: ast.AST, front_names: set[str]) -> Iterator[tuple[int, str]]:
    """Each ``isinstance``/``issubclass`` of, or ``type(x) is``, a name in ``front_names``."""
    for node in ast.walk(tree):
        checked: list[ast.expr] = []
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2):
            checked = [node.args[1]]
        elif (isinstance(node, ast.Compare) and isinstance(node.left, ast.Call)
              and isinstance(node.left.func, ast.Name) and node.left.func.id == "type"
              and all(isinstance(op, ast.Is | ast.IsNot | ast.Eq | ast.NotEq)
                      for op in node.ops)):
            checked = list(node.comparators)
        for expr in checked:
            for name in ast.walk(expr):
                if isinstance(name, ast.Name) and name.id in front_names:
                    yield node.lineno, name.id


def test_the_type_checker_sees_isinstance_and_type_is() -> None:
    tree = ast.parse("isinstance(t, (A, B))\ntype(d) is C\nisinstance(x, int)\n")
    assert list(front_types_checked(tree, {"A", "C"})) == [(1, "A"), (2, "C")]


def test_no_isinstance_of_a_front_ends_type_outside_its_package() -> None:
    """Which kind a target, a scenario or a deployment is, the registry says (``kind_of``,
    ``Front.fits``, ``front_of_history``); a check of a front end's type elsewhere is a branch
    per front end."""
    found = []
    for module, path in sorted(source_modules().items()):
        if not module.startswith("harness"):
            continue
        tree = ast.parse(path.read_text(), str(path))
        own = inside(module, FRONT_PACKAGES)
        front_names = {alias.asname or alias.name
                       for node in run_time_imports(tree, type_checking=True)
                       if isinstance(node, ast.ImportFrom) and node.module
                       and (front := inside(node.module, FRONT_PACKAGES)) is not None
                       and front != own
                       for alias in node.names}
        found += [f"{path.relative_to(ROOT)}:{line}: {name}"
                  for line, name in front_types_checked(tree, front_names)]
    assert not found, "a front end's type checked outside its package:\n" + "\n".join(found)


def test_one_lazy_face() -> None:
    """``harness`` resolves its public names on first use (PEP 562), so that every pytest run,
    which imports it through the plugin, stays cheap; no other package does it again."""
    lazy = sorted(module for module, path in source_modules().items()
                  if any(isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
                         for node in ast.parse(path.read_text()).body))
    assert lazy == ["harness"], f"module-level __getattr__ outside harness/__init__.py: {lazy}"


@pytest.mark.parametrize("package", ["harness", "harness.consumer"])
def test_every_name_a_face_lists_resolves(package: str) -> None:
    """A face's names resolve (``harness``'s on first use: a stale path fails only there)."""
    face = importlib.import_module(package)
    unresolved = [name for name in face.__all__ if not hasattr(face, name)]
    assert not unresolved, f"{package} lists names it cannot resolve: {unresolved}"


def test_the_lease_since_a_claim_is_judged_in_one_place() -> None:
    """Whether a promised lease has run out since an incident or a claim (with the checker's
    slack) is ``judging/_analysis.py``'s ``past_the_lease``; a property module comparing
    against ``LEASE_SLACK`` itself is a second copy (P9 and P10 each had one)."""
    found = [f"{path.relative_to(ROOT)}:{node.lineno}"
             for path in sorted((ROOT / "harness").rglob("_properties.py"))
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Compare)
             and any(isinstance(n, ast.Name) and n.id == "LEASE_SLACK" for n in ast.walk(node))]
    assert not found, "lease comparisons outside past_the_lease:\n" + "\n".join(found)


def test_the_engine_root_holds_at_most_fifteen_modules() -> None:
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
