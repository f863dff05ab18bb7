"""Governed provider calls: every HTTP request the provider receives is an attempt RetryLens records.

The REAL openai and anthropic clients, sync and async, streaming included, talk to a local
fake provider (an HTTP server this test starts). The user code is the obvious one:
``governor.call(lambda: client.chat.completions.create(...), goal=..., agent=..., dependency=...)``.
"""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime

import anthropic
import openai
import pytest
from fake_provider import (
    OVERLOADED,
    RATE_LIMITED,
    FakeProvider,
    Reply,
    anthropic_message,
    anthropic_stream,
    openai_completion,
    openai_stream,
)

from retrylens.schemas import Decision, ErrorType, EventKind, TaskOutcome
from retrylens.sdk import GaveUp, Governor, RetryPolicy
from retrylens.testing import CapturedEvents, capture_events

START = datetime(2026, 12, 1, tzinfo=UTC)
HI = [{"role": "user", "content": "hi"}]


def virtual_governor(captured: CapturedEvents) -> Governor:
    """A governor whose backoff advances a virtual clock (the test never sleeps for it)."""
    return Governor.with_virtual_time(start=START, emit=captured.emit, rng=random.Random(1))


def attempts(captured: CapturedEvents) -> tuple[int, int]:
    """(attempts recorded, failed attempts recorded)."""
    failed = len(captured.of_kind(EventKind.ATTEMPT_FAILED))
    succeeded = len(captured.of_kind(EventKind.ATTEMPT_SUCCEEDED))
    return failed + succeeded, failed


def test_three_requests_are_three_attempts_two_failed_with_the_obvious_user_code() -> None:
    script = [RATE_LIMITED, RATE_LIMITED, Reply(body=openai_completion("hi there"))]
    with FakeProvider(script) as fake, capture_events() as captured:
        governor = Governor(emit=captured.emit)  # default settings, real sleeps
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
        answer = governor.call(
            lambda: client.chat.completions.create(model="gpt-test", messages=HI),
            goal="say hi",
            agent="support",
            dependency="openai",
        )
        assert answer.choices[0].message.content == "hi there"
        assert fake.count == 3
        assert attempts(captured) == (3, 2)
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
        assert {e.error_type for e in failed} == {ErrorType.RATE_LIMIT}
        assert [e.error_detail.status for e in failed] == [429, 429]
        assert captured.outcomes() and set(captured.outcomes().values()) == {TaskOutcome.SUCCEEDED}


def test_a_provider_that_never_recovers_gets_no_more_requests_than_the_policy_allows() -> None:
    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
        with pytest.raises(GaveUp):
            governor.call(
                lambda: client.chat.completions.create(model="gpt-test", messages=HI),
                goal="say hi",
                agent="support",
                dependency="openai",
            )
        recorded, failed = attempts(captured)
        assert fake.count == recorded == failed
        assert (
            recorded <= governor.policy.budget.retries + 1
        )  # no step completed: the base allowance


def test_anthropic_overloaded_twice_then_an_answer_is_three_attempts_typed_overloaded() -> None:
    script = [OVERLOADED, OVERLOADED, Reply(body=anthropic_message("fine"))]
    with FakeProvider(script) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        client = anthropic.Anthropic(base_url=fake.url, api_key="sk-ant-test")
        message = governor.call(
            lambda: client.messages.create(model="claude-test", max_tokens=10, messages=HI),
            goal="say hi",
            agent="support",
            dependency="anthropic",
        )
        assert message.content[0].text == "fine"
        assert fake.count == 3
        assert attempts(captured) == (3, 2)
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
        # overloaded is the provider asking to back off, as a 429 does: rate_limit, status 529
        assert [(e.error_type, e.error_detail.status, e.error_detail.code) for e in failed] == [
            (ErrorType.RATE_LIMIT, 529, "OverloadedError")
        ] * 2


