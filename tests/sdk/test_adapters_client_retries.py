"""The provider client's retries inside an adapter's attempt are attempts of its task.

pydantic-ai's ``run_governed``, the LangChain callback handler and the tenacity hooks
record model calls as attempts; the openai client under them would resend a 429 by itself
(``max_retries=2``). Each request the provider received is an attempt of the adapter's
task: the governor decides each retry the client would have made (its decision, honouring
``Retry-After``), and with ``RETRYLENS_PROVIDER_RETRIES=client`` the client keeps them and
each resend is a "retried on its own" decision. The REAL pydantic-ai, langchain-core,
tenacity and openai client, against the local fake provider server.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
from fake_provider import RATE_LIMITED, FakeProvider, Reply, openai_completion

from retrylens.schemas import Decision, ErrorType, EventKind, TaskOutcome
from retrylens.sdk import Governor
from retrylens.testing import CapturedEvents, capture_events

SCRIPT = [RATE_LIMITED, RATE_LIMITED]


@pytest.fixture(params=["governor", "client"])
def owner(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Who retries: the governor (the default) or the client (opted out)."""
    monkeypatch.setenv("RETRYLENS_PROVIDER_RETRIES", request.param)
    return str(request.param)


def governor(captured: CapturedEvents) -> Governor:
    """A governor on virtual time: its backoff never sleeps."""
    return Governor.with_virtual_time(
        start=datetime(2026, 12, 1, tzinfo=UTC), emit=captured.emit, rng=random.Random(1)
    )


def counts(captured: CapturedEvents) -> tuple[int, int]:
    failed = len(captured.of_kind(EventKind.ATTEMPT_FAILED))
    return failed + len(captured.of_kind(EventKind.ATTEMPT_SUCCEEDED)), failed


def assert_three_attempts_two_client_retries(captured: CapturedEvents, owner: str) -> None:
    assert len({e.task_id for e in captured.events}) == 1
    assert counts(captured) == (3, 2)
    failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
    assert [(e.attempt, e.error_type, e.error_detail.status) for e in failed] == [
        (1, ErrorType.RATE_LIMIT, 429),
        (2, ErrorType.RATE_LIMIT, 429),
    ]
    decisions = captured.of_kind(EventKind.DECISION)
    assert [d.decision for d in decisions] == [Decision.RETRY_BACKOFF] * 2
    if owner == "client":
        assert all("retried on its own" in d.decision_reason for d in decisions)
    else:  # the governor's own verdicts, honouring the server's retry-after-ms
        assert all("honouring Retry-After (5 ms)" in d.decision_reason for d in decisions)
        assert all(d.backoff_ms >= 5 for d in decisions)
    assert [e.attempt for e in captured.of_kind(EventKind.ATTEMPT_SUCCEEDED)] == [3]
    assert list(captured.outcomes().values()) == [TaskOutcome.SUCCEEDED]


def test_pydantic_ai_run_governed_counts_the_clients_retries_as_attempts(owner) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from retrylens.sdk.integrations.pydantic_ai import run_governed_sync

    with FakeProvider([*SCRIPT, Reply(body=openai_completion("shipped"))]) as fake:
        with capture_events() as captured:
            model = OpenAIChatModel(
                "gpt-test", provider=OpenAIProvider(base_url=f"{fake.url}/v1", api_key="sk-test")
            )
            governor = Governor.with_virtual_time(
                start=datetime(2026, 12, 1, tzinfo=UTC), project="shop", emit=captured.emit
            )
            result = run_governed_sync(Agent(model, name="support"), "where is order 7?", governor)
        assert result.output == "shipped"
        assert fake.count == 3
    assert_three_attempts_two_client_retries(captured, owner)


def test_langchain_handler_counts_the_clients_retries_as_attempts(owner) -> None:
    from test_adapters_observed_once import _ShopModel

    from retrylens.sdk.integrations.langchain import RetryLensCallbackHandler

    with FakeProvider([*SCRIPT, Reply(body=openai_completion("shipped"))]) as fake:
        with capture_events() as captured:
            model = _ShopModel.make(fake.url)
            handler = RetryLensCallbackHandler(governor(captured), agent="support")
            reply = model.invoke("where is order 7?", config={"callbacks": [handler]})  # type: ignore[attr-defined]
            handler.close()
        assert reply.content == "shipped"
        assert fake.count == 3
    assert_three_attempts_two_client_retries(captured, owner)


def test_tenacity_hooks_count_the_clients_retries_as_attempts(owner) -> None:
    import openai
    import tenacity

    from retrylens.sdk.integrations.tenacity import TenacityHooks

    with FakeProvider([*SCRIPT, Reply(body=openai_completion("shipped"))]) as fake:
        with capture_events() as captured:
            client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
            hooks = TenacityHooks(governor(captured), goal="order 7", agent="support")

            @tenacity.retry(**hooks.kwargs(stop=tenacity.stop_after_attempt(3)))
            def ask() -> str:
                answer = client.chat.completions.create(
                    model="gpt-test", messages=[{"role": "user", "content": "order 7?"}]
                )
                return answer.choices[0].message.content or ""

            assert ask() == "shipped"
        assert fake.count == 3
        # each retry says it is one, as the client's own would (x-stainless-retry-count)
        sent = [{k.lower(): v for k, v in r["headers"].items()} for r in fake.requests]
        assert [h.get("x-stainless-retry-count") for h in sent] == ["0", "1", "2"]
    assert_three_attempts_two_client_retries(captured, owner)


def test_tenacity_retries_after_the_client_gave_up_continue_the_attempt_count(owner) -> None:
    import openai
    import tenacity

    from retrylens.sdk.integrations.tenacity import TenacityHooks

    script = [RATE_LIMITED, RATE_LIMITED, Reply(body=openai_completion("shipped"))]
    with FakeProvider(script) as fake:
        with capture_events() as captured:
            client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test", max_retries=1)
            hooks = TenacityHooks(governor(captured), goal="order 7", agent="support")

            @tenacity.retry(**hooks.kwargs(stop=tenacity.stop_after_attempt(3)))
            def ask() -> str:
                answer = client.chat.completions.create(
                    model="gpt-test", messages=[{"role": "user", "content": "order 7?"}]
                )
                return answer.choices[0].message.content or ""

            assert ask() == "shipped"
        assert fake.count == 3  # the client: 429, 429 (gave up); tenacity: the answer
    assert counts(captured) == (3, 2)
    assert [e.attempt for e in captured.of_kind(EventKind.ATTEMPT_STARTED)] == [1, 2, 3]
    decisions = captured.of_kind(EventKind.DECISION)
    # the client's one retry (the governor's verdict, or the client's own), then tenacity's
    assert ["on its own" in d.decision_reason for d in decisions] == [owner == "client", False]
    assert ["tenacity" in d.decision_reason for d in decisions] == [False, True]
