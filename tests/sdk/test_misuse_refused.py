"""Misuse is refused loudly, never recorded as a success (issue 35 item 2).

Every decorator of the SDK works written bare and called; an awaitable handed back to a
plain (sync) call, step or tool — nothing of it ran — raises
:class:`~retrylens.errors.AsyncToolInPlainCall` at once (no retry) and the task is
recorded failed, never succeeded.
"""

from __future__ import annotations

import asyncio
import random
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from retrylens.errors import AsyncToolInPlainCall
from retrylens.schemas import EventKind, TaskOutcome
from retrylens.sdk import Governor
from retrylens.testing import CapturedEvents, capture_events

START = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def captured() -> Iterator[CapturedEvents]:
    with capture_events() as events:
        yield events


@pytest.fixture
def g(captured: CapturedEvents) -> Governor:
    return Governor.with_virtual_time(start=START, emit=captured.emit, rng=random.Random(3))


def _no_success(captured: CapturedEvents) -> None:
    assert EventKind.ATTEMPT_SUCCEEDED.value not in captured.kinds()
    assert TaskOutcome.SUCCEEDED not in captured.outcomes().values()
    assert list(captured.outcomes().values()) == [TaskOutcome.FAILED]


# -- decorators written bare and called ----------------------------------------------------
def test_a_bare_tool_decorator_runs_the_tool_as_a_step(g: Governor) -> None:
    calls: list[str] = []

    @g.tool
    def lookup(order: str) -> str:
        calls.append(order)
        return f"order {order}"

    assert g.call(lambda: lookup("A1"), goal="look it up") == "order A1"
    assert calls == ["A1"]
    assert lookup.__name__ == "lookup"


def test_a_called_tool_decorator_with_and_without_a_name_runs_the_tool(g: Governor) -> None:
    @g.tool()
    def first() -> int:
        return 1

    @g.tool("second", dependency="search")
    def second() -> int:
        return 2

    assert g.call(lambda: first() + second(), goal="add") == 3


def test_a_bare_async_tool_decorator_is_awaited_as_a_step(g: Governor) -> None:
    @g.tool
    async def lookup(order: str) -> str:
        await asyncio.sleep(0)
        return f"order {order}"

    async def agent() -> str:
        return await lookup("B2")

    assert asyncio.run(g.acall(agent, goal="look it up")) == "order B2"


def test_a_bare_governed_decorator_governs_sync_and_async_functions(g: Governor) -> None:
    @g.governed
    def plain(x: int) -> int:
        return x + 1

    @g.governed
    async def awaited(x: int) -> int:
        return x + 2

    assert plain(1) == 2
    assert asyncio.run(awaited(1)) == 3


def test_a_bare_side_effect_decorator_is_named_after_the_function(
    g: Governor, captured: CapturedEvents
) -> None:
    charged: list[int] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")

        @g.side_effect
        def charge(amount: int) -> str:
            charged.append(amount)
            return "ch_1"

    assert g.call(lambda: charge(10), goal="charge") == "ch_1"
    assert charged == [10]
    tools = [s.tool for e in captured.of_kind(EventKind.SIDE_EFFECT) for s in e.side_effects]
    assert tools == [
        "test_a_bare_side_effect_decorator_is_named_after_the_function.<locals>.charge"
    ]


@pytest.mark.parametrize("decorator", ["tool", "side_effect", "governed"])
def test_a_decorator_given_something_not_callable_says_so_at_once(
    g: Governor, decorator: str
) -> None:
    decorate = getattr(g, decorator)
    made = decorate("name") if decorator != "governed" else decorate()
    with pytest.raises(TypeError, match=f"@governor.{decorator} decorates a function"):
        made(42)


# -- an awaitable where a value was due ---------------------------------------------------
def test_an_async_function_in_a_plain_call_is_refused_and_recorded_failed(
    g: Governor, captured: CapturedEvents
) -> None:
    ran: list[str] = []

    async def agent() -> str:
        ran.append("agent")
        return "done"

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine was never awaited" on top
        with pytest.raises(AsyncToolInPlainCall, match="acall"):
            g.call(agent, goal="plan")
    assert ran == []
    _no_success(captured)


def test_an_async_side_effect_called_through_a_plain_call_charges_nothing_and_is_refused(
    g: Governor, captured: CapturedEvents
) -> None:
    charged: list[int] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")

        @g.side_effect("payments.charge", unsafe=True)
        async def charge(amount: int) -> str:
            charged.append(amount)
            return "ch_1"

    with pytest.raises(AsyncToolInPlainCall):
        g.call(charge, 10, goal="charge")
    assert charged == []
    _no_success(captured)


def test_a_sync_governed_function_returning_a_coroutine_is_refused_once_not_retried(
    g: Governor, captured: CapturedEvents
) -> None:
    async def later() -> str:
        return "late"

    tries: list[int] = []

    @g.governed
    def agent() -> Any:
        tries.append(1)
        if len(tries) == 1:
            raise TimeoutError("first try times out")  # the loop (not the fast path) runs
        return later()

    with pytest.raises(AsyncToolInPlainCall):
        agent()
    assert len(tries) == 2
    _no_success(captured)


def test_a_sync_tool_returning_a_coroutine_in_a_plain_call_is_refused(
    g: Governor, captured: CapturedEvents
) -> None:
    async def later() -> str:
        return "late"

    @g.tool
    def lookup() -> Any:
        return later()

    with pytest.raises(AsyncToolInPlainCall):
        g.call(lambda: lookup(), goal="look it up")
    _no_success(captured)


def test_a_run_refuses_to_record_an_awaitable_as_its_success(
    g: Governor, captured: CapturedEvents
) -> None:
    """Adapters and ``run.attempts()`` loops record through ``succeed``: it refuses too."""

    async def later() -> str:
        return "late"

    with pytest.raises(AsyncToolInPlainCall), g.start("adapter task", agent="adapter") as run:
        attempt = run.begin()
        run.succeed(attempt, later())
    _no_success(captured)


def test_a_langgraph_node_returning_a_coroutine_in_a_sync_graph_is_refused(
    g: Governor, captured: CapturedEvents
) -> None:
    """Adapters record through the run as well: a sync node that hands back a coroutine
    (an ``async def`` helper called without ``await``) is refused, not a success."""
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    from retrylens.sdk.integrations.langgraph import governed_node

    class State(TypedDict):
        answer: str

    async def fetch() -> dict[str, str]:
        return {"answer": "late"}

    def node(state: State) -> Any:
        return fetch()  # the await was forgotten

    graph = StateGraph(State)
    graph.add_node("fetch", governed_node(node, g, agent="research"))
    graph.add_edge(START, "fetch")
    graph.add_edge("fetch", END)
    with pytest.raises(AsyncToolInPlainCall):
        graph.compile().invoke({"answer": ""})
    _no_success(captured)
