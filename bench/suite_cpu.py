"""Where the test suite's time goes: wall AND CPU seconds per test file, per xdist worker.

Wall time alone misleads on a shared 2-core machine (another person's load stretches it);
CPU seconds (user + system of the test process and of every subprocess it waited for:
the CLI, the demo, a server, a private broker) are what a test file costs the two cores
whatever else runs. Two parts:

* a pytest plugin: with ``RETRYLENS_SUITE_CPU_DIR`` set, each test process (the main one or
  an xdist worker) appends one JSON line per test to ``<dir>/<worker>.jsonl``: its file,
  wall seconds and CPU seconds over setup + call + teardown (a module fixture's teardown
  counts in the file's last test), and when it started and ended (``time.time()``), so a
  worker's idle tail at the end of a run shows. A worker's session fixtures (a shared server,
  a browser) are torn down, and their processes reaped, in the teardown of its last test: that
  teardown (with the last test's and module's own) is a row of its own (file
  ``SESSION_TEARDOWN``), not the last test's cost (session 19 read a one-test module's 13 s of
  CPU as 81 s). Loaded with ``-p suite_cpu`` and this
  folder on ``PYTHONPATH``::

      RETRYLENS_SUITE_CPU_DIR=/tmp/run-a PYTHONPATH=bench PYTEST_ARGS="-p suite_cpu" make test

* a report: per-file totals of one run, or of two runs side by side (before, after)::

      python bench/suite_cpu.py /tmp/run-a                       # one run, heaviest first
      python bench/suite_cpu.py /tmp/run-a /tmp/run-b --json     # before / after per file
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ENV_DIR = "RETRYLENS_SUITE_CPU_DIR"
#: the ``file`` of a worker's last teardown row (its session fixtures' stop and reaped processes)
SESSION_TEARDOWN = "<session teardown>"


def _cpu_seconds() -> float:
    """User + system CPU of this process and of its children that were waited for."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


# --- the pytest plugin ---------------------------------------------------------------------

try:
    import pytest
except ImportError:  # the report needs no pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:
    #: the last test's teardown, measured apart: (started, wall, cpu)
    _last_teardown: list[tuple[float, float, float]] = []

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        if nextitem is not None or not os.environ.get(ENV_DIR):
            yield
            return
        started, wall0, cpu0 = time.time(), time.perf_counter(), _cpu_seconds()
        yield
        _last_teardown.append((started, time.perf_counter() - wall0, _cpu_seconds() - cpu0))

    def _write(out_dir: str, row: dict[str, object]) -> None:
        path = Path(out_dir) / f"{row['worker']}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        out_dir = os.environ.get(ENV_DIR)
        if not out_dir:
            yield
            return
        _last_teardown.clear()
        started, wall0, cpu0 = time.time(), time.perf_counter(), _cpu_seconds()
        yield
        wall, cpu, ended = time.perf_counter() - wall0, _cpu_seconds() - cpu0, time.time()
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        if _last_teardown:  # the worker's last test: its teardown stopped the session fixtures
            td_started, td_wall, td_cpu = _last_teardown.pop()
            wall, cpu = wall - td_wall, cpu - td_cpu
            _write(out_dir, {"file": SESSION_TEARDOWN, "test": SESSION_TEARDOWN, "worker": worker,
                             "wall": round(td_wall, 4), "cpu": round(td_cpu, 4),
                             "start": round(td_started, 3), "end": round(ended, 3)})
            ended = td_started
        _write(out_dir, {
            "file": item.nodeid.split("::", 1)[0],
            "test": item.nodeid,
            "worker": worker,
            "wall": round(wall, 4),
            "cpu": round(cpu, 4),
            "start": round(started, 3),
            "end": round(ended, 3),
        })


# --- the report ------------------------------------------------------------------------------


@dataclass
class FileCost:
    tests: int = 0
    wall: float = 0.0
    cpu: float = 0.0


@dataclass
class Run:
    files: dict[str, FileCost] = field(default_factory=dict)
    workers: dict[str, tuple[float, float, float]] = field(default_factory=dict)  # first start, last end, busy wall

    @property
    def span(self) -> float:
        if not self.workers:
            return 0.0
        return max(e for _, e, _ in self.workers.values()) - min(s for s, _, _ in self.workers.values())


