"""governed_node in a real LangGraph StateGraph whose nodes fail on chosen calls.

Assertions read the stored metrics (emitter → processor → ClickHouse) or the emitted events.
"""

from __future__ import annotations

import asyncio
from typing import TypedDict

import pytest
from adapter_store import recording
from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy

from retrylens.schemas import Decision, EventKind, TaskOutcome
from retrylens.sdk import PolicySource
from retrylens.sdk.core.state import Attempt
from retrylens.sdk.integrations.langgraph import governed_node
from retrylens.store import EventStore

pytestmark = pytest.mark.clickhouse


class State(TypedDict, total=False):
    question: str
    facts: str
    answer: str


def _flaky(failures: int, error: type[Exception] = ConnectionResetError):  # noqa: ANN202
    calls: list[int] = []

    def fetch(state: State) -> State:
        calls.append(1)
        if len(calls) <= failures:
            raise error(f"search backend failed (call {len(calls)})")
        return {"facts": f"facts about {state['question']}"}

    fetch.calls = calls  # type: ignore[attr-defined]
    return fetch


def _answer(state: State) -> State:
    return {"answer": f"answer from {state['facts']}"}


def _graph(fetch_node, answer_node):  # noqa: ANN001, ANN202
    graph = StateGraph(State)
    graph.add_node("fetch", fetch_node)
    graph.add_node("answer", answer_node)
    graph.add_edge(START, "fetch")
    graph.add_edge("fetch", "answer")
    graph.add_edge("answer", END)
    return graph.compile()


def test_a_node_failing_twice_is_retried_by_the_governor_within_the_langgraph_policy(
    store: EventStore,
) -> None:
    with recording("lg-retry") as rec:
        g = rec.governor
        app = _graph(
            governed_node(_flaky(2), g, retry_policy=RetryPolicy(max_attempts=4), agent="research"),
            governed_node(_answer, g, agent="research"),
        )
        out = app.invoke({"question": "tides"})
        metrics = rec.store(store)
        decisions = rec.captured.decisions()
    assert out["answer"] == "answer from facts about tides"
    assert (metrics.tasks, metrics.calls, metrics.failures) == (2, 4, 2)
    assert (metrics.retries, metrics.retry_successes, metrics.tasks_recovered) == (2, 1, 1)
    assert metrics.retry_rate == 0.5
    assert decisions == [Decision.RETRY_BACKOFF, Decision.RETRY_BACKOFF]


def test_max_attempts_and_retry_on_of_the_langgraph_policy_bound_the_retries() -> None:
    """LangGraph's default ``retry_on`` retries connection errors, never a ValueError."""
    with recording() as rec:
        g = rec.governor
        capped = _flaky(5)
        with pytest.raises(ConnectionResetError):
            _graph(
                governed_node(capped, g, retry_policy=RetryPolicy(max_attempts=2)),
                _answer,
            ).invoke({"question": "q"})
        not_retried = _flaky(5, ValueError)
        with pytest.raises(ValueError):
            _graph(
                governed_node(not_retried, g, retry_policy=RetryPolicy()),  # LangGraph's default
                _answer,
            ).invoke({"question": "q"})
        events = rec.events()
    decisions = [
        (e.attempt, e.decision, e.decision_reason) for e in events if e.kind is EventKind.DECISION
    ]
    assert [(n, d) for n, d, _ in decisions] == [
        (1, Decision.RETRY_BACKOFF),
        (2, Decision.GIVE_UP),
        (1, Decision.GIVE_UP),
    ]
    assert "max_attempts=2" in decisions[1][2] and "retry_on" in decisions[2][2]
    assert (len(capped.calls), len(not_retried.calls)) == (2, 1)
    assert [e.outcome for e in events if e.kind is EventKind.TASK_FINISHED] == [
        TaskOutcome.FAILED
    ] * 2


def test_the_governor_stops_retries_the_langgraph_policy_would_allow() -> None:
    source = PolicySource()
    source.kill(agent="research")
    with recording(policy=source) as rec:
        fetch = _flaky(3)
        app = _graph(
            governed_node(
                fetch, rec.governor, retry_policy=RetryPolicy(max_attempts=5), agent="research"
            ),
            _answer,
        )
        with pytest.raises(ConnectionResetError):
            app.invoke({"question": "q"})
        decisions = rec.captured.of_kind(EventKind.DECISION)
    assert len(fetch.calls) == 1
    assert "kill switch" in (decisions[0].decision_reason or "")


def test_an_async_node_gets_the_attempt_and_its_rebuilt_context() -> None:
    seen: list[tuple[int, int]] = []

    async def draft(state: State, attempt: Attempt) -> State:
        seen.append((attempt.number, len(attempt.messages)))
        if attempt.number == 1:
            raise ConnectionResetError("connection reset by peer")
        return {"facts": "drafted"}

    with recording() as rec:
        app = _graph(governed_node(draft, rec.governor, agent="writer"), _answer)
        out = asyncio.run(app.ainvoke({"question": "q"}))
        outcomes = list(rec.captured.outcomes().values())
    assert out["answer"] == "answer from drafted"
    assert [n for n, _ in seen] == [1, 2] and all(m >= 1 for _, m in seen)
    assert outcomes == [TaskOutcome.SUCCEEDED]
