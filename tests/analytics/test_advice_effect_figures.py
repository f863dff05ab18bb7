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


def _rows(status: str, outcomes: list[tuple[str, float | None]]) -> list[dict[str, Any]]:
    explanation = {"advice": [{"advice": "k", "status": status}]}
    # "".join: a string built at run time, as the store's rows are (never the interned literal)
    return [{"failed": outcome != "succeeded", "outcome": "".join(outcome), "cost_usd": cost,
             "explanation": explanation} for outcome, cost in outcomes]


def test_the_success_interval_is_newcombes_hybrid_score_interval_of_his_worked_example() -> None:
    """Newcombe (1998), Statistics in Medicine 17:873, example (a): 56/70 vs 48/80, method 10:
    difference +0.2000, 95 % CI [+0.0524, +0.3339]."""
    given = [("succeeded", 0.0)] * 56 + [("failed", 0.0)] * 14
    withheld = [("succeeded", 0.0)] * 48 + [("failed", 0.0)] * 32
    (effect,) = measure(_rows("given", given) + _rows("withheld", withheld))
    success = effect["success"]
    assert success["value"] == pytest.approx(0.2)
    assert (success["lo"], success["hi"]) == (pytest.approx(0.0524, abs=6e-5), pytest.approx(0.3339, abs=6e-5))


@pytest.mark.parametrize(
    ("a", "b"),
    [([0.010, 0.020, 0.035, 0.050, 0.120], [0.020, 0.020, 0.025, 0.031]), ([0.010, 0.030], [0.020, 0.024])],
)
def test_the_cost_interval_is_welchs_normal_interval(a: list[float], b: list[float]) -> None:
    given = [("succeeded", c) for c in a]
    withheld = [("succeeded", c) for c in b]
    (effect,) = measure(_rows("given", given) + _rows("withheld", withheld))
    d = statistics.mean(a) - statistics.mean(b)
    se = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
    cost = effect["cost_usd"]
    assert (cost["value"], cost["lo"], cost["hi"]) == pytest.approx((d, d - 1.96 * se, d + 1.96 * se))


def test_an_arm_of_one_task_has_no_spread_of_its_own() -> None:
    (effect,) = measure(_rows("given", [("succeeded", 0.05)]) + _rows("withheld", [("succeeded", 0.01)]))
    assert effect["cost_usd"] == pytest.approx({"value": 0.04, "lo": 0.04, "hi": 0.04})


def test_a_kind_never_given_has_no_effect_figures_and_is_too_few_to_judge() -> None:
    (effect,) = measure(_rows("withheld", [("succeeded", 0.01)] * 12))
    assert effect["given"] == 0 and effect["verdict"] == "too few"
    assert effect["success"] == effect["cost_usd"] == {"value": None, "lo": None, "hi": None}


def test_pre_checks_whose_tasks_have_not_ended_are_left_out_and_the_rest_still_count() -> None:
    pending = {"failed": None, "outcome": "", "cost_usd": 0.0,
               "explanation": {"advice": [{"advice": "k", "status": "given"}]}}
    rows = [pending] + _rows("given", [("succeeded", 0.0)] * 3) + _rows("withheld", [("failed", 0.0)] * 2)
    (effect,) = measure(rows)
    assert (effect["given"], effect["withheld"]) == (3, 2)


def _effect(success: tuple[float, float], cost: tuple[float, float], price: float | None = None) -> dict[str, Any]:
    def ci(lo: float, hi: float) -> dict[str, float]:
        return {"value": (lo + hi) / 2, "lo": lo, "hi": hi}

    return {"given": 50, "withheld": 50, "success": ci(*success), "cost_usd": ci(*cost),
            "handoff": ci(-0.05, 0.05), "price_of_success": price}


@pytest.mark.parametrize("success", [(-0.05, 0.10), (0.0, 0.10)])
def test_a_cost_rise_without_a_clear_success_rise_hurts_however_small(success: tuple[float, float]) -> None:
    kind, words = verdict(_effect(success, (0.002, 0.004)))
    assert kind == "hurts" and words.startswith("it raises cost without clearly raising success")