def test_async_openai_and_anthropic_clients_are_governed_the_same_way() -> None:
    async def main(captured: CapturedEvents, openai_url: str, anthropic_url: str) -> None:
        governor = virtual_governor(captured)
        oa = openai.AsyncOpenAI(base_url=f"{openai_url}/v1", api_key="sk-test")
        an = anthropic.AsyncAnthropic(base_url=anthropic_url, api_key="sk-ant-test")
        first = await governor.acall(
            lambda: oa.chat.completions.create(model="gpt-test", messages=HI),
            goal="a",
            agent="support",
            dependency="openai",
        )
        second = await governor.acall(
            lambda: an.messages.create(model="claude-test", max_tokens=10, messages=HI),
            goal="b",
            agent="support",
            dependency="anthropic",
        )
        assert first.choices[0].message.content == "one"
        assert second.content[0].text == "two"

    with (
        FakeProvider([RATE_LIMITED, Reply(body=openai_completion("one"))]) as oa_fake,
        FakeProvider([OVERLOADED, OVERLOADED, Reply(body=anthropic_message("two"))]) as an_fake,
        capture_events() as captured,
    ):
        asyncio.run(main(captured, oa_fake.url, an_fake.url))
        assert (oa_fake.count, an_fake.count) == (2, 3)
        assert attempts(captured) == (5, 3)


def test_streaming_calls_sync_and_async_count_each_request() -> None:
    async def astream(client: openai.AsyncOpenAI) -> str:
        stream = await client.chat.completions.create(model="gpt-test", messages=HI, stream=True)
        return "".join([c.choices[0].delta.content or "" async for c in stream])

    with (
        FakeProvider([RATE_LIMITED, Reply(events=openai_stream("streamed"))]) as oa_fake,
        FakeProvider([OVERLOADED, Reply(events=anthropic_stream("streamed"))]) as an_fake,
        FakeProvider([RATE_LIMITED, RATE_LIMITED, Reply(events=openai_stream("async"))]) as fake3,
        capture_events() as captured,
    ):
        governor = virtual_governor(captured)
        oa = openai.OpenAI(base_url=f"{oa_fake.url}/v1", api_key="sk-test")
        an = anthropic.Anthropic(base_url=an_fake.url, api_key="sk-ant-test")

        def stream_openai() -> str:
            stream = oa.chat.completions.create(model="gpt-test", messages=HI, stream=True)
            return "".join(c.choices[0].delta.content or "" for c in stream)

        def stream_anthropic() -> str:
            with an.messages.stream(model="claude-test", max_tokens=10, messages=HI) as stream:
                return "".join(stream.text_stream)

        assert governor.call(stream_openai, goal="s1", agent="a", dependency="openai") == "streamed"
        assert governor.call(stream_anthropic, goal="s2", agent="a", dependency="anthropic") == (
            "streamed"
        )
        aclient = openai.AsyncOpenAI(base_url=f"{fake3.url}/v1", api_key="sk-test")
        text = asyncio.run(
            governor.acall(lambda: astream(aclient), goal="s3", agent="a", dependency="openai")
        )
        assert text == "async"
        assert (oa_fake.count, an_fake.count, fake3.count) == (2, 2, 3)
        assert attempts(captured) == (7, 4)


def test_connection_errors_are_attempts_too_and_the_client_does_not_multiply_them() -> None:
    script = [Reply(drop=True), Reply(drop=True), Reply(body=openai_completion("back"))]
    with FakeProvider(script) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
        answer = governor.call(
            lambda: client.chat.completions.create(model="gpt-test", messages=HI),
            goal="say hi",
            agent="support",
            dependency="openai",
        )
        assert answer.choices[0].message.content == "back"
        assert fake.count == 3
        assert attempts(captured) == (3, 2)
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
        assert {e.error_type for e in failed} == {ErrorType.NETWORK}


