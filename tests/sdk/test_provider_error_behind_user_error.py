"""A user's error wrapped around a provider failure is classified by the provider failure.

Inside a governed attempt RetryLens keeps the client from retrying (the stainless client
raises its error at once; a plain client's resend is refused). User code often catches
that error and raises one of its own, ``raise LLMFailed("llm failed") from e`` or, inside
the ``except``, without ``from``. The attempt failed because the provider answered 429:
it must be typed ``rate_limit`` (so the rate-limit rules retry it after the server's
wait), not by the user's class (``unknown``, which goes to a person). The REAL openai
client and httpx, against the local fake provider server.
"""

from __future__ import annotations

import copy
import random
from datetime import UTC, datetime

import httpx
import openai
import pytest
from fake_provider import RATE_LIMITED, FakeProvider, Reply, openai_completion

from retrylens.schemas import ErrorType, EventKind, TaskOutcome
from retrylens.sdk import Failure, Governor
from retrylens.testing import CapturedEvents, capture_events

HI = [{"role": "user", "content": "hi"}]
SCRIPT = [RATE_LIMITED, RATE_LIMITED, Reply(body=openai_completion("shipped"))]


class LLMFailed(Exception):
    """The user's own error: says nothing about why."""


def virtual_governor(captured: CapturedEvents) -> Governor:
    return Governor.with_virtual_time(
        start=datetime(2026, 12, 1, tzinfo=UTC), emit=captured.emit, rng=random.Random(1)
    )


def assert_two_rate_limits_then_the_answer(fake: FakeProvider, captured: CapturedEvents) -> None:
    assert fake.count == 3
    failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
    assert [e.error_type for e in failed] == [ErrorType.RATE_LIMIT] * 2
    assert [e.error_detail.status for e in failed] == [429, 429]
    assert not captured.of_kind(EventKind.HANDOFF)
    assert list(captured.outcomes().values()) == [TaskOutcome.SUCCEEDED]


@pytest.mark.parametrize("chained", ["from", "context"])
def test_a_user_error_raised_from_the_openai_error_is_typed_by_the_429(chained) -> None:
    with FakeProvider(SCRIPT) as fake, capture_events() as captured:
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")

        def ask() -> str:
            try:
                answer = client.chat.completions.create(model="m", messages=HI)
            except openai.APIError as e:
                if chained == "from":
                    raise LLMFailed("llm failed") from e
                raise LLMFailed("llm failed")  # noqa: B904 - the context chains it
            return answer.choices[0].message.content or ""

        governor = virtual_governor(captured)
        assert governor.call(ask, goal="g", agent="a", dependency="openai") == "shipped"
        assert_two_rate_limits_then_the_answer(fake, captured)
        codes = {e.error_detail.code for e in captured.of_kind(EventKind.ATTEMPT_FAILED)}
        assert codes == {"RateLimitError"}


def test_a_user_error_raised_from_a_refused_httpx_resend_is_typed_by_the_429() -> None:
    def ask(url: str) -> str:
        """A hand-written loop resending on 429, which wraps whatever went wrong."""
        client = httpx.Client()
        try:
            for _ in range(3):
                response = client.post(f"{url}/v1/chat/completions", json={"messages": HI})
                if response.status_code != 429:
                    break
            response.raise_for_status()
        except Exception as e:  # the refused resend included
            raise LLMFailed("llm failed") from e
        return str(response.json()["choices"][0]["message"]["content"])

    with FakeProvider(SCRIPT) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        assert governor.call(lambda: ask(fake.url), goal="g", agent="a") == "shipped"
        assert_two_rate_limits_then_the_answer(fake, captured)


def test_an_error_carrying_a_copy_of_the_failed_response_is_typed_by_that_failure() -> None:
    """A client that raises its error with a copy of the response (openai 3.63 copies it to
    strip credentials from the request) still carries the 429 RetryLens saw fail."""

    class ClientError(Exception):
        def __init__(self, response: httpx.Response) -> None:
            super().__init__(f"HTTP {response.status_code}")
            self.response = response

    def ask(url: str) -> str:
        with httpx.Client() as client:
            response = client.post(f"{url}/v1/chat/completions", json={"messages": HI})
        if response.status_code == 429:
            safe = copy.copy(response)  # not the response object that was seen: as openai 3.63 copies it
            safe.extensions = response.extensions.copy()
            raise LLMFailed("llm failed") from ClientError(safe)
        return str(response.json()["choices"][0]["message"]["content"])

    with FakeProvider(SCRIPT) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        assert governor.call(lambda: ask(fake.url), goal="g", agent="a") == "shipped"
        assert_two_rate_limits_then_the_answer(fake, captured)
        assert {e.error_detail.code for e in captured.of_kind(EventKind.ATTEMPT_FAILED)} == {"ClientError"}


