"""Explore, then judge, through the CLI over seeds: `retrylens demo` then `retrylens report policies`.

For each seed and each explored setup of ``evaluation.planted`` (the logic-cap raise, the
429 retries the live policy gave up on), ``evaluation.planted_cli.explore_then_judge``
records the live policy exploring the change with ``retrylens demo --learn-share 0`` into a
fresh embedded store, judges it with ``retrylens report policies``, and runs the change
live in the simulator on the same seed for the truth. Printed per setup: the verdicts, how
often it was adopted, the mean estimate and truth, and how often the 95 % interval held
the truth.

Usage: ``python bench/explore_then_judge.py [--seeds 5] [--tasks 250] [--json] [--smoke]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from retrylens.evaluation.planted import SETUPS
from retrylens.evaluation.planted_cli import explore_then_judge

EXPLORED = ("claims-explores-logic", "claims-explores-429")


def measure(seeds: int, tasks: int, replicates: int, setups: list[str]) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="explore-then-judge-") as tmp:
        for name in setups:
            for seed in range(1, seeds + 1):
                run = explore_then_judge(SETUPS[name], seed=seed, tasks=tasks, replicates=replicates,
                                         workdir=Path(tmp) / f"{name}-{seed}")
                runs.append({k: v for k, v in run.items() if k != "why"})
    out: dict[str, Any] = {"seeds": seeds, "tasks": tasks, "replicates": replicates,
                           "wall_s": round(time.perf_counter() - started, 1), "setups": []}
    for name in setups:
        mine = [r for r in runs if r["setup"] == name]
        out["setups"].append({
            "setup": name, "candidate": mine[0]["candidate"], "runs": len(mine),
            "verdicts": dict(Counter(r["verdict"] for r in mine)),
            "adopted": sum(r["decision"] == "adopt_candidate" for r in mine),
            "mean_truth": round(sum(r["truth"] for r in mine) / len(mine), 4),
            "mean_estimate": round(sum(r["estimate"] for r in mine) / len(mine), 4),
            "truth_in_ci": sum(r["truth_in_ci"] for r in mine),
            "mean_unsupported_share": round(sum(r["unsupported_share"] for r in mine) / len(mine), 4),
        })
    out["runs"] = runs
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=250)
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--setups", default=",".join(EXPLORED))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="tiny size: one seed of the 429 setup")
    args = parser.parse_args()
    setups = [s for s in args.setups.split(",") if s]
    if args.smoke:
        args.seeds, args.tasks, args.replicates, setups = 1, 60, 50, ["claims-explores-429"]
    result = measure(args.seeds, args.tasks, args.replicates, setups)
    if args.json:
        print(json.dumps(result))
        return
    for s in result["setups"]:
        print(f"{s['setup']:24s} {s['candidate']:14s} verdicts {s['verdicts']} adopted {s['adopted']}/{s['runs']} "
              f"truth {s['mean_truth']:+.4f} estimate {s['mean_estimate']:+.4f} "
              f"truth in CI {s['truth_in_ci']}/{s['runs']}")


if __name__ == "__main__":
    main()
