"""Off-policy estimators on synthetic logs with a known truth: unbiased within their standard error."""

from __future__ import annotations

import numpy as np
import pytest
from eval_helpers import bandit_frame, bandit_truth

from retrylens.evaluation.history import build_history
from retrylens.evaluation.off_policy import evaluate, ips, snips
from retrylens.sdk.core.policy import RetryPolicy

P_SUCCESS = {"rebuild_context": 0.5, "retry_same": 0.2, "degrade_precision": 0.8}
LIVE = RetryPolicy(id="live", caps={"validation": 5}, budget={"max_attempts": 10})


def _unbiased(errors: list[float]) -> bool:
    """The mean error over repeated logs is within three of its own standard errors of zero."""
    e = np.asarray(errors)
    return abs(e.mean()) <= 3 * e.std(ddof=1) / np.sqrt(len(e))


def test_ips_of_constant_weights_is_the_mean() -> None:
    returns = np.array([1.0, 0.0, 1.0, 1.0])
    assert ips(np.ones(4), returns).value == pytest.approx(0.75)
    assert snips(np.full(4, 3.0), returns).value == pytest.approx(0.75)


@pytest.mark.parametrize("estimator", ["ips", "snips", "dr"])
def test_greedy_target_is_estimated_without_bias(estimator) -> None:
    truth = bandit_truth(0.6, P_SUCCESS["rebuild_context"], 3)
    errors, z = [], []
    for seed in range(40):
        h = build_history(bandit_frame(400, epsilon=0.3, p_success=P_SUCCESS, seed=seed))
        e = evaluate(h, LIVE, LIVE).estimates[estimator]["success"]
        errors.append(e.value - truth)
        z.append((e.value - truth) / e.se)
    assert _unbiased(errors)
    assert np.mean(np.abs(np.array(z)) <= 2) >= 0.85      # and the reported SE describes the spread


def test_dr_and_ips_are_unbiased_for_an_explored_decision_kind() -> None:
    """Target: always degrade_precision (shadow column), seen only through exploration."""
    truth = bandit_truth(0.6, P_SUCCESS["degrade_precision"], 3)
    errors: dict[str, list[float]] = {"ips": [], "dr": []}
    for seed in range(40):
        frame = bandit_frame(400, epsilon=0.3, p_success=P_SUCCESS, seed=1000 + seed)
        frame.loc[(frame["kind"] == "decision") & (frame["decision"] != "handoff_human"),
                  "shadow_decision"] = "degrade_precision"
        frame.loc[frame["kind"] == "decision", "shadow"] = True
        h = build_history(frame)
        result = evaluate(h, LIVE, LIVE, actions="shadow")
        for name, values in errors.items():
            values.append(result.estimates[name]["success"].value - truth)
    for name, values in errors.items():
        assert _unbiased(values), name


def test_lower_cap_needs_no_exploration() -> None:
    """ε = 0: a cap of one retry is evaluated exactly from the prefixes of longer histories."""
    h = build_history(bandit_frame(2000, epsilon=0.0, p_success=P_SUCCESS, seed=7))
    target = LIVE.model_copy(update={"caps": {**LIVE.caps, "validation": 1}})
    result = evaluate(h, target, LIVE)
    truth = bandit_truth(0.6, P_SUCCESS["rebuild_context"], 2)
    for name in ("ips", "snips", "dr"):
        e = result.estimates[name]["success"]
        assert abs(e.value - truth) <= 3 * e.se
    assert result.unsupported == 0 and result.effective_n == pytest.approx(result.n)
