"""Does the pre-check's advice pay where the truth is planted? The with/without A/B on a planted word.

Issue 34, item 6. The scenario ``simulation/planted/long_prompt_word.yaml``: two agents, a word
that makes the model's plan fail most of the time, planted in a short prompt for one
(``offshore``) and as the 20th of 23 words of a long prompt for the other (``wire``); nothing else
has an effect. Per seed, the demo's A/B of :mod:`precheck_ab` (first half recorded
and trained on, second half run with pre-checks through the real API app and without, on the
same seeded faults), and per agent: the share of risky tasks (the planted word in the input,
known from the scenario) and of the others that received advice, and success and cost with
and without. The pass line per seed: advice on the risky tasks and (almost) none on the others;
success not lower and cost lower, or success higher.

``python bench/planted_precheck_ab.py [--json] [--smoke] [--tasks N] [--seeds 7,8,9] [--jobs N]``
(``--smoke``: 400 tasks, one seed, to check the script runs).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from precheck_ab import in_processes, one_run

from retrylens.simulation import load_scenario
from retrylens.simulation.tasks import generate_tasks

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "simulation" / "planted" / "long_prompt_word.yaml"
PLANTED = {"short-agent": "offshore", "long-agent": "wire"}


def risky_tasks(tasks: int, seed: int) -> dict[str, tuple[str, bool]]:
    """``{task id: (agent, the planted word is in its input)}`` — the truth, from the scenario."""
    scenario = load_scenario(SCENARIO)
    out = {}
    for task in generate_tasks(scenario, tasks, seed):
        agent = task.template.agent
        out[task.task_id] = (agent, PLANTED[agent] in task.text.casefold().split("\n")[0])
    return out


def judged(run: dict[str, Any], truth: dict[str, tuple[str, bool]], ids: list[str]) -> dict[str, Any]:
    """Per agent and overall: advice on risky tasks and the others, success and cost with / without."""
    out: dict[str, Any] = {}
    kinds = {i: k for k, rows in run["kinds"].items() for i in rows}
    for agent in (*sorted(PLANTED), "all"):
        rows = [i for i, t in enumerate(ids) if agent in ("all", truth[t][0])]
        risky = [i for i in rows if truth[ids[i]][1]]
        other = [i for i in rows if not truth[ids[i]][1]]
        advised = {i for i in rows if kinds.get(i) != "none"}
        d = run["diffs"]
        success_change = sum(d["success"][i] for i in rows)
        cost_change = sum(d["cost_usd"][i] for i in rows)
        out[agent] = {
            "tasks": len(rows),
            "risky": len(risky),
            "advised_share_risky": round(len(advised & set(risky)) / max(1, len(risky)), 4),
            "advised_share_other": round(len(advised & set(other)) / max(1, len(other)), 4),
            "succeeded_change": int(round(success_change)),
            "succeeded_change_risky": int(round(sum(d["success"][i] for i in risky))),
            "succeeded_change_other": int(round(sum(d["success"][i] for i in other))),
            "cost_change_usd": round(cost_change, 6),
            "cost_without_usd": round(
                sum(run["cost_per_task_without"][i] for i in rows), 6
            ),
            # None: no task of it was advised, so there is nothing to judge
            "pays": bool((success_change >= 0 and cost_change < 0) or success_change > 0)
            if advised
            else None,
        }
    return out


def seed_run(seed: int, tasks: int, chdb: Path, data: Path) -> dict[str, Any]:
    run = one_run(SCENARIO, seed, tasks, 0.5, chdb, data)
    return {"seed": seed, "model": run["model"], "advice": run["advice"], "run": run}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="400 tasks, one seed")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--seeds", default="7,8,9")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once, one process each")
    args = parser.parse_args()
    tasks = 400 if args.smoke else args.tasks
    seeds = [7] if args.smoke else [int(s) for s in args.seeds.split(",") if s]
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="planted-ab-") as tmp:
        # a data directory per seed: a finished run's process may still hold its lock when the next starts
        calls = [(seed, tasks, Path(tmp) / f"chdb-{seed}", Path(tmp)) for seed in seeds]
        runs = in_processes(seed_run, calls, args.jobs)
    per_seed = []
    for r in runs:
        truth = risky_tasks(tasks, r["seed"])
        ids = r["run"]["task_ids"]
        per_seed.append(
            {
                "seed": r["seed"],
                "model_auc": r["model"].get("roc_auc"),
                "advice": r["advice"],
                "with": r["run"]["with_prechecks"],
                "without": r["run"]["without"],
                "agents": judged(r["run"], truth, ids),
            }
        )
    result = {
        "scenario": str(SCENARIO.relative_to(ROOT)),
        "tasks": tasks,
        "seeds": seeds,
        "seconds": round(time.perf_counter() - began, 1),
        "per_seed": per_seed,
        "pays_every_seed": all(s["agents"]["all"]["pays"] is not False for s in per_seed),
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print("seed | agent | advised risky / other | Δ succeeded | Δ cost USD (of without) | pays", file=sys.stderr)
    for s in per_seed:
        for agent, a in s["agents"].items():
            print(
                f"{s['seed']} | {agent} | {a['advised_share_risky']:.2f} / {a['advised_share_other']:.2f} | "
                f"{a['succeeded_change']:+d} | {a['cost_change_usd']:+.4f} ({a['cost_without_usd']:.4f}) | {a['pays']}"
            )
    print(f"pays on every seed: {result['pays_every_seed']} ({result['seconds']} s)")


if __name__ == "__main__":
    main()
