"""Vectorised counterfactual replay vs a naive per-attempt Python loop, same run.

A governed fleet run (default scenario, 2,000 tasks) is tiled to about 1M logged
attempts (tasks repeated with their own indices), then replayed under 5 policies (live,
the two example candidates, a no-hand-off variant and a faster-backoff variant with a
deadline). The vectorised path includes the shared running counts and the imputation fit;
the naive path (``evaluation.replay_loop``) runs the same rules attempt by attempt on a
subset. Both give the same numbers (checked here on the subset). Bootstrap CIs are not
timed; each side is the best of 3 runs. Usage: ``python bench/replay.py [--json] [--attempts N] [--naive-attempts N]``.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from retrylens.evaluation.candidates import load_candidate
from retrylens.evaluation.ground_truth import history_of, run_policy_events
from retrylens.evaluation.history import History
from retrylens.evaluation.limits import Limits
from retrylens.evaluation.replay import fit_imputation, replay_policy
from retrylens.evaluation.replay_loop import replay_loop
from retrylens.simulation import fleet_policy, load_scenario

REPEATS = 3
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "policies"


def tile(h: History, attempts: int) -> History:
    """``h`` repeated until it holds about ``attempts`` attempt rows."""
    times = max(1, -(-attempts // h.n_attempts))
    off_rows = np.repeat(np.arange(times) * h.n_attempts, h.n_tasks)
    off_tasks = np.repeat(np.arange(times) * h.n_tasks, h.n_attempts)

    def per_task(a: np.ndarray) -> np.ndarray:
        return np.tile(a, times)

    return replace(
        h, task_ids=per_task(h.task_ids), agents=per_task(h.agents), succeeded=per_task(h.succeeded),
        handed_off=per_task(h.handed_off), starts=per_task(h.starts) + off_rows, counts=per_task(h.counts),
        task=np.tile(h.task, times) + off_tasks, pos=np.tile(h.pos, times), failed=np.tile(h.failed, times),
        error=np.tile(h.error, times), retryable=np.tile(h.retryable, times), phase=np.tile(h.phase, times),
        tokens=np.tile(h.tokens, times), cost=np.tile(h.cost, times), latency=np.tile(h.latency, times),
        backoff=np.tile(h.backoff, times), decision=np.tile(h.decision, times), greedy=np.tile(h.greedy, times),
        shadow=np.tile(h.shadow, times), propensity=np.tile(h.propensity, times),
        steps=np.tile(h.steps, times) if h.steps is not None else None,
        task_policies=per_task(h.task_policies) if h.task_policies is not None else None, _cache=None,
    )


def policies(live):  # noqa: ANN001, ANN201
    conservative = load_candidate(EXAMPLES / "conservative.yaml", live).policy
    aggressive = load_candidate(EXAMPLES / "aggressive.yaml", live).policy
    no_handoff = live.with_overrides(rules={**live.rules.model_dump(), "handoff_when_stopped": False})
    fast = live.with_overrides(backoff={"base_ms": 100, "cap_ms": 2000}, budget={"max_attempts": 6, "deadline_s": 20})
    return {"live": live, "conservative": conservative, "aggressive": aggressive, "no-handoff": no_handoff,
            "fast-backoff": fast}


def measure(attempts: int = 1_000_000, naive_attempts: int = 20_000, tasks: int = 2_000) -> dict[str, float]:
    scenario = load_scenario()
    live = fleet_policy(scenario)
    base = history_of(run_policy_events(scenario, tasks=tasks, seed=42))
    big = tile(base, attempts)
    pols = policies(live)
    vectorised_s = naive_s = float("inf")
    for _ in range(REPEATS):  # best of REPEATS: the machine is shared
        big._cache = None
        start = time.perf_counter()
        model = fit_imputation(big)
        ref = Limits.of(live, big.phases, name="live")
        lims = [Limits.of(p, big.phases, name=n) for n, p in pols.items()]
        results = [replay_policy(big, lim, ref, model) for lim in lims]
        vectorised_s = min(vectorised_s, time.perf_counter() - start)
    small = tile(base, naive_attempts)
    small_model = fit_imputation(small)
    small_ref = Limits.of(live, small.phases, name="live")
    for _ in range(REPEATS):
        start = time.perf_counter()
        loops = [replay_loop(small, Limits.of(p, small.phases, name=n), small_ref, small_model)
                 for n, p in pols.items()]
        naive_s = min(naive_s, time.perf_counter() - start)
    for lim, slow in zip([Limits.of(p, small.phases, name=n) for n, p in pols.items()], loops, strict=True):
        fast = replay_policy(small, lim, small_ref, small_model).per_task
        for metric, values in slow.items():
            np.testing.assert_allclose(fast[metric], values, rtol=1e-9, atol=1e-9)
    vec_us = vectorised_s / (big.n_attempts * len(pols)) * 1e6
    naive_us = naive_s / (small.n_attempts * len(pols)) * 1e6
    return {
        "attempts": big.n_attempts, "tasks": big.n_tasks, "policies": len(pols),
        "naive_attempts": small.n_attempts, "vectorised_s": round(vectorised_s, 3), "naive_s": round(naive_s, 3),
        "vectorised_us_per_attempt": round(vec_us, 4), "naive_us_per_attempt": round(naive_us, 3),
        "speedup": round(naive_us / vec_us, 1),
        "success_by_policy": {r.name: round(r.point["success"], 4) for r in results},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--attempts", type=int, default=1_000_000)
    parser.add_argument("--naive-attempts", type=int, default=20_000)
    parser.add_argument("--smoke", action="store_true", help="tiny size: the test suite's smoke run")
    args = parser.parse_args()
    result = (measure(10_000, 1_000, tasks=100) if args.smoke else measure(args.attempts, args.naive_attempts))
    if args.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:28s} {value}")


if __name__ == "__main__":
    main()
