"""Test modules import shared helpers from modules with unique names, never from ``conftest``.

Every folder of tests has its own ``conftest.py``, all imported under the one name
``conftest``: ``from conftest import x`` in a test module finds whichever conftest pytest
loaded last, so it breaks as soon as another folder's tests run in the same process
(``pytest tests/dashboard/test_dashboard_alerts.py tests/api/test_api_auth.py`` could not
collect). Helpers live in modules named for their folder (``apitest_support``,
``dashboard_seed``, ``dashboard_runs``); conftest files hold fixtures only.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from source_trees import tree, trees

pytestmark = pytest.mark.source_only  # no installed package's version can change it (pyproject.toml, markers)

TESTS = Path(__file__).resolve().parents[1]


def _conftest_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.ImportFrom) and node.module == "conftest" and node.level == 0:
            found.append(f"{path.relative_to(TESTS)}:{node.lineno}")
        elif isinstance(node, ast.Import) and any(alias.name == "conftest" for alias in node.names):
            found.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    return found


def test_no_module_imports_a_conftest_by_name() -> None:
    paths = sorted(TESTS.rglob("*.py"))
    trees(paths)  # all at once: one child interpreter
    found = [hit for path in paths for hit in _conftest_imports(path)]
    assert found == [], f"import these from a uniquely named helper module instead: {found}"
