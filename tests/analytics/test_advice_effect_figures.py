"""An advice kind's measured effect, figure by figure, against values known in advance:
Newcombe's own worked example for the difference of two rates, Welch's interval computed
independently for cost, and the verdict's rules at their edges (issue 38 item 2: the
mutation run found these figures unpinned).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest

from retrylens.analytics.advice_effects import measure, verdict


def _rows(status: str, outcomes: list[tuple[str, float]]) -> list[dict[str, Any]]:
    explanation = {"advice": [{"advice": "k", "status": status}]}
    return [{"failed": outcome != "succeeded", "outcome": outcome, "cost_usd": cost, "explanation": explanation}
            for outcome, cost in outcomes]


def test_the_success_interval_is_newcombes_hybrid_score_interval_of_his_worked_example() -> None:
    """Newcombe (1998), Statistics in Medicine 17:873, example (a): 56/70 vs 48/80, method 10:
    difference +0.2000, 95 % CI [+0.0524, +0.3339]."""
    given = [("succeeded", 0.0)] * 56 + [("failed", 0.0)] * 14
    withheld = [("succeeded", 0.0)] * 48 + [("failed", 0.0)] * 32
    (effect,) = measure(_rows("given", given) + _rows("withheld", withheld))
    success = effect["success"]
    assert success["value"] == pytest.approx(0.2)
    assert (success["lo"], success["hi"]) == (pytest.approx(0.0524, abs=5e-4), pytest.approx(0.3339, abs=5e-4))


def test_the_cost_interval_is_welchs_normal_interval() -> None:
    a = [0.010, 0.020, 0.035, 0.050, 0.120]
    b = [0.020, 0.020, 0.025, 0.031]
    given = [("succeeded", c) for c in a]
    withheld = [("succeeded", c) for c in b]
    (effect,) = measure(_rows("given", given) + _rows("withheld", withheld))
    d = statistics.mean(a) - statistics.mean(b)
    se = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
    cost = effect["cost_usd"]
    assert (cost["value"], cost["lo"], cost["hi"]) == pytest.approx((d, d - 1.96 * se, d + 1.96 * se))


def _effect(success: tuple[float, float], cost: tuple[float, float], price: float | None = None) -> dict[str, Any]:
    def ci(lo: float, hi: float) -> dict[str, float]:
        return {"value": (lo + hi) / 2, "lo": lo, "hi": hi}

    return {"given": 50, "withheld": 50, "success": ci(*success), "cost_usd": ci(*cost),
            "handoff": ci(-0.05, 0.05), "price_of_success": price}


def test_a_cost_rise_without_a_clear_success_rise_hurts_however_small() -> None:
    assert verdict(_effect((-0.05, 0.10), (0.002, 0.004)))[0] == "hurts"


def test_a_cost_fall_without_a_loss_of_success_helps() -> None:
    assert verdict(_effect((-0.05, 0.10), (-0.004, -0.002)))[0] == "helps"


def test_a_cost_rise_exactly_worth_the_successes_it_adds_is_kept() -> None:
    """Retired only when the cost rises by MORE than the added successes are worth:
    +0.01 USD a task for at most +50 % success at 0.02 USD a success is exactly worth it."""
    assert verdict(_effect((0.10, 0.5), (0.01, 0.03), price=0.02))[0] == "helps"
    assert verdict(_effect((0.10, 0.5), (0.0101, 0.03), price=0.02))[0] == "hurts"
