"""Under the adapters what RetryLens records as decided is what the provider received.

Inside pydantic-ai's ``run_governed``, the LangChain handler and the tenacity hooks the
governor decides the retries of the client under the framework, but the retry is the
client's request sent again: the prompt and context are the framework's. A decision that
would change the request is therefore either applied at that level — a fallback model
the policy names, written into the request's ``model`` — or recorded as what the
adapter does: the same request resent (a fallback the request cannot use stops instead
of piling on an open breaker). Every attempt's dependency is the model the provider saw,
and the analytics count the degradations that happened. The REAL pydantic-ai, tenacity,
openai client and httpx, against the local fake provider.
"""

from __future__ import annotations

from dataclasses import replace

import httpx
import openai
import pytest
import tenacity
from adapter_store import recording
from fake_provider import RATE_LIMITED, FakeProvider, Reply, openai_completion
from pydantic_ai.exceptions import ModelHTTPError
from test_adapters_own_client_retries import (
    HI,
    QUICK_BREAKER,
    _openai_agent,
    _run_pydantic_ai,
    virtual_governor,
)

from retrylens.schemas import Decision, EventKind
from retrylens.sdk import Failure, RetryPolicy, parse_policy
from retrylens.sdk.core.policy import TaskBudget
from retrylens.sdk.core.rules import Rule, Verdict
from retrylens.sdk.core.state import TaskState
from retrylens.sdk.integrations.tenacity import TenacityHooks
from retrylens.store import EventStore
from retrylens.testing import CapturedEvents, capture_events

SAME_REQUEST = {Decision.RETRY_SAME, Decision.RETRY_BACKOFF}
CONFLICT = Reply(409, {}, b'{"error": {"message": "conflict", "type": "conflict"}}')


def models_sent(fake: FakeProvider) -> list[str]:
    return [str(r["body"].get("model")) for r in fake.requests]


def attempt_dependencies(captured: CapturedEvents) -> list[str]:
    return [e.dependency for e in captured.of_kind(EventKind.ATTEMPT_STARTED)]


def retrying_decisions(captured: CapturedEvents) -> list[Decision]:
    return [
        d.decision
        for d in captured.of_kind(EventKind.DECISION)
        if d.decision.value.startswith(("retry", "rebuild", "patch", "degrade"))
    ]


# -- a fallback model the request names is applied ---------------------------------------------
def test_a_fallback_model_is_the_model_the_resend_asks_for() -> None:
    policy = RetryPolicy(fallbacks={"m": "m-mini"})  # the turn's dependency is its model, "m"
    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        _run_pydantic_ai(_openai_agent(fake.url), virtual_governor(captured, policy))
        assert Decision.DEGRADE_DEPENDENCY in retrying_decisions(captured)
        assert models_sent(fake) == attempt_dependencies(captured) == ["m", "m", "m-mini"]
        degraded = [e.degraded for e in captured.of_kind(EventKind.ATTEMPT_STARTED)]
        assert degraded == [False, False, True]


@pytest.mark.clickhouse
def test_the_analytics_count_the_fallback_the_provider_saw(store: EventStore) -> None:
    policy = parse_policy({"fallbacks": {"m": "m-mini"}, "backoff": {"jitter": 0.0}})
    with FakeProvider(default=RATE_LIMITED) as fake, recording("as-sent", policy=policy) as rec:
        _run_pydantic_ai(_openai_agent(fake.url), rec.governor)
        metrics = rec.store(store)
        sent = models_sent(fake)
    switches = sum(1 for a, b in zip(sent, sent[1:], strict=False) if a != b)
    assert (metrics.calls, metrics.failures, metrics.degrades) == (len(sent), len(sent), switches)
    assert switches == 1


