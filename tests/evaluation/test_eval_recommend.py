"""The recommendation adopts a candidate only when its CI's bound clears a practical margin.

Decisions are read from :func:`recommend` as the report records them, on replay results
whose intervals straddle zero, clear the margin, or sit just below it.
"""

from __future__ import annotations

from typing import Any

import pytest

from retrylens.evaluation.report import Margins, recommend

LIVE_COST = 0.01
CHANGES = [{"field": "caps.timeout", "live": 3, "candidate": 1}]


def _estimate(value: float, lo: float, hi: float) -> dict[str, float]:
    return {"value": value, "lo": lo, "hi": hi}


def _policy(name: str, success: tuple[float, float, float], cost: tuple[float, float, float] = (0.0, -1e-4, 1e-4),
            *, imputed: float = 0.0) -> dict[str, Any]:
    return {"name": name, "estimates": {"cost_usd": _estimate(LIVE_COST, LIVE_COST, LIVE_COST)},
            "diff_vs_live": {"success": _estimate(*success), "cost_usd": _estimate(*cost)},
            "imputed_share": imputed, "truncated_share": 0.0, "decision_divergence": 0.0,
            "changes": [] if name == "live" else CHANGES}


def _decide(*candidates: dict[str, Any], margins: Margins | None = None) -> dict[str, Any]:
    return recommend([_policy("live", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)), *candidates], margins)


def test_a_success_gain_whose_ci_straddles_zero_is_no_clear_winner() -> None:
    rec = _decide(_policy("bold", (0.03, -0.01, 0.07)))
    assert rec["decision"] == "no_clear_winner" and rec["policy"] is None
    assert "no clear winner" in rec["reason"]
    assert rec["candidates"] == [{"name": "bold", "verdict": "within_uncertainty", "why": rec["candidates"][0]["why"],
                                  "changes": CHANGES}]


def test_a_gain_whose_ci_clears_the_margin_is_adopted_with_its_changes() -> None:
    rec = _decide(_policy("bold", (0.05, 0.02, 0.08)))
    assert (rec["decision"], rec["policy"]) == ("adopt_candidate", "bold")
    assert rec["changes"] == CHANGES and "+2.0%" in rec["reason"]


def test_a_gain_whose_ci_lower_bound_sits_just_below_the_margin_is_not_adopted() -> None:
    """The issue's case: +0.2 % success, CI +0.0 % … +0.3 %: significant, not worth a change."""
    rec = _decide(_policy("aggressive", (0.002, 0.0001, 0.003)),
                  _policy("almost", (0.03, 0.0099, 0.05)))
    assert rec["decision"] == "no_clear_winner"
    assert [c["verdict"] for c in rec["candidates"]] == ["below_margin", "below_margin"]


def test_the_margin_is_configurable() -> None:
    almost = _policy("almost", (0.03, 0.0099, 0.05))
    assert _decide(almost, margins=Margins(success=0.005))["policy"] == "almost"
    assert _decide(almost, margins=Margins(success=0.02))["decision"] == "no_clear_winner"


def test_a_saving_is_adopted_only_when_its_ci_clears_the_cost_margin() -> None:
    cheaper = _policy("lean", (0.0, -0.004, 0.004), (-0.002, -0.003, -0.0006))  # saves >= 6 % of 0.01
    barely = _policy("lean", (0.0, -0.004, 0.004), (-0.002, -0.003, -0.0004))  # hi saves only 4 %
    assert _decide(cheaper)["policy"] == "lean"
    assert _decide(barely)["decision"] == "no_clear_winner"


def test_a_saving_that_may_cost_success_is_not_adopted() -> None:
    risky = _policy("lean", (-0.01, -0.03, 0.01), (-0.004, -0.005, -0.003))
    assert _decide(risky)["decision"] == "no_clear_winner"


def test_a_candidate_that_leans_on_imputation_is_never_adopted() -> None:
    rec = _decide(_policy("bold", (0.05, 0.02, 0.08), imputed=0.5))
    assert rec["decision"] == "no_clear_winner" and rec["candidates"][0]["verdict"] == "leans_on_imputation"


def test_the_best_of_two_winners_is_chosen_by_its_lower_bound() -> None:
    rec = _decide(_policy("a", (0.06, 0.015, 0.1)), _policy("b", (0.04, 0.03, 0.05)))
    assert rec["policy"] == "b"


@pytest.mark.parametrize("bad", [-0.1, 1.0, float("nan")])
def test_a_margin_outside_zero_to_one_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="margin success"):
        Margins(success=bad)