def test_the_backoff_honours_retry_after_ms() -> None:
    slow = Reply(429, {"retry-after-ms": "2500"}, RATE_LIMITED.body)
    with FakeProvider([slow, Reply(body=openai_completion())]) as fake, capture_events() as c:
        governor = virtual_governor(c)
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
        governor.call(
            lambda: client.chat.completions.create(model="gpt-test", messages=HI),
            goal="say hi",
            agent="support",
            dependency="openai",
        )
        (decision,) = c.of_kind(EventKind.DECISION)
        assert decision.decision == Decision.RETRY_BACKOFF
        assert decision.backoff_ms >= 2500


def test_the_backoff_honours_a_retry_after_attribute_on_an_exception() -> None:
    class Throttled(Exception):
        status_code = 429
        retry_after = 3.0  # seconds, as many client libraries carry it

    calls = []

    def work() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise Throttled("slow down")
        return "ok"

    with capture_events() as c:
        virtual_governor(c).call(work, goal="g", agent="a", dependency="d")
        (decision,) = c.of_kind(EventKind.DECISION)
        assert decision.backoff_ms >= 3000


def test_a_server_saying_x_should_retry_false_is_not_retried() -> None:
    refused = Reply(500, {"x-should-retry": "false"}, b'{"error": {"message": "no"}}')
    with FakeProvider(default=refused) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
        with pytest.raises(GaveUp):
            governor.call(
                lambda: client.chat.completions.create(model="gpt-test", messages=HI),
                goal="say hi",
                agent="support",
                dependency="openai",
            )
        assert fake.count == 1
        assert attempts(captured) == (1, 1)


def test_a_server_saying_x_should_retry_true_is_retried_by_the_governor_not_the_client() -> None:
    odd = Reply(400, {"x-should-retry": "true"}, b'{"error": {"message": "try again"}}')
    with FakeProvider([odd, Reply(body=openai_completion())]) as fake, capture_events() as c:
        governor = virtual_governor(c)
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
        governor.call(
            lambda: client.chat.completions.create(model="gpt-test", messages=HI),
            goal="say hi",
            agent="support",
            dependency="openai",
        )
        assert fake.count == 2
        assert attempts(c) == (2, 1)


def test_broken_retry_headers_are_read_as_absent_and_every_request_is_still_an_attempt() -> None:
    broken = [
        Reply(429, {"retry-after-ms": "nan", "retry-after": "soon-ish"}, b"not json"),
        Reply(503, {"retry-after": "-4", "x-should-retry": "maybe"}, b"\xff\xfe"),
        Reply(body=openai_completion("ok")),
    ]
    with FakeProvider(broken) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
        answer = governor.call(
            lambda: client.chat.completions.create(model="gpt-test", messages=HI),
            goal="g",
            agent="a",
            dependency="openai",
        )
        assert answer.choices[0].message.content == "ok"
        assert fake.count == 3
        assert attempts(captured) == (3, 2)
        assert [e.error_type for e in captured.of_kind(EventKind.ATTEMPT_FAILED)] == [
            ErrorType.RATE_LIMIT,
            ErrorType.SERVER_ERROR,
        ]


def test_a_stream_broken_half_way_is_a_failed_attempt_and_the_next_one_answers() -> None:
    script = [
        Reply(events=openai_stream("lost"), cut_stream=True),
        Reply(events=openai_stream("ok")),
    ]
    with FakeProvider(script) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")

        def stream() -> str:
            chunks = client.chat.completions.create(model="gpt-test", messages=HI, stream=True)
            return "".join(c.choices[0].delta.content or "" for c in chunks)

        assert governor.call(stream, goal="g", agent="a", dependency="openai") == "ok"
        assert fake.count == 2
        assert attempts(captured) == (2, 1)