def test_a_fallback_for_a_model_named_in_configuration_is_applied_too() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from retrylens.sdk.integrations.pydantic_ai import run_governed_sync

    configured = "".join(["gpt-", "m"])  # read from configuration: equal to the model, not it
    policy = RetryPolicy(fallbacks={"gpt-m": "gpt-m-mini"})
    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        provider = OpenAIProvider(base_url=f"{fake.url}/v1", api_key="sk-test")
        agent = Agent(OpenAIChatModel("gpt-m", provider=provider))
        with pytest.raises(ModelHTTPError):
            run_governed_sync(
                agent, "hi", virtual_governor(captured, policy), dependency=configured
            )
        assert (
            models_sent(fake) == attempt_dependencies(captured) == ["gpt-m", "gpt-m", "gpt-m-mini"]
        )


# -- what a failed try took is what its request took --------------------------------------------
def test_a_failed_try_is_recorded_with_the_time_its_request_took() -> None:
    # the virtual clock never moves while the provider thinks: the 150 ms recorded on the
    # failed attempt can only be the request's own latency, measured at the HTTP level
    slow_429 = replace(RATE_LIMITED, delay_s=0.15)
    with (
        FakeProvider([slow_429], default=Reply(200, {}, openai_completion())) as fake,
        capture_events() as captured,
    ):
        hooks = TenacityHooks(virtual_governor(captured), goal="g", dependency="openai")
        _ask_openai(fake.url, hooks)
        assert fake.count == 2
        (failed,) = captured.of_kind(EventKind.ATTEMPT_FAILED)
        assert 150 <= failed.latency_ms < 5_000


# -- what cannot be applied is recorded as what happens ----------------------------------------
def _ask_openai(url: str, hooks: TenacityHooks) -> None:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-test")

    @tenacity.retry(**hooks.kwargs(stop=tenacity.stop_after_attempt(2)))
    def ask() -> str:
        return (
            client.chat.completions.create(model="m", messages=HI).choices[0].message.content or ""
        )

    ask()


def test_a_fallback_the_request_cannot_name_is_recorded_as_a_resend_of_the_same_request() -> None:
    policy = RetryPolicy(fallbacks={"openai": "backup"})  # a dependency, not a model
    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        hooks = TenacityHooks(virtual_governor(captured, policy), goal="g", dependency="openai")
        with pytest.raises(openai.RateLimitError):
            _ask_openai(fake.url, hooks)
        assert set(models_sent(fake)) == {"m"}
        assert len(attempt_dependencies(captured)) == fake.count
        assert set(attempt_dependencies(captured)) == {"openai"}
        assert set(retrying_decisions(captured)) <= SAME_REQUEST
        assert not any(e.degraded for e in captured.events)
        governor = [
            d for d in captured.of_kind(EventKind.DECISION) if "tenacity" not in d.decision_reason
        ]
        resent = [d for d in governor if "degrade_dependency not applied" in d.decision_reason]
        assert len(resent) == 1 and resent[0].decision is Decision.RETRY_BACKOFF
        # still honouring the provider's retry-after-ms, as the policy's backoff does
        assert all(d.backoff_ms >= 5 for d in governor if d.decision in SAME_REQUEST)


def test_an_open_breaker_whose_fallback_the_request_cannot_use_stops_the_resends() -> None:
    policy = QUICK_BREAKER.model_copy(update={"fallbacks": {"openai": "backup"}})
    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        hooks = TenacityHooks(virtual_governor(captured, policy), goal="g", dependency="openai")
        with pytest.raises(openai.RateLimitError):
            _ask_openai(fake.url, hooks)
        assert fake.count == len(attempt_dependencies(captured)) == 2
        assert set(attempt_dependencies(captured)) == {"openai"}
        last = captured.of_kind(EventKind.DECISION)[-1]
        assert last.decision is Decision.GIVE_UP
        assert "circuit breaker for openai is open" in last.decision_reason
        assert "failing fast" in last.decision_reason


