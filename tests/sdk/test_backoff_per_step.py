"""A step's retries back off from the base, and a long task with one blip per step finishes
(issue 35 item 4).

The real governor on virtual time (its sleeps advance a clock: nothing really sleeps),
wired as a user wires a multi-step task — ``governor.step`` per tool call inside
``governor.call`` — under the default policy.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime

from retrylens.schemas import EventKind, TaskOutcome
from retrylens.sdk import Governor, parse_policy
from retrylens.sdk.core.policy import RetryPolicy
from retrylens.testing import CapturedEvents, capture_events

START = datetime(2026, 12, 1, tzinfo=UTC)
BASE_MS, JITTER = 500, 0.3  # the default backoff: 500 ms doubling, ±30 %


def tool_failing(times: dict[int, int]) -> Callable[[int], str]:
    """A tool whose call ``i`` times out on its first ``times[i]`` tries."""
    tries: dict[int, int] = {}

    def tool(i: int) -> str:
        tries[i] = tries.get(i, 0) + 1
        if tries[i] <= times.get(i, 0):
            raise TimeoutError(f"call {i} timed out")
        return f"result {i}"

    return tool


def run(policy: RetryPolicy, steps: int, times: dict[int, int]) -> tuple[Governor, CapturedEvents]:
    """A ``steps``-step task; no dependency is named, so no breaker watches the tool (a
    dependency failing every other call is unhealthy: its breaker would open, by design)."""
    tool = tool_failing(times)
    with capture_events() as captured:
        gov = Governor.with_virtual_time(
            policy, start=START, emit=captured.emit, rng=random.Random(7)
        )

        def task() -> None:
            for i in range(steps):
                gov.step(f"call-{i}", tool, i)

        gov.call(task, goal=f"a {steps}-step task", agent="ops")
        return gov, captured


def backoffs(captured: CapturedEvents) -> list[int]:
    return [e.backoff_ms for e in captured.of_kind(EventKind.DECISION)]


def within(ms: int, retry: int) -> bool:
    """Whether ``ms`` is the default wait of a step's ``retry``-th retry (1-based)."""
    expected = BASE_MS * 2 ** (retry - 1)
    return expected * (1 - JITTER) <= ms <= expected * (1 + JITTER)


def test_a_twenty_step_task_with_one_blip_per_step_finishes_under_the_defaults() -> None:
    gov, captured = run(RetryPolicy(), 20, dict.fromkeys(range(20), 1))
    assert list(captured.outcomes().values()) == [TaskOutcome.SUCCEEDED]
    waits = backoffs(captured)
    assert len(waits) == 20
    assert all(within(ms, 1) for ms in waits), waits
    assert gov.clock() <= 20 * BASE_MS * (1 + JITTER) / 1000  # slept ≤ 13 s, virtually


def test_a_steps_retries_grow_within_the_step_and_the_next_step_starts_from_the_base() -> None:
    _, captured = run(RetryPolicy(), 3, {0: 3, 1: 1, 2: 2})
    waits = backoffs(captured)
    assert [within(ms, n) for ms, n in zip(waits, [1, 2, 3, 1, 1, 2], strict=True)] == [True] * 6


def test_a_task_failing_twice_on_every_call_still_stops_after_a_few_steps() -> None:
    """The allowance stops a runaway task: two failures per call outrun one retry per step."""
    policy = parse_policy({"breaker": {"enabled": False}})
    tool = tool_failing(dict.fromkeys(range(60), 2))
    gov = Governor.with_virtual_time(policy, start=START, rng=random.Random(7))
    steps_done: list[int] = []

    def task() -> None:
        for i in range(60):
            gov.step(f"call-{i}", tool, i, dependency="crm")
            steps_done.append(i)

    try:
        gov.call(task, goal="a runaway task", agent="ops")
    except Exception as stopped:  # noqa: BLE001 - TaskStopped, read below
        assert "task retry allowance" in str(stopped)
    assert len(steps_done) <= 5


def test_a_twenty_step_task_with_one_blip_per_step_finishes_when_its_dependency_is_named() -> None:
    """The default breaker watches the named dependency: a blip the retry recovers from is
    one success to it (a failing-every-other-call count would open it after 5 steps)."""
    tool = tool_failing(dict.fromkeys(range(20), 1))
    with capture_events() as captured:
        gov = Governor.with_virtual_time(
            RetryPolicy(), start=START, emit=captured.emit, rng=random.Random(7)
        )

        def task() -> None:
            for i in range(20):
                gov.step(f"call-{i}", tool, i, dependency="crm")

        gov.call(task, goal="a 20-step task on the crm", agent="ops")
    assert list(captured.outcomes().values()) == [TaskOutcome.SUCCEEDED]
    assert len(backoffs(captured)) == 20
    assert not gov.breaker_open("crm")


def test_a_dead_named_dependency_still_opens_its_breaker_under_the_defaults() -> None:
    """Failures nobody recovers from still count: ten tasks on a dead dependency open it."""
    gov = Governor.with_virtual_time(RetryPolicy(), start=START, rng=random.Random(7))

    def dead() -> str:
        raise TimeoutError("the crm does not answer")

    for n in range(10):
        try:
            gov.call(lambda: gov.step("read", dead, dependency="crm"), goal=f"task {n}", agent="ops")
        except Exception:  # noqa: BLE001, S112 - each task gives up; the breaker is read below
            continue
        if gov.breaker_open("crm"):
            break
    assert gov.breaker_open("crm")