def load(directory: Path) -> Run:
    """One run's rows (every ``*.jsonl`` in ``directory``), summed per file and per worker."""
    run = Run()
    paths = sorted(directory.glob("*.jsonl"))
    if not paths:
        raise SystemExit(f"no *.jsonl rows in {directory}: was {ENV_DIR} set for the run?")
    for path in paths:
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SystemExit(f"{path}:{line_no}: not a JSON row ({exc})") from None
            cost = run.files.setdefault(row["file"], FileCost())
            cost.tests += row["file"] != SESSION_TEARDOWN
            cost.wall += row["wall"]
            cost.cpu += row["cpu"]
            first, last, busy = run.workers.get(row["worker"], (row["start"], row["end"], 0.0))
            run.workers[row["worker"]] = (min(first, row["start"]), max(last, row["end"]), busy + row["wall"])
    return run


def report(runs: list[Run], names: list[str], top: int) -> dict[str, object]:
    files = sorted(
        {f for run in runs for f in run.files},
        key=lambda f: -max(run.files.get(f, FileCost()).cpu for run in runs),
    )
    rows = [
        {"file": f, **{
            f"{name}_{k}": round(getattr(run.files.get(f, FileCost()), k), 1)
            for name, run in zip(names, runs, strict=True) for k in ("tests", "cpu", "wall")
        }}
        for f in files
    ]
    totals = {
        name: {
            "tests": sum(c.tests for c in run.files.values()),
            "cpu": round(sum(c.cpu for c in run.files.values()), 1),
            "test_wall": round(sum(c.wall for c in run.files.values()), 1),
            "span": round(run.span, 1),
            "workers": {
                w: {"first_to_last": round(e - s, 1), "idle_tail": round(run.span - (e - min(
                    s2 for s2, _, _ in run.workers.values())), 1)}
                for w, (s, e, _) in sorted(run.workers.items())
            },
        }
        for name, run in zip(names, runs, strict=True)
    }
    return {"totals": totals, "files": rows[:top] if top else rows}


def smoke_run(directory: Path) -> Path:
    """A real run of the plugin on two trivial tests (in this process): rows for ``--smoke``."""
    import pytest

    tests, rows = directory / "tests", directory / "rows"
    tests.mkdir(parents=True, exist_ok=True)
    (tests / "test_tiny.py").write_text("def test_a():\n    assert sum(range(1000))\n\n"
                                        "def test_b():\n    assert sorted('ba') == ['a', 'b']\n")
    (tests / "pytest.ini").write_text("[pytest]\n")
    os.environ[ENV_DIR] = str(rows)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # stdout carries the figures alone
            code = pytest.main(["-q", "-p", "suite_cpu", "-p", "no:cacheprovider", "-c",
                                str(tests / "pytest.ini"), str(tests)], plugins=[])
    finally:
        del os.environ[ENV_DIR]
    if code != 0:
        raise SystemExit(f"the smoke run's tests failed ({code})")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="*", type=Path, help="one directory per run (before first)")
    parser.add_argument("--top", type=int, default=40, help="files shown, heaviest CPU first (0: all)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--smoke", action="store_true", help="a real two-test run of the plugin, then its report")
    args = parser.parse_args(argv)
    if args.smoke:
        args.runs = [smoke_run(Path(tempfile.mkdtemp(prefix="suite-cpu-smoke-")))]
    if not args.runs:
        parser.error("give at least one run directory (or --smoke)")
    runs = [load(d) for d in args.runs]
    names = ["before", "after"] if len(runs) == 2 else [d.name for d in args.runs]
    result = report(runs, names, args.top)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    for name, t in result["totals"].items():  # type: ignore[union-attr]
        print(f"{name}: {t['tests']} tests, CPU {t['cpu']} s, test wall {t['test_wall']} s, "
              f"span {t['span']} s, workers {t['workers']}")
    header = "file".ljust(60) + "".join(f"{n + ' n':>10}{n + ' cpu':>12}{n + ' wall':>12}" for n in names)
    print(header)
    for row in result["files"]:  # type: ignore[union-attr]
        print(row["file"].ljust(60) + "".join(
            f"{row[f'{n}_tests']:>10.0f}{row[f'{n}_cpu']:>12.1f}{row[f'{n}_wall']:>12.1f}" for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
