"""Issue 24: the shadow comparison and the offline replay speak the step retry allowance.

The log: 12-step tasks at a 30 % fault rate under the old fixed budget (5 attempts), run
by the real governor through :mod:`retrylens.simulation.multistep` — long tasks that the
fixed budget stops after a few completed steps.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from retrylens.evaluation.ground_truth import history_of
from retrylens.evaluation.limits import Limits
from retrylens.evaluation.replay import fit_imputation, replay_policy
from retrylens.evaluation.replay_loop import replay_loop
from retrylens.evaluation.shadow import compare_shadow
from retrylens.schemas import RETRYING_DECISIONS, Decision, EventKind, RetryEvent
from retrylens.sdk.core.policy import parse_policy
from retrylens.simulation.multistep import ToolBoundary, run_governed_steps
from retrylens.store.event_table import event_row

ALLOWANCE = {"retries": 4, "retries_per_step": 0.5, "max_retries": 20}
FIXED = {"max_attempts": 5}


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logging.getLogger("retrylens").setLevel(logging.ERROR)


def _log(policy: dict[str, object], tasks: int = 40) -> list[RetryEvent]:
    events: list[RetryEvent] = []
    live = parse_policy({"id": "live", **policy})
    for t in range(tasks):
        run_governed_steps(ToolBoundary(5, t, 12, 0.3), live, emit=events.append)
    return events


def test_a_shadow_candidate_with_the_allowance_would_go_on_where_the_fixed_budget_stopped(
    store,
) -> None:
    events = _log({"budget": FIXED, "shadow": {"candidate": {"budget": ALLOWANCE}}})
    stops = [
        e
        for e in events
        if e.kind is EventKind.DECISION and e.decision_reason.startswith("task budget exhausted")
    ]
    assert stops, "the fixed budget stops some of these long tasks"
    assert all(" after " in e.decision_reason for e in stops)  # the reason names the steps
    assert any(e.shadow_decision in RETRYING_DECISIONS for e in stops)
    store.insert_rows(
        [event_row(e, topic="t", partition=0, offset=i) for i, e in enumerate(events)]
    )
    shadow = compare_shadow(store)
    stopped_live = {Decision.GIVE_UP.value, Decision.HANDOFF_HUMAN.value}
    assert any(
        r["live"] in stopped_live and r["candidate"] in {d.value for d in RETRYING_DECISIONS}
        for r in shadow.matrix
    )


def test_replay_credits_the_steps_the_log_names_and_both_replays_agree() -> None:
    h = history_of(_log({"budget": FIXED}))
    assert h.steps is not None and h.steps.max() > 0  # read from "... after N steps"
    live = parse_policy({"id": "live", "budget": FIXED})
    per_step = parse_policy({"id": "per_step", "budget": ALLOWANCE})
    no_share = parse_policy(
        {"id": "no_share", "budget": {"retries": 4, "retries_per_step": 0, "max_retries": 20}}
    )
    model = fit_imputation(h)
    grown = replay_policy(h, per_step, live, model)
    flat = replay_policy(h, no_share, live, model)
    assert grown.extended.sum() > 0 and flat.extended.sum() == 0
    # past the live budget the log shows no retry: the gain is a bound, not a borrowed rate
    assert grown.unsupported.any() and grown.point["success"] == flat.point["success"]
    assert grown.optimistic is not None and grown.optimistic["success"].mean() > flat.point["success"]
    ref, lim = Limits.of(live, h.phases, name="live"), Limits.of(per_step, h.phases, name="c")
    loop = replay_loop(h, lim, ref, model)
    for metric, values in loop.items():
        assert np.allclose(values, grown.per_task[metric]), metric
