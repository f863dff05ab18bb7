"""LangGraph's ``interrupt()`` inside a tool, seen by ``RetryLensCallbackHandler``: a pause,
not a failure. The tool's task records no failed attempt and no give-up while the graph
waits for a person, and when the graph resumes, the tool's second run continues the same
task to its success (not a separate task). Real LangGraph (StateGraph, in-memory
checkpointer) and a real LangChain tool; events captured."""

from __future__ import annotations

import asyncio
import random
from typing import TypedDict

from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from retrylens.schemas import Decision, EventKind, TaskOutcome
from retrylens.sdk import Governor
from retrylens.sdk.integrations.langchain import RetryLensCallbackHandler
from retrylens.testing import capture_events


class State(TypedDict, total=False):
    refund: str
    approved: str


@tool
def approve_refund(refund: str) -> str:
    """Ask a person to approve a refund."""
    return str(interrupt(f"approve refund {refund}?"))


def _node(state: State) -> State:
    return {"approved": approve_refund.invoke({"refund": state["refund"]})}


async def _anode(state: State) -> State:
    return {"approved": await approve_refund.ainvoke({"refund": state["refund"]})}


def _graph(node):  # noqa: ANN001, ANN202
    graph = StateGraph(State)
    graph.add_node("approve", node)
    graph.add_edge(START, "approve")
    graph.add_edge("approve", END)
    return graph.compile(checkpointer=InMemorySaver())


def _tool_events(events: list) -> list:  # noqa: ANN001
    return [e for e in events if e.dependency == "approve_refund" or e.kind == EventKind.TASK_STARTED]


def _assert_one_paused_then_finished_task(during: list, events: list) -> None:  # noqa: ANN001
    assert EventKind.ATTEMPT_FAILED not in [e.kind for e in during]
    assert all(e.decision is Decision.NONE for e in during)
    assert EventKind.ATTEMPT_FAILED not in [e.kind for e in events]
    assert [e for e in events if e.decision is Decision.GIVE_UP] == []
    assert len({e.task_id for e in events}) == 1, "the resumed tool started a task of its own"
    assert [e.dependency for e in events if e.kind == EventKind.ATTEMPT_SUCCEEDED] == ["approve_refund"]
    finished = [e for e in events if e.outcome is not None]
    assert [e.outcome for e in finished] == [TaskOutcome.SUCCEEDED]


def test_an_interrupt_in_a_tool_is_a_pause_and_the_resume_continues_the_task() -> None:
    config = {"configurable": {"thread_id": "refund-tool-1"}}
    with capture_events() as captured:
        handler = RetryLensCallbackHandler(Governor(rng=random.Random(2), emit=captured.emit))
        config["callbacks"] = [handler]
        graph = _graph(_node)
        paused = graph.invoke({"refund": "R-9"}, config)
        assert "__interrupt__" in paused
        during = captured.events
        done = graph.invoke(Command(resume="yes"), config)
        handler.close()
        events = captured.events
    assert done["approved"] == "yes"
    _assert_one_paused_then_finished_task(during, events)


def test_an_interrupt_in_an_async_tool_is_a_pause_too() -> None:
    config = {"configurable": {"thread_id": "refund-tool-2"}}

    async def run() -> tuple[dict, list, dict]:
        graph = _graph(_anode)
        paused = await graph.ainvoke({"refund": "R-10"}, config)
        during = captured.events
        done = await graph.ainvoke(Command(resume="no"), config)
        return paused, during, done

    with capture_events() as captured:
        handler = RetryLensCallbackHandler(Governor(rng=random.Random(2), emit=captured.emit))
        config["callbacks"] = [handler]
        paused, during, done = asyncio.run(run())
        handler.close()
        events = captured.events
    assert "__interrupt__" in paused and done["approved"] == "no"
    _assert_one_paused_then_finished_task(during, events)


def test_a_tool_that_really_fails_is_still_a_failed_attempt() -> None:
    """The pause is LangGraph's control flow only: an error of the tool's own is recorded."""

    @tool
    def broken(refund: str) -> str:
        """Always fails."""
        raise RuntimeError(f"refund {refund} service down")

    def node(state: State) -> State:
        try:
            return {"approved": broken.invoke({"refund": state["refund"]})}
        except RuntimeError:
            return {"approved": "failed"}

    config = {"configurable": {"thread_id": "refund-tool-3"}}
    with capture_events() as captured:
        handler = RetryLensCallbackHandler(Governor(rng=random.Random(2), emit=captured.emit))
        config["callbacks"] = [handler]
        assert _graph(node).invoke({"refund": "R-11"}, config)["approved"] == "failed"
        handler.close()
        events = captured.events
    assert EventKind.ATTEMPT_FAILED in [e.kind for e in events]
