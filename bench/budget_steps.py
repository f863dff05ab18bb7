"""Task budgets on multi-step tasks: per-call naive retry vs the governor, side by side (issue 24).

Why: a fixed attempt count per task ran out on long tasks (5-12 tool calls, a few percent
of faults per call) where a naive per-call retry loop finished. This bench runs tasks of
2-20 steps at several fault rates through :mod:`retrylens.simulation.multistep` — naive
(3 tries per call), the governor with steps, the governor around the whole task — on the
same seeded faults, and prints per (steps, fault rate) cell the tasks each finished and
the tool requests each made per task. ``check`` holds the claim: in every cell the
governed step wiring finishes at least as many tasks as naive and makes no more requests
per task.

Beside the fault grid, one row per step count is a task whose every call fails once (a
blip) then succeeds (issue 35): naive finishes it, and so must the governor, whose slept
backoff per task is printed (each step's retries back off from the base). Those rows run
with the circuit breaker off, so that they measure the budget: a dependency failing every
other call is at the default breaker's 50 % threshold and trips it after 5 steps (10
calls), a separate protection, reported apart (``blip_with_breaker``).

``--sweep`` runs the step wiring under candidate allowances (``retries_per_step`` ×
``max_retries``, base ``retries`` 4 as the old 5 attempts) and says which pass in every
cell, blip rows included: the policy defaults are the tightest that pass
(bench/RESULTS.md).

Usage: ``python bench/budget_steps.py [--tasks 300] [--seed 0] [--sweep] [--json] [--smoke]``
(``--smoke``: 3 tasks per cell on 2 and 5 steps at one fault rate, to prove it runs).
"""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from retrylens.sdk.core.policy import BreakerPolicy, RetryPolicy, TaskBudget
from retrylens.simulation.multistep import WIRINGS, run_governed_steps, run_grid, run_naive

STEPS = (2, 5, 10, 15, 20)
FAULT_RATES = (0.01, 0.03, 0.05, 0.10, 0.15)
SWEEP = [
    TaskBudget(max_attempts=5),  # the old fixed budget
    *(
        TaskBudget(retries=4, retries_per_step=share, max_retries=ceiling)
        for share in (0.25, 0.5, 1.0)
        for ceiling in (10, 20)
    ),
]


def check(rows: list[dict[str, Any]], wiring: str = "governed_steps") -> list[str]:
    """Cells where ``wiring`` finished fewer tasks than naive or made more requests per task."""
    problems = []
    for row in rows:
        gov, naive = row[wiring], row["naive"]
        where = f"{row['steps']} steps at {_rate(row['fault_rate'])}"
        if gov["finished"] < naive["finished"]:
            problems.append(f"{where}: finished {gov['finished']} < naive {naive['finished']}")
        if gov["requests_per_task"] > naive["requests_per_task"]:
            problems.append(
                f"{where}: {gov['requests_per_task']} requests per task > naive "
                f"{naive['requests_per_task']}"
            )
    return problems


def table(rows: list[dict[str, Any]]) -> str:
    """The cells as a Markdown table: finished and requests per task, wirings side by side."""
    head = (
        "| steps | fault rate | naive finished | steps finished | plain finished "
        "| naive req/task | steps req/task | plain req/task | steps slept s/task "
        "| steps stopped by |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"
    )
    lines = []
    for r in rows:
        n, s, p = r["naive"], r["governed_steps"], r["governed_plain"]
        stopped = ", ".join(f"{k} {v}" for k, v in s["stopped_by"].items()) or "-"
        lines.append(
            f"| {r['steps']} | {_rate(r['fault_rate'])} | {n['finished']}/{n['tasks']} "
            f"| {s['finished']}/{s['tasks']} | {p['finished']}/{p['tasks']} "
            f"| {n['requests_per_task']:.2f} | {s['requests_per_task']:.2f} "
            f"| {p['requests_per_task']:.2f} | {s['slept_s_per_task']:.1f} | {stopped} |"
        )
    return head + "\n".join(lines)


def _rate(rate: float | None) -> str:
    return "every step once" if rate is None else f"{rate:.0%}"


def sweep(
    tasks: int, seed: int, steps: tuple[int, ...] = STEPS, rates: tuple[float, ...] = FAULT_RATES
) -> list[dict[str, Any]]:
    """Each candidate budget on the step wiring, against naive: which pass every cell."""
    results = []
    wirings = {"naive": run_naive, "governed_steps": run_governed_steps}
    for budget in SWEEP:
        policy = RetryPolicy(budget=budget)
        rows = grid_and_blips(steps, rates, tasks, seed, policy, wirings)
        problems = check(rows)
        results.append(
            {
                "budget": budget.model_dump(
                    include={"max_attempts", "retries", "retries_per_step", "max_retries"}
                ),
                "passes": not problems,
                "problems": problems,
                "finished_minus_naive": sum(
                    r["governed_steps"]["finished"] - r["naive"]["finished"] for r in rows
                ),
            }
        )
    return results


def grid_and_blips(
    steps: tuple[int, ...],
    rates: tuple[float, ...],
    tasks: int,
    seed: int,
    policy: RetryPolicy,
    wirings: Any,
) -> list[dict[str, Any]]:
    """The fault grid under ``policy``, then the blip rows under it with the breaker off."""
    rows = run_grid(steps, rates, tasks=tasks, seed=seed, policy=policy, wirings=wirings)
    no_breaker = policy.model_copy(update={"breaker": BreakerPolicy(enabled=False)})
    blips = run_grid(
        steps, (), tasks=tasks, seed=seed, policy=no_breaker, wirings=wirings, blips=True
    )
    return rows + blips


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=300, help="tasks per cell")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sweep", action="store_true", help="compare candidate allowances")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="tiny size: the test suite's smoke run")
    args = parser.parse_args()
    logging.getLogger("retrylens").setLevel(logging.ERROR)
    steps, rates = ((2, 5), (0.05,)) if args.smoke else (STEPS, FAULT_RATES)
    tasks = 3 if args.smoke else args.tasks
    if args.sweep:
        out: dict[str, Any] = {
            "tasks_per_cell": tasks,
            "seed": args.seed,
            "sweep": sweep(tasks, args.seed, steps, rates),
        }
        print(json.dumps(out, indent=None if args.json else 2))
        return
    policy = RetryPolicy()
    rows = grid_and_blips(steps, rates, tasks, args.seed, policy, WIRINGS)
    with_breaker = run_grid(
        (max(steps),), (), tasks=1, seed=args.seed, policy=policy, wirings=WIRINGS, blips=True
    )
    problems = check(rows)
    out = {
        "tasks_per_cell": tasks,
        "seed": args.seed,
        "budget": policy.budget.model_dump(include={"retries", "retries_per_step", "max_retries"}),
        "cells": rows,
        "passes": not problems,
        "problems": problems,
        "blip_with_breaker": with_breaker[0],
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(table(rows))
        print("passes" if not problems else "\n".join(problems))
        stopped = with_breaker[0]["governed_steps"]["stopped_by"]
        print(f"{max(steps)} steps, one blip each, default breaker on: stopped by {stopped or '-'}")


if __name__ == "__main__":
    main()
