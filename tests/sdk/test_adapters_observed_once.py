"""An adapter's governed model call is recorded once, even with ``observe()`` on.

``observe()`` records every provider call as a task of its own; a call made inside an
adapter's attempt (pydantic-ai's ``run_governed``) is already that adapter's task, so the
observer leaves it to the adapter. The REAL pydantic-ai with its REAL openai model and
client, against the repo's local fake provider server.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_provider import RATE_LIMITED, FakeProvider, Reply, openai_completion, openai_stream
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from retrylens.schemas import EventKind, TaskOutcome
from retrylens.sdk import Governor, observe
from retrylens.sdk.integrations.providers.observing import stop_observing
from retrylens.sdk.integrations.pydantic_ai import run_governed_sync
from retrylens.testing import CapturedEvents, capture_events


@pytest.fixture
def captured() -> Iterator[CapturedEvents]:
    with capture_events() as events:
        observe(emit=events.emit)
        try:
            yield events
        finally:
            stop_observing()


def _tasks(captured: CapturedEvents) -> set[str]:
    return {str(e.task_id) for e in captured.events}


def test_pydantic_ai_run_governed_under_observe_is_one_task_not_two(
    captured: CapturedEvents,
) -> None:
    with FakeProvider([RATE_LIMITED, Reply(body=openai_completion("shipped"))]) as fake:
        model = OpenAIChatModel(
            "gpt-test", provider=OpenAIProvider(base_url=f"{fake.url}/v1", api_key="sk-test")
        )
        agent = Agent(model, name="support")
        governor = Governor(project="shop", emit=captured.emit)
        result = run_governed_sync(agent, "where is order 7?", governor)
        assert result.output == "shipped"
        assert fake.count == 2  # the 429 is retried (the governor decides the client's retry)
    assert len(_tasks(captured)) == 1  # the adapter's task; the observer did not add one
    assert list(captured.outcomes().values()) == [TaskOutcome.SUCCEEDED]
    assert {e.agent.name for e in captured.of_kind(EventKind.TASK_STARTED)} <= {"support"}


class _ShopModel:
    """A LangChain chat model on the real openai client (built lazily: LangChain's base)."""

    @staticmethod
    def make(url: str) -> object:
        import openai
        from langchain_core.language_models.chat_models import BaseChatModel
        from langchain_core.messages import AIMessage
        from langchain_core.outputs import ChatGeneration, ChatResult

        client = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-test")

        class ShopChat(BaseChatModel):
            @property
            def _llm_type(self) -> str:
                return "shop-openai"

            def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
                answer = client.chat.completions.create(
                    model="gpt-test",
                    messages=[{"role": "user", "content": str(m.content)} for m in messages],
                )
                text = answer.choices[0].message.content or ""
                return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

        return ShopChat()


def test_langchain_handler_under_observe_is_one_task_not_two(captured: CapturedEvents) -> None:
    from retrylens.sdk.integrations.langchain import RetryLensCallbackHandler

    with FakeProvider([RATE_LIMITED, Reply(body=openai_completion("shipped"))]) as fake:
        model = _ShopModel.make(fake.url)
        governor = Governor(project="shop", emit=captured.emit)
        handler = RetryLensCallbackHandler(governor, agent="support")
        reply = model.invoke("where is order 7?", config={"callbacks": [handler]})  # type: ignore[attr-defined]
        handler.close()
        assert reply.content == "shipped"
        assert fake.count == 2  # the 429 is retried (the governor decides the client's retry)
    assert len(_tasks(captured)) == 1  # the handler's task; the observer did not add one
    assert list(captured.outcomes().values()) == [TaskOutcome.SUCCEEDED]


def test_an_observed_call_after_a_langchain_run_is_still_recorded(
    captured: CapturedEvents,
) -> None:
    import openai

    from retrylens.sdk.integrations.langchain import RetryLensCallbackHandler

    with FakeProvider(default=Reply(body=openai_completion("ok"))) as fake:
        model = _ShopModel.make(fake.url)
        handler = RetryLensCallbackHandler(Governor(emit=captured.emit), agent="support")
        model.invoke("hi", config={"callbacks": [handler]})  # type: ignore[attr-defined]
        handler.close()
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
        client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "x"}]
        )
    assert len(_tasks(captured)) == 2  # the handler's task, then the observer's


def test_openai_agents_streamed_turn_under_observe_is_one_task_not_two(
    captured: CapturedEvents,
) -> None:
    import asyncio

    import openai
    from agents import Agent as AgentsAgent
    from agents import OpenAIChatCompletionsModel, Runner, set_tracing_disabled

    from retrylens.sdk.integrations.openai_agents import governed_model

    set_tracing_disabled(True)
    stream = Reply(headers={"content-type": "text/event-stream"}, events=openai_stream("shipped"))

    async def main(url: str) -> str:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="sk-test")
        model = governed_model(
            OpenAIChatCompletionsModel("gpt-test", openai_client=client),
            Governor(project="shop", emit=captured.emit),
            agent="support",
        )
        result = Runner.run_streamed(AgentsAgent(name="support", model=model), "order 7?")
        async for _ in result.stream_events():
            pass
        return str(result.final_output)

    with FakeProvider([stream]) as fake:
        assert asyncio.run(main(fake.url)) == "shipped"
        assert fake.count == 1
    assert len(_tasks(captured)) == 1  # the adapter's task; the observer did not add one
    assert list(captured.outcomes().values()) == [TaskOutcome.SUCCEEDED]


def test_tenacity_hooks_under_observe_record_each_call_once(captured: CapturedEvents) -> None:
    import openai
    import tenacity

    from retrylens.sdk.integrations.tenacity import TenacityHooks

    with FakeProvider(
        [RATE_LIMITED, Reply(body=openai_completion("shipped")), Reply(body=openai_completion())]
    ) as fake:
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
        hooks = TenacityHooks(
            Governor(project="shop", emit=captured.emit), goal="order 7", agent="support"
        )

        @tenacity.retry(**hooks.kwargs(stop=tenacity.stop_after_attempt(3)))
        def ask() -> str:
            answer = client.chat.completions.create(
                model="gpt-test", messages=[{"role": "user", "content": "order 7?"}]
            )
            return answer.choices[0].message.content or ""

        assert ask() == "shipped"
        assert fake.count == 2  # the 429 is retried (the governor decides the client's retry)
        client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "x"}]
        )
    assert len(_tasks(captured)) == 2  # the hooks' task, then the observer's for the bare call
