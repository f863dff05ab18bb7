"""Where retries hide, and what ``observe()`` sees of each (the README's table is these tests).

Each set-up is the framework's obvious code against a local fake provider answering 429
twice and then an answer, with the REAL frameworks and the REAL openai client under them.
Without RetryLens nothing of the two retries is visible to the app; with
``retrylens.sdk.observe()`` every request the provider received is an attempt.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from datetime import UTC, datetime

import openai
import pytest
from fake_provider import RATE_LIMITED, FakeProvider, Reply, openai_completion

from retrylens.schemas import EventKind
from retrylens.sdk import Governor, observe
from retrylens.sdk.integrations.providers.observing import stop_observing
from retrylens.testing import CapturedEvents, capture_events

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def observed() -> Iterator[CapturedEvents]:
    with capture_events() as events:
        observe(emit=events.emit)
        try:
            yield events
        finally:
            stop_observing()


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(
        [RATE_LIMITED, RATE_LIMITED], default=Reply(body=openai_completion("ok"))
    ) as fake:
        yield fake


def tasks_and_attempts(events: CapturedEvents) -> tuple[int, int, int]:
    """(tasks, attempts, failed attempts) recorded."""
    failed = len(events.of_kind(EventKind.ATTEMPT_FAILED))
    attempts = failed + len(events.of_kind(EventKind.ATTEMPT_SUCCEEDED))
    return len({e.task_id for e in events.events}), attempts, failed


def test_a_provider_client_with_its_default_retries(observed, provider) -> None:
    client = openai.OpenAI(base_url=f"{provider.url}/v1", api_key="sk-test")  # max_retries=2
    client.chat.completions.create(model="m", messages=HI)
    assert provider.count == 3
    assert tasks_and_attempts(observed) == (1, 3, 2)


def test_a_tenacity_loop_around_the_default_client(observed, provider) -> None:
    import tenacity

    client = openai.OpenAI(base_url=f"{provider.url}/v1", api_key="sk-test")  # max_retries=2

    @tenacity.retry(stop=tenacity.stop_after_attempt(4))
    def ask() -> str:
        return (
            client.chat.completions.create(model="m", messages=HI).choices[0].message.content or ""
        )

    assert ask() == "ok"
    assert provider.count == 3  # the client recovered inside tenacity's first attempt
    assert tasks_and_attempts(observed) == (1, 3, 2)


def test_langchain_with_retry_over_a_client_that_does_not_retry(observed, provider) -> None:
    from langchain_core.runnables import RunnableLambda

    client = openai.OpenAI(base_url=f"{provider.url}/v1", api_key="sk-test", max_retries=0)
    ask = RunnableLambda(lambda _: client.chat.completions.create(model="m", messages=HI))
    ask.with_retry(stop_after_attempt=3, wait_exponential_jitter=False).invoke("hi")
    assert provider.count == 3
    # each re-invocation is its own client call: three one-attempt tasks, two failed (the
    # LangChain adapter's callback handler is what links them as one operation's retries)
    assert tasks_and_attempts(observed) == (3, 3, 2)


def test_langgraph_retry_policy_over_a_client_that_does_not_retry(observed, provider) -> None:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.types import RetryPolicy

    class State(TypedDict):
        answer: str

    client = openai.OpenAI(base_url=f"{provider.url}/v1", api_key="sk-test", max_retries=0)

    def model(state: State) -> State:
        reply = client.chat.completions.create(model="m", messages=HI)
        return {"answer": reply.choices[0].message.content or ""}

    graph = StateGraph(State)
    graph.add_node(
        "model",
        model,
        retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.01, jitter=False),
    )
    graph.add_edge(START, "model")
    graph.add_edge("model", END)
    assert graph.compile().invoke({"answer": ""})["answer"] == "ok"
    assert provider.count == 3
    assert tasks_and_attempts(observed) == (3, 3, 2)


def test_pydantic_ai_over_the_default_openai_client(observed, provider) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel(
        "m", provider=OpenAIProvider(base_url=f"{provider.url}/v1", api_key="sk-test")
    )
    assert Agent(model).run_sync("hi").output == "ok"
    assert provider.count == 3  # the client retried twice inside one model request
    assert tasks_and_attempts(observed) == (1, 3, 2)


def test_openai_agents_over_the_default_openai_client(observed, provider) -> None:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled

    set_tracing_disabled(True)  # the SDK would upload its traces to OpenAI
    try:
        client = openai.AsyncOpenAI(base_url=f"{provider.url}/v1", api_key="sk-test")
        agent = Agent(name="a", model=OpenAIChatCompletionsModel(model="m", openai_client=client))
        result = asyncio.run(Runner.run(agent, "hi"))
    finally:
        set_tracing_disabled(False)
    assert result.final_output == "ok"
    assert provider.count == 3
    assert tasks_and_attempts(observed) == (1, 3, 2)


@pytest.fixture
def governed() -> Iterator[tuple[CapturedEvents, Governor]]:
    """A governor on virtual time (its backoff never sleeps) and what it emitted."""
    with capture_events() as events:
        governor = Governor.with_virtual_time(
            start=datetime(2026, 12, 1, tzinfo=UTC), emit=events.emit, rng=random.Random(1)
        )
        yield events, governor


def test_a_governed_langgraph_node_owns_the_client_retries_under_it(provider, governed) -> None:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.types import RetryPolicy

    from retrylens.sdk.integrations.langgraph import governed_node

    class State(TypedDict):
        answer: str

    captured, governor = governed
    client = openai.OpenAI(base_url=f"{provider.url}/v1", api_key="sk-test")  # max_retries=2

    def model(state: State) -> State:
        reply = client.chat.completions.create(model="m", messages=HI)
        return {"answer": reply.choices[0].message.content or ""}

    graph = StateGraph(State)
    graph.add_node(
        "model", governed_node(model, governor, retry_policy=RetryPolicy(max_attempts=3))
    )
    graph.add_edge(START, "model")
    graph.add_edge("model", END)
    assert graph.compile().invoke({"answer": ""})["answer"] == "ok"
    assert provider.count == 3
    assert tasks_and_attempts(captured) == (1, 3, 2)


def test_a_governed_openai_agents_model_owns_the_client_retries_under_it(
    provider, governed
) -> None:
    from agents import (
        Agent,
        ModelSettings,
        OpenAIChatCompletionsModel,
        Runner,
        set_tracing_disabled,
    )

    from retrylens.sdk.integrations.openai_agents import governed_model, retry_settings

    captured, governor = governed
    set_tracing_disabled(True)
    try:
        client = openai.AsyncOpenAI(base_url=f"{provider.url}/v1", api_key="sk-test")
        model = governed_model(
            OpenAIChatCompletionsModel(model="m", openai_client=client), governor
        )
        agent = Agent(
            name="a", model=model, model_settings=ModelSettings(retry=retry_settings(model))
        )
        assert asyncio.run(Runner.run(agent, "hi")).final_output == "ok"
        assert provider.count == 3
        assert tasks_and_attempts(captured) == (1, 3, 2)
    finally:
        set_tracing_disabled(False)


def _hand_written_loop(url: str) -> str:
    """A plain httpx client resending on 429, as many in-house model clients do."""
    import httpx

    client = httpx.Client()
    for _ in range(5):
        response = client.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": HI})
        if response.status_code != 429:
            break
    response.raise_for_status()
    return str(response.json()["choices"][0]["message"]["content"])


def test_a_hand_written_httpx_loop_to_a_provider_host(observed, provider, monkeypatch) -> None:
    monkeypatch.setenv("RETRYLENS_PROVIDER_HOSTS", "127.0.0.1")  # stands for api.openai.com
    assert _hand_written_loop(provider.url) == "ok"
    assert provider.count == 3
    assert tasks_and_attempts(observed) == (1, 3, 2)


def test_a_governed_hand_written_httpx_loop_is_owned_by_the_governor(provider, governed) -> None:
    captured, governor = governed
    assert governor.call(lambda: _hand_written_loop(provider.url), goal="g", agent="a") == "ok"
    assert provider.count == 3
    assert tasks_and_attempts(captured) == (1, 3, 2)


def test_pydantic_ai_run_governed_counts_the_client_retries_under_it(provider, governed) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from retrylens.sdk.integrations.pydantic_ai import run_governed_sync

    captured, governor = governed
    model = OpenAIChatModel(
        "m", provider=OpenAIProvider(base_url=f"{provider.url}/v1", api_key="sk-test")
    )
    assert run_governed_sync(Agent(model), "hi", governor).output == "ok"
    assert provider.count == 3  # the client's two retries, each decided by the governor
    assert tasks_and_attempts(captured) == (1, 3, 2)
    assert_the_governor_decided(captured)


def assert_the_governor_decided(captured: CapturedEvents) -> None:
    """The two retries were the governor's verdicts (honouring the server's retry-after-ms)."""
    decisions = captured.of_kind(EventKind.DECISION)
    assert len(decisions) == 2
    assert all("honouring Retry-After" in d.decision_reason for d in decisions)


def test_the_langchain_handler_owns_the_client_retries_under_it(provider, governed) -> None:
    from test_adapters_observed_once import _ShopModel

    from retrylens.sdk.integrations.langchain import RetryLensCallbackHandler

    captured, governor = governed
    model = _ShopModel.make(provider.url)  # a chat model over the default openai client
    handler = RetryLensCallbackHandler(governor)
    assert model.invoke("hi", config={"callbacks": [handler]}).content == "ok"  # type: ignore[attr-defined]
    handler.close()
    assert provider.count == 3
    assert tasks_and_attempts(captured) == (1, 3, 2)
    assert_the_governor_decided(captured)


def test_tenacity_hooks_own_the_client_retries_under_them(provider, governed) -> None:
    import tenacity

    from retrylens.sdk.integrations.tenacity import TenacityHooks

    captured, governor = governed
    client = openai.OpenAI(base_url=f"{provider.url}/v1", api_key="sk-test")  # max_retries=2
    hooks = TenacityHooks(governor, goal="g", agent="a", dependency="openai")

    @tenacity.retry(**hooks.kwargs(stop=tenacity.stop_after_attempt(4)))
    def ask() -> str:
        return (
            client.chat.completions.create(model="m", messages=HI).choices[0].message.content or ""
        )

    assert ask() == "ok"
    assert provider.count == 3
    assert tasks_and_attempts(captured) == (1, 3, 2)
    assert_the_governor_decided(captured)
