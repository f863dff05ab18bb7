"""Per-agent conditioning held to planted truth: two agents, the same failure class, opposite recoveries.

``evaluation.planted.TWO_AGENTS``: the intake agent's validation failures recover on a
retry half the time; the audit agent's 'sealed' claims never pass validation. The live
policy (``caps.validation 1``) explores the candidate's third attempt (``caps.validation
2``) half the time. Each agent's share of the candidate's effect must come from its own
logged retries: intake gains, audit gains nothing — a pooled rate would lend audit
intake's recoveries (a false gain) and dilute intake's. The truth is the candidate run
live on the same seeded tasks.
"""

from __future__ import annotations

import pytest

from retrylens.evaluation.history import ERRORS
from retrylens.evaluation.planted import SETUPS, run_planted, truth_table
from retrylens.evaluation.replay import fit_imputation

SEED = 3
TASKS = 300
NAME = "validation-cap-up"


@pytest.fixture(scope="module")
def run():  # noqa: ANN201
    return run_planted(SETUPS["two-agents-explore-validation"], seed=SEED, tasks=TASKS, replicates=200)


def _agent_verdict(run, agent: str) -> dict:  # noqa: ANN001
    verdict = next(v for v in run.recommendation["candidates"] if v["name"] == NAME)
    return verdict["by_agent"][agent]


def test_the_planted_truth_is_what_the_scenario_says(run) -> None:
    assert run.true_diff_of_agent(NAME, "audit-agent") == 0.0
    assert run.true_diff_of_agent(NAME, "intake-agent") > 0.05


def test_each_agents_retries_are_imputed_from_its_own_logged_retries(run) -> None:
    model = fit_imputation(run.truth.log)
    rates = {}
    for agent in ("intake-agent", "audit-agent"):
        code = model.agent_names.index(agent)
        rows = model.ev_group // len(ERRORS) == code
        deep = rows & (model.ev_depth >= 2)
        assert deep.sum() >= model.min_trials, agent  # exploration gave both agents evidence
        rates[agent] = float(model.ev_ok[deep].mean())
    assert rates["audit-agent"] == 0.0
    assert rates["intake-agent"] > 0.3


def test_the_agent_whose_retries_never_recover_is_judged_to_gain_nothing(run) -> None:
    judged = run.replay_of(NAME).by_agent["audit-agent"]
    assert judged.unsupported_share == 0.0
    assert judged.diff_vs_live["success"].value == 0.0 == run.true_diff_of_agent(NAME, "audit-agent")
    assert judged.diff_vs_live["cost_usd"].value > 0  # a third attempt that never helps still costs
    assert _agent_verdict(run, "audit-agent")["verdict"] not in ("better", "cheaper", "below_margin")


def test_the_agent_whose_retries_recover_is_judged_better_with_the_truth_in_its_interval(run) -> None:
    judged = run.replay_of(NAME).by_agent["intake-agent"]
    truth = run.true_diff_of_agent(NAME, "intake-agent")
    d = judged.diff_vs_live["success"]
    assert judged.unsupported_share == 0.0
    assert d.lo <= truth <= d.hi, (d, truth)
    assert _agent_verdict(run, "intake-agent")["verdict"] == "better", _agent_verdict(run, "intake-agent")


def test_the_fleet_verdict_holds_the_fleet_truth(run) -> None:
    d = run.replay_of(NAME).diff_vs_live["success"]
    assert d.lo <= run.true_diff(NAME) <= d.hi, truth_table(run)
    assert run.verdict(NAME) == "better"


def test_a_pooled_rate_would_have_lent_audit_a_gain_it_never_has(run) -> None:
    """What the per-agent key prevents: intake's and audit's deep retries pooled."""
    model = fit_imputation(run.truth.log)
    deep = model.ev_depth >= 2
    pooled = float(model.ev_ok[deep].mean())
    assert pooled > 0.1  # audit's tasks would have been credited this recovery rate


def test_the_cli_lines_name_each_agents_verdict_where_they_differ_from_the_fleets(run) -> None:
    from retrylens.evaluation.report import recommendation_lines

    lines = recommendation_lines({"recommendation": run.recommendation, "candidates": [{"name": NAME,
                                                                                         "changes": []}]})
    audit = next(line for line in lines if "for audit-agent alone" in line)
    intake = next(line for line in lines if "for intake-agent alone" in line)
    assert "no difference beyond the uncertainty" in audit and "+0.0%" in audit
    assert "better beyond the margin" in intake
