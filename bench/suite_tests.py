"""The suite's costliest single tests, and any subset's totals, from ``suite_cpu`` rows.

``bench/suite_cpu.py`` sums per file; a long test hides in a file of many quick ones, and the
lowest-dependency run is a subset of the locked run's tests. This reads the same rows
(``RETRYLENS_SUITE_CPU_DIR`` of a run) and prints, per run:

* the top tests by wall seconds and by CPU seconds (setup + call + teardown; a module
  fixture's set-up counts in its file's first test, its teardown in the last);
* with ``--only IDS`` (a file of node ids, one a line, e.g. from ``pytest --collect-only -q
  -m "not browser and not slow"``), the totals of that subset as well as of the whole run.

Two runs (before, after) are printed side by side, matched by node id::

    python bench/suite_tests.py /tmp/run-a --top 40
    python bench/suite_tests.py /tmp/run-a /tmp/run-b --only lowest-ids.txt --json
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path


def load_rows(directory: Path) -> dict[str, dict[str, float]]:
    """Node id → {wall, cpu} of one run (every ``*.jsonl`` in ``directory``)."""
    rows: dict[str, dict[str, float]] = {}
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            rows[row["test"]] = {"wall": row["wall"], "cpu": row["cpu"]}
    if not rows:
        raise SystemExit(f"no rows in {directory}")
    return rows


def totals(rows: dict[str, dict[str, float]], only: set[str] | None = None) -> dict[str, float]:
    chosen = [r for t, r in rows.items() if only is None or t in only]
    return {"tests": len(chosen), "cpu": round(sum(r["cpu"] for r in chosen), 1),
            "wall": round(sum(r["wall"] for r in chosen), 1)}


def top(runs: list[dict[str, dict[str, float]]], key: str, n: int) -> list[dict[str, object]]:
    """The first run's ``n`` heaviest tests by ``key``, with every run's figures for them."""
    first = runs[0]
    ranked = sorted(first, key=lambda t: -first[t][key])[:n]
    return [{"test": t, **{f"{i}_{k}": run.get(t, {}).get(k) for i, run in enumerate(runs) for k in ("wall", "cpu")}}
            for t in ranked]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="*", type=Path, help="one suite_cpu directory per run (before first)")
    parser.add_argument("--top", type=int, default=40, help="tests listed per ranking")
    parser.add_argument("--only", type=Path, help="node ids of a subset (one a line) to total as well")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--smoke", action="store_true", help="the rows of a real two-test run (suite_cpu --smoke)")
    args = parser.parse_args(argv)
    if args.smoke:
        from suite_cpu import smoke_run

        args.runs = [smoke_run(Path(tempfile.mkdtemp(prefix="suite-tests-smoke-")))]
    if not args.runs:
        parser.error("give at least one run directory (or --smoke)")
    runs = [load_rows(d) for d in args.runs]
    only = None
    if args.only:
        only = {line.strip() for line in args.only.read_text().splitlines() if "::" in line}
    result = {
        "runs": [str(d) for d in args.runs],
        "totals": [totals(r) for r in runs],
        "subset_totals": [totals(r, only) for r in runs] if only is not None else None,
        "top_wall": top(runs, "wall", args.top),
        "top_cpu": top(runs, "cpu", args.top),
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    for name, t in zip(result["runs"], result["totals"], strict=True):
        print(f"{name}: {t}")
    if only is not None:
        for name, t in zip(result["runs"], result["subset_totals"], strict=True):
            print(f"{name} ({args.only.name} only): {t}")
    for key in ("wall", "cpu"):
        print(f"\ntop {args.top} by {key} (wall s / cpu s per run)")
        for row in result[f"top_{key}"]:
            figures = "  ".join(f"{row[f'{i}_wall'] or 0:7.1f} {row[f'{i}_cpu'] or 0:6.1f}" for i in range(len(runs)))
            print(f"{figures}  {row['test']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
