"""The replay's history, array by array, from a frame whose every value is planted.

Replay and the off-policy estimators read only :class:`History`; a wrong array here (a
task of another project merged in, an unfinished task counted, the wrong decision joined,
a budget stop's steps misread, a wait credited after a stop) is a wrong verdict with no
error. Each array is compared exactly (mutation target ``replay_history``).
"""

from __future__ import annotations

import pandas as pd

from retrylens.evaluation.history import COLUMNS, DECISION_CODE, ERROR_CODE, NO_ERROR, build_history

_DEFAULTS = dict(phase="plan", error_type="", retryable=True, decision="none", decision_reason="",
                 backoff_ms=0, shadow_decision="", propensity=None, tokens_in=0, tokens_out=0,
                 cost_usd=0.0, latency_ms=0.0, outcome="", policy_id="live", policy_version="3")


def _row(project: str, agent: str, task: str, attempt: int, kind: str, **values: object) -> dict[str, object]:
    return {**_DEFAULTS, "project": project, "agent_name": agent, "task_id": task, "attempt": attempt,
            "kind": kind, **values}


def _frame() -> pd.DataFrame:
    rows = [
        # p1/t1: two failures, listed out of order; the first decision logged twice (the last counts)
        _row("p1", "a", "t1", 2, "attempt_failed", phase="act", error_type="bogus", retryable=None,
             tokens_in=20, tokens_out=1, cost_usd=0.25, latency_ms=200.0),
        _row("p1", "a", "t1", 1, "attempt_failed", error_type="timeout", tokens_in=10, tokens_out=5,
             cost_usd=0.5, latency_ms=100.0),
        _row("p1", "a", "t1", 1, "decision", decision="give_up", backoff_ms=7),
        _row("p1", "a", "t1", 1, "decision", decision="retry_backoff",
             decision_reason="explored: retry_backoff instead of retry_same", backoff_ms=250,
             shadow_decision="give_up", propensity=0.25),
        _row("p1", "a", "t1", 2, "decision", decision="give_up",
             decision_reason="budget: stopped after 12 steps", backoff_ms=999),
        _row("p1", "a", "t1", 2, "task_finished", outcome="failed"),
        # p1/t2: not finished, so its outcome is unknown: left out
        _row("p1", "a", "t2", 1, "attempt_failed", error_type="timeout"),
        # p1/t3: handed off after one failure (a stop: its backoff is not waited)
        _row("p1", "a", "t3", 1, "attempt_failed", error_type="rate_limit", retryable=False,
             tokens_in=3, cost_usd=0.125, latency_ms=30.0),
        _row("p1", "a", "t3", 1, "decision", decision="handoff_human", backoff_ms=40),
        _row("p1", "a", "t3", 1, "task_finished", outcome="handed_off"),
        # p2/t1: the same task id in another project; a compact first-try success
        _row("p2", "b", "t1", 1, "attempt_succeeded", phase="act", outcome="succeeded", tokens_out=9,
             cost_usd=1.0, latency_ms=50.0, policy_id="cand", policy_version="1"),
    ]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def test_every_array_of_the_history_is_the_planted_one() -> None:
    h = build_history(_frame())
    d = DECISION_CODE
    assert list(h.task_ids) == ["t1", "t3", "t1"] and list(h.agents) == ["a", "a", "b"]
    assert h.succeeded.tolist() == [False, False, True] and h.handed_off.tolist() == [False, True, False]
    assert h.counts.tolist() == [2, 1, 1] and h.starts.tolist() == [0, 2, 3]
    assert h.task.tolist() == [0, 0, 1, 2] and h.pos.tolist() == [1, 2, 1, 1]
    assert h.failed.tolist() == [True, True, True, False]
    assert h.error.tolist() == [ERROR_CODE["timeout"], ERROR_CODE["unknown"], ERROR_CODE["rate_limit"], NO_ERROR]
    assert h.retryable.tolist() == [True, True, False, True]
    assert h.phases == ("plan", "act") and h.phase.tolist() == [0, 1, 0, 1]
    assert h.tokens.tolist() == [15, 21, 3, 9]
    assert h.cost.tolist() == [0.5, 0.25, 0.125, 1.0] and h.latency.tolist() == [100.0, 200.0, 30.0, 50.0]
    assert h.decision.tolist() == [d["retry_backoff"], d["give_up"], d["handoff_human"], -1]
    assert h.greedy.tolist() == [d["retry_same"], d["give_up"], d["handoff_human"], -1]
    assert h.shadow.tolist() == [d["give_up"], -1, -1, -1]
    assert h.propensity.tolist() == [0.25, 1.0, 1.0, 1.0]
    assert h.backoff.tolist() == [250.0, 0.0, 0.0, 0.0]
    assert h.steps is not None and h.steps.tolist() == [0.0, 12.0, 0.0, 0.0]
    assert h.policies == ("cand@1", "live@3")
    assert h.task_policies is not None and list(h.task_policies) == ["live@3", "live@3", "cand@1"]


