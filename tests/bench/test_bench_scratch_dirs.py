"""A bench that opens the embedded store in its own process does not fail on removing its
scratch directory.

chDB keeps its engine (and its background merges) running until the process exits, so a part
may be written into the store's folder while ``TemporaryDirectory`` removes it: ``rmtree`` then
meets ``Directory not empty`` and the bench exits 1 after its figures are measured. A CI run
failed that way (``bench/queries.py``'s smoke run, a loaded machine, session 19). The scratch
directory's removal is not what a bench measures, so those benches pass
``ignore_cleanup_errors=True``; this test finds every such bench by itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.source_only

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _opens_the_store_in_process(tree: ast.AST) -> bool:
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"open_store", "connect"}
        for node in ast.walk(tree)
    )


def _scratch_dirs(tree: ast.AST) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "TemporaryDirectory"
    ]


def _ignores_cleanup_errors(call: ast.Call) -> bool:
    return any(
        k.arg == "ignore_cleanup_errors" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in call.keywords
    )


CHECKED = sorted(
    p for p in BENCH.glob("*.py") if _opens_the_store_in_process(ast.parse(p.read_text())) and _scratch_dirs(ast.parse(p.read_text()))
)


def test_the_benches_that_open_the_store_in_process_are_found() -> None:
    assert {p.name for p in CHECKED} >= {"queries.py", "classifier.py", "fit_time.py", "precheck_ab.py"}


@pytest.mark.parametrize("script", CHECKED, ids=[p.name for p in CHECKED])
def test_a_bench_with_the_store_in_process_ignores_its_scratch_directorys_cleanup_errors(script: Path) -> None:
    tree = ast.parse(script.read_text())
    unguarded = [call.lineno for call in _scratch_dirs(tree) if not _ignores_cleanup_errors(call)]
    assert not unguarded, f"{script.name}: TemporaryDirectory without ignore_cleanup_errors=True at lines {unguarded}"
