"""Task budgets on multi-step tasks: per-call naive retry vs the governor, side by side (issue 24).

Why: a fixed attempt count per task ran out on long tasks (5-12 tool calls, a few percent
of faults per call) where a naive per-call retry loop finished. This bench runs tasks of
2-20 steps at several fault rates through :mod:`retrylens.simulation.multistep` — naive
(3 tries per call), the governor with steps, the governor around the whole task — on the
same seeded faults, and prints per (steps, fault rate) cell the tasks each finished and
the tool requests each made per task. ``check`` holds the claim: in every cell the
governed step wiring finishes at least as many tasks as naive and makes no more requests
per task.

``--sweep`` runs the step wiring under candidate allowances (``retries_per_step`` ×
``max_retries``, base ``retries`` 4 as the old 5 attempts) and says which pass in every
cell: the policy defaults are the tightest that pass (bench/RESULTS.md).

Usage: ``python bench/budget_steps.py [--tasks 300] [--seed 0] [--sweep] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from retrylens.sdk.policy import RetryPolicy, TaskBudget
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
        where = f"{row['steps']} steps at {row['fault_rate']:.0%}"
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
        "| naive req/task | steps req/task | plain req/task | steps stopped by |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"
    )
    lines = []
    for r in rows:
        n, s, p = r["naive"], r["governed_steps"], r["governed_plain"]
        stopped = ", ".join(f"{k} {v}" for k, v in s["stopped_by"].items()) or "-"
        lines.append(
            f"| {r['steps']} | {r['fault_rate']:.0%} | {n['finished']}/{n['tasks']} "
            f"| {s['finished']}/{s['tasks']} | {p['finished']}/{p['tasks']} "
            f"| {n['requests_per_task']:.2f} | {s['requests_per_task']:.2f} "
            f"| {p['requests_per_task']:.2f} | {stopped} |"
        )
    return head + "\n".join(lines)


def sweep(tasks: int, seed: int) -> list[dict[str, Any]]:
    """Each candidate budget on the step wiring, against naive: which pass every cell."""
    results = []
    wirings = {"naive": run_naive, "governed_steps": run_governed_steps}
    for budget in SWEEP:
        rows = run_grid(
            STEPS,
            FAULT_RATES,
            tasks=tasks,
            seed=seed,
            policy=RetryPolicy(budget=budget),
            wirings=wirings,
        )
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=300, help="tasks per cell")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sweep", action="store_true", help="compare candidate allowances")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="tiny size: the test suite's smoke run")
    args = parser.parse_args()
    if args.smoke:
        args.tasks = 5
    logging.getLogger("retrylens").setLevel(logging.ERROR)
    if args.sweep:
        out: dict[str, Any] = {
            "tasks_per_cell": args.tasks,
            "seed": args.seed,
            "sweep": sweep(args.tasks, args.seed),
        }
        print(json.dumps(out, indent=None if args.json else 2))
        return
    policy = RetryPolicy()
    rows = run_grid(
        STEPS, FAULT_RATES, tasks=args.tasks, seed=args.seed, policy=policy, wirings=WIRINGS
    )
    problems = check(rows)
    out = {
        "tasks_per_cell": args.tasks,
        "seed": args.seed,
        "budget": policy.budget.model_dump(include={"retries", "retries_per_step", "max_retries"}),
        "cells": rows,
        "passes": not problems,
        "problems": problems,
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(table(rows))
        print("passes" if not problems else "\n".join(problems))


if __name__ == "__main__":
    main()