def test_clearly_fewer_hand_offs_help() -> None:
    effect = _effect((-0.05, 0.10), (-0.01, 0.01))
    effect["handoff"] = {"value": -0.2, "lo": -0.3, "hi": -0.1}
    assert verdict(effect)[0] == "helps"


def test_a_cost_fall_without_a_loss_of_success_helps() -> None:
    assert verdict(_effect((-0.05, 0.10), (-0.004, -0.002)))[0] == "helps"


def test_a_cost_rise_exactly_worth_the_successes_it_adds_is_kept() -> None:
    """Retired only when the cost rises by MORE than the added successes are worth:
    +0.01 USD a task for at most +50 % success at 0.02 USD a success is exactly worth it."""
    assert verdict(_effect((0.10, 0.5), (0.01, 0.03), price=0.02))[0] == "helps"
    assert verdict(_effect((0.10, 0.5), (0.0101, 0.03), price=0.02))[0] == "hurts"


@pytest.mark.parametrize(
    ("success", "cost", "handoff"),
    [
        ((-0.10, 0.0), (-0.01, 0.01), (-0.05, 0.05)),  # success may be lower, not clearly
        ((0.0, 0.10), (-0.01, 0.01), (-0.05, 0.05)),  # success may be higher, not clearly
        ((-0.05, 0.10), (-0.01, 0.01), (0.0, 0.10)),  # hand-offs may be more, not clearly
        ((-0.05, 0.10), (-0.01, 0.01), (-0.05, 0.05)),  # cost may be higher or lower
        ((-0.05, 0.10), (-0.01, 0.01), (-0.10, 0.0)),  # hand-offs may be fewer, not clearly
    ],
)
def test_an_effect_whose_intervals_all_reach_zero_is_unclear(success, cost, handoff) -> None:
    effect = _effect(success, cost)
    effect["handoff"] = {"value": sum(handoff) / 2, "lo": handoff[0], "hi": handoff[1]}
    assert verdict(effect)[0] == "unclear"


@pytest.mark.parametrize("cost", [(0.0, 0.01), (-0.01, 0.01)])  # cost unchanged or either way
def test_more_hand_offs_without_more_success_hurt_and_the_words_say_hand_offs(cost: tuple[float, float]) -> None:
    effect = _effect((-0.05, 0.10), cost)
    effect["handoff"] = {"value": 0.2, "lo": 0.1, "hi": 0.3}
    kind, words = verdict(effect)
    assert kind == "hurts" and words.startswith("it raises hand-offs without clearly raising success")


def test_hand_offs_count_only_handed_off_tasks_and_an_unknown_cost_counts_as_nothing() -> None:
    given = [("succeeded", None)] * 10 + [("failed", None)] * 5 + [("cancelled", None)] * 5
    withheld = [("handed_off", 0.01)] * 10 + [("succeeded", 0.01)] * 10
    (effect,) = measure(_rows("given", given) + _rows("withheld", withheld))
    assert effect["handoff"]["value"] == pytest.approx(0.0 - 0.5)
    assert effect["success"]["value"] == pytest.approx(0.5 - 0.5)
    assert effect["cost_usd"]["value"] == pytest.approx(0.0 - 0.01)


def test_a_success_rate_that_clearly_falls_hurts() -> None:
    kind, words = verdict(_effect((-0.3, -0.1), (-0.01, 0.01)))
    assert kind == "hurts" and words.startswith("it lowers success")


@pytest.mark.parametrize(("given", "withheld", "judged"), [(10, 10, True), (9, 10, False), (10, 9, False)])
def test_a_kind_is_judged_from_ten_tasks_on_each_side(given: int, withheld: int, judged: bool) -> None:
    effect = _effect((-0.05, 0.10), (-0.01, 0.01))
    effect["given"], effect["withheld"] = given, withheld
    assert (verdict(effect)[0] != "too few") is judged
