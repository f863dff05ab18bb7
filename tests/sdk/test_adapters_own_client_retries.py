"""Under the adapters the governor owns the provider client's retries: bounded by the policy.

pydantic-ai's ``run_governed``, the LangChain callback handler and the tenacity hooks leave
the model call to their framework; the openai and anthropic clients under them retry a 429
or 529 by themselves (``max_retries=2``), and a framework loop (tenacity, ``with_retry``)
re-invokes the call after the client gave up. Against a provider that never recovers,
each request the provider receives must be an attempt of the adapter's task, and the
requests must stop where the policy says: its attempt budget, an open circuit breaker, an
exhausted fleet retry budget. The REAL pydantic-ai, langchain-core, tenacity, openai and
anthropic clients, against the local fake provider server this test starts.
"""

from __future__ import annotations

import asyncio
import json
import random
from datetime import UTC, datetime

import anthropic
import openai
import pytest
import tenacity
from fake_provider import RATE_LIMITED, FakeProvider, Reply

from retrylens.schemas import Decision, EventKind, TaskOutcome
from retrylens.sdk import Governor, RetryPolicy
from retrylens.sdk.core.policy import BreakerPolicy, FleetBudgetPolicy, TaskBudget
from retrylens.testing import CapturedEvents, capture_events

START = datetime(2026, 12, 1, tzinfo=UTC)
HI = [{"role": "user", "content": "hi"}]
#: Anthropic's "overloaded", asking for a short wait (so the client's own sleeps stay short)
OVERLOADED_FOREVER = Reply(
    529,
    {"retry-after-ms": "5"},
    json.dumps(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    ).encode(),
)
TWO_ATTEMPTS = RetryPolicy(budget=TaskBudget(max_attempts=2))
#: a breaker that opens after two calls of which half failed
QUICK_BREAKER = RetryPolicy(breaker=BreakerPolicy(window=2, min_calls=2, failure_ratio=0.5))
#: a fleet retry budget that allows retries while more than 2 of its 4 tokens are left
SMALL_FLEET_BUDGET = RetryPolicy(fleet_budget=FleetBudgetPolicy(max_tokens=4))


def virtual_governor(captured: CapturedEvents, policy: RetryPolicy | None = None) -> Governor:
    """A governor whose backoff advances a virtual clock (the test never sleeps for it)."""
    return Governor.with_virtual_time(policy, start=START, emit=captured.emit, rng=random.Random(1))


def recorded(captured: CapturedEvents) -> tuple[int, int, int]:
    """(tasks, attempts recorded, failed attempts recorded)."""
    failed = len(captured.of_kind(EventKind.ATTEMPT_FAILED))
    attempts = failed + len(captured.of_kind(EventKind.ATTEMPT_SUCCEEDED))
    return len({e.task_id for e in captured.events}), attempts, failed


#: each policy above, and what its governor says when it stops the requests
STOPPING = pytest.mark.parametrize(
    ("policy", "stopped_by"),
    [
        (TWO_ATTEMPTS, "task budget exhausted: 2/2 attempts used"),
        (QUICK_BREAKER, "circuit breaker for"),
        (SMALL_FLEET_BUDGET, "fleet retry budget for"),
    ],
    ids=["budget", "breaker", "fleet"],
)


def assert_bounded(
    fake: FakeProvider, captured: CapturedEvents, most: int, stopped_by: str = ""
) -> None:
    """Each request is a failed attempt of one task, no more than ``most``, and the governor's
    last decision gave up saying ``stopped_by``."""
    tasks, attempts, failed = recorded(captured)
    assert (tasks, attempts, failed) == (1, fake.count, fake.count)
    assert 1 <= fake.count <= most
    assert list(captured.outcomes().values()) == [TaskOutcome.FAILED]
    last = captured.of_kind(EventKind.DECISION)[-1]
    assert last.decision is Decision.GIVE_UP
    assert stopped_by in last.decision_reason


# -- pydantic-ai ------------------------------------------------------------------------------
def _openai_agent(url: str) -> object:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("m", provider=OpenAIProvider(base_url=f"{url}/v1", api_key="sk-test"))
    return Agent(model, name="support")


def _anthropic_agent(url: str) -> object:
    from pydantic_ai import Agent
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    provider = AnthropicProvider(
        anthropic_client=anthropic.AsyncAnthropic(base_url=url, api_key="k")
    )
    return Agent(AnthropicModel("claude-test", provider=provider), name="support")


def _run_pydantic_ai(agent: object, governor: Governor) -> None:
    from pydantic_ai.exceptions import ModelHTTPError

    from retrylens.sdk.integrations.pydantic_ai import run_governed_sync

    with pytest.raises(ModelHTTPError):  # what pydantic-ai raises when the client gives up
        run_governed_sync(agent, "where is order 7?", governor)


