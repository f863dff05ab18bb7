"""Python sources parsed into ``ast`` trees in a child interpreter, for the tests that read code.

CPython 3.11's AST constructor keeps a recursion counter that a deep recursion earlier in
the same thread can leave out of step (python/cpython#106905, fixed in 3.12): a later
``ast.parse`` then raises ``SystemError: AST constructor recursion depth mismatch``, so a
source-reading test failed or passed depending on which test ran before it in the worker.
A fresh interpreter has no such past: the files are parsed there (one child per batch) and
the trees come back pickled (unpickling builds nodes through their classes, not the
constructor with the counter). Trees are cached per path for the session.
"""

from __future__ import annotations

import ast
import pickle
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

_PARSE = (
    "import ast, pickle, sys\n"
    "paths = sys.stdin.read().splitlines()\n"
    "trees = [ast.parse(open(p, encoding='utf-8').read(), filename=p) for p in paths]\n"
    "sys.stdout.buffer.write(pickle.dumps(trees))\n"
)
_cache: dict[Path, ast.Module] = {}


def trees(paths: Iterable[Path]) -> dict[Path, ast.Module]:
    """The parsed tree of each of ``paths`` (parsed together in one child interpreter)."""
    given = [Path(p) for p in paths]
    missing = sorted({p.resolve() for p in given} - _cache.keys())
    if missing:
        done = subprocess.run(
            [sys.executable, "-I", "-c", _PARSE],
            input="\n".join(map(str, missing)).encode(),
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"parsing {len(missing)} files failed:\n{done.stderr.decode()[-2000:]}")
        _cache.update(zip(missing, pickle.loads(done.stdout), strict=True))  # noqa: S301 - our own child's output
    return {p: _cache[p.resolve()] for p in given}


def tree(path: Path) -> ast.Module:
    """The parsed tree of one file (prefer :func:`trees` for many: one child for all)."""
    return trees([path])[Path(path)]
