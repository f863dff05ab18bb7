"""The import graph of ``retrylens`` read from the source, for the layering and cycle tests.

Every ``import`` and ``from … import`` counts, also those under ``TYPE_CHECKING`` and inside
functions: a cycle hidden behind a lazy import is still two modules that cannot be read,
tested or moved apart. ``from pkg import sub`` where ``sub`` is a module is an edge to the
submodule, not to the package's ``__init__`` (Python imports parent packages first anyway).
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from source_trees import tree, trees

REPO = Path(__file__).resolve().parents[1]


def modules() -> dict[str, Path]:
    """Import name → file, from the package-dir table of pyproject.toml."""
    table = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    found: dict[str, Path] = {}
    for package, folder in table.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = [package, *path.relative_to(REPO / folder).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            submodules = {f"{source}.{alias.name}" for alias in node.names} & known.keys()
            targets.update(submodules)
            if len(submodules) < len(node.names):
                targets.add(source)
    return {t for t in targets if t in known and t != name}


def import_graph(prefix: str = "retrylens") -> dict[str, set[str]]:
    """Module → the project modules it imports, for the modules under ``prefix``."""
    known = modules()
    trees(known.values())  # all at once: one child interpreter
    return {
        name: {t for t in _imports(name, path, known) if t == prefix or t.startswith(prefix + ".")}
        for name, path in known.items()
        if name == prefix or name.startswith(prefix + ".")
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)