@pytest.mark.parametrize(
    ("make_agent", "dead"),
    [(_openai_agent, RATE_LIMITED), (_anthropic_agent, OVERLOADED_FOREVER)],
    ids=["openai-429", "anthropic-529"],
)
def test_pydantic_ai_requests_stay_within_the_attempt_budget(make_agent, dead) -> None:
    with FakeProvider(default=dead) as fake, capture_events() as captured:
        _run_pydantic_ai(make_agent(fake.url), virtual_governor(captured, TWO_ATTEMPTS))
        assert_bounded(fake, captured, most=2, stopped_by="task budget")  # the client alone: 3


@STOPPING
def test_pydantic_ai_requests_stop_where_the_policy_says(policy, stopped_by) -> None:
    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        _run_pydantic_ai(_openai_agent(fake.url), virtual_governor(captured, policy))
        assert_bounded(fake, captured, most=2, stopped_by=stopped_by)  # the client alone: 3


def test_pydantic_ai_with_the_default_policy_keeps_every_request_an_attempt() -> None:
    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        _run_pydantic_ai(_openai_agent(fake.url), governor)
        assert_bounded(fake, captured, most=governor.policy.budget.retries + 1, stopped_by="")


# -- LangChain --------------------------------------------------------------------------------
def _langchain_model(url: str) -> object:
    from test_adapters_observed_once import _ShopModel

    return _ShopModel.make(url)  # a chat model over the default openai client


def test_langchain_with_retry_over_the_default_client_stays_within_the_attempt_budget() -> None:
    from retrylens.sdk.integrations.langchain import RetryLensCallbackHandler

    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        handler = RetryLensCallbackHandler(governor, agent="support")
        model = _langchain_model(fake.url).with_retry(  # type: ignore[attr-defined]
            stop_after_attempt=3, exponential_jitter_params={"max": 0.001, "jitter": 0}
        )
        with pytest.raises(openai.RateLimitError):
            model.invoke("where is order 7?", config={"callbacks": [handler]})
        handler.close()
        # LangChain 3 x the client 3 = 9 requests without the governor owning the retries
        assert_bounded(fake, captured, most=governor.policy.budget.retries + 1, stopped_by="")


@STOPPING
def test_langchain_handler_requests_stop_where_the_policy_says(policy, stopped_by) -> None:
    from retrylens.sdk.integrations.langchain import RetryLensCallbackHandler

    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        handler = RetryLensCallbackHandler(virtual_governor(captured, policy), agent="support")
        with pytest.raises(openai.RateLimitError):
            _langchain_model(fake.url).invoke("order 7?", config={"callbacks": [handler]})  # type: ignore[attr-defined]
        handler.close()
        assert_bounded(fake, captured, most=2, stopped_by=stopped_by)


# -- tenacity ---------------------------------------------------------------------------------
def test_the_readmes_tenacity_loop_against_a_dead_provider_stays_within_the_budget() -> None:
    from retrylens.sdk.integrations.tenacity import TenacityHooks

    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")  # max_retries=2
        hooks = TenacityHooks(governor, goal="order 7", agent="support", dependency="openai")

        @tenacity.retry(**hooks.kwargs(stop=tenacity.stop_after_attempt(4)))
        def ask() -> str:
            answer = client.chat.completions.create(model="m", messages=HI)
            return answer.choices[0].message.content or ""

        with pytest.raises(openai.RateLimitError):
            ask()
        # tenacity 4 x the client 3 = 12 requests without the governor owning the retries
        assert_bounded(fake, captured, most=governor.policy.budget.retries + 1, stopped_by="")


@STOPPING
def test_tenacity_hooks_over_anthropic_stop_where_the_policy_says(policy, stopped_by) -> None:
    from retrylens.sdk.integrations.tenacity import TenacityHooks

    with FakeProvider(default=OVERLOADED_FOREVER) as fake, capture_events() as captured:
        client = anthropic.Anthropic(base_url=fake.url, api_key="sk-ant-test")
        governor = virtual_governor(captured, policy)
        hooks = TenacityHooks(governor, goal="order 7", agent="support", dependency="anthropic")

        @tenacity.retry(**hooks.kwargs(stop=tenacity.stop_after_attempt(4)))
        def ask() -> str:
            message = client.messages.create(model="claude-test", max_tokens=10, messages=HI)
            return str(message.content[0].text)

        with pytest.raises(anthropic.APIStatusError):
            ask()
        assert_bounded(fake, captured, most=2, stopped_by=stopped_by)


def test_tenacity_hooks_over_an_async_streaming_openai_call_stay_within_the_budget() -> None:
    from retrylens.sdk.integrations.tenacity import TenacityHooks

    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        client = openai.AsyncOpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
        governor = virtual_governor(captured, TWO_ATTEMPTS)
        hooks = TenacityHooks(governor, goal="order 7", agent="support", dependency="openai")

        @tenacity.retry(**hooks.kwargs(stop=tenacity.stop_after_attempt(4)))
        async def ask() -> str:
            stream = await client.chat.completions.create(model="m", messages=HI, stream=True)
            return "".join([c.choices[0].delta.content or "" async for c in stream])

        with pytest.raises(openai.RateLimitError):
            asyncio.run(ask())
        assert_bounded(fake, captured, most=2, stopped_by="task budget")
