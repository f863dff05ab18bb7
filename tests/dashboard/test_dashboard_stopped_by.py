"""Issue 24: the hand-off list and a task's attempts say which budget stopped the task."""

from __future__ import annotations

from retrylens.dashboard.page_overview import handoff_rows
from retrylens.dashboard.story import Attempt, TaskStory, attempt_rows

ALLOWANCE = "task retry allowance 7/7 after 7 steps: budget exhausted (4 + 0.5 per step, at most 20)"


def _handoff(task_id: str, reason: str) -> dict[str, object]:
    return {"ts": "2026-12-01 23:00:00", "project": "shop", "task_id": task_id, "agent": "ops",
            "phase": "execution", "error_type": "timeout", "reason": reason, "policy_version": "1"}


def test_the_handoff_list_names_the_budget_that_stopped_each_task() -> None:
    rows = handoff_rows([
        _handoff("t1", ALLOWANCE),
        _handoff("t2", "step cap of step 'lookup': timeout retry cap reached (3/3 retries)"),
        _handoff("t3", "unclassified failure (RuntimeError): no retry rule applies to it"),
    ])
    assert {r["task_id"]: r["stopped_by"] for r in rows} == {
        "t1": "task retry allowance", "t2": "step cap", "t3": ""}
    assert rows[0]["open"].startswith("task?project=shop&task_id=")


def test_a_tasks_attempts_name_the_budget_of_a_give_up() -> None:
    story = TaskStory(project="shop", task_id="t1", attempts=[
        Attempt(attempt=1, correlation_id="c1", decision="retry_backoff", decision_reason="timeout is transient"),
        Attempt(attempt=2, correlation_id="c2", decision="give_up", decision_reason="token budget exhausted: 9/9"),
    ])
    assert [r["stopped_by"] for r in attempt_rows(story)] == ["", "tokens"]
