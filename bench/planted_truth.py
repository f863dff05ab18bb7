"""The policy report against planted truth, over many seeds: verdicts, interval coverage, IPS/SNIPS/DR.

For each setup of ``evaluation.planted`` and each seed, the live policy's log is judged
and every candidate is run live on the same seeded tasks. Printed per candidate:

- the verdicts given (and how often a candidate was adopted while its true gain was
  below the margin: must be 0);
- coverage: how often the true success difference lies in the report's 95 % interval
  (supported candidates) or in its bounds (unsupported ones);
- the off-policy estimators' success estimates against the candidate's true success
  rate: mean error and how often their 95 % interval holds the truth.

Usage: ``python bench/planted_truth.py [--seeds 30] [--tasks 300] [--json] [--smoke]``.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from typing import Any

from retrylens.evaluation.candidates import overlay
from retrylens.evaluation.off_policy import evaluate
from retrylens.evaluation.planted import SETUPS, run_planted, truth_table
from retrylens.evaluation.report import Margins


def measure(seeds: int, tasks: int, replicates: int, setups: list[str]) -> dict[str, Any]:
    margin = Margins().success
    rows: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    off: dict[tuple[str, str, str], list[tuple[float, float, float, float]]] = defaultdict(list)
    for name in setups:
        setup = SETUPS[name]
        for seed in range(1, seeds + 1):
            run = run_planted(setup, seed=seed, tasks=tasks, replicates=replicates)
            for row in truth_table(run):
                rows[(name, row["candidate"])].append(row)
            live = run.truth.live
            for cand, changes in setup.candidates.items():
                target = overlay(live, changes, source=cand)
                result = evaluate(run.truth.log, target, live, name=cand)
                truth = float(run.truth.truth[cand]["success"].mean())
                for est in ("ips", "snips", "dr"):
                    e = result.estimates[est]["success"]
                    off[(name, cand, est)].append((e.value, e.lo, e.hi, truth))
    out: dict[str, Any] = {"seeds": seeds, "tasks": tasks, "replicates": replicates, "candidates": []}
    for (name, cand), runs in rows.items():
        supported = [r for r in runs if r["unsupported_share"] == 0]
        unsupported = [r for r in runs if r["unsupported_share"] > 0]
        wrong = sum(r["verdict"] in ("better", "cheaper") and r["truth"] < margin for r in runs)
        entry = {
            "setup": name, "candidate": cand, "runs": len(runs),
            "verdicts": dict(Counter(r["verdict"] for r in runs)),
            "mean_truth": round(sum(r["truth"] for r in runs) / len(runs), 4),
            "mean_estimate": round(sum(r["estimate"] for r in runs) / len(runs), 4),
            "supported_runs": len(supported),
            "ci_coverage": round(sum(r["covered"] for r in supported) / len(supported), 3) if supported else None,
            "bounds_coverage": (round(sum(r["covered"] for r in unsupported) / len(unsupported), 3)
                                if unsupported else None),
            "adopted_below_margin": wrong,
            # the interval of the estimate itself (unsupported retries counted as failing)
            "estimate_ci_coverage": round(sum(r["ci_covered"] for r in runs) / len(runs), 3),
            "off_policy": {},
        }
        agents = sorted({a for r in runs for a in r.get("by_agent", {})})
        if agents:  # each agent judged on its own tasks and logged retries, against its own truth
            entry["by_agent"] = {a: {
                "verdicts": dict(Counter(r["by_agent"][a]["verdict"] for r in runs)),
                "mean_truth": round(sum(r["by_agent"][a]["truth"] for r in runs) / len(runs), 4),
                "mean_estimate": round(sum(r["by_agent"][a]["estimate"] for r in runs) / len(runs), 4),
                "ci_coverage": round(sum(r["by_agent"][a]["ci_covered"] for r in runs) / len(runs), 3),
                "adopted_below_margin": sum(r["by_agent"][a]["verdict"] in ("better", "cheaper")
                                            and r["by_agent"][a]["truth"] < margin for r in runs),
            } for a in agents}
        for est in ("ips", "snips", "dr"):
            values = off[(name, cand, est)]
            entry["off_policy"][est] = {
                "mean_error": round(sum(v - t for v, _, _, t in values) / len(values), 4),
                "ci_coverage": round(sum(lo <= t <= hi for _, lo, hi, t in values) / len(values), 3),
            }
        out["candidates"].append(entry)
    explored = [c for c in out["candidates"] if "explore" in c["setup"]]
    out["explored_estimate_ci_coverage"] = (round(sum(c["estimate_ci_coverage"] * c["runs"] for c in explored)
                                                  / sum(c["runs"] for c in explored), 3) if explored else None)
    out["adopted_below_margin"] = sum(c["adopted_below_margin"] for c in out["candidates"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--replicates", type=int, default=300)
    parser.add_argument("--setups", default=",".join(SETUPS))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="tiny size: one seed of one setup")
    args = parser.parse_args()
    setups = [s for s in args.setups.split(",") if s]
    if args.smoke:
        args.seeds, args.tasks, args.replicates, setups = 1, 40, 50, ["claims-gives-up-on-429"]
    result = measure(args.seeds, args.tasks, args.replicates, setups)
    if args.json:
        print(json.dumps(result))
        return
    for c in result["candidates"]:
        print(f"{c['setup']:24s} {c['candidate']:20s} truth {c['mean_truth']:+.4f} est {c['mean_estimate']:+.4f} "
              f"ci {c['ci_coverage']} bounds {c['bounds_coverage']} {c['verdicts']} off {c['off_policy']}")
        for agent, a in c.get("by_agent", {}).items():
            print(f"    {agent:20s} truth {a['mean_truth']:+.4f} est {a['mean_estimate']:+.4f} ci {a['ci_coverage']} "
                  f"{a['verdicts']}")
    print("explored candidates' estimate CI coverage", result["explored_estimate_ci_coverage"],
          "adopted below margin", result["adopted_below_margin"])


if __name__ == "__main__":
    main()
