"""No import cycles anywhere in ``retrylens``: the layers read in one direction.

Every ``import`` and ``from … import`` counts, also those under ``TYPE_CHECKING`` and inside
functions: a cycle hidden behind a lazy import is still two modules that cannot be read,
tested or moved apart. ``from pkg import sub`` where ``sub`` is a module is an edge to the
submodule, not to the package's ``__init__`` (Python imports parent packages first anyway).
"""

from __future__ import annotations

import ast
import graphlib
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _modules() -> dict[str, Path]:
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
    for node in ast.walk(ast.parse(path.read_text())):
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


def import_graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: _imports(name, path, known) for name, path in known.items()}


def test_the_graph_sees_the_project() -> None:
    graph = import_graph()
    assert len(graph) > 150
    assert "retrylens.sdk.run" in graph["retrylens.sdk.governor"]  # a known edge


def test_no_import_cycles() -> None:
    try:
        graphlib.TopologicalSorter(import_graph()).prepare()
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle: {' -> '.join(exc.args[1])}")


def test_a_cycle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(graph).prepare()
