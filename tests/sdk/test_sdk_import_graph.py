"""The SDK's modules import each other without cycles, counting every import statement.

Imports under ``TYPE_CHECKING`` and inside functions count too: a cycle hidden in a lazy
import is still two modules that cannot be understood (or loaded) one without the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

SDK = Path(__file__).resolve().parents[2] / "sdk"


def _module_names() -> dict[str, Path]:
    names: dict[str, Path] = {}
    for path in SDK.rglob("*.py"):
        parts = list(path.relative_to(SDK).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(["retrylens.sdk", *parts])] = path
    return names


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom, known: set[str]) -> set[str]:
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    if isinstance(node, ast.Import):
        candidates = [alias.name for alias in node.names]
    else:
        if node.level:
            base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        candidates = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    return {c for c in candidates if c in known and c != module}


def import_graph() -> dict[str, set[str]]:
    names = _module_names()
    known = set(names)
    graph: dict[str, set[str]] = {name: set() for name in names}
    for name, path in names.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                graph[name] |= _targets(name, path, node, known)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
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
    return found


def test_the_scan_sees_lazy_and_type_checking_imports() -> None:
    graph = import_graph()
    assert "retrylens.sdk.rules" in graph["retrylens.sdk.run"]  # a plain import
    assert "retrylens.sdk.policy" in graph["retrylens.sdk.state"]  # under TYPE_CHECKING
    assert "retrylens.sdk.otel" in graph["retrylens.sdk.governor"]  # inside a function
    assert cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]


def test_the_sdk_has_no_import_cycles() -> None:
    assert cycles(import_graph()) == []
