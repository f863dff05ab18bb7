"""An advice kind that adds successes but raises cost by more than they are worth is retired.

Measured on stored pre-checks (given vs withheld), a kind that clearly raises success was
judged "helps" whatever it cost. The rule the advice book applies before giving a kind
(``analytics/advice.py``) holds here too: an extra spend is paid only up to what the added
successes are worth at the price a success costs where the kind was withheld.
"""

from __future__ import annotations

from typing import Any

import pytest

from retrylens.analytics.advice_effects import measure


def _rows(status: str, outcomes: list[tuple[bool, float]]) -> list[dict[str, Any]]:
    explanation = {"advice": [{"advice": "degrade_first", "status": status}]}
    return [
        {
            "failed": not ok,
            "outcome": "succeeded" if ok else "failed",
            "cost_usd": cost,
            "explanation": explanation,
        }
        for ok, cost in outcomes
    ]


def _effect(given: list[tuple[bool, float]], withheld: list[tuple[bool, float]]) -> dict[str, Any]:
    (effect,) = measure(_rows("given", given) + _rows("withheld", withheld))
    return effect


# withheld: 30 of 60 succeed, each task ~0.010 USD: a success costs ~0.020 USD
WITHHELD = [(True, 0.010 + i * 1e-5) for i in range(30)] + [
    (False, 0.010 - i * 1e-5) for i in range(30)
]


def test_more_successes_bought_above_their_price_are_retired() -> None:
    # given: 45 of 60 succeed (+25 points) but each task costs ~0.060 USD (+0.050 a task, while
    # the added successes are worth at most ~+0.47 x 0.020 = 0.0094 USD a task)
    given = [(True, 0.060 + i * 1e-5) for i in range(45)] + [(False, 0.060) for _ in range(15)]
    effect = _effect(given, WITHHELD)
    assert effect["success"]["lo"] > 0 and effect["cost_usd"]["lo"] > 0
    assert effect["verdict"] == "hurts", effect["words"]
    assert "more than the successes it adds are worth" in effect["words"]


def test_more_successes_bought_within_their_price_still_help() -> None:
    # +25 points for +0.002 USD a task: well within what the added successes are worth
    given = [(True, 0.012 + i * 1e-5) for i in range(45)] + [(False, 0.012) for _ in range(15)]
    effect = _effect(given, WITHHELD)
    assert effect["cost_usd"]["lo"] > 0
    assert effect["verdict"] == "helps", effect["words"]


def test_the_price_of_a_success_is_read_where_the_kind_was_withheld_even_from_a_small_holdout() -> None:
    """A 10 % holdout (30 tasks) with 3 successes at ~0.001 USD a task: a success costs
    ~0.010 USD there. Given to 300 tasks, the kind lifts success from 10 % to 60 % (at most
    ~+0.64) for +0.009 USD a task, more than the ~0.0064 USD those successes are worth, so it
    is retired. Priced at the given arm's ~0.017 USD a success it would wrongly "help"."""
    withheld = [(True, 0.001)] * 3 + [(False, 0.001)] * 27
    given = [(True, 0.010)] * 180 + [(False, 0.010)] * 120
    effect = _effect(given, withheld)
    assert effect["verdict"] == "hurts", effect["words"]
    assert "more than the successes it adds are worth" in effect["words"]
    assert effect["price_of_success"] == pytest.approx(0.030 / 3)
    assert effect["success"]["lo"] > 0 and effect["success"]["hi"] * 0.010 / 0.6 > effect["cost_usd"]["lo"]
