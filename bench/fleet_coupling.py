"""How much does taking a few tasks out of the fleet move the *other* tasks? The A/B's noise floor.

The pre-check A/B (``bench/precheck_ab.py``) compares the whole fleet with and without
pre-checks. Tasks share fleet state: the circuit breaker per dependency (a count-based window:
which calls it sees decides when it opens, and while it is open every task of the fleet runs on
the fallback model), the retry throttle, the rate limits. So advice that hands a few tasks to a
person before they spend also changes what happens to tasks it never touched.

This bench measures that coupling with no model and no advice at all: per seed it runs the
part of the fleet the A/B pre-checks (the same tasks, seeds, faults and timeline) once plainly,
then ``--draws`` times with ``--remove`` tasks drawn at random (from ``--agent``'s tasks, the
agent the advice is given to) handed to human review before their first attempt, exactly as
the advice does it (the SDK's own ``apply_advice`` path). For the tasks *not* drawn it reports
the change in cost and in successes. A random draw carries no information about the tasks, so
any change in the untouched tasks is the coupling alone: the size of fleet-level noise any
advice of that reach must beat before "cost lower on every seed" can show.

``--json`` prints one object. Usage:
``python bench/fleet_coupling.py [--json] [--tasks N] [--seeds 7,8] [--draws 20] [--remove 10]
[--agent support-agent] [--jobs N] [--no-shared-state]``. ``--no-shared-state`` is the control:
the same draws with the fleet's circuit breaker and retry throttle switched off; what coupling
is left then comes from what tasks learn from each other (the failure history of recurring
inputs).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from precheck_ab import (  # bench/precheck_ab.py, beside this file
    ROOT,
    START,
    in_processes,
    without_shared_state,
)

from retrylens.cli import demo_loop
from retrylens.sdk.core.preflight import (
    PrecheckRequest,
    PrecheckResponse,
    Preflight,
    Recommendation,
)
from retrylens.simulation import load_scenario


class ReviewChosen(Preflight):
    """A pre-flight client with no server and no model: human review for the chosen task ids,
    no advice (as a failed-open check) for every other task."""

    def __init__(self, chosen: frozenset[str]) -> None:  # no API client: nothing is asked
        self.failures = 0
        self.chosen = chosen

    def check(self, request: PrecheckRequest) -> PrecheckResponse | None:
        if request.task_id not in self.chosen:
            return None
        return PrecheckResponse(
            risk=1.0,
            model_version="random-draw",
            recommended=Recommendation(human_review=True, max_attempts=1),
        )


def _per_task(result: Any) -> dict[str, tuple[float, bool, str]]:
    return {
        t.task_id: (t.cost_usd, t.outcome.value == "succeeded", t.agent) for t in result.tallies
    }


def one_seed(
    scenario_path: Path,
    seed: int,
    tasks: int,
    learn_share: float,
    draws: int,
    remove: int,
    agent: str,
    shared_state: bool = True,
) -> dict[str, Any]:
    scenario = load_scenario(scenario_path)
    if not shared_state:
        scenario = without_shared_state(scenario)
    rest = range(int(tasks * learn_share), tasks)
    plain = _per_task(demo_loop.run_part(scenario, tasks=tasks, seed=seed, part=rest, start=START))
    pool = sorted(task_id for task_id, (_, _, a) in plain.items() if a == agent)
    plain_cost = sum(c for c, _, _ in plain.values())
    rows = []
    for draw in range(draws):
        chosen = frozenset(random.Random(f"{seed}:{draw}").sample(pool, min(remove, len(pool))))
        reviewer = ReviewChosen(chosen)
        moved = _per_task(
            demo_loop.run_part(
                scenario,
                tasks=tasks,
                seed=seed,
                part=rest,
                start=START,
                preflight=lambda _project, r=reviewer: r,
            )
        )
        others = [t for t in plain if t not in chosen]
        rows.append(
            {
                "draw": draw,
                "untouched_cost_change_usd": sum(moved[t][0] - plain[t][0] for t in others),
                "untouched_success_change": sum(
                    int(moved[t][1]) - int(plain[t][1]) for t in others
                ),
                "untouched_tasks_changed": sum(
                    1 for t in others if (moved[t][0], moved[t][1]) != (plain[t][0], plain[t][1])
                ),
                "drawn_cost_saved_usd": sum(plain[t][0] - moved[t][0] for t in chosen),
            }
        )
    shares = [r["untouched_cost_change_usd"] / plain_cost for r in rows]
    return {
        "seed": seed,
        "plain_cost_usd": plain_cost,
        "pool": len(pool),
        "draws": rows,
        "untouched_cost_change_share": {
            "mean": statistics.fmean(shares),
            "sd": statistics.stdev(shares) if len(shares) > 1 else 0.0,
            "min": min(shares),
            "max": max(shares),
            "draws_up": sum(s > 0 for s in shares),
            "draws_up_over_1pct": sum(s > 0.01 for s in shares),
        },
        "untouched_success_lost_draws": sum(r["untouched_success_change"] < 0 for r in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--seeds", default="7,8,9,10,11,12,13")
    parser.add_argument("--learn-share", type=float, default=0.5)
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--remove", type=int, default=10, help="tasks handed to review per draw")
    parser.add_argument("--agent", default="support-agent", help="the agent whose tasks are drawn")
    parser.add_argument(
        "--scenario", type=Path, default=ROOT / "simulation" / "default_scenario.yaml"
    )
    parser.add_argument("--jobs", type=int, default=1, help="seeds at once, one process each")
    parser.add_argument(
        "--no-shared-state",
        action="store_true",
        help="control: the fleet's policy without circuit breaker and retry throttle",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny size: the test suite's smoke run")
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.seeds, args.draws, args.remove = 60, "7", 2, 2
    if args.draws < 2 or args.remove < 1:
        parser.error("--draws must be at least 2 and --remove at least 1")
    seeds = [int(s) for s in args.seeds.split(",") if s]
    began = time.perf_counter()
    calls = [
        (
            args.scenario,
            seed,
            args.tasks,
            args.learn_share,
            args.draws,
            args.remove,
            args.agent,
            not args.no_shared_state,
        )
        for seed in seeds
    ]
    runs = in_processes(one_seed, calls, args.jobs)
    all_shares = [
        r["untouched_cost_change_usd"] / run["plain_cost_usd"] for run in runs for r in run["draws"]
    ]
    result = {
        "scenario": args.scenario.name,
        "tasks": args.tasks,
        "remove": args.remove,
        "agent": args.agent,
        "shared_state": not args.no_shared_state,
        "seconds": round(time.perf_counter() - began, 1),
        "seeds": runs,
        "pooled_untouched_cost_change_share": {
            "sd": statistics.stdev(all_shares),
            "min": min(all_shares),
            "max": max(all_shares),
            "draws": len(all_shares),
            "draws_up": sum(s > 0 for s in all_shares),
            "draws_up_over_1pct": sum(s > 0.01 for s in all_shares),
        },
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(
        f"{args.remove} random {args.agent} tasks handed to review; change of the OTHER tasks' cost "
        "(share of the plain part's cost) per seed:",
        file=sys.stderr,
    )
    for run in runs:
        s = run["untouched_cost_change_share"]
        print(
            f"  seed {run['seed']}: mean {s['mean']:+.2%}, sd {s['sd']:.2%}, range "
            f"[{s['min']:+.2%}, {s['max']:+.2%}], up in {s['draws_up']}/{args.draws} draws "
            f"({s['draws_up_over_1pct']} by > 1 %); success of others lower in "
            f"{run['untouched_success_lost_draws']}/{args.draws}"
        )
    p = result["pooled_untouched_cost_change_share"]
    print(
        f"  pooled: sd {p['sd']:.2%}, range [{p['min']:+.2%}, {p['max']:+.2%}], up in "
        f"{p['draws_up']}/{p['draws']} draws ({p['draws_up_over_1pct']} by > 1 %)"
    )


if __name__ == "__main__":
    main()
