"""The LangChain callback handler, run with real langchain-core runnables and fake chat models.

Each test reads what reached the store (real emitter → ingest processor → ClickHouse →
``metrics_summary``) or the emitted events, never calls of a mock.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from adapter_store import recording
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import JsonOutputParser, StrOutputParser
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool

from retrylens.schemas import Decision, EventKind, TaskOutcome
from retrylens.sdk.integrations.langchain import RetryLensCallbackHandler
from retrylens.store import EventStore

pytestmark = pytest.mark.clickhouse


class FlakyChatModel(FakeListChatModel):
    """FakeListChatModel whose calls fail with a timeout for the prompts listed in ``fail``
    (each listed prompt fails ``times`` times before it answers)."""

    fail: dict[str, int] = {}

    def _call(self, messages: list[Any], *args: Any, **kwargs: Any) -> str:
        prompt = str(messages[-1].content)
        with _LOCK:
            left = self.fail.get(prompt, 0)
            if left:
                self.fail[prompt] = left - 1
        if left:
            raise TimeoutError(f"model timed out on {prompt!r}")
        return f"answer to {prompt}"


_LOCK = threading.Lock()


def _next(message: AIMessage) -> str:
    return f"follow up on {message.content}"


def test_three_clean_model_calls_in_a_chain_are_three_operations_without_retries(
    store: EventStore,
) -> None:
    model = FakeListChatModel(responses=["one", "two", "three"])
    chain = model | RunnableLambda(_next) | model | RunnableLambda(_next) | model
    with recording("lc-clean") as rec:
        handler = RetryLensCallbackHandler(rec.governor, agent="writer")
        assert chain.invoke("start", config={"callbacks": [handler]}).content == "three"
        metrics = rec.store(store)
        events = rec.events()
    assert (metrics.calls, metrics.tasks, metrics.retries, metrics.failures) == (3, 3, 0, 0)
    assert metrics.retry_rate == 0
    assert sorted(rec.captured.outcomes().values()) == [TaskOutcome.SUCCEEDED] * 3
    assert {e.attempt for e in events} == {1}


def test_a_model_call_failing_once_then_succeeding_is_one_retry_and_one_retry_success(
    store: EventStore,
) -> None:
    flaky = FlakyChatModel(responses=["unused"], fail={"what is 2+2": 1})
    chain = (
        RunnableLambda(lambda q: q)
        | flaky.with_retry(stop_after_attempt=3, wait_exponential_jitter=False)
        | StrOutputParser()
    )
    clean = FakeListChatModel(responses=["a summary"])
    with recording("lc-retry") as rec:
        handler = RetryLensCallbackHandler(rec.governor, agent="math")
        config = {"callbacks": [handler]}
        assert chain.invoke("what is 2+2", config=config) == "answer to what is 2+2"
        clean.invoke("summarise", config=config)
        metrics = rec.store(store)
        failed = rec.captured.of_kind(EventKind.ATTEMPT_FAILED)
        decisions = rec.captured.of_kind(EventKind.DECISION)
    assert (metrics.calls, metrics.tasks, metrics.failures) == (3, 2, 1)
    assert (metrics.retries, metrics.retry_successes, metrics.tasks_recovered) == (1, 1, 1)
    assert failed[0].error_type.value == "timeout" and failed[0].attempt == 1
    assert [d.decision for d in decisions] in (
        [Decision.RETRY_SAME],
        [Decision.RETRY_BACKOFF],
    )
    assert decisions[0].task_id == failed[0].task_id


def test_an_output_parser_error_fails_the_model_attempt_and_the_rerun_is_its_retry(
    store: EventStore,
) -> None:
    model = FakeListChatModel(responses=["Sure! The total is twelve.", '{"total": 12}'])
    chain = (model | JsonOutputParser()).with_retry(
        retry_if_exception_type=(OutputParserException,),
        stop_after_attempt=2,
        wait_exponential_jitter=False,
    )
    with recording("lc-parser") as rec:
        handler = RetryLensCallbackHandler(rec.governor, agent="extractor")
        assert chain.invoke("total?", config={"callbacks": [handler]}) == {"total": 12}
        metrics = rec.store(store)
        failed = rec.captured.of_kind(EventKind.ATTEMPT_FAILED)
    assert [(f.error_type.value, f.attempt) for f in failed] == [("schema_mismatch", 1)]
    assert (metrics.tasks, metrics.calls, metrics.retries, metrics.retry_successes) == (1, 2, 1, 1)


def test_a_tool_inside_a_lambda_is_its_own_operation_finished_without_close() -> None:
    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"order {order}: shipped"

    model = FakeListChatModel(responses=["order 7 shipped yesterday"])
    chain = RunnableLambda(lambda q: lookup.invoke(q)) | model
    with recording() as rec:
        handler = RetryLensCallbackHandler(rec.governor, agent="support")
        chain.invoke("7", config={"callbacks": [handler]})
        events = rec.events()  # no close()
    finished = {e.dependency: e.outcome for e in events if e.outcome is not None}
    assert finished == {"lookup": TaskOutcome.SUCCEEDED, "FakeListChatModel": TaskOutcome.SUCCEEDED}


def test_a_failed_call_replaced_by_a_fallback_gives_up_when_the_chain_goes_on() -> None:
    primary = FlakyChatModel(responses=["unused"], fail={"hello": 1})
    backup = FakeListChatModel(responses=["hi from the backup"])
    chain = RunnableLambda(lambda q: q) | primary.with_fallbacks([backup])
    with recording() as rec:
        handler = RetryLensCallbackHandler(rec.governor, agent="chat")
        assert (
            chain.invoke("hello", config={"callbacks": [handler]}).content == "hi from the backup"
        )
        decisions = rec.captured.of_kind(EventKind.DECISION)
        outcomes = sorted(rec.captured.outcomes().values())
    assert [d.decision for d in decisions] == [Decision.GIVE_UP]
    assert "went on without it" in (decisions[0].decision_reason or "")
    assert outcomes == [TaskOutcome.FAILED, TaskOutcome.SUCCEEDED]


def test_a_failed_top_level_call_retried_by_the_caller_is_a_retry_of_that_call() -> None:
    flaky = FlakyChatModel(responses=["unused"], fail={"ping": 1, "other": 1})
    config: Any = {"callbacks": []}
    with recording() as rec:
        config["callbacks"].append(RetryLensCallbackHandler(rec.governor, agent="loop"))
        for prompt in ("ping", "other"):
            with pytest.raises(TimeoutError):
                flaky.invoke(prompt, config=config)
        flaky.invoke("ping", config=config)  # the caller's retry of "ping", not of "other"
        config["callbacks"][0].close()
        events = rec.events()
    attempts: dict[str, list[tuple[int, str]]] = {}
    for e in events:
        if e.kind in (EventKind.ATTEMPT_FAILED, EventKind.ATTEMPT_SUCCEEDED, EventKind.DECISION):
            attempts.setdefault(e.task_id, []).append((e.attempt, e.kind.value))
    assert sorted(attempts.values()) == [
        [(1, "attempt_failed"), (1, "decision")],
        [(1, "attempt_failed"), (1, "decision"), (2, "attempt_succeeded")],
    ]
    assert [e.decision for e in events if e.kind is EventKind.DECISION][-1] is Decision.GIVE_UP


def test_concurrent_calls_with_retries_keep_every_operation_apart(store: EventStore) -> None:
    prompts = [f"question {i}" for i in range(16)]
    flaky = FlakyChatModel(responses=["unused"], fail={"question 3": 1, "question 11": 1})
    chain = RunnableLambda(lambda q: q) | flaky.with_retry(
        stop_after_attempt=2, wait_exponential_jitter=False
    )
    with recording("lc-batch") as rec:
        handler = RetryLensCallbackHandler(rec.governor, agent="batch")
        with ThreadPoolExecutor(8) as pool:  # callbacks arrive from eight threads at once
            answers = list(pool.map(lambda p: chain.invoke(p, {"callbacks": [handler]}), prompts))
        metrics = rec.store(store)
    assert [a.content for a in answers] == [f"answer to {p}" for p in prompts]
    assert (metrics.tasks, metrics.calls, metrics.failures) == (16, 18, 2)
    assert (metrics.retries, metrics.retry_successes, metrics.tasks_recovered) == (2, 2, 2)


def test_async_chains_are_recorded_like_sync_ones() -> None:
    flaky = FlakyChatModel(responses=["unused"], fail={"async question": 1})
    chain = RunnableLambda(lambda q: q) | flaky.with_retry(
        stop_after_attempt=2, wait_exponential_jitter=False
    )
    with recording() as rec:
        handler = RetryLensCallbackHandler(rec.governor, agent="async")
        answer = asyncio.run(chain.ainvoke("async question", {"callbacks": [handler]}))
        events = rec.events()
    assert answer.content == "answer to async question"
    assert [(e.attempt, e.kind.value) for e in events if e.kind is not EventKind.TASK_STARTED] == [
        (1, "attempt_started"),
        (1, "attempt_failed"),
        (1, "decision"),
        (2, "attempt_started"),
        (2, "attempt_succeeded"),
        (2, "task_finished"),
    ]


def test_a_parser_rejection_fails_only_the_model_call_it_parsed() -> None:
    first = FakeListChatModel(responses=["an outline"], name="planner")
    second = FakeListChatModel(responses=["not json at all"], name="writer")
    inner = second | JsonOutputParser()
    # nested two levels below the outer chain, so the parser error passes the planner's level
    chain = first | RunnableLambda(_next) | RunnableLambda(lambda text: inner.invoke(text))
    with recording() as rec:
        handler = RetryLensCallbackHandler(rec.governor, agent="pipeline")
        with pytest.raises(OutputParserException):
            chain.invoke("plan", config={"callbacks": [handler]})
        handler.close()
        events = rec.events()
    outcomes = {e.dependency: e.outcome for e in events if e.outcome is not None}
    failed = [
        (e.dependency, e.error_type.value) for e in events if e.kind is EventKind.ATTEMPT_FAILED
    ]
    assert outcomes == {"planner": TaskOutcome.SUCCEEDED, "writer": TaskOutcome.FAILED}
    assert failed == [("writer", "schema_mismatch")]
