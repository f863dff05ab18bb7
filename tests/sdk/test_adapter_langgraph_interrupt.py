"""LangGraph human-in-the-loop: ``interrupt()`` inside a governed node is a pause, not a
failure — no failed attempt, no hand-off — and the resumed node continues the same task.
Real LangGraph (StateGraph + the in-memory checkpointer), events captured."""

from __future__ import annotations

import asyncio
import random
from typing import TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from retrylens.schemas import EventKind, TaskOutcome
from retrylens.sdk import Governor
from retrylens.sdk.integrations.langgraph import governed_node
from retrylens.testing import capture_events


class State(TypedDict, total=False):
    refund: str
    approved: str


def _approve(state: State) -> State:
    answer = interrupt(f"approve refund {state['refund']}?")
    return {"approved": answer}


async def _aapprove(state: State) -> State:
    answer = interrupt(f"approve refund {state['refund']}?")
    return {"approved": answer}


def _graph(node):  # noqa: ANN001, ANN202
    graph = StateGraph(State)
    graph.add_node("approve", node)
    graph.add_edge(START, "approve")
    graph.add_edge("approve", END)
    return graph.compile(checkpointer=InMemorySaver())


def test_an_interrupt_pauses_the_task_and_the_resume_continues_it() -> None:
    config = {"configurable": {"thread_id": "refund-1"}}
    with capture_events() as captured:
        g = Governor(rng=random.Random(2), emit=captured.emit)
        graph = _graph(governed_node(_approve, g))
        paused = graph.invoke({"refund": "R-9"}, config)
        assert "__interrupt__" in paused
        during = captured.kinds()
        done = graph.invoke(Command(resume="yes"), config)
        events = captured.events
    assert done["approved"] == "yes"
    assert "attempt_failed" not in during and "handoff" not in during and "decision" not in during
    kinds = [e.kind for e in events]
    assert EventKind.ATTEMPT_FAILED not in kinds and EventKind.HANDOFF not in kinds
    assert len({e.task_id for e in events}) == 1  # the resumed node continued the same task
    (finished,) = [e for e in events if e.kind == EventKind.TASK_FINISHED] or [
        e for e in events if e.outcome is not None
    ]
    assert finished.outcome is TaskOutcome.SUCCEEDED


def test_an_async_node_interrupt_is_a_pause_too() -> None:
    config = {"configurable": {"thread_id": "refund-2"}}

    async def run() -> tuple[dict, dict]:
        graph = _graph(governed_node(_aapprove, g))
        paused = await graph.ainvoke({"refund": "R-10"}, config)
        done = await graph.ainvoke(Command(resume="no"), config)
        return paused, done

    with capture_events() as captured:
        g = Governor(rng=random.Random(2), emit=captured.emit)
        paused, done = asyncio.run(run())
        events = captured.events
    assert "__interrupt__" in paused and done["approved"] == "no"
    assert EventKind.ATTEMPT_FAILED not in [e.kind for e in events]
    assert len({e.task_id for e in events}) == 1
