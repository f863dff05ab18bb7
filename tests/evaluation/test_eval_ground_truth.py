"""Ground truth: each candidate really runs on the same seeded fleet; the estimates must cover it."""

from __future__ import annotations

import pytest
from eval_helpers import example_candidates

from retrylens.evaluation.ground_truth import run_ground_truth
from retrylens.evaluation.off_policy import ESTIMATORS, evaluate
from retrylens.evaluation.replay import replay
from retrylens.simulation import fleet_policy, load_scenario

# Statistics over three seeded fleets (CI's locked run only): the estimates are numpy
# arithmetic, whose floor is the locked version; the pandas and pydantic calls that build the
# histories at their floors run in the lowest run too (test_eval_replay.py, test_eval_off_policy.py).
pytestmark = pytest.mark.slow

SEEDS = (101, 202, 303)
TASKS = 300


@pytest.fixture(scope="module")
def runs():  # noqa: ANN201
    scenario = load_scenario()
    candidates = example_candidates(fleet_policy(scenario))
    return candidates, [run_ground_truth(scenario, candidates, tasks=TASKS, seed=s, include_greedy=True)
                        for s in SEEDS]


def test_candidate_truth_comes_from_its_own_run(runs) -> None:
    _, gts = runs
    gt = gts[0]
    assert gt.histories["conservative"].n_tasks == gt.log.n_tasks == TASKS
    assert gt.true_means("conservative")["attempts"] < gt.true_means("live")["attempts"]
    assert gt.true_means("aggressive")["success"] > gt.true_means("live")["success"]


def test_replay_cis_cover_the_truth_for_90_percent_of_policy_metric_pairs(runs) -> None:
    candidates, gts = runs
    covered, total, misses = 0, 0, []
    for gt in gts:
        for r in replay(gt.log, gt.live, candidates, replicates=300, seed=gt.seed):
            truth = gt.true_means(r.name)
            for metric, e in r.estimates.items():
                total += 1
                if e.lo <= truth[metric] <= e.hi:
                    covered += 1
                else:
                    misses.append((gt.seed, r.name, metric, e.value, truth[metric]))
    assert covered / total >= 0.9, misses


@pytest.mark.parametrize("target", ["live-greedy", "conservative"])
def test_off_policy_estimates_are_within_their_standard_error_of_the_truth(runs, target) -> None:
    candidates, gts = runs
    for gt in gts:
        policy = gt.live if target == "live-greedy" else candidates[target]
        result = evaluate(gt.log, policy, gt.live, name=target)
        truth = gt.true_means(target)
        assert result.unsupported == 0
        for estimator in ESTIMATORS:
            for metric, e in result.estimates[estimator].items():
                assert abs(e.value - truth[metric]) <= 3 * e.se + 1e-9, (gt.seed, estimator, metric)


def test_off_policy_flags_cap_increases_as_unsupported(runs) -> None:
    candidates, gts = runs
    result = evaluate(gts[0].log, candidates["aggressive"], gts[0].live)
    assert result.unsupported > 0 and result.effective_n < result.n
