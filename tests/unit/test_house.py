"""The house rules of ``src/turnrl`` (``docs/design.md``, "Layers"): no module over 500 lines,
no import cycle between turnrl's modules, and every import going down the layers table.

Every import of a turnrl module counts, wherever it is written: at module level, under
``if TYPE_CHECKING:`` (it never runs, but the design depends on it all the same) and inside a
function (it runs later, but it runs: a function-level import is no way out of a cycle).
Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``, so it is an import of those
packages too (except of the importer's own packages, which are already running).
The table is read from ``docs/design.md`` itself, so the rules and their documentation are one.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "turnrl"
DESIGN = ROOT / "docs" / "design.md"
MAX_LINES = 500

Graph = Mapping[str, set[str]]


# ----------------------------------------------------------------------------- the graph
def module_name(path: Path, package: Path) -> str:
    """``src/turnrl/envs/gym/ids.py`` → ``turnrl.envs.gym.ids``; a package is its name."""
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(path, package): path for path in sorted(package.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imported_names(source: str, module: str, is_package: bool) -> Iterator[tuple[str, str]]:
    """``(dotted name, where)`` of every import in ``source``, ``where`` being ``module``
    (at module level), ``type_checking`` or ``function``; relative imports resolved."""

    def visit(node: ast.AST, where: str) -> Iterator[tuple[str, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                yield from ((alias.name, where) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = module.split(".")[:len(module.split(".")) + is_package - child.level]
                    base = ".".join([*parts, base] if base else parts)
                # `from pkg import name`: the module pkg.name, else pkg (import_graph decides)
                yield from ((f"{base}.{alias.name}", where) for alias in child.names)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for inner in child.body:
                    yield from visit(ast.Module(body=[inner], type_ignores=[]),
                                     "type_checking" if where == "module" else where)
                for inner in child.orelse:
                    yield from visit(ast.Module(body=[inner], type_ignores=[]), where)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from visit(child, "function")
            else:
                yield from visit(child, where)

    yield from visit(ast.parse(source), "module")


def import_graph(found: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module → the turnrl modules importing it runs (see the module docstring)."""
    graph: dict[str, set[str]] = {name: set() for name in found}
    for name, path in found.items():
        for target, _ in imported_names(path.read_text(encoding="utf-8"), name,
                                        path.name == "__init__.py"):
            while target and target not in found:  # `from pkg import name`: the package
                target = target.rpartition(".")[0]
            if not target or target == name:
                continue
            graph[name].add(target)
            parts = target.split(".")
            for end in range(2, len(parts)):  # the packages above it run first
                above = ".".join(parts[:end])
                if above in found and above != name and not name.startswith(above + "."):
                    graph[name].add(above)
    return graph


