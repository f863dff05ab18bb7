"""Issue 24: a task's retry allowance grows with the steps it completes, up to a ceiling.

Each test drives the real governor the way a new user wires a multi-step task —
``governor.step`` per tool call inside ``governor.call`` — with a tool that fails on
planned calls, on virtual time.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from retrylens.errors import PolicyError, TaskStopped
from retrylens.schemas import Decision, EventKind
from retrylens.sdk import Governor, parse_policy
from retrylens.sdk.core.budget import TaskLedger, stopping_budget
from retrylens.sdk.core.policy import RetryPolicy, TaskBudget, load_policy
from retrylens.testing import capture_events

START = datetime(2026, 12, 1, tzinfo=UTC)


def faulty_tool(failing: set[int]) -> tuple[Callable[[int], str], list[int]]:
    """A tool whose first try of each call in ``failing`` times out; the log of tries."""
    tries: list[int] = []

    def tool(i: int) -> str:
        tries.append(i)
        if i in failing and tries.count(i) == 1:
            raise TimeoutError(f"call {i} timed out")
        return f"result {i}"

    return tool, tries


def run_steps(
    policy: RetryPolicy, steps: int, failing: set[int]
) -> tuple[str | None, list[object]]:
    """Run a ``steps``-step task under ``policy``: None when it finished, else the stop reason."""
    tool, _ = faulty_tool(failing)
    with capture_events() as captured:
        gov = Governor.with_virtual_time(
            policy, start=START, emit=captured.emit, rng=random.Random(3)
        )

        def task() -> None:
            for i in range(steps):
                gov.step(f"call-{i}", tool, i, dependency="crm")

        try:
            gov.call(task, goal="update twelve records", agent="ops")
        except TaskStopped as stopped:
            return stopped.verdict.reason, list(captured.events)
    return None, list(captured.events)


def naive(steps: int, failing: set[int]) -> bool:
    """Per-call naive retry: up to three tries each call."""
    tool, _ = faulty_tool(failing)
    for i in range(steps):
        for attempt in range(3):
            try:
                tool(i)
                break
            except TimeoutError:
                if attempt == 2:
                    return False
    return True


def test_a_twelve_step_task_with_six_faults_finishes_as_a_naive_loop_does() -> None:
    failing = {1, 3, 5, 7, 9, 11}
    assert naive(12, failing)
    reason, _ = run_steps(RetryPolicy(), 12, failing)
    assert reason is None


def test_a_task_failing_once_on_every_call_runs_to_the_ceiling_and_says_so() -> None:
    # every call fails once: the breaker (50 % failures) is off to let the budget decide;
    # one retry earned per step (issue 35) carries it to the ceiling, not 7 steps
    policy = parse_policy({"breaker": {"enabled": False}})
    reason, events = run_steps(policy, 60, set(range(60)))
    assert reason is not None
    assert reason.startswith("task retry allowance 20/20 after 20 steps: budget exhausted")
    decisions = [e for e in events if e.kind is EventKind.DECISION]
    assert decisions[-1].decision_reason == reason
    assert decisions[-1].decision in (Decision.GIVE_UP, Decision.HANDOFF_HUMAN)
    assert stopping_budget(reason) == "task retry allowance"


def test_a_long_task_with_occasional_faults_stops_at_the_ceiling() -> None:
    budget = TaskBudget()
    reason, _ = run_steps(RetryPolicy(), 100, set(range(0, 100, 2)))
    assert reason is not None
    assert reason.startswith(
        f"task retry allowance {budget.max_retries}/{budget.max_retries} after "
    )
    assert "budget exhausted" in reason  # what the retries-exhausted measure looks for


def test_a_task_without_steps_keeps_the_old_five_attempts() -> None:
    tries: list[int] = []

    def always_slow() -> None:
        tries.append(1)
        raise TimeoutError("slow")

    gov = Governor.with_virtual_time(
        RetryPolicy(caps={"timeout": 10}), start=START, rng=random.Random(3)
    )
    with pytest.raises(TaskStopped) as stopped:
        gov.call(always_slow, goal="one call", agent="ops")
    assert len(tries) == 5
    assert stopped.value.verdict.reason.startswith("task retry allowance 4/4 after 0 steps")


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("policy.yaml", "id: legacy\nbudget:\n  max_attempts: 4\n"),
        ("policy.json", '{"policy": {"id": "legacy", "budget": {"max_attempts": 4}}}'),
    ],
)
def test_an_old_policy_file_with_max_attempts_keeps_its_fixed_meaning(
    tmp_path: Path, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    policy = load_policy(path)
    assert policy.budget.max_attempts == 4
    assert policy.budget.allowance(0) == policy.budget.allowance(50) == 3
    reason, _ = run_steps(policy, 12, {1, 3, 5, 7, 9, 11})
    assert reason == "task budget exhausted: 4/4 attempts used after 7 steps"
    assert stopping_budget(reason) == "attempts"
    # the dumped policy round-trips to the same budget (what the API and hot reload do)
    assert parse_policy(policy.model_dump(mode="json")).budget == policy.budget


def test_max_attempts_set_beside_the_allowance_is_an_extra_cap() -> None:
    budget = TaskBudget(max_attempts=3, retries=4, retries_per_step=1.0)
    assert budget.allowance(10) == 14
    assert budget.most_attempts == 3


def test_a_policy_sets_the_allowance_and_a_bad_ceiling_is_refused() -> None:
    policy = parse_policy(
        {"budget": {"retries": 2, "retries_per_step": 0.5, "max_retries": 6}}, strict=True
    )
    assert [policy.budget.allowance(n) for n in (0, 1, 2, 5, 20)] == [2, 2, 3, 4, 6]
    with pytest.raises(PolicyError, match="max_retries"):
        parse_policy({"budget": {"retries": 8, "max_retries": 6}})
    with pytest.raises(PolicyError, match="retries_per_step"):
        parse_policy({"budget": {"retries_per_step": -1}})


def test_a_step_that_uses_its_cap_up_is_named() -> None:
    def down(i: int) -> str:
        raise TimeoutError("down")

    gov = Governor.with_virtual_time(RetryPolicy(), start=START, rng=random.Random(3))
    with pytest.raises(TaskStopped) as stopped:
        gov.call(lambda: gov.step("lookup", down, 0), goal="look up", agent="ops")
    reason = stopped.value.verdict.reason
    assert reason == "step cap of step 'lookup': timeout retry cap reached (3/3 retries)"
    assert stopping_budget(reason) == "step cap"


@pytest.mark.parametrize(
    ("spend", "budget", "name"),
    [
        ({"tokens": 900}, TaskBudget(max_tokens=900), "tokens"),
        ({"cost_usd": 0.5}, TaskBudget(max_cost_usd=0.5), "money"),
        ({}, TaskBudget(deadline_s=10), "deadline"),
    ],
)
def test_tokens_money_and_deadline_stay_absolute_and_are_named(
    spend: dict[str, float], budget: TaskBudget, name: str
) -> None:
    ledger = TaskLedger(started_at=0.0)
    ledger.charge(attempts=1, **spend)  # type: ignore[arg-type]
    for _ in range(100):
        ledger.complete_step()  # steps earn retries, never tokens, money or time
    reason = ledger.exhausted(budget, now=10.0)
    assert reason is not None
    assert stopping_budget(reason) == name


def test_a_sub_agent_shares_the_steps_its_parent_earned() -> None:
    ledger = TaskLedger(started_at=0.0)
    ledger.charge(attempts=5)
    budget = TaskBudget()
    assert ledger.exhausted(budget, 0.0) is not None
    ledger.complete_step(2)
    assert ledger.exhausted(budget, 0.0) is None


def test_the_long_tasks_example_policy_sets_the_allowance() -> None:
    path = Path(__file__).resolve().parents[2] / "examples" / "policies" / "long_tasks.yaml"
    budget = load_policy(path).budget
    assert budget.max_attempts is None and budget.deadline_s == 600
    assert [budget.allowance(n) for n in (0, 12, 100)] == [4, 16, 20]