def test_a_user_error_with_no_provider_failure_behind_it_keeps_its_own_class() -> None:
    with FakeProvider([Reply(body=openai_completion("shipped"))]) as fake:
        with capture_events() as captured:
            client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
            calls = []

            def ask() -> str:
                answer = client.chat.completions.create(model="m", messages=HI)
                calls.append(answer)
                if len(calls) == 1:
                    try:
                        raise KeyError("choices")
                    except KeyError as e:
                        raise LLMFailed("bad answer") from e
                return answer.choices[0].message.content or ""

            governor = virtual_governor(captured)
            with pytest.raises(Exception):  # noqa: B017,PT011 - the governor stops it
                governor.call(ask, goal="g", agent="a")
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
        assert [e.error_detail.code for e in failed] == ["LLMFailed"]


def test_a_user_error_raised_from_a_dropped_connection_is_typed_network() -> None:
    script = [Reply(drop=True), Reply(body=openai_completion("shipped"))]
    with FakeProvider(script) as fake, capture_events() as captured:
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")

        def ask() -> str:
            try:
                answer = client.chat.completions.create(model="m", messages=HI)
            except openai.APIError as e:
                raise LLMFailed("llm failed") from e
            return answer.choices[0].message.content or ""

        assert virtual_governor(captured).call(ask, goal="g", agent="a") == "shipped"
        assert fake.count == 2
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
        assert [(e.error_type, e.error_detail.code) for e in failed] == [
            (ErrorType.NETWORK, "APIConnectionError")
        ]


def test_under_tenacity_hooks_a_user_error_from_the_clients_last_error_is_typed_by_it() -> None:
    import tenacity

    from retrylens.sdk.integrations.tenacity import TenacityHooks

    script = [RATE_LIMITED] * 3 + [Reply(body=openai_completion("shipped"))]
    with FakeProvider(script) as fake, capture_events() as captured:
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")  # max_retries=2
        hooks = TenacityHooks(virtual_governor(captured), goal="g", agent="a")

        @tenacity.retry(**hooks.kwargs(stop=tenacity.stop_after_attempt(3)))
        def ask() -> str:
            try:
                answer = client.chat.completions.create(model="m", messages=HI)
            except openai.APIError as e:
                raise LLMFailed("llm failed") from e
            return answer.choices[0].message.content or ""

        assert ask() == "shipped"
        assert fake.count == 4  # the client's call: 3 tries; tenacity's second call: the answer
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
        assert [e.error_type for e in failed] == [ErrorType.RATE_LIMIT] * 3


def test_a_user_error_raised_from_a_kept_provider_error_after_the_except_is_typed_by_the_429() -> None:
    """``raise X from e`` outside the ``except`` sets only ``__cause__``: still followed."""
    with FakeProvider(SCRIPT) as fake, capture_events() as captured:
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")

        def ask() -> str:
            kept: openai.APIError | None = None
            try:
                answer = client.chat.completions.create(model="m", messages=HI)
            except openai.APIError as e:
                kept = e
            if kept is not None:
                raise LLMFailed("llm failed") from kept
            return answer.choices[0].message.content or ""

        governor = virtual_governor(captured)
        assert governor.call(ask, goal="g", agent="a", dependency="openai") == "shipped"
        assert_two_rate_limits_then_the_answer(fake, captured)


def test_a_failure_the_user_types_explicitly_is_kept_over_the_provider_error_behind_it() -> None:
    """The user said what the failure is (a ``Failure``): the 429 behind it does not retype it."""
    with FakeProvider(SCRIPT) as fake, capture_events() as captured:
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")

        def ask() -> str:
            try:
                answer = client.chat.completions.create(model="m", messages=HI)
            except openai.APIError as e:
                raise Failure(ErrorType.LOGIC, "the agent's plan was wrong", code="PlanWrong") from e
            return answer.choices[0].message.content or ""

        governor = virtual_governor(captured)
        with pytest.raises(Exception):  # noqa: B017,PT011 - a logic failure is not retried to success here
            governor.call(ask, goal="g", agent="a", dependency="openai")
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
        assert failed and {(e.error_type, e.error_detail.code) for e in failed} == {(ErrorType.LOGIC, "PlanWrong")}
