"""The policy report held to planted truth: every candidate is also run live on the same seeded tasks.

The faults are known (``evaluation.planted``): logic errors never recover, 'disputed'
claims fail validation 95 % of the time, 12 % of calls are rate limited with a
Retry-After. A candidate that would retry beyond what the live log shows must never be
called "better": it is "not supported by the log", with bounds that hold the truth and
the exploration that would tell. Where the log does show it (lower caps, budgets, a
backoff change, no change at all, or a change the live policy explored), the estimate is
held to the truth.
"""

from __future__ import annotations

import pytest

from retrylens.evaluation.planted import SETUPS, covered, run_planted, truth_table

TASKS = 250
SEED = 3


@pytest.fixture(scope="module")
def claims():  # noqa: ANN201
    return run_planted(SETUPS["claims"], seed=SEED, tasks=TASKS, replicates=200)


@pytest.mark.parametrize("name", ["logic-cap-up", "validation-cap-up", "budget-up"])
def test_a_candidate_that_retries_past_anything_logged_is_not_supported_by_the_log(claims, name) -> None:
    verdict = next(v for v in claims.recommendation["candidates"] if v["name"] == name)
    assert verdict["verdict"] == "not_supported", truth_table(claims)
    assert verdict["why"].startswith("not supported by the log")
    assert "shadow.explore_stops" in verdict["why"] and "canary" in verdict["why"]
    assert covered(claims, name), truth_table(claims)
    assert claims.recommendation["decision"] != "adopt_candidate"


def test_a_never_retried_class_borrows_no_rate_and_claims_no_gain(claims) -> None:
    replay = claims.replay_of("logic-cap-up")
    assert replay.unsupported.any()
    assert replay.diff_vs_live["success"].value == 0.0 == claims.true_diff("logic-cap-up")
    gaps = {g["error_type"] for g in replay.gaps}
    assert gaps == {"logic"}


@pytest.mark.parametrize("name", ["rate-limit-cap-down", "validation-cap-down", "budget-down"])
def test_lower_caps_and_budgets_are_judged_worse_with_the_exact_truth(claims, name) -> None:
    replay = claims.replay_of(name)
    assert not replay.unsupported.any()
    assert claims.verdict(name) == "worse"
    for metric in ("success", "attempts", "tokens", "cost_usd"):
        assert replay.diff_vs_live[metric].value == pytest.approx(claims.true_diff(name, metric), abs=1e-9), metric


@pytest.mark.parametrize("name", ["slower-backoff", "null-change"])
def test_a_backoff_change_or_no_change_shows_no_success_difference(claims, name) -> None:
    assert claims.true_diff(name) == 0.0
    assert claims.replay_of(name).diff_vs_live["success"].value == 0.0
    assert claims.verdict(name) == "within_uncertainty"
    assert covered(claims, name)


def test_a_slower_backoff_costs_latency_the_truth_shows(claims) -> None:
    estimate = claims.replay_of("slower-backoff").diff_vs_live["latency_ms"]
    truth = claims.true_diff("slower-backoff", "latency_ms")
    assert truth > 0 and estimate.value > 0
    assert estimate.value == pytest.approx(truth, rel=0.25)


def test_every_interval_holds_its_own_point(claims) -> None:
    for r in claims.replays:
        for metric in r.estimates:
            for e in (r.estimates[metric], r.diff_vs_live[metric], r.diff_optimistic[metric]):
                assert e.lo <= e.value <= e.hi, (r.name, metric, e)
            b = r.bounds[metric]
            assert b.lo <= b.point_lo <= b.point_hi <= b.hi, (r.name, metric, b)


def test_a_live_policy_that_gives_up_on_429_gets_no_verdict_on_retrying_them_without_evidence() -> None:
    run = run_planted(SETUPS["claims-gives-up-on-429"], seed=SEED, tasks=TASKS, replicates=200)
    assert run.true_diff("retry-429") > 0.03
    assert run.verdict("retry-429") == "not_supported"
    assert covered(run, "retry-429")


def test_exploring_the_429_retries_lets_the_report_adopt_them_with_the_truth_in_the_interval() -> None:
    run = run_planted(SETUPS["claims-explores-429"], seed=SEED, tasks=TASKS, replicates=200)
    assert run.verdict("retry-429") == "better", truth_table(run)
    assert run.recommendation["decision"] == "adopt_candidate"
    d = run.replay_of("retry-429").diff_vs_live["success"]
    assert d.lo <= run.true_diff("retry-429") <= d.hi, truth_table(run)


def test_exploring_logic_retries_shows_they_gain_nothing_and_are_not_adopted() -> None:
    run = run_planted(SETUPS["claims-explores-logic"], seed=SEED, tasks=TASKS, replicates=200)
    replay = run.replay_of("logic-cap-up")
    assert not replay.unsupported.any()
    assert replay.diff_vs_live["success"].value == 0.0 == run.true_diff("logic-cap-up")
    assert run.verdict("logic-cap-up") not in ("better", "cheaper", "below_margin")
    assert run.recommendation["decision"] != "adopt_candidate"
