"""Defects of issue 20 that lived in the attempt loop, one test each: step usage and a
top-level ``cost_usd`` count towards budgets, events name the policy their attempt ran
under, and a verify / rollback / channel that raises or hangs never loses the outcome."""

from __future__ import annotations

import asyncio
import random
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from retrylens.errors import GaveUp, HandedOff, TaskStopped
from retrylens.schemas import EventKind, TaskOutcome
from retrylens.sdk import CallbackChannel, Governor, PolicySource
from retrylens.sdk.core.policy import RetryPolicy, TaskBudget
from retrylens.testing import capture_events

START = datetime(2024, 5, 1, tzinfo=UTC)


def governor(**kwargs: Any) -> Governor:
    kwargs.setdefault("rng", random.Random(11))
    return Governor.with_virtual_time(start=START, **kwargs)


def answer(tokens_in: int, tokens_out: int, **extra: Any) -> dict[str, Any]:
    return {
        "text": "ok",
        "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out},
        **extra,
    }


# -- usage -------------------------------------------------------------------------------
def test_usage_returned_by_steps_counts_towards_the_token_budget() -> None:
    flaky_calls = 0

    def flaky() -> None:
        nonlocal flaky_calls
        flaky_calls += 1
        raise TimeoutError("search timed out")

    policy = RetryPolicy(budget=TaskBudget(max_attempts=20, max_tokens=50))
    with capture_events() as captured:
        g = governor(policy=policy, emit=captured.emit)

        def task() -> None:
            for name in ("plan", "draft", "review"):
                g.step(name, lambda: answer(10, 8))  # 54 tokens in all
            g.step("search", flaky)

        with pytest.raises(TaskStopped) as stopped:
            g.call(task, goal="write the report")
        attempts = captured.of_kind(EventKind.ATTEMPT_FAILED)
        (finished,) = captured.of_kind(EventKind.TASK_FINISHED)
    assert flaky_calls == 1
    assert "token budget exhausted: 54/50" in stopped.value.verdict.reason
    assert (attempts[0].tokens_in, attempts[0].tokens_out) == (30, 24)
    assert "54 tokens" in finished.decision_reason


def test_step_usage_is_charged_once_when_the_task_then_succeeds() -> None:
    with capture_events() as captured:
        g = governor(emit=captured.emit)

        def task() -> str:
            g.step("a", lambda: answer(5, 5))
            g.step("b", lambda: answer(7, 3))
            return "done"

        assert g.call(task, goal="g") == "done"
        (event,) = captured.events  # a clean first try: one compact event
    assert (event.tokens_in, event.tokens_out) == (12, 8)


def test_a_top_level_cost_beside_usage_is_counted() -> None:
    with capture_events() as captured:
        g = governor(emit=captured.emit)
        g.call(lambda: answer(11, 7, cost_usd=0.25), goal="g")
        (event,) = captured.events
    assert (event.tokens_in, event.tokens_out, event.cost_usd) == (11, 7, 0.25)


def test_a_top_level_cost_beside_usage_stops_a_money_budget() -> None:
    calls = 0

    def costly() -> dict[str, Any]:
        nonlocal calls
        calls += 1
        return answer(1, 1, cost_usd=0.03)

    def fails() -> None:
        raise TimeoutError("slow")

    g = governor(policy=RetryPolicy(budget=TaskBudget(max_attempts=20, max_cost_usd=0.05)))

    def task() -> None:
        g.step("one", costly)
        g.step("two", costly)
        g.step("three", fails)

    with pytest.raises(TaskStopped) as stopped:
        g.call(task, goal="g")
    assert "cost budget exhausted" in stopped.value.verdict.reason


# -- the policy an attempt ran under -----------------------------------------------------
@pytest.mark.parametrize("fast", [True, False], ids=["first try", "full path"])
def test_an_attempts_events_carry_the_policy_it_ran_under(fast: bool) -> None:
    source = PolicySource(RetryPolicy(version="1"))
    calls = 0

    def work(**kwargs: Any) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            source.set(RetryPolicy(version="2"))  # a reload lands while attempt 1 runs
            raise TimeoutError("slow")
        return "ok"

    fn = work if fast else (lambda attempt: work())
    with capture_events() as captured:
        g = governor(policy=source, emit=captured.emit)
        assert g.call(fn, goal="g") == "ok"
        events = captured.events
    by_attempt = {(e.kind, e.attempt): e.policy_version for e in events if e.attempt}
    assert by_attempt[(EventKind.ATTEMPT_STARTED, 1)] == "1"
    assert by_attempt[(EventKind.ATTEMPT_FAILED, 1)] == "1"
    assert by_attempt[(EventKind.DECISION, 1)] == "1"
    assert by_attempt[(EventKind.ATTEMPT_STARTED, 2)] == "2"
    assert by_attempt[(EventKind.ATTEMPT_SUCCEEDED, 2)] == "2"


def test_a_kill_switch_flipped_during_attempt_1_still_stops_the_task() -> None:
    def work() -> None:
        g.source.kill()
        raise TimeoutError("slow")

    with capture_events() as captured:
        g = governor(emit=captured.emit)
        with pytest.raises(TaskStopped) as stopped:
            g.call(work, goal="g")
        decision = captured.of_kind(EventKind.DECISION)[-1]
    assert "kill switch" in stopped.value.verdict.reason
    assert decision.policy_version == "1"  # the version attempt 1 ran under


