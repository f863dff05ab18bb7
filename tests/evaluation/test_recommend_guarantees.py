"""The recommendation's rules at their edges: each bound that adopts a candidate, read on
the decision the report records.

A candidate is adopted only when its 95 % CI's bound clears a practical margin; these
tests put the bound exactly on each line (margin, tolerance, saving, imputed share, zero)
and on both sides of it, and the history exactly at the evidence floors.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from retrylens.evaluation.history import COLUMNS, build_history
from retrylens.evaluation.report import (
    MAX_IMPUTED_SHARE,
    MIN_FAILURES,
    MIN_TASKS,
    Margins,
    build_report,
    recommend,
)
from retrylens.sdk.core.policy import RetryPolicy

LIVE_COST = 0.01
NO_COST_CHANGE = (0.0, -1e-4, 1e-4)
CHANGES = [{"field": "caps.timeout", "live": 3, "candidate": 1}]


def _ci(value: float, lo: float, hi: float) -> dict[str, float]:
    return {"value": value, "lo": lo, "hi": hi}


def _policy(
    name: str,
    success: tuple[float, float, float],
    cost: tuple[float, float, float] = NO_COST_CHANGE,
    *,
    imputed: float = 0.0,
    live_cost: float = LIVE_COST,
) -> dict[str, Any]:
    return {
        "name": name,
        "estimates": {"cost_usd": _ci(live_cost, live_cost, live_cost)},
        "diff_vs_live": {"success": _ci(*success), "cost_usd": _ci(*cost)},
        "imputed_share": imputed,
        "truncated_share": 0.1,
        "decision_divergence": 0.2,
        "changes": [] if name == "live" else CHANGES,
    }


def _decide(
    *candidates: dict[str, Any], margins: Margins | None = None, live_cost: float = LIVE_COST
) -> dict[str, Any]:
    live = _policy("live", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), live_cost=live_cost)
    return recommend([live, *candidates], margins)


def _verdicts(rec: dict[str, Any]) -> list[str]:
    return [c["verdict"] for c in rec["candidates"]]


# -- success: the margin, zero -------------------------------------------------------------------
def test_a_lower_bound_exactly_at_the_margin_is_adopted() -> None:
    rec = _decide(_policy("bold", (0.03, 0.01, 0.05)))
    assert (rec["decision"], rec["policy"], _verdicts(rec)) == (
        "adopt_candidate",
        "bold",
        ["better"],
    )
    assert rec["reason"] == (
        "success rate +3.0% (95 % CI +1.0% … +5.0%) clears the 1.0% margin, "
        "at cost per task +0.00000 USD"
    )
    assert rec["evidence"] == {
        "imputed_share": 0.0,
        "truncated_share": 0.1,
        "decision_divergence": 0.2,
    }
    assert rec["margins"] == {"success": 0.01, "cost_share": 0.05, "success_tolerance": 0.01}


def test_a_lower_bound_at_zero_is_within_the_uncertainty_not_better() -> None:
    rec = _decide(_policy("touching", (0.02, 0.0, 0.04)), _policy("above", (0.02, 1e-9, 0.04)))
    assert rec["decision"] == "no_clear_winner"
    assert _verdicts(rec) == ["within_uncertainty", "below_margin"]


def test_an_upper_bound_at_zero_is_within_the_uncertainty_not_worse() -> None:
    rec = _decide(_policy("touching", (-0.02, -0.04, 0.0)), _policy("below", (-0.02, -0.04, -1e-9)))
    assert _verdicts(rec) == ["within_uncertainty", "worse"]
    assert rec["candidates"][1]["why"] == "success rate -2.0% (95 % CI -4.0% … -0.00%)"


def test_a_zero_margin_adopts_any_gain_whose_bound_is_not_below_zero() -> None:
    rec = _decide(_policy("tiny", (0.002, 0.0, 0.004)), margins=Margins(success=0.0))
    assert rec["policy"] == "tiny"


# -- cost: the saving, the tolerance -------------------------------------------------------------
def _cheaper(hi: float, lo_success: float = -0.004) -> dict[str, Any]:
    return _policy("lean", (0.0, lo_success, 0.004), (hi - 0.002, hi - 0.001, hi))


def test_a_saving_whose_bound_is_exactly_the_cost_margin_is_adopted() -> None:
    saving = Margins().cost_share * LIVE_COST
    rec = _decide(_cheaper(-saving))
    assert (rec["policy"], _verdicts(rec)) == ("lean", ["cheaper"])
    assert "saves at least 5% of the live cost" in rec["reason"]
    assert _verdicts(_decide(_cheaper(-saving + 1e-9))) == ["within_uncertainty"]


def test_a_success_loss_exactly_at_the_tolerance_blocks_a_saving() -> None:
    tolerance = Margins().success_tolerance
    assert _verdicts(_decide(_cheaper(-0.001, lo_success=-tolerance))) == ["within_uncertainty"]
    assert _verdicts(_decide(_cheaper(-0.001, lo_success=-tolerance + 1e-9))) == ["cheaper"]
    assert _verdicts(_decide(_cheaper(-0.001, lo_success=0.005))) == ["cheaper"]


def test_a_zero_cost_margin_still_needs_a_saving() -> None:
    free = Margins(cost_share=0.0)
    assert _verdicts(_decide(_cheaper(0.0), margins=free)) == ["within_uncertainty"]
    assert _verdicts(_decide(_cheaper(-1e-9), margins=free)) == ["cheaper"]


def test_a_saving_is_judged_against_a_live_cost_of_zero_without_dividing_by_it() -> None:
    rec = _decide(_cheaper(-0.001), live_cost=0.0)
    assert (rec["decision"], rec["policy"]) == ("adopt_candidate", "lean")


def test_the_larger_sure_saving_wins_between_two_cheaper_candidates() -> None:
    small = {**_cheaper(-0.0006), "name": "small"}
    large = {**_cheaper(-0.002), "name": "large"}
    assert _decide(small, large)["policy"] == "large"
    assert _decide(large, small)["policy"] == "large"


def test_a_better_candidate_wins_over_a_cheaper_one() -> None:
    better = _policy("better", (0.03, 0.011, 0.05))
    cheaper = {**_cheaper(-0.009), "name": "cheaper"}  # saves 90 % of the live cost at least
    assert _decide(cheaper, better)["policy"] == "better"
    assert _decide(better, cheaper)["policy"] == "better"


def test_a_better_candidate_wins_over_a_cheaper_one_whatever_the_live_cost() -> None:
    """The saving is ranked as a share of the live cost (at most 1), so a dear live policy
    does not let a saving outrank a sure gain in success."""
    live_cost = 10.0
    better = _policy("better", (0.03, 0.011, 0.05), live_cost=live_cost)
    cheaper = _policy("cheaper", (0.0, -0.004, 0.004), (-6.0, -7.0, -5.0), live_cost=live_cost)
    rec = _decide(cheaper, better, live_cost=live_cost)
    assert _verdicts(rec) == ["cheaper", "better"] and rec["policy"] == "better"


def test_the_saving_is_a_share_of_the_live_policys_cost_not_a_candidates() -> None:
    """Each policy carries its own cost estimate; the margin is 5 % of the live one's."""
    lean = _policy("lean", (0.0, -0.004, 0.004), (-0.002, -0.003, -0.0006), live_cost=0.02)
    rec = _decide(lean)  # saves 6 % of the live 0.01 (3 % of its own 0.02)
    assert (rec["policy"], _verdicts(rec)) == ("lean", ["cheaper"])


