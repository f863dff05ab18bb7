"""Counterfactual replay: exact on its own log, observed stops, imputed extensions, vectorised = loop."""

from __future__ import annotations

import numpy as np
import pytest
from eval_helpers import example_candidates

from retrylens.evaluation.ground_truth import history_of, run_policy_events
from retrylens.evaluation.history import build_history, observed_metrics
from retrylens.evaluation.limits import Limits
from retrylens.evaluation.replay import METRICS, fit_imputation, replay, replay_policy
from retrylens.evaluation.replay_loop import as_arrays, replay_loop
from retrylens.simulation import fleet_policy, load_scenario


@pytest.fixture(scope="module")
def logged():  # noqa: ANN201
    scenario = load_scenario()
    live = fleet_policy(scenario)
    return live, history_of(run_policy_events(scenario, tasks=250, seed=21)), example_candidates(live)


def test_live_policy_replayed_on_its_own_log_gives_the_log_back(logged) -> None:
    live, h, _ = logged
    result = replay_policy(h, live, live)
    observed = observed_metrics(h)
    for metric in METRICS:
        np.testing.assert_allclose(result.per_task[metric], observed[metric])
    assert not result.truncated.any() and not result.extended.any()


def test_lower_caps_only_cut_histories_short(logged) -> None:
    live, h, candidates = logged
    result = replay_policy(h, candidates["conservative"], live)
    observed = observed_metrics(h)
    assert result.truncated.any() and not result.extended.any()
    assert (result.per_task["attempts"] <= observed["attempts"]).all()
    assert (result.per_task["success"][result.truncated] == 0).all()
    assert (result.per_task["handoff"][result.truncated] == 1).all()


def test_higher_caps_past_anything_logged_are_unsupported_not_imputed(logged) -> None:
    live, h, candidates = logged
    result = replay_policy(h, candidates["aggressive"], live)
    ext = result.extended
    assert ext.any() and not result.truncated.any()
    # the live policy never retried past its caps: no evidence, so no borrowed success rate
    assert (result.unsupported == ext).all()
    assert (result.per_task["success"][ext] == observed_metrics(h)["success"][ext]).all()
    assert (result.per_task["attempts"][ext] > observed_metrics(h)["attempts"][ext]).all()
    assert result.optimistic is not None and (result.optimistic["success"][ext] == 1).all()
    assert result.gaps and all(g["logged_retries"] < 10 for g in result.gaps)


def test_vectorised_replay_equals_the_per_attempt_loop(logged) -> None:
    live, h, candidates = logged
    model = fit_imputation(h)
    ref = Limits.of(live, h.phases, name="live")
    for name, policy in {"live": live, **candidates}.items():
        lim = Limits.of(policy, h.phases, name=name)
        fast = replay_policy(h, lim, ref, model).per_task
        slow = as_arrays(replay_loop(h, lim, ref, model))
        for metric in METRICS:
            np.testing.assert_allclose(fast[metric], slow[metric], rtol=1e-9, atol=1e-9, err_msg=f"{name} {metric}")


def test_bootstrap_cis_bracket_the_point_and_differences_are_paired(logged) -> None:
    live, h, candidates = logged
    results = replay(h, live, candidates, replicates=200, seed=1)
    for r in results:
        for metric, e in r.estimates.items():
            assert e.lo <= e.value <= e.hi, (r.name, metric)
    assert all(d.lo == d.hi == 0 for d in results[0].diff_vs_live.values())


def test_empty_history_replays_to_nothing() -> None:
    import pandas as pd

    from retrylens.evaluation.history import COLUMNS

    h = build_history(pd.DataFrame(columns=list(COLUMNS)))
    live = fleet_policy(load_scenario())
    assert h.n_tasks == 0 and replay(h, live, {})[0].estimates == {}