# -- hooks that raise or hang ------------------------------------------------------------
def _outcome(captured: Any) -> TaskOutcome:
    (finished,) = captured.of_kind(EventKind.TASK_FINISHED)
    return finished.outcome


def test_a_verify_that_raises_stops_the_task_with_the_reason_and_keeps_the_outcome() -> None:
    def broken_verify(order: str) -> bool:
        raise RuntimeError("ledger API is down")

    with capture_events() as captured:
        g = governor(emit=captured.emit)
        charge = g.side_effect("payments", verify=broken_verify)(
            lambda order: (_ for _ in ()).throw(TimeoutError("timed out"))
        )
        with pytest.raises(GaveUp) as stopped:
            g.call(lambda: charge("A-1"), goal="charge")
        outcome = _outcome(captured)
    assert "verify failed (RuntimeError: ledger API is down)" in stopped.value.verdict.reason
    assert outcome is TaskOutcome.FAILED


def test_an_async_verify_that_hangs_is_bounded_and_the_outcome_recorded() -> None:
    async def hangs(order: str) -> bool:
        await asyncio.Event().wait()
        return True

    async def charge(order: str) -> None:
        raise TimeoutError("timed out")

    with capture_events() as captured:
        g = Governor(rng=random.Random(1), emit=captured.emit, hook_timeout_s=0.05)
        pay = g.side_effect("payments", verify=hangs)(charge)
        with pytest.raises(GaveUp) as stopped:
            asyncio.run(g.acall(lambda: pay("A-1"), goal="charge"))
        outcome = _outcome(captured)
    assert "verify failed (TimeoutError: verify did not answer within 0.05 s)" in (
        stopped.value.verdict.reason
    )
    assert outcome is TaskOutcome.FAILED


def test_a_rollback_that_raises_is_recorded_and_the_task_goes_on() -> None:
    runs = 0

    def broken_rollback(item: str) -> None:
        raise RuntimeError("cannot release")

    with capture_events() as captured:
        g = governor(emit=captured.emit)
        reserve = g.side_effect("inventory.reserve", rollback=broken_rollback)(lambda item: "r-1")

        def task() -> str:
            nonlocal runs
            runs += 1
            reserve("sku")
            if runs == 1:
                raise TimeoutError("model timed out")
            return "ok"

        assert g.call(task, goal="g") == "ok"
        rollbacks = [e.side_effects[0].rollback for e in captured.of_kind(EventKind.SIDE_EFFECT)]
        outcome = _outcome(captured)
    assert "failed" in rollbacks
    assert outcome is TaskOutcome.SUCCEEDED


class Raising:
    blocking = False

    def send(self, package: object) -> None:
        raise ValueError("pager rejected the package")


class Hanging:
    blocking = True

    def __init__(self) -> None:
        self.release = threading.Event()

    def send(self, package: object) -> None:
        self.release.wait(5)


@pytest.mark.parametrize("is_async", [False, True], ids=["call", "acall"])
def test_a_channel_that_raises_keeps_the_handoff_and_the_outcome(is_async: bool) -> None:
    with capture_events() as captured:
        g = governor(emit=captured.emit, handoff=Raising())
        work = lambda: (_ for _ in ()).throw(PermissionError("denied"))  # noqa: E731
        with pytest.raises(HandedOff):
            if is_async:

                async def task() -> None:
                    work()

                asyncio.run(g.acall(task, goal="g"))
            else:
                g.call(work, goal="g")
        (handoff,) = captured.of_kind(EventKind.HANDOFF)
        outcome = _outcome(captured)
    assert "channel failed: pager rejected the package" in handoff.decision_reason
    assert outcome is TaskOutcome.HANDED_OFF


def test_a_channel_that_hangs_is_bounded_in_a_plain_call() -> None:
    channel = Hanging()
    with capture_events() as captured:
        g = Governor(rng=random.Random(1), emit=captured.emit, handoff=channel, hook_timeout_s=0.05)
        with pytest.raises(HandedOff):
            g.call(lambda: (_ for _ in ()).throw(PermissionError("denied")), goal="g")
        channel.release.set()
        (handoff,) = captured.of_kind(EventKind.HANDOFF)
        outcome = _outcome(captured)
    assert "channel did not answer within 0.05 s" in handoff.decision_reason
    assert outcome is TaskOutcome.HANDED_OFF


def test_an_async_channel_that_hangs_is_bounded() -> None:
    channel = Hanging()
    with capture_events() as captured:
        g = Governor(rng=random.Random(1), emit=captured.emit, handoff=channel, hook_timeout_s=0.05)

        async def task() -> None:
            raise PermissionError("denied")

        with pytest.raises(HandedOff):
            asyncio.run(g.acall(task, goal="g"))
        channel.release.set()
        (handoff,) = captured.of_kind(EventKind.HANDOFF)
        outcome = _outcome(captured)
    assert "channel did not answer within 0.05 s" in handoff.decision_reason
    assert outcome is TaskOutcome.HANDED_OFF


def test_an_async_callback_channel_gets_the_package() -> None:
    got: list[object] = []

    async def page(package: object) -> None:
        got.append(package)

    g = governor(handoff=CallbackChannel(page))
    with pytest.raises(HandedOff):
        g.call(lambda: (_ for _ in ()).throw(PermissionError("denied")), goal="g")
    assert len(got) == 1
