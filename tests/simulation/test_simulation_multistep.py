"""Multi-step tasks (issue 24): the governed step wiring against a per-call naive loop."""

from __future__ import annotations

import logging

import pytest

from retrylens.sdk.core.policy import RetryPolicy, TaskBudget
from retrylens.simulation.multistep import (
    WIRINGS,
    Finished,
    ToolBoundary,
    run_cell,
    run_governed_steps,
    run_naive,
)

STEPS = {"naive": run_naive, "governed_steps": run_governed_steps}


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logging.getLogger("retrylens").setLevel(logging.ERROR)


def test_every_wiring_meets_the_same_fault_on_the_same_try() -> None:
    a, b = ToolBoundary(3, 7, 20, 0.3), ToolBoundary(3, 7, 20, 0.3)
    assert [a.fault(i, n) for i in range(20) for n in range(3)] == [
        b.fault(i, n) for i in range(20) for n in range(3)
    ]
    kinds = {ToolBoundary(0, t, 20, 0.3).fault(i, 0) for t in range(20) for i in range(20)}
    assert kinds == {None, "before", "after", "429"}
    assert {ToolBoundary(0, t, 20, 0.0).fault(i, 0) for t in range(5) for i in range(20)} == {None}


def test_a_fault_after_the_effect_ran_is_seen_by_verify_and_counted_as_a_duplicate() -> None:
    tools = ToolBoundary(0, 0, 1, 0.0)
    tools.fault = lambda i, n: "after" if n == 0 else None  # type: ignore[method-assign]
    assert run_naive(tools, RetryPolicy()) == Finished(True)
    assert (tools.requests, tools.duplicates) == (2, 1)  # the blind repeat ran it twice
    governed = ToolBoundary(0, 0, 1, 0.0)
    governed.fault = tools.fault  # type: ignore[method-assign]
    assert run_governed_steps(governed, RetryPolicy()).finished
    assert (governed.requests, governed.duplicates, governed.verify_reads) == (1, 0, 1)


def test_long_tasks_finish_under_the_default_budget_where_the_old_fixed_one_fell_short() -> None:
    new = run_cell(20, 0.15, tasks=200, wirings=STEPS)
    old = run_cell(
        20, 0.15, tasks=200, wirings=STEPS, policy=RetryPolicy(budget=TaskBudget(max_attempts=5))
    )
    naive = new["naive"]
    assert old["governed_steps"].finished < naive.finished  # issue 24's finding
    assert new["governed_steps"].finished >= naive.finished
    assert new["governed_steps"].requests <= naive.requests
    assert "task retry allowance" not in new["governed_steps"].stopped_by


def test_the_plain_wiring_re_runs_the_whole_task() -> None:
    cell = run_cell(10, 0.1, tasks=40, wirings=WIRINGS)
    plain, steps = cell["governed_plain"].to_dict(), cell["governed_steps"].to_dict()
    assert plain["requests_per_task"] > steps["requests_per_task"]
    assert plain["duplicates"] > 0 and steps["duplicates"] == 0
