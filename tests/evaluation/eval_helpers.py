"""Shared builders for the evaluation tests: candidate policies and synthetic logged histories."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from retrylens.evaluation.candidates import load_candidate
from retrylens.evaluation.history import COLUMNS
from retrylens.sdk.core.policy import RetryPolicy

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"


def example_candidates(live: RetryPolicy) -> dict[str, RetryPolicy]:
    loaded = [load_candidate(EXAMPLES / f"{name}.yaml", live) for name in ("conservative", "aggressive")]
    return {c.name: c.policy for c in loaded}


def _row(task: str, attempt: int, kind: str, **fields: object) -> dict[str, object]:
    row: dict[str, object] = {c: "" for c in COLUMNS}
    row.update(project="p", agent_name="a", task_id=task, attempt=attempt, phase="execution", kind=kind,
               retryable=True, decision="none", backoff_ms=0, propensity=None, tokens_in=100, tokens_out=50,
               cost_usd=0.001, latency_ms=1000, policy_id="live", policy_version="1")
    row.update(fields)
    return row


def bandit_frame(n_tasks: int, *, epsilon: float, p_success: dict[str, float], seed: int,
                 error: str = "validation", max_failures: int = 3) -> pd.DataFrame:
    """Tasks whose retries succeed with a probability set by the decision taken.

    The logging policy prefers ``rebuild_context`` and explores ``retry_same`` and
    ``degrade_precision`` ε-greedily, logging propensities as the SDK does; after
    ``max_failures`` failures it hands off. The first attempt fails with probability 0.6.
    """
    rng = np.random.default_rng(seed)
    options = ["rebuild_context", "retry_same", "degrade_precision"]
    k = len(options)
    rows = []
    for t in range(n_tasks):
        task = f"t{t}"
        attempt, ok = 1, rng.random() > 0.6
        while True:
            if ok:
                rows.append(_row(task, attempt, "attempt_succeeded"))
                rows.append(_row(task, attempt, "task_finished", outcome="succeeded"))
                break
            rows.append(_row(task, attempt, "attempt_failed", error_type=error))
            if attempt >= max_failures:
                rows.append(_row(task, attempt, "decision", decision="handoff_human", propensity=1.0,
                                 error_type=error))
                rows.append(_row(task, attempt, "task_finished", outcome="handed_off"))
                break
            explore = rng.random() < epsilon
            choice = options[rng.integers(k)] if explore else options[0]
            propensity = 1 - epsilon + epsilon / k if choice == options[0] else epsilon / k
            reason = f"exploration instead of {options[0]}: x" if choice != options[0] else "live"
            rows.append(_row(task, attempt, "decision", decision=choice, propensity=propensity,
                             decision_reason=reason, error_type=error))
            attempt += 1
            ok = rng.random() < p_success[choice]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def bandit_truth(p_first_fail: float, p: float, max_failures: int) -> float:
    """Success rate when every retry succeeds with ``p`` (at most ``max_failures`` attempts)."""
    return 1 - p_first_fail * (1 - p) ** (max_failures - 1)
