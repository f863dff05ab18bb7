"""The risk model's fits run on one BLAS thread, and the process keeps its own setting after.

Why it matters: hundreds of small fits with a BLAS thread per core spend most of their
CPU spinning on a busy machine (analytics/blas_threads.py). tests/conftest.py limits the
test process to one thread, so each test here first gives BLAS two threads, as a user's
process has on this 2-core machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from threadpoolctl import threadpool_info, threadpool_limits

from retrylens.analytics import classifier as clf
from retrylens.analytics.training import trace_examples, train_from_traces

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "agent_traces_sample.jsonl"


def _blas_threads() -> int:
    blas = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    assert blas, "threadpoolctl sees no BLAS library: the fits' thread limit would limit nothing"
    return max(blas)


class _Probe(dict):
    """A feature row that notes the BLAS threads each time the fit reads it."""

    seen: list[int]

    def items(self):  # type: ignore[override]
        self.seen.append(_blas_threads())
        return super().items()


def _probed_rows() -> tuple[list[_Probe], list[int], list[str], list[int]]:
    examples = trace_examples(SAMPLE)
    seen: list[int] = []
    rows = []
    for example in examples:
        row = _Probe(example.as_model_input())
        row.seen = seen
        rows.append(row)
    return rows, [e.label for e in examples], [e.group for e in examples], seen


def test_an_incremental_fit_runs_on_one_blas_thread() -> None:
    rows, labels, _, seen = _probed_rows()

    def chunks() -> Iterator[tuple[list[_Probe], list[int]]]:
        half = len(rows) // 2
        yield rows[:half], labels[:half]
        yield rows[half:], labels[half:]

    with threadpool_limits(limits=2, user_api="blas"):
        clf.fit_incremental(chunks())
        assert _blas_threads() == 2
    assert seen and set(seen) == {1}, sorted(set(seen))


def test_training_from_traces_runs_on_one_blas_thread(tmp_path: Path) -> None:
    """The `retrylens train` road: its report's folds and baselines included, not only the final fit."""
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:  # the fit's own thread is busy: sample the process setting beside it
        while not stop.is_set():
            seen.append(_blas_threads())
            stop.wait(0.1)  # each look at the libraries costs CPU of its own

    with threadpool_limits(limits=2, user_api="blas"):
        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            train_from_traces(SAMPLE)
        finally:
            stop.set()
            watcher.join()
        assert _blas_threads() == 2
    during = seen[1:-1]  # the first and last samples may fall before or after the training
    assert during and set(during) == {1}, sorted(set(seen))


#: Two fits at once in worker threads of a fresh process (run by the test below). A fresh
#: process: OpenBLAS ignores a worker thread's setting once the main thread has set one, as
#: tests/conftest.py does in this one.
CONCURRENT = r"""
import json, sys, threading
sys.path[:0] = sys.argv[1:]
from test_fit_threads import _blas_threads, _probed_rows
from retrylens.analytics import classifier as clf

assert _blas_threads() == 2, _blas_threads()
results, errors = [], []

def fit():
    rows, labels, groups, seen = _probed_rows()
    try:
        clf.fit_in_memory(rows, labels, groups=groups, text_features=True)
    except BaseException as exc:
        errors.append(repr(exc))
    results.append(sorted(set(seen)) if seen else [])

threads = [threading.Thread(target=fit) for _ in range(2)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps({"errors": errors, "seen": results, "after": _blas_threads()}))
"""


def test_concurrent_fits_share_the_limit_and_the_last_one_restores_it() -> None:
    """The API trains in worker threads: one fit's end must not lift the other's limit, and
    the last to end gives the process its threads back."""
    here = Path(__file__).resolve().parent
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}
    done = subprocess.run([sys.executable, "-c", CONCURRENT, str(here), str(here.parent)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result == {"errors": [], "seen": [[1], [1]], "after": 2}, result
