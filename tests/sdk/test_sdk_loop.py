"""One decision loop, two drivers: every feature behaves the same under ``call`` and ``acall``.

The reproductions of issue 20 (an ``async def`` verify truth-tested instead of awaited, an
async step that re-ran the whole task) and a parity table: each scenario runs through the
sync and the asyncio driver and must emit the same events, ids and times aside.
"""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from retrylens.errors import HandedOff, TaskStopped
from retrylens.schemas import Decision, EventKind, SideEffectStatus, TaskOutcome
from retrylens.sdk import CallbackChannel, Governor
from retrylens.sdk.core.policy import RetryPolicy, TaskBudget
from retrylens.testing import capture_events

START = datetime(2024, 5, 1, tzinfo=UTC)


def governor(**kwargs: Any) -> Governor:
    kwargs.setdefault("rng", random.Random(3))
    return Governor.with_virtual_time(start=START, **kwargs)


# -- the reproductions -----------------------------------------------------------
def test_an_async_verify_is_awaited_not_truth_tested() -> None:
    ledger: list[str] = []

    async def has_entry(order: str) -> bool:
        await asyncio.sleep(0)
        return order in ledger

    with capture_events() as captured:
        g = governor(emit=captured.emit)

        @g.side_effect("payments", verify=has_entry)
        async def charge(order: str) -> None:
            raise TimeoutError("timed out before reaching the provider")

        with pytest.raises(TaskStopped) as stopped:
            asyncio.run(g.acall(lambda: charge("A-17"), goal="charge A-17"))
        statuses = [e.side_effects[0].status for e in captured.of_kind(EventKind.SIDE_EFFECT)]
        (finished,) = captured.of_kind(EventKind.TASK_FINISHED)
    assert ledger == []
    assert SideEffectStatus.COMMITTED not in statuses
    assert finished.outcome is not TaskOutcome.SUCCEEDED
    assert not inspect.iscoroutine(stopped.value.last_error)


def test_an_async_verify_that_confirms_the_effect_commits_it_once() -> None:
    ledger: list[str] = []

    async def has_entry(order: str) -> bool:
        return order in ledger

    g = governor()

    @g.side_effect("payments", verify=has_entry)
    async def charge(order: str) -> None:
        ledger.append(order)
        raise TimeoutError("timed out after the provider booked it")

    assert asyncio.run(g.acall(lambda: charge("A-17"), goal="charge A-17")) is None
    assert ledger == ["A-17"]


def test_an_async_step_is_retried_in_place_not_the_whole_task() -> None:
    runs, lookups = 0, 0

    async def lookup(order: str) -> str:
        nonlocal lookups
        lookups += 1
        if lookups == 1:
            raise TimeoutError("orders service timed out")
        return f"{order}: shipped"

    g = governor()

    async def task() -> str:
        nonlocal runs
        runs += 1
        return await g.step("lookup", lookup, "A-17", dependency="orders")

    assert asyncio.run(g.acall(task, goal="where is A-17")) == "A-17: shipped"
    assert (runs, lookups) == (1, 2)


def test_astep_retries_a_lambda_returning_a_coroutine_in_place() -> None:
    lookups = 0

    async def lookup() -> str:
        nonlocal lookups
        lookups += 1
        if lookups < 3:
            raise ConnectionError("reset")
        return "found"

    g = governor()

    async def task() -> str:
        return await g.astep("lookup", lambda: lookup())

    assert asyncio.run(g.acall(task, goal="g")) == "found"
    assert lookups == 3


def test_a_sync_call_runs_an_async_verify_instead_of_truth_testing_it() -> None:
    ledger: list[str] = []

    async def has_entry(order: str) -> bool:
        return order in ledger

    g = governor()

    @g.side_effect("payments", verify=has_entry)
    def charge(order: str) -> None:
        raise TimeoutError("timed out before reaching the provider")

    with pytest.raises(TaskStopped):
        g.call(lambda: charge("A-17"), goal="charge A-17")
    assert ledger == []


def test_an_async_rollback_and_an_async_channel_are_awaited() -> None:
    released: list[str] = []
    packages: list[object] = []

    async def release(item: str) -> None:
        await asyncio.sleep(0)
        released.append(item)

    async def page(package: object) -> None:
        await asyncio.sleep(0)
        packages.append(package)

    g = governor(
        handoff=CallbackChannel(page),
        policy=RetryPolicy(budget=TaskBudget(max_attempts=2)),
    )
    reserve = g.side_effect("inventory.reserve", rollback=release)(lambda item: "r-1")

    async def task() -> str:
        reserve("sku-1")
        raise ValueError("the model's answer failed validation")

    with pytest.raises(HandedOff):
        asyncio.run(g.acall(task, goal="reserve"))
    assert released == ["sku-1"]
    assert len(packages) == 1


# -- parity: one scenario table, two drivers ---------------------------------------------
class Flaky:
    """A tool failing with ``errors`` in turn, then answering ``result``; sync or async."""

    def __init__(self, *errors: BaseException, result: Any = "ok") -> None:
        self.errors, self.result, self.calls = list(errors), result, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.result


