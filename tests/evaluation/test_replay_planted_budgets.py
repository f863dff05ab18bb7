"""Replay held to planted truth: tasks whose every attempt is known in advance, replayed
under budgets whose verdict on each task can be worked out by hand (issue 38, items 1-2).

A task logged failing ``k`` times before it succeeds needs ``k`` retries: a budget that
allows ``k`` retries (``k + 1`` attempts) replays it as succeeded, one that allows ``k - 1``
stops it. And a task the live budget stopped "after N steps" earns ``per_step * N`` more
retries under a per-step allowance, for N of two digits too.
"""

from __future__ import annotations

import logging
import random
from datetime import UTC, datetime

import pytest

from retrylens.errors import TaskStopped
from retrylens.evaluation.ground_truth import history_of
from retrylens.evaluation.replay import fit_imputation, replay_policy
from retrylens.schemas import Decision, EventKind, RetryEvent
from retrylens.sdk import Governor
from retrylens.sdk.core.policy import parse_policy
from retrylens.simulation.multistep import ToolBoundary, run_governed_steps

START = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logging.getLogger("retrylens").setLevel(logging.ERROR)


def _task_failing(times: int, events: list[RetryEvent], seed: int, live_retries: int = 10) -> bool:
    """One task under a live budget of ``live_retries``: ``times`` timeouts, then an answer.
    Returns whether it finished (else the budget stopped it)."""
    live = parse_policy({"id": "live", "budget": {"retries": live_retries, "max_retries": live_retries}})
    governor = Governor.with_virtual_time(live, start=START, emit=events.append, rng=random.Random(seed))
    left = [times]

    def call() -> str:
        if left[0]:
            left[0] -= 1
            raise TimeoutError("the model timed out")
        return "ok"

    try:
        return governor.call(call, agent="planted") == "ok"
    except TaskStopped:
        return False


def test_a_budget_of_k_retries_replays_a_task_that_needed_k_retries_as_succeeded() -> None:
    events: list[RetryEvent] = []
    for seed, times in enumerate((1, 2, 3)):  # each task needs `times` retries (3: the timeout cap)
        _task_failing(times, events, seed)
    h = history_of(events)
    live = parse_policy({"id": "live", "budget": {"retries": 10, "max_retries": 10}})
    model = fit_imputation(h)
    order = {tid: i for i, tid in enumerate(h.task_ids)}
    needed = {e.task_id: e.attempt - 1 for e in events if e.kind is EventKind.ATTEMPT_SUCCEEDED}
    for retries in (1, 2, 3):
        budget = parse_policy({"id": f"r{retries}", "budget": {"retries": retries, "max_retries": retries}})
        success = replay_policy(h, budget, live, model).per_task["success"]
        verdict = {task: bool(success[order[task]]) for task in needed}
        assert verdict == {task: k <= retries for task, k in needed.items()}, retries


def test_a_task_the_live_budget_stopped_gets_exactly_the_tries_the_candidates_budget_allows() -> None:
    """Logged under 1 retry: tasks that answered on their retry and tasks stopped after their
    second timeout. A candidate allowing r retries gives a stopped task r + 1 attempts in all;
    the log holds no retry past the live budget, so those tries are unsupported: counted,
    all failing (the point estimate borrows no rate), and the task flagged unsupported."""
    events: list[RetryEvent] = []
    finished = [_task_failing(1, events, seed, live_retries=1) for seed in range(4)]
    stopped = [_task_failing(9, events, seed, live_retries=1) for seed in range(4, 8)]
    assert all(finished) and not any(stopped)
    h = history_of(events)
    live = parse_policy({"id": "live", "budget": {"retries": 1, "max_retries": 1}})
    model = fit_imputation(h)
    gave_up = [i for i in range(h.n_tasks) if not h.succeeded[i]]
    assert len(gave_up) == 4
    for retries in (2, 3):  # 4 would meet the default timeout cap (3 retries) first
        candidate = parse_policy({"id": f"r{retries}", "budget": {"retries": retries, "max_retries": retries}})
        replay = replay_policy(h, candidate, live, model)
        assert replay.unsupported[gave_up].all(), retries
        assert replay.per_task["success"][gave_up].tolist() == [0.0] * 4, retries
        assert replay.per_task["attempts"][gave_up].tolist() == [retries + 1.0] * 4, retries


def _stopped_after_many_steps() -> list[RetryEvent]:
    """Long tasks (15 steps, 30 % faults) under a fixed budget of 3 attempts: stopped at
    every depth, some after 10 steps or more."""
    events: list[RetryEvent] = []
    live = parse_policy({"id": "live", "budget": {"max_attempts": 3}})
    for task in range(60):
        run_governed_steps(ToolBoundary(7, task, 15, 0.3), live, emit=events.append)
    return events


def test_a_stop_after_two_digit_steps_is_credited_those_steps_in_replay() -> None:
    events = _stopped_after_many_steps()
    stops = {e.task_id: e for e in events if e.kind is EventKind.DECISION
             and e.decision in (Decision.GIVE_UP, Decision.HANDOFF_HUMAN) and " after " in e.decision_reason}
    steps_at_stop = {task: int(e.decision_reason.rsplit(" after ", 1)[1].split()[0]) for task, e in stops.items()}
    assert max(steps_at_stop.values()) >= 10, "the planted log must stop tasks after two-digit steps"
    h = history_of(events)
    assert h.steps is not None
    last_failure = {h.task_ids[h.task[i]]: h.steps[i] for i in range(h.n_attempts) if h.failed[i]}
    assert {t: last_failure[t] for t in steps_at_stop} == steps_at_stop
    # Replayed: a per-step allowance of 1 retry every 10 steps (no base) goes on only past 10 steps.
    live = parse_policy({"id": "live", "budget": {"max_attempts": 3}})
    tenth = parse_policy({"id": "tenth", "budget": {"retries": 2, "retries_per_step": 0.1, "max_retries": 20}})
    replayed = replay_policy(h, tenth, live, fit_imputation(h))
    order = {tid: i for i, tid in enumerate(h.task_ids)}
    extended = {t for t in steps_at_stop if replayed.extended[order[t]]}
    assert extended == {t for t, n in steps_at_stop.items() if n >= 10}
