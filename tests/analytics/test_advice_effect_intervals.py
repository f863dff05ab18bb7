"""An advice kind's effect on success has an interval that holds on small, extreme arms.

Success and hand-offs are yes/no outcomes. A normal (Wald/Welch) interval of a difference
of two rates has no width from an arm whose tasks all ended alike, so a holdout of 18 tasks
that all succeeded made a kind given to 173 tasks (145 succeeded, 83.8 %) look clearly
harmful, -16.2 % [-21.7 %, -10.7 %], and retired it, though 18 successes in a row happen
about one time in 24 at 83.8 %. Newcombe's interval (from each arm's Wilson interval) keeps that uncertainty, and
still judges a clear effect clearly.
"""

from __future__ import annotations

from typing import Any

from retrylens.analytics.advice_effects import measure


def _rows(kind: str, status: str, succeeded: int, failed: int) -> list[dict[str, Any]]:
    explanation = {"advice": [{"advice": kind, "status": status}]}
    return [
        {
            "failed": not ok,
            "outcome": "succeeded" if ok else "handed_off",
            "cost_usd": 0.0,
            "explanation": explanation,
        }
        for ok in [True] * succeeded + [False] * failed
    ]


def _effect(given: tuple[int, int], withheld: tuple[int, int]) -> dict[str, Any]:
    rows = _rows("no_retry_of", "given", *given) + _rows("no_retry_of", "withheld", *withheld)
    (effect,) = measure(rows)
    return effect


def test_a_small_holdout_that_all_succeeded_does_not_prove_harm() -> None:
    effect = _effect(given=(145, 28), withheld=(18, 0))
    success = effect["success"]
    assert round(success["value"], 3) == -0.162
    assert success["lo"] < -0.162 < success["hi"]
    assert success["hi"] > 0  # 18 of 18 is consistent with the given arm's rate
    assert effect["verdict"] != "hurts", effect["words"]


def test_a_clear_harm_is_still_judged_harm() -> None:
    effect = _effect(given=(50, 50), withheld=(90, 10))
    assert effect["success"]["hi"] < 0
    assert effect["verdict"] == "hurts", effect["words"]


def test_a_clear_help_is_still_judged_help() -> None:
    effect = _effect(given=(95, 5), withheld=(60, 40))
    assert effect["success"]["lo"] > 0
    assert effect["verdict"] == "helps", effect["words"]


def test_the_interval_of_equal_arms_straddles_zero() -> None:
    effect = _effect(given=(40, 10), withheld=(40, 10))
    s = effect["success"]
    assert s["value"] == 0 and s["lo"] < 0 < s["hi"]
    assert effect["verdict"] == "unclear"