def test_a_malformed_answer_raises_what_the_client_raises_without_retrylens() -> None:
    garbage = Reply(200, {}, b"{not json")

    def ask(client: openai.OpenAI) -> object:
        return client.chat.completions.create(model="gpt-test", messages=HI)

    with FakeProvider(default=garbage) as fake:
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test", max_retries=0)
        with pytest.raises(Exception) as plain:
            ask(client)
        with capture_events() as captured:
            governor = virtual_governor(captured)
            with pytest.raises(GaveUp) as governed:
                governor.call(lambda: ask(client), goal="g", agent="a", dependency="openai")
        assert type(governed.value.__cause__ or governed.value.__context__) is type(plain.value)
        recorded, failed = attempts(captured)
        assert fake.count - 1 == recorded == failed >= 1


def test_opting_out_leaves_the_retries_to_the_client(monkeypatch) -> None:
    monkeypatch.setenv("RETRYLENS_PROVIDER_RETRIES", "client")
    script = [RATE_LIMITED, RATE_LIMITED, Reply(body=openai_completion())]
    with FakeProvider(script) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
        governor.call(
            lambda: client.chat.completions.create(model="gpt-test", messages=HI),
            goal="g",
            agent="a",
            dependency="openai",
        )
        assert fake.count == 3  # the client retried, as without RetryLens
        assert attempts(captured) == (1, 0)


def test_a_request_outside_any_governed_call_is_left_as_it_came() -> None:
    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        virtual_governor(captured)  # installs the hook
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test", max_retries=1)
        with pytest.raises(openai.RateLimitError) as raised:
            client.chat.completions.create(model="gpt-test", messages=HI)
        assert fake.count == 2  # the client's own retry, untouched
        assert "x-should-retry" not in raised.value.response.headers
        assert captured.events == []


def test_async_connection_errors_are_attempts_and_the_client_does_not_multiply_them() -> None:
    script = [Reply(drop=True), Reply(drop=True), Reply(body=anthropic_message("back"))]
    with FakeProvider(script) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        client = anthropic.AsyncAnthropic(base_url=fake.url, api_key="sk-ant-test")
        message = asyncio.run(
            governor.acall(
                lambda: client.messages.create(model="claude-test", max_tokens=5, messages=HI),
                goal="g",
                agent="a",
                dependency="anthropic",
            )
        )
        assert message.content[0].text == "back"
        assert fake.count == 3
        assert attempts(captured) == (3, 2)
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
        assert [e.error_detail.code for e in failed] == ["APIConnectionError"] * 2


def test_the_fleet_budget_is_charged_once_per_request_the_provider_received() -> None:
    with FakeProvider(default=RATE_LIMITED) as fake, capture_events() as captured:
        governor = virtual_governor(captured)
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
        with pytest.raises(GaveUp):
            governor.call(
                lambda: client.chat.completions.create(model="gpt-test", messages=HI),
                goal="g",
                agent="a",
                dependency="openai",
            )
        throttle = governor.throttles["openai"]
        assert throttle.policy.max_tokens - throttle.tokens == fake.count  # one token per failure


def test_rules_tell_overloaded_from_other_server_errors() -> None:
    """A policy allowing no server-error retry still waits out an overloaded provider."""
    policy = RetryPolicy(caps={ErrorType.SERVER_ERROR: 0, ErrorType.RATE_LIMIT: 3})
    answer = Reply(body=anthropic_message("fine"))
    for script, answered in (
        ([OVERLOADED, OVERLOADED, answer], True),
        ([Reply(503), answer], False),
    ):
        with FakeProvider(script) as fake, capture_events() as captured:
            governor = Governor.with_virtual_time(
                policy, start=START, emit=captured.emit, rng=random.Random(1)
            )
            client = anthropic.Anthropic(base_url=fake.url, api_key="sk-ant-test")

            def ask(client: anthropic.Anthropic = client) -> str:
                message = client.messages.create(model="claude-test", max_tokens=10, messages=HI)
                return str(message.content[0].text)

            if answered:
                assert governor.call(ask, goal="g", agent="a", dependency="anthropic") == "fine"
                assert fake.count == 3
            else:
                with pytest.raises(GaveUp):
                    governor.call(ask, goal="g", agent="a", dependency="anthropic")
                assert fake.count == 1
