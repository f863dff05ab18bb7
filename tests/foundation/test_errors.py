"""One exceptions module: every error RetryLens raises on purpose derives from one base and
is defined in ``retrylens/errors.py`` (httpx's ``_exceptions.py`` is the model)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from source_trees import tree, trees

import retrylens.errors as errors

REPO = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = ("retrylens", "schemas", "ingest", "store", "analytics", "sdk", "simulation", "api", "dashboard",
                "evaluation")
#: exceptions that are not errors of the product: raised through agent code on purpose, or
#: private control flow that never leaves its module
NOT_PROJECT_ERRORS = {
    ("sdk/text/sanitizer.py", "Failure"),  # an agent raises it to state a failure's class
    ("simulation/world.py", "SimFault"),  # a simulated fault, raised through agent code
    ("simulation/multistep.py", "RateLimited"),  # a simulated 429, raised through agent code
    ("api/precheck.py", "NeedsIO"),  # scoring without I/O gave up; caught at once
    ("api/events.py", "IntakeUnavailable"),  # becomes a 503 in the same module
    ("api/middleware.py", "BodyTooLarge"),  # FastAPI's HTTPException for a 413 with its figures
    ("sdk/integrations/providers/plain_calls.py", "_GaveUp"),  # never raised: ends an observed call whose client sent no more
}


def _exception_classes(path: Path) -> list[str]:
    found = []
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.ClassDef):
            bases = [ast.unparse(b) for b in node.bases]
            if any(b.endswith(("Error", "Exception")) or b in {"Exception", "BaseException"} for b in bases):
                found.append(node.name)
    return found


def test_every_project_error_is_defined_in_the_errors_module() -> None:
    strays = []
    trees(p for folder in PACKAGE_DIRS for p in (REPO / folder).rglob("*.py"))  # one child interpreter
    for folder in PACKAGE_DIRS:
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = str(path.relative_to(REPO))
            if rel == "retrylens/errors.py":
                continue
            strays += [f"{rel}:{name}" for name in _exception_classes(path) if (rel, name) not in NOT_PROJECT_ERRORS]
    assert strays == []


def test_every_error_derives_from_the_one_base_and_appears_in_the_drawn_tree() -> None:
    tree = errors.__doc__ or ""
    classes = [
        c
        for _, c in inspect.getmembers(errors, inspect.isclass)
        if c.__module__ == errors.__name__ and not getattr(c, "_is_protocol", False)
    ]
    assert len(classes) >= 15
    for cls in classes:
        assert issubclass(cls, errors.RetryLensError), cls
        assert cls.__name__ in tree, f"{cls.__name__} missing from the hierarchy in the docstring"
