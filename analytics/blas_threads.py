"""Model fits run on one BLAS/OpenMP thread: the risk model's fits are many and small.

Why: OpenBLAS (numpy's, scipy's) and scikit-learn's OpenMP start a thread per core. The
risk model fits hundreds of small logistic regressions (grouped folds times the settings
search, a few dozen to a few thousand rows); at that size the extra threads mostly spin
waiting for each other, and on a busy 2-core machine that spinning takes the core another
process needed. Measured in the test suite (session 10): one ``train_from_traces`` of the
40-trace sample took 11.7 s of CPU with the default threads, 2.2 s with one. The fits are
no slower on one thread (the matrices are too small to split), so the product limits them
itself instead of asking every user to set ``OPENBLAS_NUM_THREADS=1``.

threadpoolctl changes a process-wide setting, so concurrent fits (the API trains in a
worker thread while another request may do the same) share one limit: the first fit to
start sets it, the last to finish restores what the process had.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from threadpoolctl import threadpool_limits

P = ParamSpec("P")
R = TypeVar("R")

_lock = threading.Lock()
_depth = 0
_limiter: threadpool_limits | None = None


def _enter() -> None:
    global _depth, _limiter
    with _lock:
        if _depth == 0:
            _limiter = threadpool_limits(limits=1)
        _depth += 1


def _exit() -> None:
    global _depth, _limiter
    with _lock:
        _depth -= 1
        if _depth == 0 and _limiter is not None:
            _limiter.restore_original_limits()
            _limiter = None


def one_blas_thread(fit: Callable[P, R]) -> Callable[P, R]:
    """Run ``fit`` with BLAS and OpenMP limited to one thread, restored afterwards (see the module)."""

    @functools.wraps(fit)
    def limited(*args: P.args, **kwargs: P.kwargs) -> R:
        _enter()
        try:
            return fit(*args, **kwargs)
        finally:
            _exit()

    return limited