def find_cycles(graph: Graph) -> list[list[str]]:
    """One cycle ``[a, b, ..., a]`` per strongly connected component of more than one module
    (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return [_cycle_in(set(component), graph) for component in components]


def _cycle_in(component: set[str], graph: Graph) -> list[str]:
    """A shortest cycle through the first member of a strongly connected component."""
    start = min(component)
    paths = {start: [start]}
    todo = [start]
    while todo:
        node = todo.pop(0)
        for child in sorted(graph.get(node, ())):
            if child == start:
                return [*paths[node], start]
            if child in component and child not in paths:
                paths[child] = [*paths[node], child]
                todo.append(child)
    raise AssertionError(f"{sorted(component)} is not strongly connected")


# ----------------------------------------------------------------------------- the layers
def read_layers(text: str) -> dict[str, tuple[int, bool]]:
    """The table under ``## Layers`` of the design: ``{unit: (layer, imports within the
    layer)}``, a unit being a package or module below ``turnrl`` (``config.checks``)."""
    section = text.split("\n## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if re.match(r"\|\s*\d+\s*\|", line)]
    layers = {}
    for row in rows:
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        for unit in re.findall(r"`([\w.]+)`", cells[1]):
            layers[unit] = (int(cells[0]), cells[-1].lower().startswith("any"))
    return layers


def unit_of(module: str, layers: Mapping[str, object]) -> str | None:
    """The table's unit of ``module``: its longest listed prefix below ``turnrl``
    (``__init__`` for the package ``turnrl`` itself)."""
    parts = module.split(".")[1:] or ["__init__"]
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in layers:
            return ".".join(parts[:end])
    return None


def layer_violations(graph: Graph, layers: Mapping[str, tuple[int, bool]]) -> list[str]:
    """Every import that goes up the table, or sideways where its layer does not allow it,
    and every module the table does not place."""
    problems = [f"{module}: not in the layers table of docs/design.md"
                for module in sorted(graph) if unit_of(module, layers) is None]
    for module, targets in sorted(graph.items()):
        unit = unit_of(module, layers)
        for target in sorted(targets):
            other = unit_of(target, layers)
            if unit is None or other is None or other == unit:
                continue
            (layer, sideways), (other_layer, _) = layers[unit], layers[other]
            if other_layer > layer or (other_layer == layer and not sideways):
                problems.append(f"{module} (layer {layer}, {unit}) imports {target} "
                                f"(layer {other_layer}, {other})")
    return problems


# ----------------------------------------------------------------------------- the rules
def long_modules(found: Mapping[str, Path]) -> dict[str, int]:
    """The modules over :data:`MAX_LINES` lines, with their line counts."""
    counts = {name: len(path.read_text(encoding="utf-8").splitlines())
              for name, path in found.items()}
    return {name: count for name, count in counts.items() if count > MAX_LINES}


def test_no_module_is_over_500_lines():
    found = modules()
    long = long_modules(found)
    assert not long, "\n".join(f"{found[name].relative_to(ROOT)}: {count} lines (at most "
                               f"{MAX_LINES}); split it along its seams"
                               for name, count in sorted(long.items()))


def test_no_import_cycle_inside_turnrl():
    cycles = find_cycles(import_graph(modules()))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_imports_follow_the_layers_of_the_design():
    problems = layer_violations(import_graph(modules()),
                                read_layers(DESIGN.read_text(encoding="utf-8")))
    assert not problems, "\n".join(problems)


def test_every_unit_of_the_table_exists():
    found = modules()
    for unit in read_layers(DESIGN.read_text(encoding="utf-8")):
        name = "turnrl" if unit == "__init__" else f"turnrl.{unit}"
        assert name in found, f"docs/design.md's layers table names {unit}, which is gone"


# ----------------------------------------------------------------------------- the checks fail
def test_the_cycle_finder_finds_a_cycle_and_passes_a_tree():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []
    two = find_cycles({"a": {"b"}, "b": {"a"}, "x": {"y"}, "y": {"x", "a"}})
    assert sorted(two) == [["a", "b", "a"], ["x", "y", "x"]]


def _write(root: Path, files: dict[str, str]) -> Path:
    package = root / "turnrl"
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    return package


def test_the_graph_counts_type_checking_function_relative_and_package_imports(tmp_path):
    package = _write(tmp_path, {
        "__init__.py": "",
        "low.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                  "    from turnrl.high import High\n",
        "high.py": "def f():\n    from turnrl import low\n",
        "pkg/__init__.py": "from .inner import x\n",
        "pkg/inner.py": "from . import sibling\nx = 1\n",
        "pkg/sibling.py": "",
        "user.py": "import turnrl.pkg.inner\n",
    })
    graph = import_graph(modules(package))
    assert graph["turnrl.low"] == {"turnrl.high"}  # under TYPE_CHECKING
    assert graph["turnrl.high"] == {"turnrl.low"}  # inside a function
    assert graph["turnrl.pkg"] == {"turnrl.pkg.inner"}  # relative, from a package
    assert graph["turnrl.pkg.inner"] == {"turnrl.pkg.sibling"}  # its own package is running
    assert graph["turnrl.user"] == {"turnrl.pkg.inner", "turnrl.pkg"}  # the package runs too
    assert find_cycles(graph) == [["turnrl.high", "turnrl.low", "turnrl.high"]]


def test_the_layer_check_refuses_an_upward_import_and_an_unplaced_module():
    table = ("\n## Layers\n\n| layer | units | holds | within the layer |\n|---|---|---|---|\n"
             "| 2 | `train`, `config.checks` | a run | any |\n"
             "| 1 | `config`, `envs` | below | - |\n\n## Next\n")
    layers = read_layers(table)
    assert layers == {"train": (2, True), "config.checks": (2, True), "config": (1, False),
                      "envs": (1, False)}
    graph = {"turnrl.train.loop": {"turnrl.config", "turnrl.config.checks"},
             "turnrl.config.checks": {"turnrl.envs", "turnrl.train.loop"},
             "turnrl.config.schema": {"turnrl.config.checks", "turnrl.config.errors"},
             "turnrl.config.errors": set(), "turnrl.envs": {"turnrl.config"},
             "turnrl.cli": set()}
    assert layer_violations(graph, layers) == [
        "turnrl.cli: not in the layers table of docs/design.md",
        "turnrl.config.schema (layer 1, config) imports turnrl.config.checks "
        "(layer 2, config.checks)",
        "turnrl.envs (layer 1, envs) imports turnrl.config (layer 1, config)",
    ]


def test_the_line_limit_counts_lines(tmp_path):
    package = _write(tmp_path, {"__init__.py": "", "fits.py": "x = 1\n" * MAX_LINES,
                                "long.py": "x = 1\n" * (MAX_LINES + 1)})
    assert long_modules(modules(package)) == {"turnrl.long": MAX_LINES + 1}