def test_of_two_equal_winners_the_first_listed_is_adopted() -> None:
    a, b = _policy("a", (0.03, 0.02, 0.05)), _policy("b", (0.03, 0.02, 0.05))
    assert _decide(a, b)["policy"] == "a" and _decide(b, a)["policy"] == "b"


# -- imputation ----------------------------------------------------------------------------------
def test_an_imputed_share_exactly_at_the_limit_is_still_judged() -> None:
    rec = _decide(_policy("bold", (0.05, 0.02, 0.08), imputed=MAX_IMPUTED_SHARE))
    assert (rec["policy"], _verdicts(rec)) == ("bold", ["better"])
    rec = _decide(_policy("bold", (0.05, 0.02, 0.08), imputed=MAX_IMPUTED_SHARE + 1e-9))
    assert (rec["decision"], _verdicts(rec)) == ("no_clear_winner", ["leans_on_imputation"])


def test_no_candidates_is_no_clear_winner() -> None:
    rec = _decide()
    assert rec["decision"] == "no_clear_winner" and rec["candidates"] == []
    assert rec["reason"] == (
        "no clear winner: no candidate beats the live policy by more than the practical "
        "margin (success +1.0% or cost -5%, judged on the 95 % CI's bound); keep the live policy"
    )


# -- margins at the boundary ---------------------------------------------------------------------
@pytest.mark.parametrize("name", ["success", "cost_share", "success_tolerance"])
@pytest.mark.parametrize("bad", [-1e-9, 1.0, 1.5, float("inf"), float("nan"), "0.5", None])
def test_every_margin_outside_zero_to_one_is_refused_with_its_name(name: str, bad: object) -> None:
    with pytest.raises(ValueError, match=f"margin {name} must be a number in"):
        Margins(**{name: bad})  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["success", "cost_share", "success_tolerance"])
