"""Under the adapters a plain httpx client's own resends are bounded by the policy, not only counted.

A model call that is not a stainless client — a user's own loop around ``httpx`` that
resends a 429, as many hand-written clients do — inside pydantic-ai's ``run_governed``,
the LangChain callback handler or the tenacity hooks: before a resend of the failed
request goes out, the governor decides (its attempt budget, the fleet retry budget, the
circuit breaker); when it stops, the resend is not sent and the loop gets the provider's
failure as a :class:`~retrylens.sdk.Failure`. Against a provider that never recovers,
every request it received is one recorded attempt, no more than the policy allows. The
REAL httpx, pydantic-ai, langchain-core and tenacity, against the local fake provider.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import httpx
import pytest
import tenacity
from fake_provider import RATE_LIMITED, FakeProvider, Reply, openai_completion
from test_adapters_own_client_retries import (
    STOPPING,
    TWO_ATTEMPTS,
    assert_bounded,
    recorded,
    virtual_governor,
)

from retrylens.schemas import ErrorType, EventKind
from retrylens.sdk import Failure, Governor, parse_policy
from retrylens.testing import capture_events

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
#: what the user's loop would send on its own against a dead provider
LOOP_TRIES = 5


def ask_with_a_loop(url: str) -> str:
    """The obvious hand-written client: resend on 429 and 5xx, then give up."""
    with httpx.Client(timeout=5) as client:
        for _ in range(LOOP_TRIES):
            response = client.post(f"{url}/v1/chat/completions", json=BODY)
            if response.status_code != 429 and response.status_code < 500:
                break
        response.raise_for_status()
        return str(response.json()["choices"][0]["message"]["content"])


async def aask_with_a_loop(url: str) -> str:
    async with httpx.AsyncClient(timeout=5) as client:
        for _ in range(LOOP_TRIES):
            response = await client.post(f"{url}/v1/chat/completions", json=BODY)
            if response.status_code != 429 and response.status_code < 500:
                break
        response.raise_for_status()
        return str(response.json()["choices"][0]["message"]["content"])


def assert_refused_as_rate_limited(error: BaseException) -> None:
    assert isinstance(error, Failure)
    assert (error.error_type, error.status) == (ErrorType.RATE_LIMIT, 429)


# -- tenacity ---------------------------------------------------------------------------------
def _tenacity_ask(hooks: Any, url: str, is_async: bool) -> Any:
    kwargs = hooks.kwargs(stop=tenacity.stop_after_attempt(4))

    async def aask() -> str:
        return await aask_with_a_loop(url)

    return tenacity.retry(**kwargs)(aask if is_async else lambda: ask_with_a_loop(url))


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_tenacity_hooks_bound_a_plain_httpx_loop_by_the_attempt_budget(is_async: bool) -> None:
    from retrylens.sdk.integrations.tenacity import TenacityHooks

    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        governor = virtual_governor(captured, TWO_ATTEMPTS)
        hooks = TenacityHooks(governor, goal="order 7", agent="support", dependency="llm")
        ask = _tenacity_ask(hooks, fake.url, is_async)
        with pytest.raises(Failure) as refused:
            asyncio.run(ask()) if is_async else ask()
        assert_refused_as_rate_limited(refused.value)
        # the loop alone: 5 requests per tenacity attempt, 20 in all
        assert_bounded(fake, captured, most=2, stopped_by="task budget exhausted: 2/2")


@STOPPING
def test_tenacity_hooks_stop_a_plain_httpx_loop_where_the_policy_says(policy, stopped_by) -> None:
    from retrylens.sdk.integrations.tenacity import TenacityHooks

    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        hooks = TenacityHooks(virtual_governor(captured, policy), goal="g", dependency="llm")
        with pytest.raises(Failure):
            _tenacity_ask(hooks, fake.url, is_async=False)()
        assert_bounded(fake, captured, most=2, stopped_by=stopped_by)


def test_a_plain_httpx_loop_that_recovers_within_the_budget_gets_its_answer() -> None:
    from retrylens.sdk.integrations.tenacity import TenacityHooks

    script = [RATE_LIMITED, RATE_LIMITED, Reply(body=openai_completion("shipped"))]
    with FakeProvider(script) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        hooks = TenacityHooks(governor, goal="g", agent="support", dependency="llm")
        assert _tenacity_ask(hooks, fake.url, is_async=False)() == "shipped"
        assert fake.count == 3
        assert recorded(captured) == (1, 3, 2)
        decisions = captured.of_kind(EventKind.DECISION)
        assert len(decisions) == 2
        assert all("honouring Retry-After (5 ms)" in d.decision_reason for d in decisions)


# -- pydantic-ai ------------------------------------------------------------------------------
def _function_agent(url: str, is_async: bool) -> Any:
    """A pydantic-ai agent whose model is the user's own httpx loop (``FunctionModel``)."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    def model(messages: Any, info: Any) -> ModelResponse:
        return ModelResponse(parts=[TextPart(ask_with_a_loop(url))])

    async def amodel(messages: Any, info: Any) -> ModelResponse:
        return ModelResponse(parts=[TextPart(await aask_with_a_loop(url))])

    return Agent(FunctionModel(amodel if is_async else model), name="support")


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_pydantic_ai_bounds_a_plain_httpx_loop_by_the_attempt_budget(is_async: bool) -> None:
    from retrylens.sdk.integrations.pydantic_ai import run_governed_sync

    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        agent = _function_agent(fake.url, is_async)
        with pytest.raises(Failure) as refused:
            run_governed_sync(agent, "where is order 7?", virtual_governor(captured, TWO_ATTEMPTS))
        assert_refused_as_rate_limited(refused.value)
        assert_bounded(fake, captured, most=2, stopped_by="task budget exhausted: 2/2")


