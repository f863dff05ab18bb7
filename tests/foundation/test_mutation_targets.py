"""Every mutation target names functions its module defines, and every written-down
equivalent mutant belongs to a target (``infra/mutate.py``, ``infra/mutation_targets``).

A target whose module moved or lost a function would be pruned to no mutants at all, and
an equivalent keyed by an old module path would never match again: both go quiet instead
of failing, so a move (sdk/core/rules.py split into one module per part, session 10) must
update them, and this test says where.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from source_trees import tree

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "infra"))

from mutation_targets import (  # noqa: E402
    EQUIVALENT,
    EXEMPT,
    GUARANTEE_FOLDERS,
    GUARANTEE_MODULES,
    TARGETS,
)

pytestmark = pytest.mark.source_only  # no installed package's version can change it (pyproject.toml, markers)


def _functions(module: str) -> set[str]:
    return {n.name for n in ast.walk(tree(REPO / module)) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_target_function_is_defined_in_its_module() -> None:
    missing = [
        f"{name}: {target.module} defines no {function}"
        for name, target in TARGETS.items()
        for function in target.functions
        if function not in _functions(target.module)
    ]
    assert missing == []


def test_every_equivalent_names_a_targets_module_and_a_function_it_defines() -> None:
    targeted: dict[str, set[str]] = {}
    for target in TARGETS.values():
        targeted.setdefault(target.module, set()).update(target.functions)
    stray = [
        f"{module} {function}: {text}"
        for module, function, _operator, text in EQUIVALENT
        if function not in targeted.get(module, set()) or function not in _functions(module)
    ]
    assert stray == []


def _guarantee_modules() -> set[str]:
    under = {
        str(path.relative_to(REPO))
        for folder in GUARANTEE_FOLDERS
        for path in (REPO / folder).rglob("*.py")
        if path.name != "__init__.py"
    }
    return under | set(GUARANTEE_MODULES)


def test_every_guarantee_module_has_a_target_or_a_written_reason_why_not() -> None:
    """A new module under ingest/, store/ or sdk/transport/ (or a named guarantee module)
    fails here until it gets a target in infra/mutation_targets/ or an exemption with why."""
    targeted = {target.module for target in TARGETS.values()}
    uncovered = sorted(m for m in _guarantee_modules() if m not in targeted and not EXEMPT.get(m, "").strip())
    assert uncovered == [], "give each a target (infra/mutation_targets/) or an EXEMPT reason (coverage.py)"


def test_every_exemption_names_a_guarantee_module_that_exists() -> None:
    stray = sorted(m for m in EXEMPT if m not in _guarantee_modules() or not (REPO / m).is_file())
    assert stray == []