def test_a_plain_httpx_resend_after_a_conflict_is_recorded_as_the_same_request_again() -> None:
    def ask(url: str) -> int:
        with httpx.Client(timeout=5) as client:
            for _ in range(6):  # the user's loop resends a 409 as it is
                response = client.post(f"{url}/v1/chat/completions", json={"model": "m"})
                if response.status_code != 409:
                    break
            return response.status_code

    with FakeProvider(default=CONFLICT) as fake, capture_events() as captured:
        hooks = TenacityHooks(virtual_governor(captured), goal="g", dependency="llm")
        with pytest.raises(Failure):
            tenacity.retry(**hooks.kwargs(stop=tenacity.stop_after_attempt(2)))(
                lambda: ask(fake.url)
            )()
        assert fake.count == len(attempt_dependencies(captured)) >= 2
        assert set(retrying_decisions(captured)) <= SAME_REQUEST  # no rebuild, no patch, no degrade
        assert not any(e.degraded for e in captured.events)


def test_a_call_without_a_json_model_is_decided_as_any_other() -> None:
    policy = RetryPolicy(budget=TaskBudget(max_attempts=2), fallbacks={"openai": "backup"})
    with FakeProvider() as fake, capture_events() as captured:  # a GET: the server answers 501
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
        hooks = TenacityHooks(virtual_governor(captured, policy), goal="g", dependency="openai")

        @tenacity.retry(**hooks.kwargs(stop=tenacity.stop_after_attempt(3)))
        def models() -> object:
            return client.models.list()  # no body, no model

        with pytest.raises(openai.InternalServerError):
            models()
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
        assert [e.error_detail.status for e in failed] == [501, 501]
        assert set(attempt_dependencies(captured)) == {"openai"}


class use_backup(Rule):  # noqa: N801 - a user's own rule, named as the SDK's are
    """A user's rule: the first failure switches to a backup dependency."""

    name = "use_backup"

    def __call__(self, s: TaskState) -> Verdict | None:
        if s.attempt > 1:
            return None
        return Verdict(
            Decision.DEGRADE_DEPENDENCY, "use the backup", fallback="backup", rule=self.name
        )


def test_a_users_fallback_rule_the_request_cannot_name_is_a_resend_not_a_stop() -> None:
    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        governor = virtual_governor(captured, RetryPolicy(budget=TaskBudget(max_attempts=2)))
        governor.rules = use_backup() | governor.rules
        hooks = TenacityHooks(governor, goal="g", dependency="llm")  # the request asks for "m"
        with pytest.raises(openai.RateLimitError):
            _ask_openai(fake.url, hooks)
        assert fake.count == len(attempt_dependencies(captured)) == 2  # the resend was sent
        assert set(attempt_dependencies(captured)) == {"llm"}
        first = captured.of_kind(EventKind.DECISION)[0]
        assert first.decision is Decision.RETRY_BACKOFF
        assert "degrade_dependency not applied" in first.decision_reason


class degrade_in_place(Rule):  # noqa: N801 - a user's own rule, named as the SDK's are
    """A user's rule: degrade the dependency, naming no fallback."""

    name = "degrade_in_place"

    def __call__(self, s: TaskState) -> Verdict | None:
        if s.attempt > 1:
            return None
        return Verdict(Decision.DEGRADE_DEPENDENCY, "degrade the model", rule=self.name)


def test_a_degrade_that_names_no_fallback_is_recorded_as_the_same_request_again() -> None:
    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        governor = virtual_governor(captured, RetryPolicy(budget=TaskBudget(max_attempts=2)))
        governor.rules = degrade_in_place() | governor.rules
        hooks = TenacityHooks(governor, goal="g", dependency="m")  # the request's own model
        with pytest.raises(openai.RateLimitError):
            _ask_openai(fake.url, hooks)
        assert models_sent(fake) == attempt_dependencies(captured) == ["m", "m"]
        first = captured.of_kind(EventKind.DECISION)[0]
        assert first.decision is Decision.RETRY_BACKOFF
        assert not any(e.degraded for e in captured.events)