def test_a_margin_of_zero_or_just_below_one_is_accepted(name: str) -> None:
    assert getattr(Margins(**{name: 0}), name) == 0
    assert getattr(Margins(**{name: 0.999}), name) == 0.999


# -- evidence floors -----------------------------------------------------------------------------
def _row(task: str, attempt: int, kind: str, **fields: object) -> dict[str, object]:
    row: dict[str, object] = {c: "" for c in COLUMNS}
    row.update(
        project="p",
        agent_name="a",
        task_id=task,
        attempt=attempt,
        phase="execution",
        kind=kind,
        retryable=True,
        decision="none",
        backoff_ms=0,
        propensity=None,
        tokens_in=100,
        tokens_out=50,
        cost_usd=0.001,
        latency_ms=1000,
        policy_id="live",
        policy_version="1",
    )
    row.update(fields)
    return row


def _history(tasks: int, failures: int):  # noqa: ANN202
    """``tasks`` finished tasks; the first ``failures`` fail once (timeout) and then succeed."""
    rows = []
    for t in range(tasks):
        attempt = 1
        if t < failures:
            rows.append(_row(f"t{t}", 1, "attempt_failed", error_type="timeout"))
            rows.append(
                _row(
                    f"t{t}",
                    1,
                    "decision",
                    decision="retry_backoff",
                    propensity=1.0,
                    error_type="timeout",
                )
            )
            attempt = 2
        rows.append(_row(f"t{t}", attempt, "attempt_succeeded"))
        rows.append(_row(f"t{t}", attempt, "task_finished", outcome="succeeded"))
    return build_history(pd.DataFrame(rows, columns=list(COLUMNS)))


@pytest.mark.parametrize(
    ("tasks", "failures", "evidence"),
    [
        (MIN_TASKS - 1, MIN_FAILURES, "insufficient"),
        (MIN_TASKS, MIN_FAILURES - 1, "insufficient"),
        (MIN_TASKS, MIN_FAILURES, "sufficient"),
        (MIN_TASKS + 5, MIN_FAILURES + 5, "sufficient"),
    ],
)
def test_the_evidence_floors_are_inclusive(tasks: int, failures: int, evidence: str) -> None:
    report = build_report(_history(tasks, failures), RetryPolicy(), [], replicates=20)
    assert report["evidence"] == evidence
    decision = report["recommendation"]["decision"]
    if evidence == "insufficient":
        assert decision == "insufficient_evidence" and report["policies"] == []
        assert str(MIN_TASKS if tasks < MIN_TASKS else MIN_FAILURES) in report["evidence_reason"]
    else:
        assert decision == "no_clear_winner" and [p["name"] for p in report["policies"]] == ["live"]
        assert report["evidence_reason"] == f"{tasks} finished tasks, {failures} failed attempts"
