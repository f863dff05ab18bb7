"""A user's own fallback inside a governed call goes through (issue 35 item 3).

User code that catches a 429 and asks a cheaper model, or another endpoint, made a
decision of its own: the request is sent as written and the task is recorded degraded.
Only the same request sent again (same endpoint, same body) is a resend the governor
refuses (``tests/sdk/test_provider_plain_httpx.py`` holds that side). The REAL openai
client and httpx against a local fake provider, which records what it received.
"""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime

import httpx
import openai
from fake_provider import RATE_LIMITED, FakeProvider, Reply, openai_completion

from retrylens.schemas import EventKind, TaskOutcome
from retrylens.sdk import Governor
from retrylens.testing import CapturedEvents, capture_events

START = datetime(2026, 12, 1, tzinfo=UTC)
HI = [{"role": "user", "content": "hi"}]


def virtual_governor(captured: CapturedEvents) -> Governor:
    return Governor.with_virtual_time(start=START, emit=captured.emit, rng=random.Random(1))


def models(fake: FakeProvider) -> list[str]:
    return [r["body"].get("model", "") for r in fake.requests]


def degraded_at_the_end(captured: CapturedEvents) -> bool:
    return captured.events[-1].degraded


def test_a_cheaper_model_after_a_429_is_sent_and_recorded_as_the_users_degrade() -> None:
    script = [RATE_LIMITED, Reply(body=openai_completion("from mini"))]
    with FakeProvider(script) as fake, capture_events() as captured:
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")

        def ask() -> str:
            try:
                answer = client.chat.completions.create(model="gpt-4o", messages=HI)  # type: ignore[arg-type]
            except openai.RateLimitError:  # the user's own fallback
                answer = client.chat.completions.create(model="gpt-4o-mini", messages=HI)  # type: ignore[arg-type]
            return str(answer.choices[0].message.content)

        answer = virtual_governor(captured).call(ask, goal="say hi", agent="a", dependency="llm")
        assert answer == "from mini"
        assert models(fake) == ["gpt-4o", "gpt-4o-mini"]
        assert list(captured.outcomes().values()) == [TaskOutcome.SUCCEEDED]
        assert degraded_at_the_end(captured)


def test_an_async_cheaper_model_after_a_429_is_sent_and_recorded_as_the_users_degrade() -> None:
    script = [RATE_LIMITED, Reply(body=openai_completion("from mini"))]
    with FakeProvider(script) as fake, capture_events() as captured:
        client = openai.AsyncOpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")

        async def ask() -> str:
            try:
                answer = await client.chat.completions.create(model="gpt-4o", messages=HI)  # type: ignore[arg-type]
            except openai.RateLimitError:
                answer = await client.chat.completions.create(model="gpt-4o-mini", messages=HI)  # type: ignore[arg-type]
            return str(answer.choices[0].message.content)

        governor = virtual_governor(captured)
        answer = asyncio.run(governor.acall(ask, goal="say hi", agent="a", dependency="llm"))
        assert answer == "from mini"
        assert models(fake) == ["gpt-4o", "gpt-4o-mini"]
        assert degraded_at_the_end(captured)


def test_another_endpoint_after_a_failure_is_sent_and_recorded_as_the_users_degrade() -> None:
    """A hand-written client switching to its legacy endpoint after a 503: one attempt."""
    script = [Reply(503, body=b"{}"), Reply(body=openai_completion("legacy"))]
    with FakeProvider(script) as fake, capture_events() as captured:
        client = httpx.Client(timeout=5)

        def ask() -> str:
            body = {"model": "m", "messages": HI}
            response = client.post(f"{fake.url}/v1/chat/completions", json=body)
            if response.status_code >= 500:  # the user's fallback: the legacy endpoint
                response = client.post(f"{fake.url}/v1/legacy/completions", json=body)
            response.raise_for_status()
            return str(response.json()["choices"][0]["message"]["content"])

        answer = virtual_governor(captured).call(ask, goal="say hi", agent="a", dependency="llm")
        assert answer == "legacy"
        assert [r["path"] for r in fake.requests] == [
            "/v1/chat/completions",
            "/v1/legacy/completions",
        ]
        assert len(captured.of_kind(EventKind.ATTEMPT_FAILED)) == 0
        assert degraded_at_the_end(captured)
