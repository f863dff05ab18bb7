"""The long modules are handed out first: ``LONG_MODULES`` names real modules and every module
that declares itself long.

CI's workers get whole modules in collection order, which ``tests/conftest.py`` makes
``LONG_MODULES`` first. A module missing from the table is ordered by its number of tests, so a
heavy module of one or two tests starts last and ends the lane alone (session 19: the planted-word
A/B, one test of 82 s, ended the locked lane 34 s after every other worker was idle). A test allowed
more than pytest-timeout's suite-wide 300 s (``@pytest.mark.timeout(900)``) says by that mark that
it is long, so its module must be in the table.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest
from long_modules import LONG_MODULES
from source_trees import trees

pytestmark = pytest.mark.source_only  # reads the test modules' sources and the table, nothing installed

REPO = Path(__file__).resolve().parents[2]


def _suite_timeout_s() -> float:
    """pytest-timeout's suite-wide bound, from pyproject.toml's ``[tool.pytest.ini_options]``."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return float(pyproject["tool"]["pytest"]["ini_options"]["timeout"])


def _timeouts(module: ast.Module) -> list[float]:
    """The seconds of every ``pytest.mark.timeout(N)`` in a module (decorators and ``pytestmark``)."""
    found = []
    for node in ast.walk(module):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "timeout"
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "mark"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.append(float(node.args[0].value))
    return found


def _declared_long() -> set[str]:
    """Test modules with a test allowed more than the suite-wide timeout."""
    bound = _suite_timeout_s()
    parsed = trees(sorted((REPO / "tests").rglob("test_*.py")))  # one child interpreter
    return {
        path.relative_to(REPO).as_posix()
        for path, module in parsed.items()
        if any(seconds > bound for seconds in _timeouts(module))
    }


def test_every_long_module_exists_once() -> None:
    assert len(set(LONG_MODULES)) == len(LONG_MODULES)
    assert [m for m in LONG_MODULES if not (REPO / m).is_file()] == []


def test_every_module_with_a_test_allowed_past_the_suite_timeout_is_a_long_module() -> None:
    declared = _declared_long()
    assert "tests/simulation/test_planted_precheck_ab.py" in declared  # the scan sees a decorator's mark
    assert "tests/foundation/test_demo.py" in declared  # and a module's pytestmark
    assert sorted(declared - set(LONG_MODULES)) == []


def test_collection_hands_out_the_listed_modules_first_in_their_order(request: pytest.FixtureRequest) -> None:
    """The collected order (what xdist hands out) starts with the listed modules of this run."""
    order: list[str] = []
    for item in request.session.items:
        module = item.nodeid.split("::", 1)[0]
        if not order or order[-1] != module:
            order.append(module)
    listed = [m for m in order if m in LONG_MODULES]
    assert order[: len(listed)] == listed
    assert listed == [m for m in LONG_MODULES if m in listed]