def _sync_and_async(make: Callable[[Governor, bool], Callable[..., Any]]) -> list[list[tuple]]:
    """Run one scenario through ``call`` and ``acall``; the comparable part of each event."""
    out = []
    for is_async in (False, True):
        with capture_events() as captured:
            g = governor(emit=captured.emit, handoff=CallbackChannel(lambda p: None))
            fn = make(g, is_async)
            try:
                if is_async:

                    async def task() -> Any:
                        return await fn()  # noqa: B023 - awaited at once

                    asyncio.run(g.acall(task, goal="scenario", agent="a", dependency="m"))
                else:
                    g.call(fn, goal="scenario", agent="a", dependency="m")
            except TaskStopped:
                pass
            events = captured.events
        out.append(
            [
                (
                    e.kind,
                    e.attempt,
                    e.phase,
                    e.dependency,
                    e.decision,
                    e.decision_reason,
                    e.error_type,
                    e.outcome,
                    e.backoff_ms,
                    e.tokens_in,
                    e.policy_version,
                    tuple((s.tool, s.status, s.rollback) for s in e.side_effects),
                )
                for e in events
            ]
        )
    return out


def _body(
    g: Governor, is_async: bool, plan: Callable[[Governor, Callable], Any]
) -> Callable[..., Any]:
    """``plan(g, run)`` as the task: ``run(name, tool, ...)`` is a step or an awaited astep."""
    if not is_async:
        return lambda: plan(g, lambda name, tool, *a, **k: g.step(name, tool, *a, **k))

    async def body() -> Any:
        results = []

        def run(name: str, tool: Any, *a: Any, **k: Any) -> Any:
            results.append((name, tool, a, k))
            return None

        plan(g, run)  # collect the steps, then await them in order
        value = None
        for name, tool, a, k in results:

            async def atool(*args: Any, _t: Any = tool, **kwargs: Any) -> Any:
                return _t(*args, **kwargs)

            value = await g.astep(name, atool, *a, **k)
        return value

    return body


SCENARIOS: dict[str, Callable[[Governor, bool], Callable[..., Any]]] = {
    "first try": lambda g, a: _body(g, a, lambda g, run: run("s", Flaky())),
    "timeout then success": lambda g, a: _body(
        g, a, lambda g, run: run("s", Flaky(TimeoutError("slow")), dependency="orders")
    ),
    "two steps, the second flaky": lambda g, a: _body(
        g,
        a,
        lambda g, run: (run("read", Flaky()), run("write", Flaky(ConnectionError("reset")))),
    ),
    "gives up on a permanent error": lambda g, a: _body(
        g, a, lambda g, run: run("s", Flaky(*[PermissionError("denied")] * 9))
    ),
    "verified write": lambda g, a: _body(
        g,
        a,
        lambda g, run: run("book", Flaky(TimeoutError("after")), verify=lambda: True),
    ),
    "unsafe write hands off": lambda g, a: _body(
        g, a, lambda g, run: run("pay", Flaky(TimeoutError("after")), unsafe=True)
    ),
    "kill switch mid task": lambda g, a: _body(
        g,
        a,
        lambda g, run: (
            run("s", Flaky(TimeoutError("x"), TimeoutError("y"))) if not g.source.kill() else None
        ),
    ),
    "token budget from step usage": lambda g, a: _body(
        _with_budget(g),
        a,
        lambda g, run: (
            run("plan", Flaky(result={"usage": {"prompt_tokens": 40, "completion_tokens": 20}})),
            run("search", Flaky(*[TimeoutError("slow")] * 5)),
        ),
    ),
    "rollback of a failed effect": lambda g, a: _body(
        g,
        a,
        lambda g, run: run(
            "reserve", Flaky(ConnectionError("reset"), result="r-1"), rollback=lambda: None
        ),
    ),
    "pre-flight review hands off before the first attempt": lambda g, a: _body(
        _with_review(g), a, lambda g, run: run("s", Flaky())
    ),
}


def _with_budget(g: Governor) -> Governor:
    g.source.set(RetryPolicy(budget=TaskBudget(max_attempts=20, max_tokens=50)))
    return g


class _Review:
    def adapt(self, run: Any) -> None:
        run.state.review_first = True
        run.state.preflight_note = "risk 0.93"


def _with_review(g: Governor) -> Governor:
    g.preflight = _Review()
    return g


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_both_drivers_emit_the_same_events(name: str) -> None:
    sync_events, async_events = _sync_and_async(SCENARIOS[name])
    assert sync_events, "the scenario emitted nothing"
    assert sync_events == async_events


def test_the_parity_table_sees_a_difference() -> None:
    """The comparison is not vacuous: a different scenario gives different events."""
    one, _ = _sync_and_async(SCENARIOS["first try"])
    two, _ = _sync_and_async(SCENARIOS["timeout then success"])
    assert one != two


def test_decisions_in_the_parity_table_are_real() -> None:
    events, _ = _sync_and_async(SCENARIOS["gives up on a permanent error"])
    assert [e[4] for e in events if e[0] == EventKind.DECISION][-1] == Decision.HANDOFF_HUMAN
    events, _ = _sync_and_async(SCENARIOS["unsafe write hands off"])
    assert Decision.HANDOFF_HUMAN in [e[4] for e in events]


def test_the_budget_rollback_and_preflight_scenarios_do_what_they_say() -> None:
    events, _ = _sync_and_async(SCENARIOS["token budget from step usage"])
    assert (
        "token budget exhausted: 60/50" in [e[5] for e in events if e[0] == EventKind.DECISION][-1]
    )
    events, _ = _sync_and_async(SCENARIOS["rollback of a failed effect"])
    assert ("reserve", SideEffectStatus.ROLLED_BACK, "done") in [s for e in events for s in e[11]]
    events, _ = _sync_and_async(SCENARIOS["pre-flight review hands off before the first attempt"])
    assert (
        "pre-flight asked for human review"
        in [e[5] for e in events if e[0] == EventKind.DECISION][0]
    )
    assert EventKind.ATTEMPT_STARTED not in [e[0] for e in events]
