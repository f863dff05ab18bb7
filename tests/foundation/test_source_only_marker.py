"""A test marked ``source_only`` imports nothing installed: CI's lowest run may leave it out.

The lowest run (``.ci/run``, run 2) exists to prove the declared lower bounds of the
dependencies; a test that reads only the repository's files (source trees, import graphs,
tables of targets) gives the same answer on every set of versions, so the locked run alone
runs it. That holds only while such a test, and every helper it imports from the tests' or
``infra``'s folders, imports nothing but the standard library and pytest: this test checks
it, so a later edit that brings in an installed package (or ``retrylens`` itself) fails here
instead of quietly dropping a version-dependent test from the lowest run.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from source_trees import tree, trees

pytestmark = pytest.mark.source_only  # it checks itself too

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
#: where a test's own helpers live (``tests/``, a test folder, ``infra/`` for the mutation targets)
HELPER_ROOTS = (TESTS, REPO / "infra")
ALLOWED = {*sys.stdlib_module_names, "pytest", "__future__"}


def _marked_source_only(path: Path) -> bool:
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Attribute) and node.attr == "source_only":
            return True
    return False


def _local_module(name: str, folder: Path) -> Path | None:
    """The file of a helper module importable by the tests (``rootdir``-relative sys.path)."""
    top = name.split(".")[0]
    for root in (folder, *HELPER_ROOTS):
        for candidate in (root / f"{top}.py", root / top / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _foreign_imports(path: Path, seen: set[Path]) -> list[str]:
    """Imports of ``path`` (and of the local helpers it imports) that are neither stdlib nor pytest."""
    if path in seen:
        return []
    seen.add(path)
    found: list[str] = []
    files = [path] if path.name != "__init__.py" else sorted(path.parent.glob("*.py"))
    for file in files:
        seen.add(file)
        for node in ast.walk(tree(file)):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                if name.split(".")[0] in ALLOWED:
                    continue
                local = _local_module(name, file.parent)
                if local is None:
                    found.append(f"{file.name}: {name}")
                else:
                    found.extend(_foreign_imports(local, seen))
    return found


def _modules_marked_source_only() -> list[Path]:
    """The test modules whose tree names ``source_only``, parsed in ONE child interpreter.

    Only files whose text contains the word can name the attribute, so only those are
    parsed (and all at once): this runs at collection, in every xdist worker of both lanes,
    and parsing the 270 modules one child interpreter each cost ~14 s of CPU per collection.
    """
    candidates = [p for p in TESTS.rglob("test_*.py") if "source_only" in p.read_text(encoding="utf-8")]
    trees(candidates)  # warms tree()'s cache: one child for all
    return sorted(p for p in candidates if _marked_source_only(p))


MARKED = _modules_marked_source_only()


def test_some_modules_are_marked() -> None:
    assert len(MARKED) >= 4, MARKED


@pytest.mark.parametrize("path", MARKED, ids=lambda p: str(p.relative_to(TESTS)))
def test_a_source_only_module_imports_nothing_installed(path: Path) -> None:
    assert _foreign_imports(path, set()) == []


def test_the_check_sees_an_installed_import_behind_a_helper(tmp_path: Path) -> None:
    (tmp_path / "helper_mod.py").write_text("import json\nimport numpy\n")
    module = tmp_path / "test_x.py"
    module.write_text("import pytest\nfrom helper_mod import x\npytestmark = pytest.mark.source_only\n")
    assert _marked_source_only(module)
    assert _foreign_imports(module, set()) == ["helper_mod.py: numpy"]


def test_finding_the_marked_modules_starts_one_child_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """MARKED is worked out at collection, in every xdist worker of both CI lanes: one child
    interpreter parses the candidates (a child per test module cost ~14 s of CPU each time)."""
    import source_trees

    started: list[list[str]] = []
    real_run = source_trees.subprocess.run

    def counting_run(args: list[str], **kwargs: object) -> object:
        started.append(args)
        return real_run(args, **kwargs)

    monkeypatch.setattr(source_trees, "_cache", {})  # nothing parsed yet, as at collection
    monkeypatch.setattr(source_trees.subprocess, "run", counting_run)
    assert _modules_marked_source_only() == MARKED
    assert len(started) == 1
