"""``retrylens.sdk.observe()``: true retry analytics for an agent without a governor, in one line.

The REAL openai and anthropic clients (their default ``max_retries=2``) against a local
fake provider: each call is one task, each HTTP request one attempt, and the call returns
or raises exactly what it does without RetryLens.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import anthropic
import httpx2
import openai
import pytest
from fake_provider import (
    OVERLOADED,
    RATE_LIMITED,
    FakeProvider,
    Reply,
    openai_completion,
    openai_stream,
)

from retrylens.schemas import Decision, ErrorType, EventKind, TaskOutcome
from retrylens.sdk import Governor, observe
from retrylens.sdk.integrations.providers import provider_hook
from retrylens.sdk.integrations.providers.observing import stop_observing
from retrylens.testing import CapturedEvents, capture_events

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def captured() -> Iterator[CapturedEvents]:
    with capture_events() as events:
        observe(emit=events.emit)
        try:
            yield events
        finally:
            stop_observing()


def counts(captured: CapturedEvents) -> tuple[int, int]:
    failed = len(captured.of_kind(EventKind.ATTEMPT_FAILED))
    return failed + len(captured.of_kind(EventKind.ATTEMPT_SUCCEEDED)), failed


def test_each_call_is_a_task_whose_attempts_are_the_requests_the_provider_received(
    captured: CapturedEvents,
) -> None:
    script = [RATE_LIMITED, RATE_LIMITED, Reply(body=openai_completion("hi"))]
    with FakeProvider(script) as fake:
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
        answer = client.chat.completions.create(model="gpt-test", messages=HI)
        assert answer.choices[0].message.content == "hi"
        assert fake.count == 3
        assert counts(captured) == (3, 2)
        assert captured.decisions() == [Decision.RETRY_BACKOFF] * 2
        assert list(captured.outcomes().values()) == [TaskOutcome.SUCCEEDED]
        assert {e.dependency for e in captured.events} == {"openai"}


def test_a_call_the_client_gives_up_on_is_a_failed_task_with_every_request(
    captured: CapturedEvents,
) -> None:
    with FakeProvider(default=OVERLOADED) as fake:
        client = anthropic.Anthropic(base_url=fake.url, api_key="sk-ant-test")
        with pytest.raises(anthropic.InternalServerError):
            client.messages.create(model="claude-test", max_tokens=5, messages=HI)
        assert fake.count == 3
        assert counts(captured) == (3, 3)
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
        assert {(e.error_type, e.error_detail.status, e.error_detail.code) for e in failed} == {
            (ErrorType.RATE_LIMIT, 529, "overloaded")
        }
        assert captured.decisions()[-1] == Decision.GIVE_UP
        assert list(captured.outcomes().values()) == [TaskOutcome.FAILED]


def test_async_and_streaming_calls_are_observed(captured: CapturedEvents) -> None:
    async def main(url: str) -> str:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="sk-test")
        stream = await client.chat.completions.create(model="gpt-test", messages=HI, stream=True)
        return "".join([c.choices[0].delta.content or "" async for c in stream])

    with FakeProvider([RATE_LIMITED, Reply(events=openai_stream("streamed"))]) as fake:
        assert asyncio.run(main(fake.url)) == "streamed"
        assert fake.count == 2
        assert counts(captured) == (2, 1)


def test_nothing_is_counted_twice_when_a_governor_also_runs(captured: CapturedEvents) -> None:
    script = [RATE_LIMITED, RATE_LIMITED, Reply(body=openai_completion())]
    with FakeProvider(script) as fake:
        governor = Governor(emit=captured.emit)
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
        governor.call(
            lambda: client.chat.completions.create(model="gpt-test", messages=HI),
            goal="g",
            agent="a",
            dependency="openai",
        )
        assert fake.count == 3
        assert counts(captured) == (3, 2)
        assert len({e.task_id for e in captured.events}) == 1


SCENARIOS = {
    "answer": ([Reply(body=openai_completion("same"))], None),
    "recovers": ([RATE_LIMITED, Reply(body=openai_completion("same"))], None),
    "rate limited for good": ([], RATE_LIMITED),
    "refused": ([], Reply(400, {}, b'{"error": {"message": "bad request"}}')),
    "garbage body": ([], Reply(200, {}, b"{not json")),
    "broken headers": ([], Reply(503, {"retry-after": "\x7f", "retry-after-ms": "x"}, b"")),
    "dropped": ([], Reply(drop=True)),
    "stream cut": ([], Reply(events=openai_stream("abcdef"), cut_stream=True)),
}


def _outcome(script: list[Reply], default: Reply | None, stream: bool) -> tuple[object, ...]:
    with FakeProvider(list(script), default=default) as fake:
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test", max_retries=1)
        try:
            if stream:
                chunks = client.chat.completions.create(model="gpt-test", messages=HI, stream=True)
                value: object = [c.model_dump() for c in chunks]
            else:
                value = client.chat.completions.create(model="gpt-test", messages=HI).model_dump()
        except Exception as exc:  # noqa: BLE001 - compared below
            status = getattr(exc, "status_code", None)
            return ("raised", type(exc), str(exc), status, fake.count)
        return ("returned", json.dumps(value, sort_keys=True, default=str), fake.count)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_call_returns_and_raises_exactly_the_same_with_and_without_observe(name: str) -> None:
    script, default = SCENARIOS[name]
    stream = name == "stream cut"
    stop_observing()
    provider_hook.uninstall()
    without = _outcome(script, default, stream)
    with capture_events() as events:
        observe(emit=events.emit)
        try:
            with_observe = _outcome(script, default, stream)
        finally:
            stop_observing()
        assert with_observe == without
        requests = without[-1]
        assert counts(events)[0] == requests  # and every request was recorded


def test_observe_sees_clients_imported_after_it_and_uninstall_restores_the_library() -> None:
    with FakeProvider([RATE_LIMITED, Reply(body=openai_completion("late"))]) as fake:
        code = textwrap.dedent(
            f"""
            import sys
            import retrylens.sdk
            assert "openai" not in sys.modules and "httpx2" not in sys.modules
            events = []
            retrylens.sdk.observe(emit=events.append)
            import openai, httpx2
            client = openai.OpenAI(base_url="{fake.url}/v1", api_key="sk-test")
            print(client.chat.completions.create(model="m", messages={HI!r}).choices[0].message.content)
            print(sorted(e.kind.value for e in events))
            from retrylens.sdk import provider_hook
            provider_hook.uninstall()
            print(getattr(httpx2.Client.send, "__retrylens_original__", None) is None)
            """
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
        ).stdout.splitlines()
    assert out[0] == "late"
    assert out[1].count("attempt_failed") == 1 and out[1].count("attempt_succeeded") == 1
    assert out[2] == "True"


def test_uninstall_puts_back_the_original_send() -> None:
    original = httpx2.Client.__dict__["send"]
    original = getattr(original, "__retrylens_original__", original)
    provider_hook.install()
    assert httpx2.Client.send is not original
    provider_hook.uninstall()
    assert httpx2.Client.__dict__["send"] is original


def test_observe_stays_the_function_after_its_module_is_imported() -> None:
    import retrylens.sdk
    import retrylens.sdk.integrations.providers.observing  # noqa: F401 - importing the module must not shadow the function

    assert callable(retrylens.sdk.observe)
    assert retrylens.sdk.observe is observe
