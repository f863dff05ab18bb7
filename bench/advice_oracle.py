"""What each pre-check action would do if given to every task of an agent: the ceiling of advice.

The demo's A/B (:mod:`precheck_ab`) measures the advice the product gives; this measures what
the governor's pre-check actions *could* do, so a seed where the A/B shows no saving can be
read as "the rules missed it" or "no action pays there". Per seed, the second half of the
seeded default fleet (tasks ``N/2 .. N``, the A/B's pre-checked half) runs once plain and once
per action, the action applied through the SDK's own :func:`~retrylens.sdk.core.preflight.apply_advice`
to every task before it starts (no store, no model: every task gets it). The fleet gives each
task its own seeded faults and governor draws, so the runs pair task by task.

Per (action, agent, seed): the change in succeeded tasks and in cost (USD), with − without.
Actions: simplified mode first, at most 3 / 4 attempts, no retry / one retry of a schema
mismatch or of a validation failure.

``python bench/advice_oracle.py [--json] [--tasks N] [--seeds 7,8,9]``
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from retrylens.sdk.core.preflight import PrecheckResponse, Recommendation, apply_advice
from retrylens.simulation import load_scenario, run_fleet
from retrylens.simulation.fleet import FleetResult

START = datetime(2026, 11, 1, tzinfo=UTC)
ACTIONS: dict[str, dict[str, Any]] = {
    "degrade_first": {"degrade_first": True},
    "max_attempts_3": {"max_attempts": 3},
    "max_attempts_4": {"max_attempts": 4},
    "no_retry_of_schema_mismatch": {"caps": {"schema_mismatch": 0}},
    "one_retry_of_schema_mismatch": {"caps": {"schema_mismatch": 1}},
    "no_retry_of_validation": {"caps": {"validation": 0}},
    "one_retry_of_validation": {"caps": {"validation": 1}},
}


class _Everyone:
    """A pre-flight client that gives every task the same advice (no API, no model)."""

    def __init__(self, recommendation: Recommendation) -> None:
        self.answer = PrecheckResponse(risk=1.0, recommended=recommendation)

    def adapt(self, run: Any) -> None:
        apply_advice(run, self.answer)


def _half(seed: int, tasks: int, action: dict[str, Any] | None) -> FleetResult:
    client = _Everyone(Recommendation(**action)) if action is not None else None
    return run_fleet(
        load_scenario(None),
        tasks=tasks,
        seed=seed,
        task_range=range(tasks // 2, tasks),
        start=START,
        preflight=(lambda _project: client) if client is not None else None,
    )


def oracle(seed: int, tasks: int) -> dict[str, dict[str, dict[str, float]]]:
    """``{action: {agent: {"tasks", "succeeded_change", "cost_change_usd", "cost_without_usd"}}}``."""
    plain = _half(seed, tasks, None)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, action in ACTIONS.items():
        run = _half(seed, tasks, action)
        per: dict[str, dict[str, float]] = defaultdict(
            lambda: {
                "tasks": 0,
                "succeeded_change": 0,
                "cost_change_usd": 0.0,
                "cost_without_usd": 0.0,
            }
        )
        for a, b in zip(run.tallies, plain.tallies, strict=True):
            assert a.task_id == b.task_id
            row = per[a.agent]
            row["tasks"] += 1
            row["succeeded_change"] += int(a.outcome.value == "succeeded") - int(
                b.outcome.value == "succeeded"
            )
            row["cost_change_usd"] += a.cost_usd - b.cost_usd
            row["cost_without_usd"] += b.cost_usd
        out[name] = {
            agent: {k: round(v, 6) for k, v in row.items()} for agent, row in sorted(per.items())
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--seeds", default="7,8,9")
    parser.add_argument("--smoke", action="store_true", help="tiny size: the test suite's smoke run")
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.seeds = 60, "7"
    began = time.perf_counter()
    seeds = [int(s) for s in args.seeds.split(",") if s]
    runs = {seed: oracle(seed, args.tasks) for seed in seeds}
    if args.json:
        print(
            json.dumps(
                {
                    "tasks": args.tasks,
                    "seconds": round(time.perf_counter() - began, 1),
                    "seeds": runs,
                }
            )
        )
        return
    print(
        "action / agent: per seed Δ succeeded tasks / Δ cost mUSD (every task of the agent given the action)"
    )
    for name in ACTIONS:
        for agent in runs[seeds[0]][name]:
            cells = "  ".join(
                f"{seed}: {runs[seed][name][agent]['succeeded_change']:+.0f} / "
                f"{runs[seed][name][agent]['cost_change_usd'] * 1e3:+.1f}"
                for seed in seeds
            )
            print(f"{name:30s} {agent:15s} {cells}")


if __name__ == "__main__":
    main()