def test_a_retried_failure_keeps_its_wait_and_a_decision_of_none_is_not_a_stop_reading() -> None:
    """Every retrying decision keeps the wait it logged; a failure with no decision row
    joined is read as ``none`` (a stop: no wait), and its steps are 0."""
    rows = [
        _row("p", "a", "t", 1, "attempt_failed", error_type="server_error"),
        _row("p", "a", "t", 1, "decision", decision="retry_same", backoff_ms=0),
        _row("p", "a", "t", 2, "attempt_failed", error_type="network"),
        _row("p", "a", "t", 2, "decision", decision="rebuild_context", backoff_ms=30,
             decision_reason="after 3 steps of 4"),
        _row("p", "a", "t", 3, "attempt_failed", error_type="network", backoff_ms=55),
        _row("p", "a", "t", 3, "task_finished", outcome="failed"),
    ]
    h = build_history(pd.DataFrame(rows, columns=list(COLUMNS)))
    d = DECISION_CODE
    assert h.decision.tolist() == [d["retry_same"], d["rebuild_context"], d["none"]]
    assert h.backoff.tolist() == [0.0, 30.0, 0.0]
    assert h.steps is not None and h.steps.tolist() == [0.0, 3.0, 0.0]
    assert h.pos.tolist() == [1, 2, 3] and h.counts.tolist() == [3]


def test_a_frame_with_no_finished_task_is_an_empty_history() -> None:
    rows = [_row("p", "a", "t", 1, "attempt_failed", error_type="timeout")]
    for frame in (pd.DataFrame(rows, columns=list(COLUMNS)), pd.DataFrame(columns=list(COLUMNS))):
        h = build_history(frame)
        assert (h.n_tasks, h.n_attempts, h.policies) == (0, 0, ())


def test_the_decision_joined_to_an_attempt_is_its_decision_rows_in_whatever_order_the_rows_come() -> None:
    """Events read from a file or built in memory (``frame_from_events``) need not be in time
    order: an attempt row after its decision row must not be read as that attempt's decision
    (an attempt row carries decision ``none``, a stop: the retry and its wait would be lost)."""
    rows = [
        _row("p", "a", "t", 1, "decision", decision="retry_backoff", backoff_ms=250),
        _row("p", "a", "t", 1, "attempt_failed", error_type="timeout"),
        _row("p", "a", "t", 2, "task_finished", outcome="succeeded"),
        _row("p", "a", "t", 2, "attempt_succeeded"),
    ]
    h = build_history(pd.DataFrame(rows, columns=list(COLUMNS)))
    d = DECISION_CODE
    assert h.decision.tolist() == [d["retry_backoff"], -1]
    assert h.backoff.tolist() == [250.0, 0.0]
    assert h.succeeded.tolist() == [True]
