"""What the task ledger and the fleet retry throttle promise, read on the governor's
decisions (issue 25 item 2: the survivors of mutating ``sdk/core/budget.py``).

A governor on virtual time with a seeded rng, the obvious ``call``; the breaker is
switched off where the throttle alone must decide.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from retrylens.errors import TaskStopped
from retrylens.schemas import EventKind
from retrylens.sdk import Governor, parse_policy
from retrylens.sdk.core.budget import TaskLedger, stopping_budget
from retrylens.sdk.core.policy import RetryPolicy, TaskBudget, steps_allowance
from retrylens.sdk.core.policy_source import PolicySource
from retrylens.sdk.core.usage import Usage
from retrylens.testing import capture_events

START = datetime(2026, 12, 1, tzinfo=UTC)


def test_usage_reported_by_each_attempt_does_not_buy_more_attempts() -> None:
    tries = 0

    def ask(attempt) -> str:  # noqa: ANN001
        nonlocal tries
        tries += 1
        attempt.report(Usage(tokens_in=100, tokens_out=20, cost_usd=0.001))
        raise TimeoutError("model timed out")

    gov = Governor.with_virtual_time(
        RetryPolicy(caps={"timeout": 10}), start=START, rng=random.Random(3)
    )
    with pytest.raises(TaskStopped) as stopped:
        gov.call(ask, goal="summarise", agent="a")
    assert tries == 5  # the default allowance: 4 retries, whatever the attempts spent
    assert stopped.value.verdict.reason.startswith("task retry allowance 4/4 after 0 steps")


def test_a_budget_lowered_mid_task_stops_a_task_already_past_it() -> None:
    source = PolicySource(RetryPolicy(caps={"timeout": 10}))
    tries = 0

    def ask() -> str:
        nonlocal tries
        tries += 1
        if tries == 4:  # three retries spent: the operator cuts the allowance to one
            source.set(parse_policy({"caps": {"timeout": 10}, "budget": {"retries": 1}}))
        raise TimeoutError("model timed out")

    gov = Governor.with_virtual_time(source, start=START, rng=random.Random(3))
    with pytest.raises(TaskStopped) as stopped:
        gov.call(ask, goal="summarise", agent="a")
    assert tries == 4
    assert stopped.value.verdict.reason.startswith("task retry allowance 3/1 after 0 steps")


@pytest.mark.parametrize(
    ("spend", "budget", "now", "name"),
    [
        ({"tokens": 899}, TaskBudget(max_tokens=900), 0.0, None),
        ({"tokens": 900}, TaskBudget(max_tokens=900), 0.0, "tokens"),
        ({"cost_usd": 0.49}, TaskBudget(max_cost_usd=0.5), 0.0, None),
        ({"cost_usd": 0.5}, TaskBudget(max_cost_usd=0.5), 0.0, "money"),
        ({}, TaskBudget(deadline_s=10), 9.9, None),
        ({}, TaskBudget(deadline_s=10), 10.0, "deadline"),
        ({}, TaskBudget(deadline_s=10), 60.0, "deadline"),
    ],
)
def test_tokens_money_and_time_stop_a_task_at_the_limit_and_not_before(
    spend: dict[str, float], budget: TaskBudget, now: float, name: str | None
) -> None:
    ledger = TaskLedger(started_at=100.0)  # a clock that does not start at zero
    ledger.charge(attempts=1, **spend)  # type: ignore[arg-type]
    reason = ledger.exhausted(budget, now=100.0 + now)
    assert (reason if reason is None else stopping_budget(reason)) == name


def test_the_deadline_reason_says_how_long_the_task_ran() -> None:
    ledger = TaskLedger(started_at=1000.0)
    ledger.charge(attempts=1)
    reason = ledger.exhausted(TaskBudget(deadline_s=30), now=1030.5)
    assert reason == "deadline passed: 30.5s of 30.0s"


def test_a_fresh_ledger_has_spent_nothing_and_charges_only_what_it_is_told() -> None:
    ledger = TaskLedger(started_at=0.0)
    assert (ledger.attempts, ledger.retries, ledger.tokens, ledger.cost_usd) == (0, 0, 0, 0.0)
    ledger.charge(attempts=1)
    assert (ledger.attempts, ledger.tokens, ledger.cost_usd) == (1, 0, 0.0)
    ledger.charge(tokens=120)
    ledger.charge(cost_usd=0.25)
    assert (ledger.attempts, ledger.retries, ledger.tokens, ledger.cost_usd) == (1, 0, 120, 0.25)
    with pytest.raises(TypeError):  # keyword-only: a bare number could be any of the three
        ledger.charge(1)  # type: ignore[misc]


def test_a_token_budget_stops_the_task_at_the_attempt_that_reaches_it() -> None:
    tries = 0

    def ask(attempt) -> str:  # noqa: ANN001
        nonlocal tries
        tries += 1
        attempt.report(Usage(tokens_in=100, tokens_out=20))
        raise TimeoutError("model timed out")

    policy = RetryPolicy(caps={"timeout": 10}, budget=TaskBudget(max_tokens=300))
    gov = Governor.with_virtual_time(policy, start=START, rng=random.Random(3))
    with pytest.raises(TaskStopped) as stopped:
        gov.call(ask, goal="summarise", agent="a")
    assert tries == 3  # 120, 240, 360 tokens: the third crosses 300
    assert stopped.value.verdict.reason == "token budget exhausted: 360/300"


def test_a_fixed_attempt_count_lowered_mid_task_stops_a_task_already_past_it() -> None:
    source = PolicySource(RetryPolicy(caps={"timeout": 10}))
    tries = 0

    def ask() -> str:
        nonlocal tries
        tries += 1
        if tries == 4:
            source.set(parse_policy({"caps": {"timeout": 10}, "budget": {"max_attempts": 2}}))
        raise TimeoutError("model timed out")

    gov = Governor.with_virtual_time(source, start=START, rng=random.Random(3))
    with pytest.raises(TaskStopped) as stopped:
        gov.call(ask, goal="summarise", agent="a")
    assert tries == 4
    assert stopped.value.verdict.reason == "task budget exhausted: 4/2 attempts used"


def test_a_deadline_stops_retries_once_the_task_has_run_that_long() -> None:
    tries: list[float] = []
    policy = parse_policy(
        {"caps": {"timeout": 50}, "budget": {"retries": 50, "max_retries": 50, "deadline_s": 30}}
    )
    gov = Governor.with_virtual_time(policy, start=START, rng=random.Random(3))

    def ask() -> str:
        tries.append(gov.now())
        raise TimeoutError("model timed out")

    with pytest.raises(TaskStopped) as stopped:
        gov.call(ask, goal="summarise", agent="a")
    reason = stopped.value.verdict.reason
    assert stopping_budget(reason) == "deadline"
    assert tries[-1] - tries[0] >= 30  # the last try started after the deadline had passed
    assert tries[-2] - tries[0] < 30  # every earlier try was before it
    assert len(tries) >= 3


def test_the_fleet_throttle_lets_retries_through_while_failures_stay_near_ratio() -> None:
    """max_tokens 10, ratio 0.1: each failure costs a token, each success earns 0.1, and a
    retry needs more than 5 tokens left. Tasks that each fail once then succeed spend a net
    0.9: the first five are retried, the sixth fails fast, naming the fleet budget."""
    policy = parse_policy(
        {"fleet_budget": {"max_tokens": 10, "ratio": 0.1}, "breaker": {"enabled": False}}
    )
    with capture_events() as captured:
        gov = Governor.with_virtual_time(
            policy, start=START, emit=captured.emit, rng=random.Random(3)
        )
        outcomes: list[str] = []
        for i in range(7):
            tries = 0

            def flaky() -> str:
                nonlocal tries
                tries += 1
                if tries == 1:
                    raise TimeoutError("slow")
                return "ok"

            try:
                gov.call(flaky, goal=f"task {i}", agent="a", dependency="api")
                outcomes.append("retried")
            except TaskStopped as stopped:
                outcomes.append(stopped.verdict.reason)
    assert outcomes[:5] == ["retried"] * 5
    assert all("fleet retry budget for api is spent" in o for o in outcomes[5:])
    assert gov.throttles["api"].tokens == pytest.approx(10 - 5 * 0.9 - 2)
    stops = [e for e in captured.events if e.kind is EventKind.DECISION]
    assert sum("fleet retry budget" in (e.decision_reason or "") for e in stops) == 2


def test_the_fleet_throttle_refills_to_its_maximum_and_no_further() -> None:
    policy = parse_policy({"fleet_budget": {"max_tokens": 10, "ratio": 0.5}})
    gov = Governor.with_virtual_time(policy, start=START, rng=random.Random(3))
    throttle = gov.throttles["api"]
    for _ in range(6):
        throttle.record(False)
    assert throttle.tokens == 4.0 and not gov.retry_allowed("api")
    for _ in range(2):
        throttle.record(True)
    assert throttle.tokens == 5.0 and not gov.retry_allowed("api")  # exactly half: no retry
    throttle.record(True)
    assert throttle.tokens == 5.5 and gov.retry_allowed("api")
    for _ in range(20):
        throttle.record(True)
    assert throttle.tokens == 10.0
    for _ in range(20):
        throttle.record(False)
    assert throttle.tokens == 0.0  # never below empty: 0.5 a success refills it from there
    throttle.record(True)
    assert throttle.tokens == 0.5


def test_a_switched_off_throttle_never_stops_a_retry() -> None:
    gov = Governor.with_virtual_time(
        parse_policy({"fleet_budget": {"enabled": False, "max_tokens": 10}}), start=START
    )
    for _ in range(30):
        gov.throttles["api"].record(False)
    assert gov.retry_allowed("api")


@pytest.mark.parametrize(
    ("reason", "name"),
    [
        ("step cap of step 'lookup': timeout retry cap reached (3/3 retries)", "step cap"),
        ("task retry allowance 4/4 after 0 steps: budget exhausted", "task retry allowance"),
        ("task budget exhausted: 4/4 attempts used", "attempts"),
        ("token budget exhausted: 900/900", "tokens"),
        ("cost budget exhausted: $0.5000/$0.5000", "money"),
        ("deadline passed: 10.0s of 10.0s", "deadline"),
        ("fleet retry budget for api is spent (retries > 10% of calls): failing fast", None),
        ("the reason mentions a deadline passed later", None),
    ],
)
def test_each_stop_reason_names_its_budget_and_others_name_none(
    reason: str, name: str | None
) -> None:
    assert stopping_budget(reason) == name


def always_timing_out() -> tuple[list[int], object]:
    tries: list[int] = []

    def ask() -> str:
        tries.append(1)
        raise TimeoutError("model timed out")

    return tries, ask


@pytest.mark.parametrize(
    "budget",
    [
        {"retries": 2, "max_retries": 2},
        {"retries": 0, "retries_per_step": 1.0, "max_retries": 3},
        {"max_attempts": 4},
    ],
)
def test_a_task_makes_as_many_attempts_as_its_budget_says_at_most(budget: dict) -> None:
    policy = parse_policy({"caps": {"timeout": 30}, "budget": budget})
    tries, ask = always_timing_out()
    gov = Governor.with_virtual_time(policy, start=START, rng=random.Random(3))
    with pytest.raises(TaskStopped):
        gov.call(ask, goal="summarise", agent="a")
    # no steps completed: what the base allows, which most_attempts bounds from above
    assert len(tries) == policy.budget.allowance(0) + 1 <= policy.budget.most_attempts
    assert policy.budget.most_attempts == min(
        policy.budget.max_retries + 1, policy.budget.max_attempts or 10**9
    )


def test_most_attempts_is_the_ceiling_reached_by_a_task_with_many_steps() -> None:
    policy = parse_policy({"caps": {"timeout": 30}, "budget": {"retries": 0, "max_retries": 3}})
    tries: list[int] = []
    gov = Governor.with_virtual_time(policy, start=START, rng=random.Random(3))

    def tool(i: int) -> str:
        tries.append(i)
        if i >= 8:  # eight steps done (4 retries earned, 3 allowed), then the tool breaks
            raise TimeoutError("down")
        return "ok"

    def task() -> None:
        for i in range(20):
            gov.step(f"call-{i}", tool, i)

    with pytest.raises(TaskStopped) as stopped:
        gov.call(task, goal="many steps", agent="a")
    failed_tries = sum(1 for i in tries if i >= 8)
    assert failed_tries == policy.budget.most_attempts == 4
    assert stopped.value.verdict.reason.startswith("task retry allowance 3/3 after 8 steps")


def test_a_whole_retry_per_step_is_earned_only_by_completed_steps() -> None:
    budget = TaskBudget(retries=2, retries_per_step=1.0, max_retries=10)
    assert [budget.allowance(n) for n in (0, 1, 3, 20)] == [2, 3, 5, 10]
    assert budget.allowance(-3) == 2  # a negative count earns nothing and takes nothing
    assert steps_allowance(2, 2.0, 10, -3) == 2  # the formula the replay repeats, alike


def test_an_old_fixed_budget_earns_no_retries_per_step_and_says_so() -> None:
    budget = parse_policy({"budget": {"max_attempts": 4}}).budget
    assert (budget.retries, budget.retries_per_step, budget.max_retries) == (3, 0.0, 3)
