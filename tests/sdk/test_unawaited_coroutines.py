"""A coroutine user code creates and drops without awaiting, inside a governed call, is
caught: the call raises :class:`~retrylens.errors.CoroutineNeverAwaited` naming it and the
task is recorded failed, never succeeded (issue 35 item 2).

``charge(10)`` without ``await`` builds a coroutine and throws it away: nothing was
charged, and Python only prints "coroutine 'charge' was never awaited" when it is
collected. Inside a governed attempt that warning is the governor's to act on.
"""

from __future__ import annotations

import asyncio
import random
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from retrylens.errors import CoroutineNeverAwaited
from retrylens.schemas import ErrorType, EventKind, TaskOutcome
from retrylens.sdk import Governor
from retrylens.testing import CapturedEvents, capture_events

START = datetime(2026, 12, 1, tzinfo=UTC)

charged: list[int] = []


async def charge(amount: int) -> str:
    charged.append(amount)
    return "ch_1"


@pytest.fixture(autouse=True)
def _no_charges() -> Iterator[None]:
    charged.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # Python's own warning, printed too
        yield


@pytest.fixture
def captured() -> Iterator[CapturedEvents]:
    with capture_events() as events:
        yield events


@pytest.fixture
def g(captured: CapturedEvents) -> Governor:
    return Governor.with_virtual_time(start=START, emit=captured.emit, rng=random.Random(3))


def failed_not_succeeded(captured: CapturedEvents) -> None:
    assert EventKind.ATTEMPT_SUCCEEDED.value not in captured.kinds()
    assert list(captured.outcomes().values()) == [TaskOutcome.FAILED]


def test_a_coroutine_dropped_in_a_plain_call_fails_the_task(
    g: Governor, captured: CapturedEvents
) -> None:
    def agent() -> str:
        charge(10)  # the await is missing: nothing is charged
        return "charged"

    with pytest.raises(CoroutineNeverAwaited, match="'charge'") as raised:
        g.call(agent, goal="charge the order")
    assert raised.value.coroutines == ("charge",)
    assert charged == []
    failed_not_succeeded(captured)
    [failed] = captured.of_kind(EventKind.ATTEMPT_FAILED)  # told on the record, too
    assert failed.error_type == ErrorType.LOGIC and not failed.retryable
    assert "coroutine 'charge'" in failed.error_detail.message


def test_a_coroutine_dropped_in_an_async_call_fails_the_task(
    g: Governor, captured: CapturedEvents
) -> None:
    async def agent() -> str:
        charge(10)
        await asyncio.sleep(0)
        return "charged"

    with pytest.raises(CoroutineNeverAwaited, match="'charge'"):
        asyncio.run(g.acall(agent, goal="charge the order"))
    assert charged == []
    failed_not_succeeded(captured)


def test_a_coroutine_dropped_by_a_step_fails_the_step_and_the_task(
    g: Governor, captured: CapturedEvents
) -> None:
    ran: list[str] = []

    def pay() -> str:
        charge(10)
        return "paid"

    def agent() -> str:
        g.step("pay", pay)
        ran.append("after the step")
        return "done"

    with pytest.raises(CoroutineNeverAwaited):
        g.call(agent, goal="pay")
    assert ran == [] and charged == []
    failed_not_succeeded(captured)


def test_a_coroutine_dropped_on_a_retry_is_not_retried_again(
    g: Governor, captured: CapturedEvents
) -> None:
    tries: list[int] = []

    def agent() -> str:
        tries.append(1)
        if len(tries) == 1:
            raise TimeoutError("slow upstream")
        charge(10)
        return "charged"

    with pytest.raises(CoroutineNeverAwaited):
        g.call(agent, goal="charge the order")
    assert len(tries) == 2  # a usage error: retrying it cannot help
    failed_not_succeeded(captured)


def test_a_governed_function_that_drops_a_coroutine_is_refused(
    g: Governor, captured: CapturedEvents
) -> None:
    @g.governed
    def checkout(amount: int) -> str:
        charge(amount)
        return "ok"

    with pytest.raises(CoroutineNeverAwaited):
        checkout(5)
    failed_not_succeeded(captured)


def test_awaited_and_kept_coroutines_are_not_refused(
    g: Governor, captured: CapturedEvents
) -> None:
    async def agent() -> str:
        first = await charge(1)
        later = charge(2)  # created here, awaited further down: fine
        await asyncio.sleep(0)
        return first + await later

    assert asyncio.run(g.acall(agent, goal="charge twice")) == "ch_1ch_1"
    assert charged == [1, 2]
    assert list(captured.outcomes().values()) == [TaskOutcome.SUCCEEDED]


def test_outside_a_governed_call_python_warns_as_usual(g: Governor) -> None:
    def script() -> None:
        charge(10)

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        script()
    assert [str(w.message) for w in seen] == ["coroutine 'charge' was never awaited"]
    assert seen[0].filename == __file__  # still pointing at the user's code, not the SDK's