# -- LangChain --------------------------------------------------------------------------------
def _plain_chat_model(url: str) -> Any:
    """A LangChain chat model whose calls are the user's own httpx loop."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    def result(text: str) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    class PlainHttpChat(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "plain-httpx"

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
            return result(ask_with_a_loop(url))

        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
            return result(await aask_with_a_loop(url))

    return PlainHttpChat()


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_langchain_handler_bounds_a_plain_httpx_loop_under_with_retry(is_async: bool) -> None:
    from retrylens.sdk.integrations.langchain import RetryLensCallbackHandler

    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        handler = RetryLensCallbackHandler(virtual_governor(captured, TWO_ATTEMPTS), agent="a")
        model = _plain_chat_model(fake.url).with_retry(
            stop_after_attempt=3, exponential_jitter_params={"max": 0.001, "jitter": 0}
        )
        config: Any = {"callbacks": [handler]}
        with pytest.raises(Failure) as refused:
            if is_async:
                asyncio.run(model.ainvoke("order 7?", config=config))
            else:
                model.invoke("order 7?", config=config)
        handler.close()
        assert_refused_as_rate_limited(refused.value)
        # LangChain 3 x the loop 5 = 15 requests without the governor deciding the resends
        assert_bounded(fake, captured, most=2, stopped_by="task budget exhausted: 2/2")


# -- the resend's wait, a stop during it, a request that is not a resend -----------------------
def _hooks(governor: Governor) -> Any:
    from retrylens.sdk.integrations.tenacity import TenacityHooks

    return TenacityHooks(governor, goal="order 7", agent="support", dependency="llm")


def test_under_tenacity_a_resend_waits_only_what_the_backoff_asks_beyond_the_clients_own_wait() -> (
    None
):
    slept: list[float] = []

    def patient_loop(url: str) -> str:
        with httpx.Client(timeout=5) as client:
            response = client.post(f"{url}/v1/chat/completions", json=BODY)
            time.sleep(0.15)  # the client's own wait before its resend
            response = client.post(f"{url}/v1/chat/completions", json=BODY)
            return response.text

    script = [Reply(429, {"retry-after-ms": "400"}, b"{}"), Reply(body=openai_completion("ok"))]
    with FakeProvider(script) as fake, capture_events() as captured:
        governor = Governor(emit=captured.emit, sleep=slept.append, rng=random.Random(1))
        retry = tenacity.retry(**_hooks(governor).kwargs(stop=tenacity.stop_after_attempt(2)))
        retry(lambda: patient_loop(fake.url))()
        assert fake.count == 2
        (decision,) = captured.of_kind(EventKind.DECISION)
        assert decision.backoff_ms >= 400
        assert len(slept) == 1
        assert decision.backoff_ms / 1000 - 0.4 <= slept[0] <= decision.backoff_ms / 1000 - 0.15


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_under_tenacity_a_kill_switch_flipped_during_the_backoff_refuses_the_resend(
    is_async: bool,
) -> None:
    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        governor: Governor

        def kill(_seconds: float) -> None:
            governor.source.kill()

        async def akill(seconds: float) -> None:
            kill(seconds)

        governor = Governor(emit=captured.emit, sleep=kill, asleep=akill, rng=random.Random(1))
        ask = _tenacity_ask(_hooks(governor), fake.url, is_async)
        with pytest.raises(Failure) as refused:
            asyncio.run(ask()) if is_async else ask()
        assert_refused_as_rate_limited(refused.value)
        assert fake.count == 1
        assert captured.of_kind(EventKind.DECISION)[-1].decision_reason.startswith("kill switch")


@pytest.mark.parametrize("path", ["/v1/a-smaller-model", "/v1/embeddings"])
def test_under_tenacity_a_request_elsewhere_after_a_failure_is_sent_as_it_is(path: str) -> None:
    def ask_elsewhere(url: str) -> str:
        with httpx.Client(timeout=5) as client:
            client.post(f"{url}/v1/chat/completions", json=BODY)  # 429: the code moves on
            return client.post(f"{url}{path}", json=BODY).text

    script = [RATE_LIMITED, Reply(body=openai_completion("ok"))]
    with FakeProvider(script) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        retry = tenacity.retry(**_hooks(governor).kwargs(stop=tenacity.stop_after_attempt(2)))
        retry(lambda: ask_elsewhere(fake.url))()
        assert fake.count == 2
        assert captured.of_kind(EventKind.DECISION) == []  # no resend: nothing to decide
        assert recorded(captured) == (1, 1, 0)


def test_under_tenacity_a_client_wait_longer_than_the_backoff_adds_no_sleep() -> None:
    slept: list[float] = []

    def patient_loop(url: str) -> str:
        with httpx.Client(timeout=5) as client:
            client.post(f"{url}/v1/chat/completions", json=BODY)
            time.sleep(0.05)  # longer than the policy's backoff of a few ms
            return client.post(f"{url}/v1/chat/completions", json=BODY).text

    quick = parse_policy({"backoff": {"jitter": 0.0, "base_ms": 1, "cap_ms": 2}})
    with FakeProvider([RATE_LIMITED, Reply(body=openai_completion("ok"))]) as fake:
        with capture_events() as captured:
            governor = Governor(quick, emit=captured.emit, sleep=slept.append)
            retry = tenacity.retry(**_hooks(governor).kwargs(stop=tenacity.stop_after_attempt(2)))
            retry(lambda: patient_loop(fake.url))()
            assert fake.count == 2
            assert recorded(captured) == (1, 2, 1)
        assert slept == []


def test_under_tenacity_a_loop_whose_client_keeps_its_retries_is_only_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RETRYLENS_PROVIDER_RETRIES", "client")
    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        governor = virtual_governor(captured, TWO_ATTEMPTS)
        with pytest.raises(httpx.HTTPStatusError):
            _tenacity_ask(_hooks(governor), fake.url, is_async=False)()
        assert fake.count == LOOP_TRIES  # opted out: the loop's resends all went out
        decisions = captured.of_kind(EventKind.DECISION)
        assert sum("retried on its own" in d.decision_reason for d in decisions) == LOOP_TRIES - 1
